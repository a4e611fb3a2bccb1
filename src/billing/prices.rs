//! Pool prices over time, SLA terms, and revenue reports for operators.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use gpuplane_store::billing::prices as stored;

use crate::auth::OperatorAuth;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::inventory::MAX_PRICE_MINOR;
use crate::state::AppState;

pub use gpuplane_store::billing::prices::{PoolPrice, PoolRevenue, TenantRevenue, insert_price};

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"price_per_gpu_hour_minor": 199, "price_per_gpu_month_minor": 105000, "effective_from": "2026-12-01T00:00:00Z"}))]
pub struct CreatePoolPriceRequest {
    #[schema(minimum = 0, maximum = 1000000000)]
    pub price_per_gpu_hour_minor: i64,
    #[schema(minimum = 0, maximum = 100000000000i64)]
    pub price_per_gpu_month_minor: Option<i64>,
    /// When it takes effect (default now). Never in the past: charges already made are never rewritten.
    #[serde(default, deserialize_with = "crate::extract::sane_time_opt")]
    #[schema(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-")]
    pub effective_from: Option<DateTime<Utc>>,
}

/// Schedule a price change for a pool.
#[utoipa::path(
    post, path = "/v1/admin/pools/{pool_id}/prices", tag = "billing", operation_id = "create_pool_price",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    request_body = CreatePoolPriceRequest,
    responses((status = 201, description = "The price", body = PoolPrice))
)]
pub async fn create_pool_price(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<CreatePoolPriceRequest>,
) -> ApiResult<(StatusCode, Json<PoolPrice>)> {
    let mut errors = Vec::new();
    if !(0..=MAX_PRICE_MINOR).contains(&req.price_per_gpu_hour_minor) {
        errors.push(FieldError::new("price_per_gpu_hour_minor", format!("must be between 0 and {MAX_PRICE_MINOR}")));
    }
    if req.price_per_gpu_month_minor.is_some_and(|m| !(0..=100 * MAX_PRICE_MINOR).contains(&m)) {
        errors.push(FieldError::new("price_per_gpu_month_minor", "must be between 0 and 1e11"));
    }
    if req.effective_from.is_some_and(|t| t < Utc::now() - chrono::Duration::seconds(5)) {
        errors.push(FieldError::new("effective_from", "must not be in the past"));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    let exists = stored::pool_exists(&mut tx, pool_id).await?;
    if !exists {
        return Err(ApiError::NotFound("pool"));
    }
    let price =
        insert_price(&mut tx, pool_id, req.price_per_gpu_hour_minor, req.price_per_gpu_month_minor, req.effective_from)
            .await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(price)))
}

/// A pool's price history and schedule.
#[utoipa::path(
    get, path = "/v1/admin/pools/{pool_id}/prices", tag = "billing", operation_id = "list_pool_prices",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    responses((status = 200, description = "Prices by effective time", body = Vec<PoolPrice>))
)]
pub async fn list_pool_prices(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
) -> ApiResult<Json<Vec<PoolPrice>>> {
    let prices = stored::list_prices(&mut *state.db.acquire().await?, pool_id).await?;
    Ok(Json(prices))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"target_percent": 99.5, "credit_percent": 10}))]
pub struct PoolSla {
    /// Monthly availability promised for monthly leases, percent (e.g. 99.5). Null removes the SLA.
    #[schema(minimum = 0, maximum = 100)]
    pub target_percent: Option<f64>,
    /// Credit, in percent of the month's charge, when availability falls below the target.
    #[schema(minimum = 0, maximum = 100)]
    pub credit_percent: Option<i32>,
}

/// Set a pool's SLA for monthly leases.
#[utoipa::path(
    put, path = "/v1/admin/pools/{pool_id}/sla", tag = "billing", operation_id = "set_pool_sla",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    request_body = PoolSla,
    responses((status = 200, description = "The SLA as stored", body = PoolSla))
)]
pub async fn set_pool_sla(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
    ApiJson(sla): ApiJson<PoolSla>,
) -> ApiResult<Json<PoolSla>> {
    let target_ppm = match sla.target_percent {
        Some(t) if t.is_finite() && (0.0..=100.0).contains(&t) => Some((t * 10_000.0).round() as i32),
        Some(_) => return Err(ApiError::field("target_percent", "between 0 and 100")),
        None => None,
    };
    if sla.credit_percent.is_some_and(|c| !(0..=100).contains(&c))
        || target_ppm.is_some() != sla.credit_percent.is_some()
    {
        return Err(ApiError::field("credit_percent", "0-100, given exactly when target_percent is"));
    }
    let done = stored::set_sla(&mut *state.db.acquire().await?, pool_id, target_ppm, sla.credit_percent).await?;
    if !done {
        return Err(ApiError::NotFound("pool"));
    }
    Ok(Json(sla))
}

#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PeriodParams {
    /// Start (RFC 3339).
    #[serde(deserialize_with = "crate::extract::sane_time")]
    #[param(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-")]
    pub from: DateTime<Utc>,
    /// End (RFC 3339), exclusive.
    #[serde(deserialize_with = "crate::extract::sane_time")]
    #[param(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-")]
    pub to: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Revenue {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub pools: Vec<PoolRevenue>,
    pub tenants: Vec<TenantRevenue>,
}

/// Revenue and utilization per pool and per tenant for a period.
#[utoipa::path(
    get, path = "/v1/admin/billing/revenue", tag = "billing", operation_id = "get_revenue",
    params(PeriodParams),
    responses((status = 200, description = "Revenue by pool and tenant", body = Revenue))
)]
pub async fn get_revenue(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiQuery(period): ApiQuery<PeriodParams>,
) -> ApiResult<Json<Revenue>> {
    if period.from >= period.to {
        return Err(ApiError::field("from", "must be before `to`"));
    }
    let mut conn = state.db.acquire().await?;
    let pools = stored::pool_revenue(&mut conn, period.from, period.to).await?;
    let tenants = stored::tenant_revenue(&mut conn, period.from, period.to).await?;
    Ok(Json(Revenue { from: period.from, to: period.to, pools, tenants }))
}
