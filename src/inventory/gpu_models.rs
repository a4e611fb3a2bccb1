//! The GPU model catalog: built-in datasheet facts, and models operators add.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use sqlx::AssertSqlSafe;
use utoipa::ToSchema;

use crate::auth::{AnyAuth, OperatorAuth};
use crate::error::{ApiError, ApiResult, FieldError, constraint_name};
use crate::extract::ApiJson;
use crate::state::AppState;

/// A GPU model's datasheet facts (dense tensor throughput, no sparsity).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
#[schema(example = json!({"key": "h100", "name": "H100 SXM", "memory_bytes": 80000000000u64, "memory_bandwidth_gbps": 3350,
    "bf16_tflops": 989.0, "fp8_tflops": 1979.0, "gpu_link": "nvlink4", "gpu_link_gbps": 900, "host_link": "pcie5"}))]
pub struct GpuModel {
    /// Catalog key, e.g. `h100`, `rtx4090`.
    #[schema(pattern = r"^[a-z0-9][a-z0-9._-]{0,62}$")]
    pub key: String,
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
    #[schema(minimum = 1, maximum = 4000000000000i64)]
    pub memory_bytes: i64,
    /// Memory bandwidth, GB/s.
    #[schema(minimum = 1, maximum = 1000000)]
    pub memory_bandwidth_gbps: i32,
    /// Dense BF16/FP16 tensor TFLOP/s.
    #[schema(exclusive_minimum = 0, maximum = 1000000)]
    pub bf16_tflops: f64,
    /// Dense FP8 tensor TFLOP/s; absent when the GPU has no FP8 tensor cores.
    #[schema(exclusive_minimum = 0, maximum = 1000000)]
    pub fp8_tflops: Option<f64>,
    /// GPU-to-GPU link: `none`, `nvlink3`, `nvlink4` or `nvlink5`.
    #[schema(pattern = r"^(none|nvlink3|nvlink4|nvlink5)$")]
    pub gpu_link: String,
    /// GPU-to-GPU bandwidth per GPU, GB/s (0 without a link).
    #[schema(minimum = 0, maximum = 100000)]
    pub gpu_link_gbps: i32,
    /// Host link: `pcie3`, `pcie4` or `pcie5`.
    #[schema(pattern = r"^(pcie3|pcie4|pcie5)$")]
    pub host_link: String,
}

pub const GPU_MODEL_COLUMNS: &str =
    "key, name, memory_bytes, memory_bandwidth_gbps, bf16_tflops, fp8_tflops, gpu_link, gpu_link_gbps, host_link";

impl GpuModel {
    pub fn validate(&self) -> Result<(), ApiError> {
        let mut errors = Vec::new();
        if !is_slug(&self.key) {
            errors.push(FieldError::new("key", "lowercase letters, digits, '.', '_' or '-', 1-63 characters"));
        }
        errors.extend(crate::extract::check_name("name", &self.name, 100).err());
        if !(1..=4_000_000_000_000).contains(&self.memory_bytes) {
            errors.push(FieldError::new("memory_bytes", "must be between 1 and 4e12"));
        }
        if !(1..=1_000_000).contains(&self.memory_bandwidth_gbps) {
            errors.push(FieldError::new("memory_bandwidth_gbps", "must be between 1 and 1000000"));
        }
        if !(self.bf16_tflops.is_finite() && self.bf16_tflops > 0.0 && self.bf16_tflops <= 1e6) {
            errors.push(FieldError::new("bf16_tflops", "must be a positive number up to 1e6"));
        }
        if let Some(fp8) = self.fp8_tflops
            && !(fp8.is_finite() && fp8 > 0.0 && fp8 <= 1e6)
        {
            errors.push(FieldError::new("fp8_tflops", "must be a positive number up to 1e6"));
        }
        if !["none", "nvlink3", "nvlink4", "nvlink5"].contains(&self.gpu_link.as_str()) {
            errors.push(FieldError::new("gpu_link", "one of none, nvlink3, nvlink4, nvlink5"));
        }
        if !(0..=100_000).contains(&self.gpu_link_gbps) || (self.gpu_link == "none") != (self.gpu_link_gbps == 0) {
            errors.push(FieldError::new("gpu_link_gbps", "0 exactly when gpu_link is none, else 1-100000"));
        }
        if !["pcie3", "pcie4", "pcie5"].contains(&self.host_link.as_str()) {
            errors.push(FieldError::new("host_link", "one of pcie3, pcie4, pcie5"));
        }
        if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
    }
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
    let models = sqlx::query_as(AssertSqlSafe(format!("SELECT {GPU_MODEL_COLUMNS} FROM gpu_models ORDER BY key")))
        .fetch_all(&state.db)
        .await?;
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
    model.validate()?;
    let created: GpuModel = sqlx::query_as(AssertSqlSafe(format!(
        "INSERT INTO gpu_models ({GPU_MODEL_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         RETURNING {GPU_MODEL_COLUMNS}"
    )))
    .bind(&model.key)
    .bind(model.name.trim())
    .bind(model.memory_bytes)
    .bind(model.memory_bandwidth_gbps)
    .bind(model.bf16_tflops)
    .bind(model.fp8_tflops)
    .bind(&model.gpu_link)
    .bind(model.gpu_link_gbps)
    .bind(&model.host_link)
    .fetch_one(&state.db)
    .await
    .map_err(|err| match constraint_name(&err) {
        Some("gpu_models_pkey") => ApiError::conflict("gpu_model_exists", "a GPU model with this key exists"),
        _ => err.into(),
    })?;
    Ok((StatusCode::CREATED, Json(created)))
}
