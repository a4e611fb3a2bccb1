//! Nodes and their GPUs. Operators create them here; node agents will register through the same code.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::AssertSqlSafe;
use sqlx::PgConnection;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::OperatorAuth;
use crate::error::{ApiError, ApiResult, FieldError, constraint_name};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, new_id};
use crate::state::AppState;
pub use gpuplane_protocol::agent::IntraLink;

crate::page_schema!(NodePage, Node);

pub use gpuplane_store::inventory::NodeState;

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
    pub launchers: Option<crate::agent_api::launchers::Launchers>,
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
    launchers: Option<sqlx::types::Json<crate::agent_api::launchers::Launchers>>,
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

async fn attach_gpus(conn: &mut PgConnection, rows: Vec<NodeRow>) -> Result<Vec<Node>, sqlx::Error> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let gpus: Vec<(Uuid, Uuid, i32, String, bool)> = sqlx::query_as(
        "SELECT node_id, id, idx, uuid, healthy FROM gpus WHERE node_id = ANY($1) ORDER BY node_id, idx",
    )
    .bind(&ids)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Node {
            gpus: gpus
                .iter()
                .filter(|g| g.0 == r.id)
                .map(|g| Gpu { id: g.1, index: g.2, uuid: g.3.clone(), healthy: g.4 })
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

pub async fn load_node(conn: &mut PgConnection, node_id: Uuid) -> Result<Option<Node>, sqlx::Error> {
    let rows: Vec<NodeRow> = sqlx::query_as(AssertSqlSafe(format!("{} WHERE n.id = $1", node_select())))
        .bind(node_id)
        .fetch_all(&mut *conn)
        .await?;
    Ok(attach_gpus(conn, rows).await?.pop())
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewGpu {
    #[schema(minimum = 0, maximum = 63)]
    pub index: i32,
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub uuid: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"pool_id": "0192f5a0-0000-7000-8000-000000000001", "hostname": "gpu-node-01",
    "address": "10.0.0.11", "intra_link": "nvlink", "intra_link_gbps": 900, "network_gbps": 400, "rdma": true,
    "gpus": [{"index": 0, "uuid": "GPU-0a1b2c3d-0000-0000-0000-000000000000"}, {"index": 1, "uuid": "GPU-0a1b2c3d-0000-0000-0000-000000000001"}]}))]
pub struct CreateNodeRequest {
    pub pool_id: Uuid,
    #[schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")]
    pub hostname: String,
    #[schema(min_length = 1, max_length = 255, pattern = r"^[^\s\u0000-\u001f\u007f-\u009f]+$")]
    pub address: String,
    pub intra_link: IntraLink,
    /// GB/s; defaults to the GPU model's link (NVLink) or PCIe 4.0 x16 (32 GB/s).
    #[schema(minimum = 1, maximum = 100000)]
    pub intra_link_gbps: Option<i32>,
    /// Gbit/s between nodes.
    #[schema(minimum = 0, maximum = 100000)]
    pub network_gbps: i32,
    #[serde(default)]
    pub rdma: bool,
    #[schema(min_items = 1, max_items = 64)]
    pub gpus: Vec<NewGpu>,
    /// A host no gpuplane agent will run on, leased as it is: it is `ready` at once, the platform runs no jobs
    /// there and cannot prove its liveness, its leases say so (`Lease.external`) and are billed from start to
    /// end. Without it (the default) the node is `awaiting_agent` and takes no leases until an agent registers
    /// its host name.
    #[serde(default)]
    pub external: bool,
}

/// Most GPUs one node may carry.
pub const MAX_GPUS_PER_NODE: usize = 64;

