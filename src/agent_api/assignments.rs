//! The agents' side of jobs: an agent fetches its node's assignments and reports each one's status.

use axum::Json;
use axum::extract::State;
use uuid::Uuid;

use crate::jobs::protocol::{AssignmentList, AssignmentStatus, AssignmentStatusResponse};

use crate::auth::AgentAuth;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::jobs::lifecycle;
use crate::jobs::problems::stale_credential;
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;
use gpuplane_protocol::logs::{LogReport, LogReportResponse};

/// The node's unfinished assignments, each with what to do (`run` or `cancel`). Fetching marks new ones
/// `assigned`. An assignment that is no longer listed has ended (e.g. with its lease): stop it.
#[utoipa::path(
    get, path = "/v1/agent/assignments", tag = "agents", operation_id = "get_assignments",
    responses((status = 200, description = "The node's assignments", body = AssignmentList))
)]
pub async fn get_assignments(
    State(state): State<AppState>,
    agent: AgentAuth,
) -> ApiResult<(NoStore, Json<AssignmentList>)> {
    let mut tx = state.db.begin().await?;
    let mut list = lifecycle::fetch_assignments(&mut tx, &state.settings.keyring, agent.node_id, agent.generation)
        .await?
        .ok_or_else(stale_credential)?;
    tx.commit().await?;
    // A serving part's forwarder lets in only the gateway, which presents this token (stored nowhere).
    for assignment in &mut list.assignments {
        if let Some(serve) = &mut assignment.spec.serve {
            serve.token = state.tokens.replica_token(assignment.job_node_id);
        }
    }
    Ok((NO_STORE, Json(list)))
}

/// Report a state transition of an assignment's process (running, succeeded, failed, cancelled) with its exit
/// code and last lines of output. Idempotent; states only move forward.
#[utoipa::path(
    post, path = "/v1/agent/assignments/{job_node_id}/status", tag = "agents", operation_id = "report_assignment_status",
    params(("job_node_id" = Uuid, Path, description = "The assignment's `job_node_id`")),
    request_body = AssignmentStatus,
    responses((status = 200, description = "The assignment as recorded now", body = AssignmentStatusResponse))
)]
pub async fn report_assignment_status(
    State(state): State<AppState>,
    agent: AgentAuth,
    ApiPath(job_node_id): ApiPath<Uuid>,
    ApiJson(report): ApiJson<AssignmentStatus>,
) -> ApiResult<Json<AssignmentStatusResponse>> {
    if report.output_tail.len() > 1000 {
        return Err(ApiError::field("output_tail", "at most 1000 lines (the service keeps the last 50)"));
    }
    if report.progress.is_some_and(|p| !p.valid()) {
        return Err(ApiError::field("progress", "0 <= done <= total"));
    }
    let mut tx = state.db.begin().await?;
    let (state_now, desired) = lifecycle::report_status(
        &mut tx,
        &state.settings.keyring,
        agent.node_id,
        agent.generation,
        job_node_id,
        &report,
    )
    .await?;
    tx.commit().await?;
    Ok(Json(AssignmentStatusResponse { state: state_now, desired }))
}

/// Ship a part's output: its next lines, numbered per part (`seq`). Idempotent: a line already stored (a report
/// sent again after a lost answer) is skipped, and the answer says the highest `seq` stored, so the agent can
/// forget everything up to it. A gap in `seq` is counted as lost lines. The job's secret values are masked before
/// anything is stored.
#[utoipa::path(
    post, path = "/v1/agent/assignments/{job_node_id}/logs", tag = "agents", operation_id = "report_assignment_logs",
    params(("job_node_id" = Uuid, Path, description = "The assignment's `job_node_id`")),
    request_body = LogReport,
    responses((status = 200, description = "What the service holds of the part's output now", body = LogReportResponse))
)]
pub async fn report_assignment_logs(
    State(state): State<AppState>,
    agent: AgentAuth,
    ApiPath(job_node_id): ApiPath<Uuid>,
    ApiJson(report): ApiJson<LogReport>,
) -> ApiResult<Json<LogReportResponse>> {
    if let Err((field, message)) = report.check() {
        return Err(ApiError::field(field, message));
    }
    let mut tx = state.db.begin().await?;
    let cap = state.settings.job_log_cap_bytes;
    let keyring = &state.settings.keyring;
    let acked_seq =
        crate::jobs::logs::ingest(&mut tx, keyring, agent.node_id, agent.generation, job_node_id, &report, cap).await?;
    tx.commit().await?;
    Ok(Json(LogReportResponse { acked_seq }))
}

/// The archive a job names as its working directory (`workdir`), for the agent of a node where a part of that job
/// has not ended: the agent unpacks it into the part's working directory before it starts the part. Any other
/// upload is 404, whatever the caller knows of its digest.
#[utoipa::path(
    get, path = "/v1/agent/uploads/{digest}", tag = "agents", operation_id = "get_agent_upload",
    params(("digest" = String, Path, description = "The upload's digest, as the part's spec names it")),
    responses((status = 200, description = "The archive's bytes", body = crate::uploads::routes::ArchiveBody, content_type = "application/octet-stream"))
)]
pub async fn get_agent_upload(
    State(state): State<AppState>,
    agent: AgentAuth,
    ApiPath(digest): ApiPath<String>,
) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    let mut conn = state.db.acquire().await?;
    if !gpuplane_store::jobs::agent_current(&mut conn, agent.node_id, agent.generation).await? {
        return Err(stale_credential());
    }
    if !crate::uploads::is_digest(&digest) {
        return Err(ApiError::NotFound("upload"));
    }
    let content = gpuplane_store::uploads::for_node(&mut conn, agent.node_id, &digest)
        .await?
        .ok_or(ApiError::NotFound("upload"))?;
    let media = axum::http::HeaderValue::from_static(crate::uploads::routes::ARCHIVE_MEDIA_TYPE);
    Ok(([(axum::http::header::CONTENT_TYPE, media)], content).into_response())
}

// ---------------------------------------------------------------------------------------------------------------
// Insights
