//! Reaching a tenant's object by id: another tenant's is 404, exactly as one that does not exist, so its existence
//! is never revealed. A leaf: the domains that take a lease id in their paths (leases, jobs, environments) share it.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::ApiError;

/// 404 unless the lease exists and is the tenant's.
pub async fn ensure_lease_owned(conn: &mut PgConnection, tenant_id: Uuid, lease_id: Uuid) -> Result<(), ApiError> {
    if gpuplane_store::leases::read::lease_is_owned(conn, tenant_id, lease_id).await? {
        Ok(())
    } else {
        Err(ApiError::NotFound("lease"))
    }
}
