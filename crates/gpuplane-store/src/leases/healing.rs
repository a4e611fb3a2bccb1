//! Healing a lease whose node was lost: that node's GPUs leave the lease, and a replacement node of the same pool
//! joins it through the one allocation core ([`super::allocation::place`] and [`super::allocation::write_lease`]
//! with [`super::allocation::LeaseWrite::Join`]), all or nothing. The rule (when a lease is healed, and the
//! billing around it) is the server's.

use sqlx::PgConnection;
use uuid::Uuid;

use super::Term;
use crate::StoreResult;

/// An active lease about to be healed, locked.
pub struct HealSubject {
    pub tenant_id: Uuid,
    pub pool_id: Uuid,
    pub gpu_count: i32,
    pub term: Term,
    pub currency: String,
    /// A lease across pools (healing is per pool: not built for them).
    pub has_parts: bool,
    /// It attaches a host volume (the host holds the data: it is not replaced).
    pub host_volume: bool,
}

/// Lock an active lease to heal it; none when it is not active.
pub async fn lock_subject(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Option<HealSubject>> {
    Ok(sqlx::query_as!(
        HealSubject,
        r#"SELECT l.tenant_id, l.pool_id, l.gpu_count, l.term AS "term: Term", l.currency AS "currency!",
             EXISTS (SELECT 1 FROM lease_parts p WHERE p.lease_id = l.id) AS "has_parts!",
             EXISTS (SELECT 1 FROM volume_attachments a JOIN volumes v ON v.id = a.volume_id
                     WHERE a.lease_id = l.id AND a.detached_at IS NULL AND v.kind = 'host') AS "host_volume!"
         FROM leases l WHERE l.id = $1 AND l.state = 'active' FOR UPDATE OF l"#,
        lease_id
    )
    .fetch_optional(conn)
    .await?)
}

/// The GPUs of `node_id` that lease `lease_id` holds.
pub async fn gpus_on_node(conn: &mut PgConnection, lease_id: Uuid, node_id: Uuid) -> StoreResult<i32> {
    Ok(sqlx::query_scalar!(
        r#"SELECT count(*)::int AS "n!" FROM gpus WHERE held_by = $1 AND node_id = $2"#,
        lease_id,
        node_id
    )
    .fetch_one(conn)
    .await?)
}

/// Take the GPUs of `node_id` out of lease `lease_id` (the lease row is locked by the caller): they are free
/// again (the node's counter raised by the healthy ones, under the node's lock), and the lease holds the rest.
/// Returns how many left.
pub async fn remove_node(conn: &mut PgConnection, lease_id: Uuid, node_id: Uuid) -> StoreResult<i32> {
    sqlx::query!("SELECT id FROM nodes WHERE id = $1 FOR UPDATE", node_id).fetch_optional(&mut *conn).await?;
    let row = sqlx::query!(
        r#"WITH freed AS (
             UPDATE gpus SET held_by = NULL WHERE held_by = $1 AND node_id = $2 RETURNING id, healthy),
         counted AS (
             UPDATE nodes SET free_gpus = free_gpus + (SELECT count(*) FROM freed WHERE healthy)::int WHERE id = $2),
         lease AS (
             UPDATE leases SET gpu_ids = ARRAY(SELECT g FROM unnest(gpu_ids) g WHERE g <> ALL(ARRAY(SELECT id FROM freed))),
                 gpu_count = gpu_count - (SELECT count(*) FROM freed)::int, updated_at = now()
             WHERE id = $1 AND (SELECT count(*) FROM freed) > 0)
         SELECT count(*)::int AS "n!" FROM freed"#,
        lease_id,
        node_id
    )
    .fetch_one(conn)
    .await?;
    Ok(row.n)
}
