//! HTTP face of the planner: `POST /v1/plans` and `POST /v1/plans/mixed` (stateless) and `POST /v1/advice` (over
//! the platform's pools). The planning itself is the pure `planner` module.

use axum::Json;
use axum::extract::State;
use gpuplane_store::StoreError;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;

use crate::auth::TenantAuth;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::ApiJson;
use crate::inventory::gpu_models::GpuModel;
use crate::planner::{
    self, AdviceRequest, AdviceResult, AdviceTarget, GpuSpec, LinkKind, MixedPlanRequest, MixedPlanResult, ModelRef,
    PlanError, PlanRequest, PlanResult, PoolOffer, WorkloadFields,
};
use crate::state::AppState;

/// The planner's view of a catalog GPU model. Without NVLink, GPUs talk over the host's PCIe link.
pub fn gpu_spec(model: &GpuModel) -> GpuSpec {
    let (link, link_gb_s) = match model.gpu_link.as_str() {
        "none" => (
            LinkKind::Pcie,
            match model.host_link.as_str() {
                "pcie5" => 64.0,
                "pcie3" => 16.0,
                _ => 32.0,
            },
        ),
        _ => (LinkKind::Nvlink, model.gpu_link_gbps as f64),
    };
    GpuSpec {
        key: model.key.clone(),
        name: model.name.clone(),
        memory_bytes: model.memory_bytes.max(0) as u64,
        mem_bandwidth_gb_s: model.memory_bandwidth_gbps as f64,
        bf16_tflops: model.bf16_tflops,
        fp8_tflops: model.fp8_tflops,
        link,
        link_gb_s,
    }
}

/// Map a planner error to the API's: bad input is 422 `validation_failed`; nothing fitting is 422
/// `plan_infeasible` with the reason and the smallest configuration that would fit.
pub fn plan_error(err: PlanError) -> ApiError {
    match err {
        PlanError::Invalid { field, message } => ApiError::Validation(vec![FieldError::new(field, message)]),
        PlanError::Infeasible { reason, needed_bytes_min, available_bytes, smallest_fit, hints } => {
            ApiError::Unprocessable {
                code: "plan_infeasible",
                message: reason,
                context: Some(serde_json::json!({
                    "needed_bytes_min": needed_bytes_min,
                    "available_bytes": available_bytes,
                    "smallest_fit": smallest_fit,
                    "hints": hints,
                })),
            }
        }
    }
}

/// Run CPU-bound planning off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, PlanError> + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ApiError::Internal(e.into()))?.map_err(plan_error)
}

/// Plan a model on a cluster: ranked parallelization plans with memory, speed and an explanation.
#[utoipa::path(
    post, path = "/v1/plans", tag = "planner", operation_id = "create_plan",
    request_body(content = PlanRequest, example = json!({
        "model": {"preset": "llama3-70b"},
        "workload": {"kind": "train", "seq_len": 4096, "global_batch": 1024},
        "cluster": {"gpu": "a100-80g", "gpus": 64, "gpus_per_node": 8, "inter_node_gbps": 1600, "rdma": true},
        "pins": {}, "top_n": 3})),
    responses(
        (status = 200, description = "Plans, fastest first", body = PlanResult),
        (status = 422, description = "Invalid input (`validation_failed`) or nothing fits (`plan_infeasible`, with the smallest fitting configuration in `context`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_plan(_auth: TenantAuth, ApiJson(req): ApiJson<PlanRequest>) -> ApiResult<Json<PlanResult>> {
    let result = blocking(move || planner::plan_request(&req)).await?;
    Ok(Json(result))
}

/// Plan training or LoRA over unlike GPUs: one to four parts, each one GPU model in nodes of one size, planned
/// together (pipeline stages sized to each part's speed and memory) and each part alone. The same errors as
/// `POST /v1/plans`, with a part's field errors at `parts[i].field`.
#[utoipa::path(
    post, path = "/v1/plans/mixed", tag = "planner", operation_id = "create_mixed_plan",
    request_body(content = MixedPlanRequest, example = json!({
        "model": {"preset": "llama2-13b"},
        "workload": {"kind": "train", "seq_len": 4096, "global_batch": 512},
        "parts": [
            {"gpu": "a100-80g", "gpus": 8, "gpus_per_node": 8, "inter_node_gbps": 400},
            {"gpu": "rtx4090", "gpus": 8, "gpus_per_node": 4, "inter_node_gbps": 400}],
        "top_n": 3})),
    responses(
        (status = 200, description = "Plans over the parts together or one part alone, fastest first, with their stages and per-part use", body = MixedPlanResult),
        (status = 422, description = "Invalid input (`validation_failed`, e.g. `parts[1].gpus`, or `workload.kind` for inference) or nothing fits, together or alone (`plan_infeasible`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_mixed_plan(
    _auth: TenantAuth,
    ApiJson(req): ApiJson<MixedPlanRequest>,
) -> ApiResult<Json<MixedPlanResult>> {
    let result = blocking(move || planner::plan_mixed_request(&req)).await?;
    Ok(Json(result))
}

/// What the tenant wants done; the platform supplies the pools.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"model": {"preset": "llama2-7b"}, "workload": {"kind": "lora", "seq_len": 4096, "global_batch": 64},
    "target": {"training_tokens": 2000000000u64}, "deadline_hours": 24, "budget_minor": 50000}))]
