//! Heartbeats: the one statement that proves a node alive and stores its samples, what else a heartbeat
//! reports (versions, launchers), and GPU health (fatal XIDs, an operator's restore).

use sqlx::PgConnection;
use uuid::Uuid;

use super::liveness::Liveness;
use crate::StoreResult;
use crate::leases::events::{NewEvent, record_event};
use crate::leases::{Actor, LeaseState};

/// A node's GPUs as (index, GPU id), by index, if the credential generation is still the node's current one
/// (empty otherwise, or when the node is gone).
pub async fn gpu_map(conn: &mut PgConnection, node_id: Uuid, generation: i64) -> StoreResult<Vec<(i32, Uuid)>> {
    Ok(sqlx::query!(
        "SELECT g.idx, g.id FROM gpus g JOIN nodes n ON n.id = g.node_id \
         WHERE n.id = $1 AND n.agent_generation = $2 ORDER BY g.idx",
        node_id,
        generation
    )
    .map(|g| (g.idx, g.id))
    .fetch_all(conn)
    .await?)
}

/// One heartbeat's samples, one row per sampling instant (the arrays run in parallel).
pub struct HeartbeatSamples<'a> {
    /// The sampling instants.
    pub ats: &'a [chrono::DateTime<chrono::Utc>],
    /// Each instant's GPU records, packed.
    pub packed: &'a [Vec<u8>],
    /// Each instant's (GPU index, XID code) pairs as a flat int array literal, or None.
    pub xids: &'a [Option<String>],
    /// Bytes of one GPU's packed record.
    pub record_len: i32,
}

/// What the heartbeat's statement found and did. Every field is None when the node or its credential
/// generation is gone.
pub struct HeartbeatRow {
    pub admin_state: Option<String>,
    /// Liveness before this heartbeat.
    pub was: Option<Liveness>,
    /// GPU samples newly stored.
    pub accepted: i64,
    /// The node has an assignment to fetch or a cancel to apply.
    pub assignments_pending: bool,
    /// The versions on record before this heartbeat.
    pub driver: Option<String>,
    pub cuda: Option<String>,
}

/// One statement: touch the node (only with the current credential generation) and insert the samples, one
/// row per sampling instant (a resent instant is skipped by the primary key). Returns the node's admin state,
/// its liveness before this heartbeat, how many samples were new, and whether the node has assignments to
/// fetch; None when the node is gone.
pub async fn store_heartbeat(
    conn: &mut PgConnection,
    node_id: Uuid,
    generation: i64,
    samples: HeartbeatSamples<'_>,
) -> StoreResult<Option<HeartbeatRow>> {
    // `assignments_pending`: the node has an assignment it has not fetched or a cancel it has not applied (the
    // heartbeat's hint), evaluated in this statement so that the hint costs no round trip.
    Ok(sqlx::query_as!(
        HeartbeatRow,
        r#"WITH prev AS (SELECT liveness, facts->>'driver_version' AS driver, facts->>'cuda_version' AS cuda
             FROM nodes WHERE id = $1 AND agent_generation = $2),
         touched AS (
             UPDATE nodes SET last_heartbeat_at = now(),
                 liveness = node_heard_liveness(not_ready_reason)
             WHERE id = $1 AND agent_generation = $2 RETURNING admin_state, telemetry_key),
         inserted AS (
             INSERT INTO telemetry_raw (node_key, at, samples, xids)
             SELECT t.telemetry_key, u.at, u.samples, u.xids::int[]
             FROM touched t, UNNEST($3::timestamptz[], $4::bytea[], $5::text[]) AS u(at, samples, xids)
             ON CONFLICT (node_key, at) DO NOTHING RETURNING length(samples) / $6 AS gpus)
         SELECT (SELECT admin_state FROM touched), (SELECT liveness FROM prev) AS "was: Liveness",
             (SELECT COALESCE(sum(gpus), 0)::bigint FROM inserted) AS "accepted!",
             EXISTS (SELECT 1 FROM job_nodes WHERE node_id = $1
                 AND state IN ('pending', 'assigned', 'running') AND (state = 'pending' OR desired = 'cancel'))
                 AS "assignments_pending!",
             (SELECT driver FROM prev), (SELECT cuda FROM prev)"#,
        node_id,
        generation,
        samples.ats,
        samples.packed,
        samples.xids as &[Option<String>],
        samples.record_len
    )
    .fetch_optional(conn)
    .await?)
}

