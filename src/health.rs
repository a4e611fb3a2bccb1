//! Liveness, readiness and Prometheus metrics.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthStatus {
    /// `ok`.
    pub status: String,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "system", operation_id = "get_healthz",
    responses((status = 200, description = "The process is up", body = HealthStatus)))]
pub async fn get_healthz() -> axum::Json<HealthStatus> {
    axum::Json(HealthStatus { status: "ok".into() })
}

/// The database is reachable.
#[utoipa::path(get, path = "/readyz", tag = "system", operation_id = "get_readyz",
    responses(
        (status = 200, description = "Ready to serve", body = HealthStatus),
        (status = 503, description = "The database is unreachable", body = crate::error::Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_readyz(State(state): State<AppState>) -> axum::response::Response {
    let ping = match state.db.acquire().await {
        Ok(mut conn) => gpuplane_store::ops::ping(&mut conn).await.map_err(sqlx::Error::from),
        Err(err) => Err(err),
    };
    match ping {
        Ok(_) => axum::Json(HealthStatus { status: "ok".into() }).into_response(),
        Err(err) => {
            tracing::warn!(error = %err, "readiness check failed");
            crate::observability::record_db_error(&err);
            let mut response = ApiError::Internal(anyhow::anyhow!("database unreachable")).into_response();
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            response
        }
    }
}

/// Prometheus metrics: requests by route and status, latency histogram, database pool use.
#[utoipa::path(get, path = "/metrics", tag = "system", operation_id = "get_metrics",
    responses((status = 200, description = "Prometheus text exposition format", body = String, content_type = "text/plain")))]
pub async fn get_metrics(State(state): State<AppState>) -> ApiResult<impl IntoResponse> {
    // Also the fleet (GPUs, nodes, leases, queue, heartbeats, metering), read from the database at scrape time,
    // background rounds and process figures; see `crate::observability`.
    let page = crate::observability::render(&state.metrics, &state.db).await;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], page))
}
