//! Pools: one GPU model in one region, sold at one price per GPU-hour.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::AssertSqlSafe;
use sqlx::PgExecutor;
use utoipa::ToSchema;
use uuid::Uuid;

use super::ALLOCATABLE_NODE;
use super::gpu_models::{GPU_MODEL_COLUMNS, GpuModel, is_slug};
use crate::auth::{AnyAuth, OperatorAuth};
use crate::error::{ApiError, ApiResult, FieldError, constraint_name};
use crate::extract::{ApiJson, ApiPath, new_id};
use crate::state::AppState;

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

pub async fn load_pools(db: impl PgExecutor<'_>, pool_id: Option<Uuid>) -> Result<Vec<Pool>, sqlx::Error> {
    let rows: Vec<PoolRow> = sqlx::query_as(AssertSqlSafe(pools_query())).bind(pool_id).fetch_all(db).await?;
    Ok(rows.into_iter().map(Pool::from).collect())
}

/// List pools with prices and free capacity.
#[utoipa::path(
    get, path = "/v1/pools", tag = "inventory", operation_id = "list_pools",
    responses((status = 200, description = "Every pool", body = Vec<Pool>))
)]
pub async fn list_pools(State(state): State<AppState>, _auth: AnyAuth) -> ApiResult<Json<Vec<Pool>>> {
    Ok(Json(load_pools(&state.db, None).await?))
}

/// Get one pool.
#[utoipa::path(
    get, path = "/v1/pools/{pool_id}", tag = "inventory", operation_id = "get_pool",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    responses((status = 200, description = "The pool", body = Pool))
)]
pub async fn get_pool(
    State(state): State<AppState>,
    _auth: AnyAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
) -> ApiResult<Json<Pool>> {
    load_pools(&state.db, Some(pool_id)).await?.pop().map(Json).ok_or(ApiError::NotFound("pool"))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "h100-us-east", "gpu_model": "h100", "region": "us-east",
    "price_per_gpu_hour_minor": 249, "currency": "USD"}))]
pub struct CreatePoolRequest {
    #[schema(pattern = r"^[a-z0-9][a-z0-9._-]{0,62}$")]
    pub name: String,
    /// GPU model key from the catalog.
    #[schema(pattern = r"^[a-z0-9][a-z0-9._-]{0,62}$")]
    pub gpu_model: String,
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub region: String,
    #[schema(minimum = 0, maximum = 1000000000)]
    pub price_per_gpu_hour_minor: i64,
    #[schema(pattern = r"^[A-Z]{3}$")]
    pub currency: String,
}

/// Upper bound on a GPU-hour price, to catch unit mistakes (1e9 minor units = 10 million in major units).
pub const MAX_PRICE_MINOR: i64 = 1_000_000_000;

fn validate_pool_fields(
    name: Option<&str>,
    region: Option<&str>,
    price: Option<i64>,
    currency: Option<&str>,
) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    if let Some(name) = name
        && !is_slug(name)
    {
        errors.push(FieldError::new("name", "lowercase letters, digits, '.', '_' or '-', 1-63 characters"));
    }
    if let Some(region) = region {
        errors.extend(crate::extract::check_name("region", region, 64).err());
    }
    if let Some(price) = price
        && !(0..=MAX_PRICE_MINOR).contains(&price)
    {
        errors.push(FieldError::new("price_per_gpu_hour_minor", format!("must be between 0 and {MAX_PRICE_MINOR}")));
    }
    if let Some(currency) = currency
        && !(currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase()))
    {
        errors.push(FieldError::new("currency", "an ISO 4217 code of 3 uppercase letters, e.g. USD"));
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
}

fn pool_write_error(err: sqlx::Error) -> ApiError {
    match constraint_name(&err) {
        Some("pools_name_unique") => ApiError::conflict("pool_name_taken", "a pool with this name exists"),
        Some("pools_gpu_model_fkey") => ApiError::field("gpu_model", "no such GPU model in the catalog"),
        _ => err.into(),
    }
}

