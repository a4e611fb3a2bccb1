//! Pools: one GPU model in one region, sold at one price per GPU-hour.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{AssertSqlSafe, PgConnection};
use utoipa::ToSchema;
use uuid::Uuid;

use super::ALLOCATABLE_NODE;
use super::gpu_models::{GPU_MODEL_COLUMNS, GpuModel};
use crate::StoreResult;

/// A pool with its GPU model's facts, its price and what is free in it now.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Pool {
    pub id: Uuid,
    /// Unique slug, e.g. `h100-us-east`.
    pub name: String,
    pub region: String,
    pub gpu_model: GpuModel,
    /// Price of one GPU for one hour, in minor units of `currency` (cents, fen).
    pub price_per_gpu_hour_minor: i64,
    /// ISO 4217 code, e.g. `USD`, `CNY`.
    pub currency: String,
    /// Every GPU in the pool, whatever its state.
    pub total_gpus: i64,
    /// GPUs a new lease could take now.
    pub free_gpus: i64,
    /// The most free GPUs on any single node: the largest `single_node` lease possible now.
    pub largest_free_block: i64,
    /// This pool's minimum NVIDIA driver version, overriding the service's (absent: the service's applies).
    pub min_driver_version: Option<String>,
    /// This pool's minimum CUDA version, overriding the service's (absent: the service's applies).
    pub min_cuda_version: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct PoolRow {
    id: Uuid,
    name: String,
    region: String,
    price_per_gpu_hour_minor: i64,
    currency: String,
    total_gpus: i64,
    free_gpus: i64,
    largest_free_block: i64,
    min_driver_version: Option<String>,
    min_cuda_version: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    gpu_model: sqlx::types::Json<GpuModel>,
}

impl From<PoolRow> for Pool {
    fn from(r: PoolRow) -> Self {
        Pool {
            id: r.id,
            name: r.name,
            region: r.region,
            gpu_model: r.gpu_model.0,
            price_per_gpu_hour_minor: r.price_per_gpu_hour_minor,
            currency: r.currency,
            total_gpus: r.total_gpus,
            free_gpus: r.free_gpus,
            largest_free_block: r.largest_free_block,
            min_driver_version: r.min_driver_version,
            min_cuda_version: r.min_cuda_version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Pools with capacity figures; `$1` is an optional pool id filter.
fn pools_query() -> String {
    let model_fields: Vec<String> = GPU_MODEL_COLUMNS.split(", ").map(|c| format!("'{c}', m.{c}")).collect();
    format!(
        "WITH node_capacity AS ( \
             SELECT n.pool_id, n.gpu_count AS total, \
                    CASE WHEN {ALLOCATABLE_NODE} THEN n.free_gpus ELSE 0 END AS free \
             FROM nodes n WHERE ($1::uuid IS NULL OR n.pool_id = $1)) \
         SELECT p.id, p.name, p.region, \
                COALESCE((SELECT cp.price_per_gpu_hour_minor FROM pool_current_prices cp WHERE cp.pool_id = p.id), \
                    p.price_per_gpu_hour_minor) AS price_per_gpu_hour_minor, \
                p.currency, p.min_driver_version, p.min_cuda_version, p.created_at, p.updated_at, \
                COALESCE(sum(c.total), 0)::bigint AS total_gpus, COALESCE(sum(c.free), 0)::bigint AS free_gpus, \
                COALESCE(max(c.free), 0)::bigint AS largest_free_block, json_build_object({}) AS gpu_model \
         FROM pools p JOIN gpu_models m ON m.key = p.gpu_model LEFT JOIN node_capacity c ON c.pool_id = p.id \
         WHERE ($1::uuid IS NULL OR p.id = $1) \
         GROUP BY p.id, m.key ORDER BY p.id",
        model_fields.join(", ")
    )
}

/// Pools with their model, current price and capacity, by id; only `pool_id`'s when given.
pub async fn load_pools(conn: &mut PgConnection, pool_id: Option<Uuid>) -> StoreResult<Vec<Pool>> {
    // Runtime SQL: built from the shared fragments `ALLOCATABLE_NODE` and `GPU_MODEL_COLUMNS`.
    let rows: Vec<PoolRow> = sqlx::query_as(AssertSqlSafe(pools_query())).bind(pool_id).fetch_all(conn).await?;
    Ok(rows.into_iter().map(Pool::from).collect())
}

/// A pool to insert (its first price is the caller's to record).
#[derive(Debug, Clone)]
pub struct NewPool<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub gpu_model: &'a str,
    pub region: &'a str,
    pub price_per_gpu_hour_minor: i64,
    pub currency: &'a str,
}

/// Insert a pool; fails on `pools_name_unique` or `pools_gpu_model_fkey`.
pub async fn insert_pool(conn: &mut PgConnection, pool: &NewPool<'_>) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency) VALUES ($1, $2, $3, $4, $5, $6)",
        pool.id,
        pool.name,
        pool.gpu_model,
        pool.region,
        pool.price_per_gpu_hour_minor,
        pool.currency
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The fields of a pool to change; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct PoolChange<'a> {
    pub name: Option<&'a str>,
    pub region: Option<&'a str>,
    pub price_per_gpu_hour_minor: Option<i64>,
    pub currency: Option<&'a str>,
}

/// Change a pool's name, region, price or currency; false when there is no such pool. Fails on
/// `pools_name_unique`.
pub async fn update_pool(conn: &mut PgConnection, pool_id: Uuid, change: &PoolChange<'_>) -> StoreResult<bool> {
    let updated = sqlx::query!(
        "UPDATE pools SET name = COALESCE($2, name), region = COALESCE($3, region), \
         price_per_gpu_hour_minor = COALESCE($4, price_per_gpu_hour_minor), currency = COALESCE($5, currency), \
         updated_at = now() WHERE id = $1",
        pool_id,
        change.name,
        change.region,
        change.price_per_gpu_hour_minor,
        change.currency
    )
    .execute(conn)
    .await?;
    Ok(updated.rows_affected() > 0)
}

/// Set the pool's minimum driver and CUDA versions: each only when its `Some` (whose `None` clears it).
pub async fn set_pool_minimums(
    conn: &mut PgConnection,
    pool_id: Uuid,
    min_driver_version: Option<Option<&str>>,
    min_cuda_version: Option<Option<&str>>,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE pools SET \
             min_driver_version = CASE WHEN $2 THEN $3 ELSE min_driver_version END, \
             min_cuda_version = CASE WHEN $4 THEN $5 ELSE min_cuda_version END WHERE id = $1",
        pool_id,
        min_driver_version.is_some(),
        min_driver_version.flatten(),
        min_cuda_version.is_some(),
        min_cuda_version.flatten()
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The monthly price of the pool's latest price row: `None` when it has no price row, `Some(None)` when that
/// row has no monthly price.
pub async fn latest_month_price(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<Option<Option<i64>>> {
    let month = sqlx::query_scalar!(
        "SELECT price_per_gpu_month_minor FROM pool_prices WHERE pool_id = $1 ORDER BY effective_from DESC LIMIT 1",
        pool_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(month)
}