pub struct AdviceQuery {
    pub model: ModelRef,
    pub workload: WorkloadFields,
    pub target: AdviceTarget,
    /// Finish within this many hours.
    pub deadline_hours: Option<f64>,
    /// Spend at most this, in minor units of the pool's currency.
    pub budget_minor: Option<i64>,
}

/// The platform's pools as the planner sees them: model facts, price, GPUs free now, typical node shape.
pub async fn pool_offers(conn: &mut PgConnection) -> Result<Vec<PoolOffer>, StoreError> {
    let rows = gpuplane_store::ops::pool_offer_rows(conn).await?;
    Ok(rows
        .into_iter()
        .filter(|r| r.gpus_per_node > 0)
        .map(|r| PoolOffer {
            pool_id: r.id.to_string(),
            gpu: gpu_spec(&r.gpu_model),
            price_per_gpu_hour_minor: r.price_per_gpu_hour_minor,
            currency: r.currency,
            free_gpus: r.free_gpus.clamp(0, u32::MAX as i64) as u32,
            gpus_per_node: r.gpus_per_node as u32,
            inter_node_gbps: r.network_gbps as f64,
            rdma: r.rdma,
        })
        .collect())
}

/// Which GPUs to rent: for every pool and the GPU counts free in it now, the best plan, time to finish and
/// cost at the pool's price; shown is the cost/time frontier (nothing left out is both cheaper and faster than
/// an option shown; costs within `cost_tie_bps` count as equal and the faster is shown), with the cheapest and
/// the fastest of what is shown marked. Training and LoRA may also get `mixes`: two pools of one currency used
/// by one plan, priced per pool, shown when cheaper or faster than every single-pool option.
#[utoipa::path(
    post, path = "/v1/advice", tag = "planner", operation_id = "create_advice",
    request_body = AdviceQuery,
    responses(
        (status = 200, description = "The cost/time frontier across pools: options meeting every constraint first, each part cheapest first", body = AdviceResult),
        (status = 422, description = "Invalid input (`validation_failed`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_advice(
    State(state): State<AppState>,
    _auth: TenantAuth,
    ApiJson(query): ApiJson<AdviceQuery>,
) -> ApiResult<Json<AdviceResult>> {
    let pools = pool_offers(&mut *state.db.acquire().await?).await?;
    let req = AdviceRequest {
        model: query.model,
        workload: query.workload,
        target: query.target,
        deadline_hours: query.deadline_hours,
        budget_minor: query.budget_minor,
        pools,
    };
    Ok(Json(blocking(move || planner::advice(&req)).await?))
}
