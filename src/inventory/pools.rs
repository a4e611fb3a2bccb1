//! Pools: one GPU model in one region, sold at one price per GPU-hour.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use gpuplane_store::StoreError;
use gpuplane_store::inventory::pools as store;
use serde::Deserialize;
use sqlx::PgPool;
use utoipa::ToSchema;
use uuid::Uuid;

use super::gpu_models::is_slug;
use crate::auth::{AnyAuth, OperatorAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, new_id};
use crate::state::AppState;

pub use gpuplane_store::inventory::pools::Pool;

/// Pools with their model, current price and capacity, by id; only `pool_id`'s when given.
pub async fn load_pools(db: &PgPool, pool_id: Option<Uuid>) -> Result<Vec<Pool>, sqlx::Error> {
    let mut conn = db.acquire().await?;
    Ok(store::load_pools(&mut conn, pool_id).await?)
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

pub use super::MAX_PRICE_MINOR;

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

fn pool_write_error(err: StoreError) -> ApiError {
    match err.constraint() {
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
    let pool = store::NewPool {
        id,
        name: &req.name,
        gpu_model: &req.gpu_model,
        region: req.region.trim(),
        price_per_gpu_hour_minor: req.price_per_gpu_hour_minor,
        currency: &req.currency,
    };
    store::insert_pool(&mut tx, &pool).await.map_err(pool_write_error)?;
    gpuplane_store::billing::prices::insert_price(&mut tx, id, req.price_per_gpu_hour_minor, None, None).await?;
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
            && gpuplane_protocol::versions::parse_version(version).is_none()
        {
            errors.push(FieldError::new(field, "1-4 dot-separated numbers of up to 6 digits, e.g. 525.60.13"));
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    let change = store::PoolChange {
        name: req.name.as_deref(),
        region: req.region.as_deref().map(str::trim),
        price_per_gpu_hour_minor: req.price_per_gpu_hour_minor,
        currency: req.currency.as_deref(),
    };
    if !store::update_pool(&mut tx, pool_id, &change).await.map_err(pool_write_error)? {
        return Err(ApiError::NotFound("pool"));
    }
    if req.min_driver_version.is_some() || req.min_cuda_version.is_some() {
        let driver = req.min_driver_version.as_ref().map(Option::as_deref);
        let cuda = req.min_cuda_version.as_ref().map(Option::as_deref);
        store::set_pool_minimums(&mut tx, pool_id, driver, cuda).await?;
        // The pool's nodes are judged by the new minimums at once, in the same transaction.
        super::readiness::evaluate_pool(&mut tx, pool_id, &state.settings).await?;
    }
    // A new price takes effect now; what was metered at the old price stays as it was.
    if let Some(price) = req.price_per_gpu_hour_minor {
        let month = store::latest_month_price(&mut tx, pool_id).await?;
        gpuplane_store::billing::prices::insert_price(&mut tx, pool_id, price, month.flatten(), None).await?;
    }
    tx.commit().await?;
    load_pools(&state.db, Some(pool_id)).await?.pop().map(Json).ok_or(ApiError::NotFound("pool"))
}
