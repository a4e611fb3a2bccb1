//! Nodes and their GPUs. Operators create them here; node agents will register through the same code.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use gpuplane_store::inventory::nodes as store;
use serde::Deserialize;
use sqlx::PgConnection;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::OperatorAuth;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams};
use crate::state::AppState;
pub use gpuplane_protocol::agent::IntraLink;

crate::page_schema!(NodePage, Node);

pub use gpuplane_store::inventory::NodeState;

pub use gpuplane_store::inventory::nodes::{FleetPool, Gpu, Node, load_node};

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
    let Some(model_link_gbps) = store::pool_model_link_gbps(conn, req.pool_id).await? else {
        return Err(ApiError::field("pool_id", "no such pool"));
    };
    let intra_link_gbps = req.intra_link_gbps.unwrap_or(match req.intra_link {
        IntraLink::Nvlink if model_link_gbps > 0 => model_link_gbps,
        _ => 32,
    });
    let node = store::NewNode {
        pool_id: req.pool_id,
        hostname: &req.hostname,
        address: req.address.trim(),
        intra_link: req.intra_link,
        intra_link_gbps,
        network_gbps: req.network_gbps,
        rdma: req.rdma,
        external: req.external,
        gpus: req.gpus.iter().map(|g| (g.index, g.uuid.trim())).collect(),
    };
    let id = store::insert_node(conn, &node).await.map_err(|err| match err.constraint() {
        Some("nodes_hostname_unique") => ApiError::conflict("node_hostname_taken", "a node with this hostname exists"),
        Some("gpus_uuid_unique") => {
            ApiError::conflict("gpu_uuid_taken", "a GPU with one of these uuids is registered on another node")
        }
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
    let nodes = store::list_nodes(&mut conn, page.after(), filter.pool_id, filter.state, limit).await?;
    Ok(Json(Page::from_rows(nodes, limit, |n| n.id)))
}

/// The fleet at a glance: per pool, nodes (all and ready) and GPUs (all and unhealthy), counted in one query
/// so the operator's fleet page does not page through every node.
#[utoipa::path(
    get, path = "/v1/admin/fleet", tag = "admin", operation_id = "get_fleet",
    responses((status = 200, description = "Per pool, by pool id", body = Vec<FleetPool>))
)]
pub async fn get_fleet(State(state): State<AppState>, _op: OperatorAuth) -> ApiResult<Json<Vec<FleetPool>>> {
    let mut conn = state.db.acquire().await?;
    let rows = store::fleet(&mut conn).await?;
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
    let node = update_node(state, node_id, NodeChange::AdminState(admin_state)).await?;
    tracing::info!(node.id = %node_id, admin_state, "node admin state changed");
    Ok(Json(node))
}

/// An operator's change to one node.
enum NodeChange<'a> {
    /// Its `admin_state`.
    AdminState(&'a str),
    /// Allow its host name to be registered afresh for [`REREGISTRATION_WINDOW_MINUTES`].
    AllowReregistration,
}

/// Make the change and return the node as it is then; 404 when there is none.
async fn update_node(state: &AppState, node_id: Uuid, change: NodeChange<'_>) -> ApiResult<Node> {
    let mut tx = state.db.begin().await?;
    let found = match change {
        NodeChange::AdminState(admin_state) => store::set_admin_state(&mut tx, node_id, admin_state).await?,
        NodeChange::AllowReregistration => {
            store::allow_reregistration(&mut tx, node_id, REREGISTRATION_WINDOW_MINUTES).await?
        }
    };
    if !found {
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
    let node = update_node(&state, node_id, NodeChange::AllowReregistration).await?;
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
