//! The agents' side of lease environments: each node's agent reports its environment's state and host keys.

use axum::extract::State;
use axum::http::StatusCode;
use gpuplane_store::environments as store;
use uuid::Uuid;

use crate::auth::AgentAuth;
use crate::environments::protocol::{EnvironmentState, EnvironmentStatus};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath};
use crate::jobs::problems::stale_credential;
use crate::state::AppState;

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

    #[test]
    fn fingerprints_are_openssh_sha256() {
        assert!(is_sha256_fingerprint("SHA256:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g50"));
        assert!(!is_sha256_fingerprint("MD5:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g50"));
        assert!(!is_sha256_fingerprint("SHA256:short"));
        assert!(!is_sha256_fingerprint("SHA256:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g5;"));
    }
}
