//! Driver/CUDA readiness: what judging a node reads and writes (the rule itself is the server's).

use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;
use crate::agents::liveness::{Event, Liveness, Versions};

/// The pool's own minimum driver and CUDA versions (each absent when the service's applies); `None` when
/// there is no such pool.
pub async fn pool_minimums(
    conn: &mut PgConnection,
    pool_id: Uuid,
) -> StoreResult<Option<(Option<String>, Option<String>)>> {
    let row = sqlx::query!("SELECT min_driver_version, min_cuda_version FROM pools WHERE id = $1", pool_id)
        .map(|r| (r.min_driver_version, r.min_cuda_version))
        .fetch_optional(conn)
        .await?;
    Ok(row)
}

/// What a node is judged by, read under a row lock.
#[derive(Debug, Clone)]
pub struct NodeVersions {
    pub pool_id: Uuid,
    pub hostname: String,
    pub liveness: Liveness,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
}

/// Lock the node (`FOR UPDATE`) and read its pool, host name, liveness and reported versions.
pub async fn lock_node_versions(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Option<NodeVersions>> {
    let row = sqlx::query_as!(
        NodeVersions,
        r#"SELECT pool_id, hostname, liveness AS "liveness: Liveness", facts->>'driver_version' AS driver_version,
                  facts->>'cuda_version' AS cuda_version
         FROM nodes WHERE id = $1 FOR UPDATE"#,
        node_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// Store the node's verdict, `reason` (None: its versions suffice), and the liveness the verdict gives a node
/// that was `was` when locked ([`Event::Judged`]: a live node turns `ready` <-> `not_ready`, a silent one keeps
/// its state and hears the verdict when it is back). Changes nothing when the reason is the same.
pub async fn set_verdict(
    conn: &mut PgConnection,
    node_id: Uuid,
    was: Liveness,
    reason: Option<&str>,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE nodes SET not_ready_reason = $2, updated_at = now(), liveness = $3 \
         WHERE id = $1 AND not_ready_reason IS DISTINCT FROM $2",
        node_id,
        reason,
        was.on(Event::Judged(Versions::of(reason))) as Liveness
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The active leases holding GPUs of the node, as (lease id, tenant id), by lease id.
pub async fn active_leases_on_node(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<(Uuid, Uuid)>> {
    let leases = sqlx::query!(
        "SELECT DISTINCT l.id, l.tenant_id FROM leases l JOIN gpus g ON g.held_by = l.id \
         WHERE g.node_id = $1 AND l.state = 'active' ORDER BY l.id",
        node_id
    )
    .map(|r| (r.id, r.tenant_id))
    .fetch_all(conn)
    .await?;
    Ok(leases)
}

/// The pools with a node that reports a driver or CUDA version, by id.
pub async fn pools_with_reported_versions(conn: &mut PgConnection) -> StoreResult<Vec<Uuid>> {
    let pools = sqlx::query_scalar!(
        "SELECT DISTINCT pool_id FROM nodes WHERE facts ?| array['driver_version', 'cuda_version'] ORDER BY pool_id"
    )
    .fetch_all(conn)
    .await?;
    Ok(pools)
}

/// The pool's nodes, by id.
pub async fn pool_node_ids(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<Vec<Uuid>> {
    let nodes =
        sqlx::query_scalar!("SELECT id FROM nodes WHERE pool_id = $1 ORDER BY id", pool_id).fetch_all(conn).await?;
    Ok(nodes)
}
