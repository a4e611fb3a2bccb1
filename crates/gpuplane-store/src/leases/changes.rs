//! A tenant's requests about its leases, besides their creation and end: pool choice by model, quotas, extension,
//! settings.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{LeaseState, Term};
use crate::StoreResult;

/// The pool offering GPU model `model` with the most free GPUs on allocatable nodes (ties: the lowest id).
pub async fn pool_by_model(conn: &mut PgConnection, model: &str) -> StoreResult<Option<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT p.id FROM pools p LEFT JOIN nodes n ON n.pool_id = p.id AND node_allocatable(n.admin_state, n.liveness) \
         WHERE p.gpu_model = $1 GROUP BY p.id ORDER BY COALESCE(sum(n.free_gpus), 0) DESC, p.id LIMIT 1",
        model
    )
    .fetch_optional(conn)
    .await?)
}

/// A tenant's quotas for a pool.
pub struct Quotas {
    pub max_concurrent_leases: Option<i32>,
    pub max_gpus_per_pool: Option<i32>,
    /// The pool's own limit, which overrides `max_gpus_per_pool`.
    pub max_gpus_pool: Option<i32>,
}

/// The tenant's quotas for `pool_id`, with the tenant row locked for the rest of the transaction.
pub async fn lock_quotas(conn: &mut PgConnection, tenant_id: Uuid, pool_id: Uuid) -> StoreResult<Quotas> {
    Ok(sqlx::query_as!(
        Quotas,
        "SELECT t.max_concurrent_leases, t.max_gpus_per_pool, \
            (SELECT q.max_gpus FROM tenant_pool_quotas q WHERE q.tenant_id = t.id AND q.pool_id = $2) AS max_gpus_pool \
         FROM tenants t WHERE t.id = $1 FOR UPDATE OF t",
        tenant_id,
        pool_id
    )
    .fetch_one(conn)
    .await?)
}

/// What a tenant holds: its live leases, and the GPUs of them in one pool.
pub struct InUse {
    pub leases: i64,
    pub gpus_in_pool: i64,
}

/// The tenant's live leases (queued or active; a lease across pools counts once), and their GPUs in `pool_id`
/// (`lease_shares`: a lease across pools counts its part in that pool).
pub async fn in_use(conn: &mut PgConnection, tenant_id: Uuid, pool_id: Uuid) -> StoreResult<InUse> {
    Ok(sqlx::query_as!(
        InUse,
        r#"SELECT count(*) AS "leases!",
             COALESCE(sum((SELECT sum(s.gpu_count) FROM lease_shares s WHERE s.lease_id = l.id AND s.pool_id = $2)), 0)::bigint
                 AS "gpus_in_pool!"
         FROM leases l WHERE l.tenant_id = $1 AND l.state IN ('queued', 'active')"#,
        tenant_id,
        pool_id
    )
    .fetch_one(conn)
    .await?)
}

/// A lease as locked for an extension.
pub struct ExtendLocked {
    pub generation: i64,
    pub state: LeaseState,
    pub term: Term,
    pub duration_hours: Option<i32>,
    pub months: Option<i32>,
}

/// Lock the tenant's lease for an extension; None: no such lease of the tenant.
pub async fn lock_for_extension(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
) -> StoreResult<Option<ExtendLocked>> {
    Ok(sqlx::query_as!(
        ExtendLocked,
        r#"SELECT generation, state AS "state: LeaseState", term AS "term: Term", duration_hours, months
         FROM leases WHERE id = $1 AND tenant_id = $2 FOR UPDATE"#,
        lease_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?)
}

/// Extend a lease by `hours` and `months` (one of them zero), its end time with them.
pub async fn extend(conn: &mut PgConnection, lease_id: Uuid, hours: i32, months: i32) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE leases SET duration_hours = duration_hours + $2, months = months + $3, \
             ends_at = ends_at + make_interval(months => $3, hours => $2), generation = generation + 1, updated_at = now() \
         WHERE id = $1",
        lease_id,
        hours,
        months
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A lease as locked for a change of its settings.
pub struct SettingsLocked {
    pub generation: i64,
    pub state: LeaseState,
    pub idle_release_after_minutes: Option<i32>,
    pub release_deadline: Option<DateTime<Utc>>,
}

/// Lock the tenant's lease for a change of its settings; None: no such lease of the tenant.
pub async fn lock_for_settings(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
) -> StoreResult<Option<SettingsLocked>> {
    Ok(sqlx::query_as!(
        SettingsLocked,
        r#"SELECT generation, state AS "state: LeaseState", idle_release_after_minutes, release_deadline
         FROM leases WHERE id = $1 AND tenant_id = $2 FOR UPDATE"#,
        lease_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?)
}

/// Set the lease's `idle_release_after_minutes` (None: never released for idleness).
pub async fn set_idle_release(conn: &mut PgConnection, lease_id: Uuid, minutes: Option<i32>) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE leases SET idle_release_after_minutes = $2, generation = generation + 1, updated_at = now() \
         WHERE id = $1",
        lease_id,
        minutes
    )
    .execute(conn)
    .await?;
    Ok(())
}
