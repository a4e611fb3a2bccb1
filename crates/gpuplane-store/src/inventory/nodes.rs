//! Nodes and their GPUs: the node view operators and agents read, its inserts and the operators' updates.

use chrono::{DateTime, Utc};
use gpuplane_protocol::agent::{IntraLink, Launchers};
use serde::{Deserialize, Serialize};
use sqlx::{AssertSqlSafe, PgConnection};
use utoipa::ToSchema;
use uuid::Uuid;

use super::NodeState;
use crate::StoreResult;

/// SQL expression (over `nodes n`) for the derived state.
pub const NODE_STATE_SQL: &str = "CASE WHEN n.liveness <> 'ready' THEN n.liveness \
     WHEN n.admin_state = 'active' THEN 'ready' \
     WHEN n.admin_state = 'draining' AND NOT EXISTS \
         (SELECT 1 FROM gpus g WHERE g.node_id = n.id AND g.held_by IS NOT NULL) THEN 'drained' \
     ELSE n.admin_state END";

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct Gpu {
    pub id: Uuid,
    /// Index on the node (as CUDA_VISIBLE_DEVICES counts).
    pub index: i32,
    /// The GPU's UUID as NVML reports it, e.g. `GPU-5a1c...`.
    pub uuid: String,
    /// False after a fatal XID until an operator returns it to service.
    pub healthy: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Node {
    pub id: Uuid,
    pub pool_id: Uuid,
    pub hostname: String,
    /// Address other nodes and tenants reach it at (IP or DNS name).
    pub address: String,
    pub state: NodeState,
    pub intra_link: IntraLink,
    /// GPU-to-GPU bandwidth inside the node, GB/s.
    pub intra_link_gbps: i32,
    /// Inter-node network bandwidth, Gbit/s.
    pub network_gbps: i32,
    /// Whether the inter-node network supports RDMA (InfiniBand/RoCE).
    pub rdma: bool,
    pub gpus: Vec<Gpu>,
    /// NVIDIA driver version the agent reports, e.g. `550.54.15`.
    pub driver_version: Option<String>,
    /// CUDA version the agent reports, e.g. `12.4`.
    pub cuda_version: Option<String>,
    /// Why the node is (or, once back, will be) `not_ready`, e.g. `driver 470.57.02 < 525.60.13`.
    pub not_ready_reason: Option<String>,
    /// UDP port of the agent's echo listener at `address` (round-trip probes between a lease's nodes).
    pub echo_port: Option<i32>,
    /// Created as external by an operator: no agent runs on it, so the platform runs no jobs there and cannot
    /// prove its liveness; its leases say so (`Lease.external`) and are billed from start to end.
    pub external: bool,
    /// What its agent found on the host to launch jobs with (name -> version, null when the launcher tells no
    /// version); null when no agent reported them (no agent, or one older than this field).
    #[schema(value_type = Option<std::collections::BTreeMap<String, Option<String>>>)]
    pub launchers: Option<Launchers>,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct NodeRow {
    id: Uuid,
    pool_id: Uuid,
    hostname: String,
    address: String,
    state: NodeState,
    intra_link: IntraLink,
    intra_link_gbps: i32,
    network_gbps: i32,
    rdma: bool,
    driver_version: Option<String>,
    cuda_version: Option<String>,
    not_ready_reason: Option<String>,
    echo_port: Option<i32>,
    external: bool,
    launchers: Option<sqlx::types::Json<Launchers>>,
    last_heartbeat_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn node_select() -> String {
    format!(
        "SELECT n.id, n.pool_id, n.hostname, n.address, ({NODE_STATE_SQL}) AS state, n.intra_link, n.intra_link_gbps, \
         n.network_gbps, n.rdma, n.facts->>'driver_version' AS driver_version, \
         n.facts->>'cuda_version' AS cuda_version, n.not_ready_reason, n.echo_port, n.external, n.launchers, n.last_heartbeat_at, \
         n.created_at, n.updated_at FROM nodes n"
    )
}

async fn attach_gpus(conn: &mut PgConnection, rows: Vec<NodeRow>) -> StoreResult<Vec<Node>> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let gpus = sqlx::query!(
        "SELECT node_id, id, idx, uuid, healthy FROM gpus WHERE node_id = ANY($1) ORDER BY node_id, idx",
        &ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Node {
            gpus: gpus
                .iter()
                .filter(|g| g.node_id == r.id)
                .map(|g| Gpu { id: g.id, index: g.idx, uuid: g.uuid.clone(), healthy: g.healthy })
                .collect(),
            id: r.id,
            pool_id: r.pool_id,
            hostname: r.hostname,
            address: r.address,
            state: r.state,
            intra_link: r.intra_link,
            intra_link_gbps: r.intra_link_gbps,
            network_gbps: r.network_gbps,
            rdma: r.rdma,
            driver_version: r.driver_version,
            cuda_version: r.cuda_version,
            not_ready_reason: r.not_ready_reason,
            echo_port: r.echo_port,
            external: r.external,
            launchers: r.launchers.map(|l| l.0),
            last_heartbeat_at: r.last_heartbeat_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
        .collect())
}

/// A node with its GPUs, if there is one.
pub async fn load_node(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Option<Node>> {
    // Runtime SQL: the node view is built from the shared fragment `NODE_STATE_SQL` (also `list_nodes`, `fleet`).
    let rows: Vec<NodeRow> = sqlx::query_as(AssertSqlSafe(format!("{} WHERE n.id = $1", node_select())))
        .bind(node_id)
        .fetch_all(&mut *conn)
        .await?;
    Ok(attach_gpus(conn, rows).await?.pop())
}

/// A page of nodes by id after `after`, optionally of one pool and in one state, with their GPUs.
pub async fn list_nodes(
    conn: &mut PgConnection,
    after: Uuid,
    pool_id: Option<Uuid>,
    state: Option<NodeState>,
    limit: i64,
) -> StoreResult<Vec<Node>> {
    // Runtime SQL: the node view is built from the shared fragment `NODE_STATE_SQL` (also `load_node`, `fleet`).
    let rows: Vec<NodeRow> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT * FROM ({}) n WHERE n.id > $1 AND ($2::uuid IS NULL OR n.pool_id = $2) \
         AND ($3::text IS NULL OR n.state = $3) ORDER BY n.id LIMIT $4",
        node_select()
    )))
    .bind(after)
    .bind(pool_id)
    .bind(state)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    attach_gpus(conn, rows).await
}

/// One pool's nodes and GPUs, counted (`GET /v1/admin/fleet`). Free and leased GPUs are the pool's own
/// figures (`GET /v1/pools`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct FleetPool {
    pub pool_id: Uuid,
    /// Nodes in the pool, in any state.
    pub nodes: i64,
    /// Nodes in state `ready` (taking new leases).
    pub nodes_ready: i64,
    /// GPUs on the pool's nodes.
    pub gpus: i64,
    /// GPUs marked unhealthy (after a fatal XID, until an operator restores them).
    pub gpus_unhealthy: i64,
}

