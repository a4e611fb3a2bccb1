//! The GPU model catalog: built-in datasheet facts, and models operators add.

use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

/// A GPU model's datasheet facts (dense tensor throughput, no sparsity).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"key": "h100", "name": "H100 SXM", "memory_bytes": 80000000000u64, "memory_bandwidth_gbps": 3350,
    "bf16_tflops": 989.0, "fp8_tflops": 1979.0, "gpu_link": "nvlink4", "gpu_link_gbps": 900, "host_link": "pcie5"}))]
#[serde(deny_unknown_fields)]
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

/// The catalog's columns in [`GpuModel`]'s field order, for the pools' query (`pools_query`), which builds each
/// pool's model as a JSON object of them: a runtime string for the shared `ALLOCATABLE_NODE` rule. The checked
/// statements below write their columns out, and the macros check them against [`GpuModel`].
pub(super) const GPU_MODEL_COLUMNS: &str =
    "key, name, memory_bytes, memory_bandwidth_gbps, bf16_tflops, fp8_tflops, gpu_link, gpu_link_gbps, host_link";

/// Every GPU model, by key.
pub async fn list_gpu_models(conn: &mut PgConnection) -> StoreResult<Vec<GpuModel>> {
    let models = sqlx::query_as!(
        GpuModel,
        "SELECT key, name, memory_bytes, memory_bandwidth_gbps, bf16_tflops, fp8_tflops, gpu_link, gpu_link_gbps, \
             host_link \
         FROM gpu_models ORDER BY key"
    )
    .fetch_all(conn)
    .await?;
    Ok(models)
}

/// The catalog model of a pool's GPUs.
pub async fn pool_gpu_model(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<GpuModel> {
    Ok(sqlx::query_as!(
        GpuModel,
        "SELECT key, name, memory_bytes, memory_bandwidth_gbps, bf16_tflops, fp8_tflops, gpu_link, gpu_link_gbps, \
             host_link \
         FROM gpu_models WHERE key = (SELECT gpu_model FROM pools WHERE id = $1)",
        pool_id
    )
    .fetch_one(conn)
    .await?)
}

/// Insert a model into the catalog as given; fails on `gpu_models_pkey` when its key is taken.
pub async fn insert_gpu_model(conn: &mut PgConnection, model: &GpuModel) -> StoreResult<GpuModel> {
    let created = sqlx::query_as!(
        GpuModel,
        "INSERT INTO gpu_models \
             (key, name, memory_bytes, memory_bandwidth_gbps, bf16_tflops, fp8_tflops, gpu_link, gpu_link_gbps, \
              host_link) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         RETURNING key, name, memory_bytes, memory_bandwidth_gbps, bf16_tflops, fp8_tflops, gpu_link, gpu_link_gbps, \
             host_link",
        model.key,
        model.name,
        model.memory_bytes,
        model.memory_bandwidth_gbps,
        model.bf16_tflops,
        model.fp8_tflops,
        model.gpu_link,
        model.gpu_link_gbps,
        model.host_link
    )
    .fetch_one(conn)
    .await?;
    Ok(created)
}