/// The node's echo port as its agent now listens on it (changed by an agent restart; only with the current
/// credential generation). What its peers measured to the old port is forgotten: it says nothing of the new one.
pub async fn update_echo_port(conn: &mut PgConnection, node_id: Uuid, generation: i64, port: i32) -> StoreResult<()> {
    let moved = sqlx::query!(
        "UPDATE nodes SET echo_port = $3, updated_at = now() \
         WHERE id = $1 AND agent_generation = $2 AND echo_port IS DISTINCT FROM $3",
        node_id,
        generation,
        port
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if moved > 0 {
        sqlx::query!("DELETE FROM lease_latency WHERE peer_node_id = $1", node_id).execute(conn).await?;
    }
    Ok(())
}

/// Record the launchers the agent reports, if they changed (only with the current credential generation).
pub async fn update_launchers(
    conn: &mut PgConnection,
    node_id: Uuid,
    generation: i64,
    launchers: serde_json::Value,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE nodes SET launchers = $3, updated_at = now() \
         WHERE id = $1 AND agent_generation = $2 AND launchers IS DISTINCT FROM $3",
        node_id,
        generation,
        launchers
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Record the driver and CUDA versions the host reports (a None keeps what is on record).
pub async fn record_versions(
    conn: &mut PgConnection,
    node_id: Uuid,
    driver: Option<&str>,
    cuda: Option<&str>,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE nodes SET facts = COALESCE(facts, '{}'::jsonb) \
             || jsonb_strip_nulls(jsonb_build_object('driver_version', $2::text, 'cuda_version', $3::text)) \
         WHERE id = $1",
        node_id,
        driver,
        cuda
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Lock the node's row until the transaction ends (as allocation does, so its free counter stays exact).
pub async fn lock_node(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<()> {
    sqlx::query!("SELECT 1 AS locked FROM nodes WHERE id = $1 FOR UPDATE", node_id).fetch_optional(conn).await?;
    Ok(())
}

/// A GPU [`take_out_of_service`] took out: its id and the lease holding it, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfService {
    pub gpu_id: Uuid,
    pub lease_id: Option<Uuid>,
}

/// Take the node's healthy GPU at `index` out of service, the one way it is done, so that the node's free counter
/// stays exact whoever calls it and in whatever order: the node is locked first (as allocation locks it), the GPU
/// marked unhealthy, and then either the node's free counter lowered (the GPU was free) or a `gpu_unhealthy` event
/// recorded on the lease that holds it (which keeps it until it ends). None when the GPU was not healthy, or there
/// is no such GPU: nothing changes.
pub async fn take_out_of_service(
    conn: &mut PgConnection,
    node_id: Uuid,
    index: i32,
    reason: &str,
) -> StoreResult<Option<OutOfService>> {
    lock_node(conn, node_id).await?;
    let hit = sqlx::query!(
        "UPDATE gpus g SET healthy = false, unhealthy_reason = $3, unhealthy_since = now() \
         WHERE g.node_id = $1 AND g.idx = $2 AND g.healthy \
         RETURNING g.id, g.held_by AS lease_id",
        node_id,
        index,
        reason
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(hit) = hit else { return Ok(None) };
    match hit.lease_id {
        None => {
            sqlx::query!("UPDATE nodes SET free_gpus = free_gpus - 1 WHERE id = $1", node_id)
                .execute(&mut *conn)
                .await?;
        }
        Some(lease_id) => {
            let event =
                NewEvent::new("gpu_unhealthy", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
                    .reason(reason)
                    .detail(serde_json::json!({ "gpu_id": hit.id, "node_id": node_id, "index": index }));
            record_event(conn, lease_id, event).await?;
        }
    }
    Ok(Some(OutOfService { gpu_id: hit.id, lease_id: hit.lease_id }))
}

/// Return an unhealthy GPU to service, the one way it is done: the GPU's node is locked first, the GPU marked
/// healthy, and a free one (no lease holds it) counted back on its node. The node's id, or None when there is no
/// such GPU (a healthy GPU stays as it is).
pub async fn return_to_service(conn: &mut PgConnection, gpu_id: Uuid) -> StoreResult<Option<Uuid>> {
    let Some(node_id) = lock_node_of_gpu(conn, gpu_id).await? else { return Ok(None) };
    let held = sqlx::query_scalar!(
        r#"UPDATE gpus g SET healthy = true, unhealthy_reason = NULL, unhealthy_since = NULL WHERE g.id = $1 AND NOT g.healthy
         RETURNING g.held_by IS NOT NULL AS "held!""#,
        gpu_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    if held == Some(false) {
        sqlx::query!("UPDATE nodes SET free_gpus = free_gpus + 1 WHERE id = $1", node_id).execute(&mut *conn).await?;
    }
    Ok(Some(node_id))
}

/// The node of a GPU, locked (`FOR UPDATE`) until the transaction ends.
pub async fn lock_node_of_gpu(conn: &mut PgConnection, gpu_id: Uuid) -> StoreResult<Option<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT n.id FROM nodes n JOIN gpus g ON g.node_id = n.id WHERE g.id = $1 FOR UPDATE OF n",
        gpu_id
    )
    .fetch_optional(conn)
    .await?)
}
