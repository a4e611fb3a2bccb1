//! The GPU model catalog: built-in datasheet facts, and models operators add.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use gpuplane_store::inventory::gpu_models as inventory;

use crate::auth::{AnyAuth, OperatorAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::ApiJson;
use crate::state::AppState;

pub use gpuplane_store::inventory::gpu_models::GpuModel;

/// Check a model an operator adds: every field in range, the link facts consistent.
pub fn validate_gpu_model(model: &GpuModel) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    if !is_slug(&model.key) {
        errors.push(FieldError::new("key", "lowercase letters, digits, '.', '_' or '-', 1-63 characters"));
    }
    errors.extend(crate::extract::check_name("name", &model.name, 100).err());
    if !(1..=4_000_000_000_000).contains(&model.memory_bytes) {
        errors.push(FieldError::new("memory_bytes", "must be between 1 and 4e12"));
    }
    if !(1..=1_000_000).contains(&model.memory_bandwidth_gbps) {
        errors.push(FieldError::new("memory_bandwidth_gbps", "must be between 1 and 1000000"));
    }
    if !(model.bf16_tflops.is_finite() && model.bf16_tflops > 0.0 && model.bf16_tflops <= 1e6) {
        errors.push(FieldError::new("bf16_tflops", "must be a positive number up to 1e6"));
    }
    if let Some(fp8) = model.fp8_tflops
        && !(fp8.is_finite() && fp8 > 0.0 && fp8 <= 1e6)
    {
        errors.push(FieldError::new("fp8_tflops", "must be a positive number up to 1e6"));
    }
    if !["none", "nvlink3", "nvlink4", "nvlink5"].contains(&model.gpu_link.as_str()) {
        errors.push(FieldError::new("gpu_link", "one of none, nvlink3, nvlink4, nvlink5"));
    }
    if !(0..=100_000).contains(&model.gpu_link_gbps) || (model.gpu_link == "none") != (model.gpu_link_gbps == 0) {
        errors.push(FieldError::new("gpu_link_gbps", "0 exactly when gpu_link is none, else 1-100000"));
    }
    if !["pcie3", "pcie4", "pcie5"].contains(&model.host_link.as_str()) {
        errors.push(FieldError::new("host_link", "one of pcie3, pcie4, pcie5"));
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
}

/// Catalog keys, pool names: lowercase slug of 1-63 characters.
pub fn is_slug(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_' || b == b'-')
}

/// List the GPU model catalog.
#[utoipa::path(
    get, path = "/v1/gpu-models", tag = "inventory", operation_id = "list_gpu_models",
    responses((status = 200, description = "Every GPU model, by key", body = Vec<GpuModel>))
)]
pub async fn list_gpu_models(State(state): State<AppState>, _auth: AnyAuth) -> ApiResult<Json<Vec<GpuModel>>> {
    let mut conn = state.db.acquire().await?;
    let models = inventory::list_gpu_models(&mut conn).await?;
    Ok(Json(models))
}

/// Add a GPU model to the catalog.
#[utoipa::path(
    post, path = "/v1/admin/gpu-models", tag = "admin", operation_id = "create_gpu_model",
    request_body = GpuModel,
    responses(
        (status = 201, description = "The new model", body = GpuModel),
        (status = 409, description = "Key taken (`gpu_model_exists`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_gpu_model(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiJson(model): ApiJson<GpuModel>,
) -> ApiResult<(StatusCode, Json<GpuModel>)> {
    validate_gpu_model(&model)?;
    let model = GpuModel { name: model.name.trim().to_owned(), ..model };
    let mut conn = state.db.acquire().await?;
    let created = inventory::insert_gpu_model(&mut conn, &model).await.map_err(|err| match err.constraint() {
        Some("gpu_models_pkey") => ApiError::conflict("gpu_model_exists", "a GPU model with this key exists"),
        _ => err.into(),
    })?;
    Ok((StatusCode::CREATED, Json(created)))
}
