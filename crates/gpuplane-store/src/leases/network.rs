//! Communication latency between the nodes of a lease, and its alert (the rule is the server's
//! `leases::network`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;
use crate::new_id;

/// One latency report of a node, by column: the lease, the peer node and the figures.
pub struct LatencyReports {
    pub lease_ids: Vec<Uuid>,
    pub peer_node_ids: Vec<Uuid>,
    pub p50_us: Vec<i32>,
    pub p99_us: Vec<i32>,
    pub probes: Vec<i32>,
    pub lost: Vec<i32>,
}

/// Store the reports of `node_id` (rows for leases it does not hold, or peers not in the lease, are skipped: the
/// lease may have ended since the probes). Returns the lease of each row stored.
pub async fn store_reports(conn: &mut PgConnection, node_id: Uuid, r: &LatencyReports) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(
        "INSERT INTO lease_latency AS ll (lease_id, node_id, peer_node_id, p50_us, p99_us, probes, lost, measured_at) \
         SELECT u.lease_id, $1, u.peer, u.p50, u.p99, u.probes, u.lost, now() \
         FROM UNNEST($2::uuid[], $3::uuid[], $4::int[], $5::int[], $6::int[], $7::int[]) \
             AS u(lease_id, peer, p50, p99, probes, lost) \
         WHERE u.peer <> $1 \
             AND EXISTS (SELECT 1 FROM gpus g WHERE g.node_id = $1 AND g.held_by = u.lease_id) \
             AND EXISTS (SELECT 1 FROM gpus g WHERE g.node_id = u.peer AND g.held_by = u.lease_id) \
         ON CONFLICT (lease_id, node_id, peer_node_id) DO UPDATE SET p50_us = excluded.p50_us, \
             p99_us = excluded.p99_us, probes = excluded.probes, lost = excluded.lost, measured_at = excluded.measured_at \
         RETURNING ll.lease_id",
        node_id,
        &r.lease_ids,
        &r.peer_node_ids,
        &r.p50_us,
        &r.p99_us,
        &r.probes,
        &r.lost
    )
    .fetch_all(conn)
    .await?)
}

/// Lock an active lease for its alert decision (`FOR NO KEY UPDATE`); its tenant, or None when not active.
pub async fn lock_active_lease(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Option<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT tenant_id FROM leases WHERE id = $1 AND state = 'active' FOR NO KEY UPDATE",
        lease_id
    )
    .fetch_optional(conn)
    .await?)
}

/// Raise the lease's alert `condition` unless one is open; true when this raised it.
pub async fn raise_alert(
    conn: &mut PgConnection,
    lease_id: Uuid,
    condition: &str,
    detail: &serde_json::Value,
) -> StoreResult<bool> {
    let raised = sqlx::query_scalar!(
        "INSERT INTO lease_alerts (id, lease_id, condition, detail) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (lease_id, condition) WHERE cleared_at IS NULL DO NOTHING RETURNING id",
        new_id(),
        lease_id,
        condition,
        detail
    )
    .fetch_optional(conn)
    .await?;
    Ok(raised.is_some())
}

/// Clear the lease's open alert `condition`; true when one was open.
pub async fn clear_alert(conn: &mut PgConnection, lease_id: Uuid, condition: &str) -> StoreResult<bool> {
    let cleared = sqlx::query_scalar!(
        "UPDATE lease_alerts SET cleared_at = now() \
         WHERE lease_id = $1 AND condition = $2 AND cleared_at IS NULL RETURNING id",
        lease_id,
        condition
    )
    .fetch_optional(conn)
    .await?;
    Ok(cleared.is_some())
}

/// Since when the lease's alert `condition` has been open (None: it is not).
pub async fn alert_raised_at(
    conn: &mut PgConnection,
    lease_id: Uuid,
    condition: &str,
) -> StoreResult<Option<DateTime<Utc>>> {
    Ok(sqlx::query_scalar!(
        "SELECT raised_at FROM lease_alerts WHERE lease_id = $1 AND condition = $2 AND cleared_at IS NULL",
        lease_id,
        condition
    )
    .fetch_optional(conn)
    .await?)
}

/// The latest round trips from one node of a lease to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct PairLatency {
    /// The node that measured.
    pub node_id: Uuid,
    pub node_hostname: String,
    /// The node it measured to.
    pub peer_node_id: Uuid,
    pub peer_hostname: String,
    /// Median round trip, microseconds.
    pub p50_us: i32,
    /// 99th percentile round trip, microseconds.
    pub p99_us: i32,
    /// Probes answered in the reporting period.
    pub probes: i32,
    /// Probes lost in the reporting period.
    pub lost: i32,
    pub measured_at: DateTime<Utc>,
}

/// The latest measurement of each ordered pair of the lease's nodes.
pub async fn load_pairs(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<PairLatency>> {
    Ok(sqlx::query_as!(
        PairLatency,
        "SELECT ll.node_id, n.hostname AS node_hostname, ll.peer_node_id, p.hostname AS peer_hostname, \
             ll.p50_us, ll.p99_us, ll.probes, ll.lost, ll.measured_at \
         FROM lease_latency ll JOIN nodes n ON n.id = ll.node_id JOIN nodes p ON p.id = ll.peer_node_id \
         WHERE ll.lease_id = $1 ORDER BY n.hostname, p.hostname",
        lease_id
    )
    .fetch_all(conn)
    .await?)
}
