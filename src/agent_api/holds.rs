//! Fleet-level liveness holds, for operators: which pools hold their interruptions, and releasing a hold.
//! The sweeper opens and clears them (see `liveness`).

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::OperatorAuth;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiPath;
use crate::state::AppState;

/// Too many of a pool's agent nodes went silent at once: while `released_at` is null, no lease in the pool is
/// interrupted for node silence.
#[derive(Debug, Clone, Serialize, ToSchema, sqlx::FromRow)]
pub struct LivenessHold {
    pub id: Uuid,
    pub pool_id: Uuid,
    pub opened_at: DateTime<Utc>,
    /// Silent agent nodes when the hold opened.
    pub silent_nodes: i32,
    /// Agent nodes of the pool when the hold opened.
    pub total_nodes: i32,
    /// When interruptions resumed (operator release, or the pool recovered).
    pub released_at: Option<DateTime<Utc>>,
    /// `operator:<key id>` or `system: the pool recovered`.
    pub released_by: Option<String>,
}

/// Liveness holds of pools that have not recovered yet (open ones, and ones an operator released).
#[utoipa::path(
    get, path = "/v1/admin/liveness-holds", tag = "admin", operation_id = "list_liveness_holds",
    responses((status = 200, description = "Holds not cleared yet, oldest first", body = Vec<LivenessHold>))
)]
pub async fn list_liveness_holds(
    State(state): State<AppState>,
    _op: OperatorAuth,
) -> ApiResult<Json<Vec<LivenessHold>>> {
    let holds = sqlx::query_as!(
        LivenessHold,
        "SELECT id, pool_id, opened_at, silent_nodes, total_nodes, released_at, released_by \
         FROM liveness_holds WHERE cleared_at IS NULL ORDER BY opened_at"
    )
    .fetch_all(&state.db)
    .await?;
    Ok(Json(holds))
}

/// Release a pool's liveness hold: the silent nodes' leases are interrupted at their last heartbeat by the
/// next sweep. No new hold opens in the pool until it has recovered.
#[utoipa::path(
    post, path = "/v1/admin/pools/{pool_id}/liveness-hold/release", tag = "admin", operation_id = "release_liveness_hold",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    responses((status = 200, description = "The released hold", body = LivenessHold))
)]
pub async fn release_liveness_hold(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
) -> ApiResult<Json<LivenessHold>> {
    let released = sqlx::query_as!(
        LivenessHold,
        "UPDATE liveness_holds SET released_at = now(), released_by = 'operator:' || $2::uuid::text \
         WHERE pool_id = $1 AND released_at IS NULL \
         RETURNING id, pool_id, opened_at, silent_nodes, total_nodes, released_at, released_by",
        pool_id,
        op.key_id
    )
    .fetch_optional(&state.db)
    .await?;
    match released {
        Some(hold) => {
            tracing::warn!(pool.id = %pool_id, "liveness hold released by an operator; interruptions resume");
            Ok(Json(hold))
        }
        None => Err(ApiError::NotFound("liveness hold")),
    }
}