/// Per pool, its nodes (all and ready) and GPUs (all and unhealthy), counted in one query, by pool id.
pub async fn fleet(conn: &mut PgConnection) -> StoreResult<Vec<FleetPool>> {
    // Runtime SQL: the state is the shared fragment `NODE_STATE_SQL` (also the node view).
    let rows = sqlx::query_as(AssertSqlSafe(format!(
        "WITH n AS (SELECT n.id, n.pool_id, ({NODE_STATE_SQL}) AS state FROM nodes n), \
              g AS (SELECT node_id, count(*) AS gpus, count(*) FILTER (WHERE NOT healthy) AS unhealthy \
                    FROM gpus GROUP BY node_id) \
         SELECT p.id AS pool_id, count(n.id) AS nodes, count(n.id) FILTER (WHERE n.state = 'ready') AS nodes_ready, \
                COALESCE(sum(g.gpus), 0)::bigint AS gpus, COALESCE(sum(g.unhealthy), 0)::bigint AS gpus_unhealthy \
         FROM pools p LEFT JOIN n ON n.pool_id = p.id LEFT JOIN g ON g.node_id = n.id \
         GROUP BY p.id ORDER BY p.id"
    )))
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// The GPU-to-GPU link bandwidth of the pool's GPU model; `None` when there is no such pool.
pub async fn pool_model_link_gbps(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<Option<i32>> {
    let gbps = sqlx::query_scalar!(
        "SELECT m.gpu_link_gbps FROM pools p JOIN gpu_models m ON m.key = p.gpu_model WHERE p.id = $1",
        pool_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(gbps)
}

/// A node to insert, with its GPUs (index and uuid each).
#[derive(Debug, Clone)]
pub struct NewNode<'a> {
    pub pool_id: Uuid,
    pub hostname: &'a str,
    pub address: &'a str,
    pub intra_link: IntraLink,
    pub intra_link_gbps: i32,
    pub network_gbps: i32,
    pub rdma: bool,
    /// `ready` at once when external, else `awaiting_agent`.
    pub external: bool,
    pub gpus: Vec<(i32, &'a str)>,
}

/// Insert a node and its GPUs (caller's transaction); fails on `nodes_hostname_unique` or `gpus_uuid_unique`.
pub async fn insert_node(conn: &mut PgConnection, node: &NewNode<'_>) -> StoreResult<Uuid> {
    let id = crate::new_id();
    sqlx::query!(
        "INSERT INTO nodes (id, pool_id, hostname, address, intra_link, intra_link_gbps, network_gbps, rdma, free_gpus, gpu_count, \
             external, liveness) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, CASE WHEN $10 THEN 'ready' ELSE 'awaiting_agent' END)",
        id,
        node.pool_id,
        node.hostname,
        node.address,
        node.intra_link as IntraLink,
        node.intra_link_gbps,
        node.network_gbps,
        node.rdma,
        node.gpus.len() as i32,
        node.external
    )
    .execute(&mut *conn)
    .await?;
    let gpu_ids: Vec<Uuid> = node.gpus.iter().map(|_| crate::new_id()).collect();
    let indices: Vec<i32> = node.gpus.iter().map(|g| g.0).collect();
    let uuids: Vec<&str> = node.gpus.iter().map(|g| g.1).collect();
    sqlx::query!(
        "INSERT INTO gpus (id, node_id, idx, uuid) SELECT u.id, $1, u.idx, u.uuid FROM UNNEST($2::uuid[], $3::int[], $4::text[]) AS u(id, idx, uuid)",
        id,
        &gpu_ids,
        &indices,
        &uuids as &[&str]
    )
    .execute(&mut *conn)
    .await?;
    Ok(id)
}

/// Set the operator's intent for a node (`active`, `cordoned`, `draining`, `maintenance`); false when there is
/// no such node.
pub async fn set_admin_state(conn: &mut PgConnection, node_id: Uuid, admin_state: &str) -> StoreResult<bool> {
    let updated = sqlx::query!(
        "UPDATE nodes SET admin_state = $2, generation = generation + 1, updated_at = now() WHERE id = $1",
        node_id,
        admin_state
    )
    .execute(conn)
    .await?;
    Ok(updated.rows_affected() > 0)
}

/// Allow the node's host name to be registered afresh for the next `minutes`; false when there is no such node.
pub async fn allow_reregistration(conn: &mut PgConnection, node_id: Uuid, minutes: i32) -> StoreResult<bool> {
    let updated = sqlx::query!(
        "UPDATE nodes SET reregistration_allowed_until = now() + make_interval(mins => $2), updated_at = now() \
         WHERE id = $1",
        node_id,
        minutes
    )
    .execute(conn)
    .await?;
    Ok(updated.rows_affected() > 0)
}