/// Create a pool.
#[utoipa::path(
    post, path = "/v1/admin/pools", tag = "admin", operation_id = "create_pool",
    request_body = CreatePoolRequest,
    responses(
        (status = 201, description = "The pool", body = Pool),
        (status = 409, description = "Name taken (`pool_name_taken`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_pool(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiJson(req): ApiJson<CreatePoolRequest>,
) -> ApiResult<(StatusCode, Json<Pool>)> {
    validate_pool_fields(Some(&req.name), Some(&req.region), Some(req.price_per_gpu_hour_minor), Some(&req.currency))?;
    let id = new_id();
    let mut tx = state.db.begin().await?;
    sqlx::query(
        "INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(&req.name)
    .bind(&req.gpu_model)
    .bind(req.region.trim())
    .bind(req.price_per_gpu_hour_minor)
    .bind(&req.currency)
    .execute(&mut *tx)
    .await
    .map_err(pool_write_error)?;
    crate::billing::prices::insert_price(&mut tx, id, req.price_per_gpu_hour_minor, None, None).await?;
    tx.commit().await?;
    let pool = load_pools(&state.db, Some(id)).await?.pop().ok_or(ApiError::NotFound("pool"))?;
    Ok((StatusCode::CREATED, Json(pool)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"price_per_gpu_hour_minor": 229}))]
pub struct UpdatePoolRequest {
    #[schema(pattern = r"^[a-z0-9][a-z0-9._-]{0,62}$")]
    pub name: Option<String>,
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub region: Option<String>,
    #[schema(minimum = 0, maximum = 1000000000)]
    pub price_per_gpu_hour_minor: Option<i64>,
    #[schema(pattern = r"^[A-Z]{3}$")]
    pub currency: Option<String>,
    /// Minimum NVIDIA driver version for this pool's nodes, e.g. `535.104.05`; `null` returns to the service's
    /// (`--min-driver-version`). Nodes below it become `not_ready` at once.
    #[serde(default, deserialize_with = "crate::extract::double_option")]
    #[schema(value_type = Option<String>, pattern = r"^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$")]
    pub min_driver_version: Option<Option<String>>,
    /// Minimum CUDA version for this pool's nodes, e.g. `12.2`; `null` returns to the service's
    /// (`--min-cuda-version`).
    #[serde(default, deserialize_with = "crate::extract::double_option")]
    #[schema(value_type = Option<String>, pattern = r"^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$")]
    pub min_cuda_version: Option<Option<String>>,
}

/// Update a pool's name, region, price or minimum driver/CUDA versions.
#[utoipa::path(
    patch, path = "/v1/admin/pools/{pool_id}", tag = "admin", operation_id = "update_pool",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    request_body = UpdatePoolRequest,
    responses(
        (status = 200, description = "The updated pool", body = Pool),
        (status = 404, description = "No such pool (`not_found`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "Name taken (`pool_name_taken`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is out of range or malformed, e.g. a minimum version that is not dotted numbers (`validation_failed`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn update_pool(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<UpdatePoolRequest>,
) -> ApiResult<Json<Pool>> {
    let mut errors = match validate_pool_fields(
        req.name.as_deref(),
        req.region.as_deref(),
        req.price_per_gpu_hour_minor,
        req.currency.as_deref(),
    ) {
        Err(ApiError::Validation(errors)) => errors,
        Err(other) => return Err(other),
        Ok(()) => Vec::new(),
    };
    for (field, value) in [("min_driver_version", &req.min_driver_version), ("min_cuda_version", &req.min_cuda_version)]
    {
        if let Some(Some(version)) = value
            && crate::agent_api::versions::parse_version(version).is_none()
        {
            errors.push(FieldError::new(field, "1-4 dot-separated numbers of up to 6 digits, e.g. 525.60.13"));
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    let updated = sqlx::query(
        "UPDATE pools SET name = COALESCE($2, name), region = COALESCE($3, region), \
         price_per_gpu_hour_minor = COALESCE($4, price_per_gpu_hour_minor), currency = COALESCE($5, currency), \
         updated_at = now() WHERE id = $1",
    )
    .bind(pool_id)
    .bind(&req.name)
    .bind(req.region.as_deref().map(str::trim))
    .bind(req.price_per_gpu_hour_minor)
    .bind(&req.currency)
    .execute(&mut *tx)
    .await
    .map_err(pool_write_error)?;
    if updated.rows_affected() == 0 {
        return Err(ApiError::NotFound("pool"));
    }
    if req.min_driver_version.is_some() || req.min_cuda_version.is_some() {
        sqlx::query(
            "UPDATE pools SET \
                 min_driver_version = CASE WHEN $2 THEN $3 ELSE min_driver_version END, \
                 min_cuda_version = CASE WHEN $4 THEN $5 ELSE min_cuda_version END WHERE id = $1",
        )
        .bind(pool_id)
        .bind(req.min_driver_version.is_some())
        .bind(req.min_driver_version.clone().flatten())
        .bind(req.min_cuda_version.is_some())
        .bind(req.min_cuda_version.clone().flatten())
        .execute(&mut *tx)
        .await?;
        // The pool's nodes are judged by the new minimums at once, in the same transaction.
        super::readiness::evaluate_pool(&mut tx, pool_id, &state.settings).await?;
    }
    // A new price takes effect now; what was metered at the old price stays as it was.
    if let Some(price) = req.price_per_gpu_hour_minor {
        let month: Option<(Option<i64>,)> = sqlx::query_as(
            "SELECT price_per_gpu_month_minor FROM pool_prices WHERE pool_id = $1 ORDER BY effective_from DESC LIMIT 1",
        )
        .bind(pool_id)
        .fetch_optional(&mut *tx)
        .await?;
        crate::billing::prices::insert_price(&mut tx, pool_id, price, month.and_then(|m| m.0), None).await?;
    }
    tx.commit().await?;
    load_pools(&state.db, Some(pool_id)).await?.pop().map(Json).ok_or(ApiError::NotFound("pool"))
}
