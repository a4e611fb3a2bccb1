//! Fleet-level liveness holds, for operators: which pools hold their interruptions, and releasing a hold.
//! The sweeper opens and clears them (see `liveness`).

use axum::Json;
use axum::extract::State;
use gpuplane_store::agents::holds;
use uuid::Uuid;

use crate::auth::OperatorAuth;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiPath;
use crate::state::AppState;

pub use gpuplane_store::agents::holds::LivenessHold;

/// Liveness holds of pools that have not recovered yet (open ones, and ones an operator released).
#[utoipa::path(
    get, path = "/v1/admin/liveness-holds", tag = "admin", operation_id = "list_liveness_holds",
    responses((status = 200, description = "Holds not cleared yet, oldest first", body = Vec<LivenessHold>))
)]
pub async fn list_liveness_holds(
    State(state): State<AppState>,
    _op: OperatorAuth,
) -> ApiResult<Json<Vec<LivenessHold>>> {
    let mut conn = state.db.acquire().await?;
    Ok(Json(holds::list_uncleared(&mut conn).await?))
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
    let mut conn = state.db.acquire().await?;
    let released = holds::release(&mut conn, pool_id, op.key_id).await?;
    match released {
        Some(hold) => {
            tracing::warn!(pool.id = %pool_id, "liveness hold released by an operator; interruptions resume");
            Ok(Json(hold))
        }
        None => Err(ApiError::NotFound("liveness hold")),
    }
}