impl CreateNodeRequest {
    pub fn validate(&self) -> Result<(), ApiError> {
        let mut errors = Vec::new();
        let hostname_ok = !self.hostname.is_empty()
            && self.hostname.len() <= 253
            && self.hostname.as_bytes()[0].is_ascii_alphanumeric()
            && self.hostname.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !hostname_ok {
            errors.push(FieldError::new("hostname", "letters, digits, '.' and '-', 1-253 characters"));
        }
        if self.address.is_empty()
            || self.address.chars().count() > 255
            || self.address.contains(|c: char| c.is_whitespace() || c.is_control())
        {
            errors.push(FieldError::new("address", "an IP address or DNS name, 1-255 characters"));
        }
        if let Some(gbps) = self.intra_link_gbps
            && !(1..=100_000).contains(&gbps)
        {
            errors.push(FieldError::new("intra_link_gbps", "must be between 1 and 100000"));
        }
        if !(0..=100_000).contains(&self.network_gbps) {
            errors.push(FieldError::new("network_gbps", "must be between 0 and 100000"));
        }
        if self.gpus.is_empty() || self.gpus.len() > MAX_GPUS_PER_NODE {
            errors.push(FieldError::new("gpus", format!("a node has 1-{MAX_GPUS_PER_NODE} GPUs")));
        }
        for (i, gpu) in self.gpus.iter().enumerate() {
            if !(0..MAX_GPUS_PER_NODE as i32).contains(&gpu.index) {
                errors.push(FieldError::new(format!("gpus[{i}].index"), "must be between 0 and 63"));
            }
            if self.gpus[..i].iter().any(|g| g.index == gpu.index) {
                errors.push(FieldError::new(format!("gpus[{i}].index"), "duplicate index on this node"));
            }
            errors.extend(crate::extract::check_name(&format!("gpus[{i}].uuid"), &gpu.uuid, 128).err());
            if self.gpus[..i].iter().any(|g| g.uuid == gpu.uuid) {
                errors.push(FieldError::new(format!("gpus[{i}].uuid"), "duplicate GPU uuid"));
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
    }
}

/// Insert a node and its GPUs (caller's transaction). Validates the request first.
pub async fn insert_node(conn: &mut PgConnection, req: &CreateNodeRequest) -> ApiResult<Uuid> {
    req.validate()?;
    let pool: Option<(i32,)> =
        sqlx::query_as("SELECT m.gpu_link_gbps FROM pools p JOIN gpu_models m ON m.key = p.gpu_model WHERE p.id = $1")
            .bind(req.pool_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((model_link_gbps,)) = pool else {
        return Err(ApiError::field("pool_id", "no such pool"));
    };
    let intra_link_gbps = req.intra_link_gbps.unwrap_or(match req.intra_link {
        IntraLink::Nvlink if model_link_gbps > 0 => model_link_gbps,
        _ => 32,
    });
    let id = new_id();
    sqlx::query(
        "INSERT INTO nodes (id, pool_id, hostname, address, intra_link, intra_link_gbps, network_gbps, rdma, free_gpus, gpu_count, \
             external, liveness) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, CASE WHEN $10 THEN 'ready' ELSE 'awaiting_agent' END)",
    )
    .bind(id)
    .bind(req.pool_id)
    .bind(&req.hostname)
    .bind(req.address.trim())
    .bind(req.intra_link)
    .bind(intra_link_gbps)
    .bind(req.network_gbps)
    .bind(req.rdma)
    .bind(req.gpus.len() as i32)
    .bind(req.external)
    .execute(&mut *conn)
    .await
    .map_err(|err| match constraint_name(&err) {
        Some("nodes_hostname_unique") => ApiError::conflict("node_hostname_taken", "a node with this hostname exists"),
        _ => err.into(),
    })?;
    let gpu_ids: Vec<Uuid> = req.gpus.iter().map(|_| new_id()).collect();
    let indices: Vec<i32> = req.gpus.iter().map(|g| g.index).collect();
    let uuids: Vec<&str> = req.gpus.iter().map(|g| g.uuid.trim()).collect();
    sqlx::query("INSERT INTO gpus (id, node_id, idx, uuid) SELECT u.id, $1, u.idx, u.uuid FROM UNNEST($2::uuid[], $3::int[], $4::text[]) AS u(id, idx, uuid)")
        .bind(id)
        .bind(&gpu_ids)
        .bind(&indices)
        .bind(&uuids)
        .execute(&mut *conn)
        .await
        .map_err(|err| match constraint_name(&err) {
            Some("gpus_uuid_unique") => ApiError::conflict("gpu_uuid_taken", "a GPU with one of these uuids is registered on another node"),
            _ => err.into(),
        })?;
    Ok(id)
}

/// Add a node and its GPUs to a pool. It takes leases once an agent registers its host name (it is
/// `awaiting_agent` until then), or at once when created `external`.
#[utoipa::path(
    post, path = "/v1/admin/nodes", tag = "admin", operation_id = "create_node",
    request_body = CreateNodeRequest,
    responses(
        (status = 201, description = "The node", body = Node),
        (status = 409, description = "Hostname or GPU uuid taken (`node_hostname_taken`, `gpu_uuid_taken`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_node(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiJson(req): ApiJson<CreateNodeRequest>,
) -> ApiResult<(StatusCode, Json<Node>)> {
    let mut tx = state.db.begin().await?;
    let id = insert_node(&mut tx, &req).await?;
    let node = load_node(&mut tx, id).await?.ok_or(ApiError::NotFound("node"))?;
    tx.commit().await?;
    tracing::info!(node.id = %id, hostname = %node.hostname, "node created");
    Ok((StatusCode::CREATED, Json(node)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NodeFilter {
    /// Only nodes of this pool.
    pub pool_id: Option<Uuid>,
    /// Only nodes in this state.
    pub state: Option<NodeState>,
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    pub after: Option<Uuid>,
}

/// List nodes, filtered by pool and state.
#[utoipa::path(
    get, path = "/v1/admin/nodes", tag = "admin", operation_id = "list_nodes",
    params(NodeFilter),
    responses((status = 200, description = "A page of nodes", body = NodePage))
)]
pub async fn list_nodes(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiQuery(filter): ApiQuery<NodeFilter>,
) -> ApiResult<Json<Page<Node>>> {
    let page = PageParams { limit: filter.limit, after: filter.after };
    let limit = page.fetch_limit()?;
    let mut conn = state.db.acquire().await?;
    let rows: Vec<NodeRow> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT * FROM ({}) n WHERE n.id > $1 AND ($2::uuid IS NULL OR n.pool_id = $2) \
         AND ($3::text IS NULL OR n.state = $3) ORDER BY n.id LIMIT $4",
        node_select()
    )))
    .bind(page.after())
    .bind(filter.pool_id)
    .bind(filter.state)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    let nodes = attach_gpus(&mut conn, rows).await?;
    Ok(Json(Page::from_rows(nodes, limit, |n| n.id)))
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

/// The fleet at a glance: per pool, nodes (all and ready) and GPUs (all and unhealthy), counted in one query
/// so the operator's fleet page does not page through every node.
#[utoipa::path(
    get, path = "/v1/admin/fleet", tag = "admin", operation_id = "get_fleet",
    responses((status = 200, description = "Per pool, by pool id", body = Vec<FleetPool>))
)]
pub async fn get_fleet(State(state): State<AppState>, _op: OperatorAuth) -> ApiResult<Json<Vec<FleetPool>>> {
    let rows: Vec<FleetPool> = sqlx::query_as(AssertSqlSafe(format!(
        "WITH n AS (SELECT n.id, n.pool_id, ({NODE_STATE_SQL}) AS state FROM nodes n), \
              g AS (SELECT node_id, count(*) AS gpus, count(*) FILTER (WHERE NOT healthy) AS unhealthy \
                    FROM gpus GROUP BY node_id) \
         SELECT p.id AS pool_id, count(n.id) AS nodes, count(n.id) FILTER (WHERE n.state = 'ready') AS nodes_ready, \
                COALESCE(sum(g.gpus), 0)::bigint AS gpus, COALESCE(sum(g.unhealthy), 0)::bigint AS gpus_unhealthy \
         FROM pools p LEFT JOIN n ON n.pool_id = p.id LEFT JOIN g ON g.node_id = n.id \
         GROUP BY p.id ORDER BY p.id"
    )))
    .fetch_all(&state.db)
    .await?;
    Ok(Json(rows))
}

/// Get a node with its GPUs.
#[utoipa::path(
    get, path = "/v1/admin/nodes/{node_id}", tag = "admin", operation_id = "get_node",
    params(("node_id" = Uuid, Path, description = "Node id")),
    responses((status = 200, description = "The node", body = Node))
)]
pub async fn get_node(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(node_id): ApiPath<Uuid>,
) -> ApiResult<Json<Node>> {
    let mut conn = state.db.acquire().await?;
    load_node(&mut conn, node_id).await?.map(Json).ok_or(ApiError::NotFound("node"))
}

