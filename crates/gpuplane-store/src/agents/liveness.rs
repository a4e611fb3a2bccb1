//! Liveness: the control plane's presence stamps, the sweeper's transitions of silent nodes (each one UPDATE
//! guarded by the previous state, so on several replicas exactly one performs it), fleet-level holds, and the
//! leases that silence interrupts.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;

/// Stamp the control plane's presence: a gap since the last stamp longer than `outage_gap_s` seconds moves
/// `resumed_at` to now. Returns `resumed_at`: since when it has been present without a gap.
pub async fn stamp_presence(conn: &mut PgConnection, outage_gap_s: f64) -> StoreResult<DateTime<Utc>> {
    Ok(sqlx::query_scalar!(
        "INSERT INTO control_plane_presence AS p (singleton, last_seen_at, resumed_at) VALUES (true, now(), now()) \
         ON CONFLICT (singleton) DO UPDATE SET last_seen_at = GREATEST(p.last_seen_at, now()), \
             resumed_at = CASE WHEN p.last_seen_at < now() - make_interval(secs => $1) THEN now() ELSE p.resumed_at END \
         RETURNING resumed_at",
        outage_gap_s
    )
    .fetch_one(conn)
    .await?)
}

/// A node the sweeper just marked unreachable.
pub struct UnreachableNode {
    pub id: Uuid,
    pub hostname: String,
    pub last_heartbeat_at: DateTime<Utc>,
}

/// Mark unreachable the live agent nodes silent for more than `after_s` seconds, silence counted from
/// GREATEST(last heartbeat, `resumed_at`).
pub async fn mark_unreachable(
    conn: &mut PgConnection,
    after_s: f64,
    resumed_at: DateTime<Utc>,
) -> StoreResult<Vec<UnreachableNode>> {
    Ok(sqlx::query_as!(
        UnreachableNode,
        r#"UPDATE nodes SET liveness = 'unreachable', updated_at = now()
         WHERE agent_managed AND liveness IN ('ready', 'not_ready')
             AND GREATEST(last_heartbeat_at, $2) < now() - make_interval(secs => $1)
         RETURNING id, hostname, last_heartbeat_at AS "last_heartbeat_at!""#,
        after_s,
        resumed_at
    )
    .fetch_all(conn)
    .await?)
}

/// A node the sweeper just marked offline.
pub struct OfflineNode {
    pub id: Uuid,
    pub pool_id: Uuid,
    pub hostname: String,
    pub last_heartbeat_at: DateTime<Utc>,
    /// Its pool holds interruptions (an unreleased liveness hold).
    pub held: bool,
}

/// Mark offline the agent nodes silent for more than `after_s` seconds, silence counted from
/// GREATEST(last heartbeat, `resumed_at`).
pub async fn mark_offline(
    conn: &mut PgConnection,
    after_s: f64,
    resumed_at: DateTime<Utc>,
) -> StoreResult<Vec<OfflineNode>> {
    Ok(sqlx::query_as!(
        OfflineNode,
        r#"UPDATE nodes n SET liveness = 'offline', updated_at = now()
         WHERE agent_managed AND liveness <> 'offline'
             AND GREATEST(last_heartbeat_at, $2) < now() - make_interval(secs => $1)
         RETURNING id, pool_id, hostname, last_heartbeat_at AS "last_heartbeat_at!",
             EXISTS (SELECT 1 FROM liveness_holds h WHERE h.pool_id = n.pool_id AND h.released_at IS NULL) AS "held!""#,
        after_s,
        resumed_at
    )
    .fetch_all(conn)
    .await?)
}

/// A liveness hold just opened.
pub struct OpenedHold {
    pub pool_id: Uuid,
    pub silent_nodes: i32,
    pub total_nodes: i32,
}

/// Open a hold for every pool where at least `threshold` of the agent nodes (and at least `min_nodes`) are
/// silent, and clear the holds of pools that recovered (releasing them if no operator did). Returns the holds
/// opened.
pub async fn update_holds(conn: &mut PgConnection, threshold: f64, min_nodes: i32) -> StoreResult<Vec<OpenedHold>> {
    Ok(sqlx::query_as!(
        OpenedHold,
        "WITH silence AS ( \
             SELECT pool_id, count(*) FILTER (WHERE liveness IN ('unreachable', 'offline'))::int AS silent, count(*)::int AS total \
             FROM nodes WHERE agent_managed GROUP BY pool_id), \
         cleared AS ( \
             UPDATE liveness_holds h SET cleared_at = now(), released_at = COALESCE(h.released_at, now()), \
                 released_by = COALESCE(h.released_by, 'system: the pool recovered') \
             WHERE h.cleared_at IS NULL AND NOT EXISTS (SELECT 1 FROM silence s \
                 WHERE s.pool_id = h.pool_id AND s.silent >= $2 AND s.silent >= $1::float8 * s.total) \
             RETURNING h.pool_id) \
         INSERT INTO liveness_holds (id, pool_id, silent_nodes, total_nodes) \
         SELECT gen_random_uuid(), pool_id, silent, total FROM silence \
         WHERE silent >= $2 AND silent >= $1 * total \
         ON CONFLICT (pool_id) WHERE cleared_at IS NULL DO NOTHING \
         RETURNING pool_id, silent_nodes, total_nodes",
        threshold,
        min_nodes
    )
    .fetch_all(conn)
    .await?)
}

/// An active lease that an offline node interrupts, with that node's host and last heartbeat.
pub struct DueInterruption {
    pub id: Uuid,
    pub hostname: String,
    pub last_heartbeat_at: DateTime<Utc>,
}

/// The active leases on offline agent nodes of pools without an unreleased hold; when several nodes of a lease
/// are offline, the one with the earliest last heartbeat.
pub async fn due_interruptions(conn: &mut PgConnection) -> StoreResult<Vec<DueInterruption>> {
    Ok(sqlx::query_as!(
        DueInterruption,
        r#"SELECT DISTINCT ON (l.id) l.id, n.hostname, n.last_heartbeat_at AS "last_heartbeat_at!"
         FROM nodes n JOIN gpus g ON g.node_id = n.id AND g.held_by IS NOT NULL
         JOIN leases l ON l.id = g.held_by AND l.state = 'active'
         WHERE n.agent_managed AND n.liveness = 'offline'
             AND NOT EXISTS (SELECT 1 FROM liveness_holds h WHERE h.pool_id = n.pool_id AND h.released_at IS NULL)
         ORDER BY l.id, n.last_heartbeat_at"#
    )
    .fetch_all(conn)
    .await?)
}

/// The active leases holding GPUs of a node, by id.
pub async fn active_leases_on(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT DISTINCT l.id FROM leases l JOIN gpus g ON g.held_by = l.id \
         WHERE g.node_id = $1 AND l.state = 'active' ORDER BY l.id",
        node_id
    )
    .fetch_all(conn)
    .await?)
}
