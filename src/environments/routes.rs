//! `/v1/leases/{id}/environment` and `/v1/tenant/ssh-keys` (the agents' reports are `agent_api::environments`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use gpuplane_store::environments as store;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use super::protocol::EnvironmentState;
use super::requests::StartEnvironmentRequest;
use crate::auth::{TenantAdminAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath};
use crate::jobs::problems::{check_image, lease_not_active};
use crate::state::AppState;
use gpuplane_store::leases::LeaseState;

/// The user an environment's SSH server logs in (the lease's own user on the host).
pub const ENVIRONMENT_USER: &str = "tenant";

/// A lease's interactive environment.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Environment {
    pub lease_id: Uuid,
    /// `starting` until every node's SSH server is up, then `ready`; `failed` if a node's failed; `stopped`
    /// once stopped or the lease ended.
    pub state: EnvironmentState,
    pub image: Option<String>,
    /// The user to log in as.
    pub user: String,
    /// One per node of the lease, by host name.
    pub nodes: Vec<EnvironmentNode>,
    /// What happens to the lease's files (`/lease/home`, shared with its jobs) when the lease ends.
    pub files_at_lease_end: String,
    pub created_at: DateTime<Utc>,
    pub stopped_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnvironmentNode {
    pub node_id: Uuid,
    pub hostname: String,
    /// The address to connect to.
    pub host: String,
    pub state: EnvironmentState,
    #[schema(maximum = 65535)]
    pub port: Option<u16>,
    /// Ready to paste, e.g. `ssh -p 20000 tenant@10.0.0.7`.
    pub ssh: Option<String>,
    /// The SSH server's host keys, `SHA256:...`: compare with what `ssh` shows on first connection.
    pub host_key_fingerprints: Vec<String>,
    pub reason: Option<String>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// The environment as the tenant sees it; `None` if the lease (of this tenant) has none.
async fn load_environment(conn: &mut PgConnection, tenant_id: Uuid, lease_id: Uuid) -> ApiResult<Option<Environment>> {
    let Some(env) = store::load_environment(conn, tenant_id, lease_id).await? else { return Ok(None) };
    let store::EnvironmentRow { image, state, created_at, stopped_at, lease_state } = env;
    let running = state == "requested" && lease_state == LeaseState::Active;
    let rows = store::environment_nodes(conn, lease_id).await?;
    let nodes: Vec<EnvironmentNode> = rows
        .into_iter()
        .map(|row| {
            let store::EnvironmentNodeRow {
                node_id,
                hostname,
                address: host,
                state: reported,
                port,
                host_key_fingerprints: keys,
                reason,
                updated_at,
            } = row;
            let state =
                if running { reported.unwrap_or(EnvironmentState::Starting) } else { EnvironmentState::Stopped };
            let port = port.and_then(|p| u16::try_from(p).ok()).filter(|_| state == EnvironmentState::Ready);
            EnvironmentNode {
                node_id,
                ssh: port.map(|p| format!("ssh -p {p} {ENVIRONMENT_USER}@{host}")),
                hostname,
                host,
                state,
                port,
                host_key_fingerprints: keys.and_then(|k| serde_json::from_value(k).ok()).unwrap_or_default(),
                reason,
                updated_at,
            }
        })
        .collect();
    let state = super::overall_state(running, nodes.iter().map(|n| n.state));
    Ok(Some(Environment {
        lease_id,
        state,
        image,
        user: ENVIRONMENT_USER.into(),
        nodes,
        files_at_lease_end: "wiped: a lease's files are removed from its hosts when it ends".into(),
        created_at,
        stopped_at,
    }))
}

/// The lease's environment: per node its state, `ssh` line and host key fingerprints.
#[utoipa::path(
    get, path = "/v1/leases/{lease_id}/environment", tag = "environments", operation_id = "get_environment",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    responses((status = 200, description = "The environment", body = Environment))
)]
pub async fn get_environment(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
) -> ApiResult<Json<Environment>> {
    let mut conn = state.db.acquire().await?;
    crate::access::ensure_lease_owned(&mut conn, auth.tenant_id, lease_id).await?;
    load_environment(&mut conn, auth.tenant_id, lease_id).await?.map(Json).ok_or(ApiError::NotFound("environment"))
}

/// Start (or restart) the lease's environment (tenant admin): on each of the lease's nodes the agent starts an
/// SSH server in the lease's sandbox, holding exactly the lease's GPUs on that node, accepting the tenant's
/// registered keys (`/v1/tenant/ssh-keys`) and no password. Poll `GET` until `ready`.
#[utoipa::path(
    post, path = "/v1/leases/{lease_id}/environment", tag = "environments", operation_id = "start_environment",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    request_body = StartEnvironmentRequest,
    responses(
        (status = 201, description = "Requested; the nodes start it within a few heartbeats", body = Environment),
        (status = 409, description = "The lease is not active (`lease_not_active`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn start_environment(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<StartEnvironmentRequest>,
) -> ApiResult<(StatusCode, Json<Environment>)> {
    if let Some(image) = &req.image {
        let mut errors: Vec<FieldError> = Vec::new();
        check_image(image, &mut errors);
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
    }
    let mut tx = state.db.begin().await?;
    // Held against a concurrent end of the lease until the request is stored.
    let lease_state =
        store::lease_state_for_share(&mut tx, auth.tenant_id, lease_id).await?.ok_or(ApiError::NotFound("lease"))?;
    if lease_state != LeaseState::Active {
        return Err(lease_not_active(lease_state));
    }
    store::request_environment(&mut tx, auth.tenant_id, lease_id, req.image.as_deref()).await?;
    let env = load_environment(&mut tx, auth.tenant_id, lease_id).await?.ok_or(ApiError::NotFound("environment"))?;
    tx.commit().await?;
    tracing::info!(lease.id = %lease_id, "environment requested");
    Ok((StatusCode::CREATED, Json(env)))
}

/// Stop the lease's environment (tenant admin): every process in it is killed and its ports are freed. The
/// lease's files stay until the lease ends.
#[utoipa::path(
    delete, path = "/v1/leases/{lease_id}/environment", tag = "environments", operation_id = "stop_environment",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    responses((status = 200, description = "The environment, stopped", body = Environment))
)]
pub async fn stop_environment(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
) -> ApiResult<Json<Environment>> {
    let mut tx = state.db.begin().await?;
    store::stop_environment(&mut tx, auth.tenant_id, lease_id).await?;
    let env = load_environment(&mut tx, auth.tenant_id, lease_id).await?.ok_or(ApiError::NotFound("environment"))?;
    tx.commit().await?;
    Ok(Json(env))
}