/// Set the operator's intent for a node and return it.
async fn set_admin_state(state: &AppState, node_id: Uuid, admin_state: &str) -> ApiResult<Json<Node>> {
    let update =
        sqlx::query("UPDATE nodes SET admin_state = $2, generation = generation + 1, updated_at = now() WHERE id = $1")
            .bind(node_id)
            .bind(admin_state);
    let node = update_node(state, node_id, update).await?;
    tracing::info!(node.id = %node_id, admin_state, "node admin state changed");
    Ok(Json(node))
}

/// Run `update` (an UPDATE of this one node) and return the node as it is then; 404 when there is none.
async fn update_node(
    state: &AppState,
    node_id: Uuid,
    update: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
) -> ApiResult<Node> {
    let mut tx = state.db.begin().await?;
    if update.execute(&mut *tx).await?.rows_affected() == 0 {
        return Err(ApiError::NotFound("node"));
    }
    let node = load_node(&mut tx, node_id).await?.ok_or(ApiError::NotFound("node"))?;
    tx.commit().await?;
    Ok(node)
}

/// How long an operator's permission to register a node's host name afresh lasts.
pub const REREGISTRATION_WINDOW_MINUTES: i32 = 60;

/// Allow the node's host name to be registered again with a join token alone, once, within the next hour: for
/// a host whose agent lost its state directory. Without this, re-registering an existing host name needs the
/// node's current agent credential, so a join token never takes over a registered node.
#[utoipa::path(
    post, path = "/v1/admin/nodes/{node_id}/allow-reregistration", tag = "admin",
    operation_id = "allow_node_reregistration",
    params(("node_id" = Uuid, Path, description = "Node id")),
    responses((status = 200, description = "The node; the next registration of its host name within the hour re-attaches it", body = Node))
)]
pub async fn allow_node_reregistration(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiPath(node_id): ApiPath<Uuid>,
) -> ApiResult<Json<Node>> {
    let update = sqlx::query(
        "UPDATE nodes SET reregistration_allowed_until = now() + make_interval(mins => $2), updated_at = now() \
         WHERE id = $1",
    )
    .bind(node_id)
    .bind(REREGISTRATION_WINDOW_MINUTES);
    let node = update_node(&state, node_id, update).await?;
    tracing::info!(node.id = %node_id, operator.key = %op.key_id, "node re-registration allowed");
    Ok(Json(node))
}

