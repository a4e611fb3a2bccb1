//! `/v1/leases/{id}/environment`, `/v1/tenant/ssh-keys` and the agents' environment reports.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use gpuplane_store::environments as store;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use super::protocol::{EnvironmentState, EnvironmentStatus};
use crate::auth::{AgentAuth, TenantAdminAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath};
use crate::jobs::problems::{check_image, lease_not_active, stale_credential};
use crate::leases::LeaseState;
use crate::state::AppState;

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

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartEnvironmentRequest {
    /// Run the SSH server from this image (it must have `/usr/sbin/sshd`); default: the host's, in the sandbox.
    #[serde(default)]
    #[schema(max_length = 255, pattern = "^[A-Za-z0-9._/:@][A-Za-z0-9._/:@-]*$")]
    pub image: Option<String>,
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
    let state = overall_state(running, nodes.iter().map(|n| n.state));
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

/// The environment's state from its nodes': stopped unless running; failed if any node failed; ready when all are.
pub fn overall_state(running: bool, nodes: impl Iterator<Item = EnvironmentState> + Clone) -> EnvironmentState {
    if !running {
        EnvironmentState::Stopped
    } else if nodes.clone().any(|s| s == EnvironmentState::Failed) {
        EnvironmentState::Failed
    } else if nodes.clone().all(|s| s == EnvironmentState::Ready) && nodes.count() > 0 {
        EnvironmentState::Ready
    } else {
        EnvironmentState::Starting
    }
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
    crate::leases::lifecycle::ensure_owned(&mut conn, auth.tenant_id, lease_id).await?;
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

/// Most host keys a report may carry.
const MAX_HOST_KEYS: usize = 8;

/// Report the environment's state on this node (agents).
#[utoipa::path(
    post, path = "/v1/agent/environments/{lease_id}/status", tag = "agents",
    operation_id = "report_environment_status",
    params(("lease_id" = Uuid, Path, description = "The environment's lease")),
    request_body = EnvironmentStatus,
    responses((status = 204, description = "Recorded"))
)]
pub async fn report_environment_status(
    State(state): State<AppState>,
    agent: AgentAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
    ApiJson(report): ApiJson<EnvironmentStatus>,
) -> ApiResult<StatusCode> {
    let mut errors = Vec::new();
    if report.host_key_fingerprints.len() > MAX_HOST_KEYS
        || report.host_key_fingerprints.iter().any(|f| !is_sha256_fingerprint(f))
    {
        errors.push(FieldError::new("host_key_fingerprints", "at most 8, each `SHA256:` and 43 base64 characters"));
    }
    if report.state == EnvironmentState::Ready && report.port.is_none_or(|p| p == 0) {
        errors.push(FieldError::new("port", "a ready environment has a port, 1-65535"));
    }
    if report.reason.as_deref().is_some_and(|r| r.chars().any(|c| c == '\0')) {
        errors.push(FieldError::new("reason", "must not contain NUL"));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    if !store::agent_generation_is_current(&mut tx, agent.node_id, agent.generation).await? {
        return Err(stale_credential());
    }
    let reason = report.reason.as_ref().map(|r| r.chars().take(500).collect::<String>());
    // Only an environment of a lease that holds GPUs of this node (now or before) can be reported.
    let recorded = store::EnvironmentReport {
        lease_id,
        node_id: agent.node_id,
        state: report.state,
        port: report.port.map(i32::from),
        host_key_fingerprints: serde_json::json!(report.host_key_fingerprints),
        reason: reason.as_deref(),
    };
    if !store::record_environment_node(&mut tx, &recorded).await? {
        return Err(ApiError::NotFound("environment"));
    }
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

fn is_sha256_fingerprint(text: &str) -> bool {
    text.strip_prefix("SHA256:")
        .is_some_and(|b| b.len() == 43 && b.chars().all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use EnvironmentState::*;

    #[test]
    fn the_environment_is_ready_only_when_every_node_is() {
        let state = |running, nodes: &[EnvironmentState]| overall_state(running, nodes.iter().copied());
        assert_eq!(state(true, &[Ready, Ready]), Ready);
        assert_eq!(state(true, &[Ready, Starting]), Starting);
        assert_eq!(state(true, &[Ready, Failed]), Failed);
        assert_eq!(state(false, &[Ready, Ready]), Stopped);
        assert_eq!(state(true, &[]), Starting);
    }

    #[test]
    fn fingerprints_are_openssh_sha256() {
        assert!(is_sha256_fingerprint("SHA256:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g50"));
        assert!(!is_sha256_fingerprint("MD5:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g50"));
        assert!(!is_sha256_fingerprint("SHA256:short"));
        assert!(!is_sha256_fingerprint("SHA256:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g5;"));
    }
}
