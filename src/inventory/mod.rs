//! GPU inventory: the model catalog, pools (one GPU model in one region at one price) and nodes with their GPUs.

pub mod gpu_models;
pub mod nodes;
pub mod pools;

use utoipa_axum::router::OpenApiRouter;

use crate::app::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    gpu_models::router().merge(pools::router()).merge(nodes::router())
}

/// SQL predicate (over `nodes n` and `gpus g`) for a GPU that a new lease may take: a healthy GPU on a node
/// an operator has not taken out of service and whose agent is alive.
pub const ALLOCATABLE_GPU: &str = "n.admin_state = 'active' AND n.liveness = 'ready' AND g.healthy";