/// Cordon a node: it keeps its leases and takes no new ones.
#[utoipa::path(
    post, path = "/v1/admin/nodes/{node_id}/cordon", tag = "admin", operation_id = "cordon_node",
    params(("node_id" = Uuid, Path, description = "Node id")),
    responses((status = 200, description = "The node", body = Node))
)]
pub async fn cordon_node(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(node_id): ApiPath<Uuid>,
) -> ApiResult<Json<Node>> {
    set_admin_state(&state, node_id, "cordoned").await
}

/// Return a cordoned, draining or maintenance node to service.
#[utoipa::path(
    post, path = "/v1/admin/nodes/{node_id}/uncordon", tag = "admin", operation_id = "uncordon_node",
    params(("node_id" = Uuid, Path, description = "Node id")),
    responses((status = 200, description = "The node", body = Node))
)]
pub async fn uncordon_node(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(node_id): ApiPath<Uuid>,
) -> ApiResult<Json<Node>> {
    set_admin_state(&state, node_id, "active").await
}

/// Drain a node: no new leases; it becomes `drained` when its last lease ends.
#[utoipa::path(
    post, path = "/v1/admin/nodes/{node_id}/drain", tag = "admin", operation_id = "drain_node",
    params(("node_id" = Uuid, Path, description = "Node id")),
    responses((status = 200, description = "The node", body = Node))
)]
pub async fn drain_node(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(node_id): ApiPath<Uuid>,
) -> ApiResult<Json<Node>> {
    set_admin_state(&state, node_id, "draining").await
}

/// Put a node into maintenance: out of service until uncordoned.
#[utoipa::path(
    post, path = "/v1/admin/nodes/{node_id}/maintenance", tag = "admin", operation_id = "set_node_maintenance",
    params(("node_id" = Uuid, Path, description = "Node id")),
    responses((status = 200, description = "The node", body = Node))
)]
pub async fn set_node_maintenance(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(node_id): ApiPath<Uuid>,
) -> ApiResult<Json<Node>> {
    set_admin_state(&state, node_id, "maintenance").await
}
