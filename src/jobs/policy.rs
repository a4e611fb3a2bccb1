//! A job's restart policy as the service stored it at create, read back for the code that acts on failures: the
//! lifecycle, the recovery worker, replicas and the healing of a lost node.

use sqlx::PgConnection;
use uuid::Uuid;

use super::restarts::RestartPolicy;
use crate::db::decode_json;

/// A job's policy and restarts so far.
pub async fn policy_of(conn: &mut PgConnection, job_id: Uuid) -> Result<(RestartPolicy, i32), sqlx::Error> {
    let (policy, restarts) = gpuplane_store::jobs::recovery::restart_state(conn, job_id).await?;
    Ok((decode_json(policy)?, restarts))
}
