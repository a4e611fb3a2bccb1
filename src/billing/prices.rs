//! Pool prices over time, SLA terms, and revenue reports for operators.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::OperatorAuth;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, new_id};
use crate::inventory::MAX_PRICE_MINOR;
use crate::state::AppState;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PoolPrice {
    pub id: Uuid,
    pub pool_id: Uuid,
    pub effective_from: DateTime<Utc>,
    pub price_per_gpu_hour_minor: i64,
    /// Monthly terms: price per GPU per 30-day month (absent: monthly terms use the hourly price).
    pub price_per_gpu_month_minor: Option<i64>,
}

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

/// Insert a price row (the caller's transaction); `effective_from` None means now.
pub async fn insert_price(
    conn: &mut sqlx::PgConnection,
    pool_id: Uuid,
    hour: i64,
    month: Option<i64>,
    effective_from: Option<DateTime<Utc>>,
) -> Result<PoolPrice, sqlx::Error> {
    sqlx::query_as!(
        PoolPrice,
        "INSERT INTO pool_prices (id, pool_id, effective_from, price_per_gpu_hour_minor, price_per_gpu_month_minor) \
         VALUES ($1, $2, COALESCE($3, now()), $4, $5) \
         ON CONFLICT (pool_id, effective_from) DO UPDATE SET price_per_gpu_hour_minor = EXCLUDED.price_per_gpu_hour_minor, \
             price_per_gpu_month_minor = EXCLUDED.price_per_gpu_month_minor \
         RETURNING id, pool_id, effective_from, price_per_gpu_hour_minor, price_per_gpu_month_minor",
        new_id(),
        pool_id,
        effective_from,
        hour,
        month
    )
    .fetch_one(conn)
    .await
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
    let exists = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM pools WHERE id = $1) AS "exists!""#, pool_id)
        .fetch_one(&mut *tx)
        .await?;
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
    let prices = sqlx::query_as!(
        PoolPrice,
        "SELECT id, pool_id, effective_from, price_per_gpu_hour_minor, price_per_gpu_month_minor FROM pool_prices \
         WHERE pool_id = $1 ORDER BY effective_from",
        pool_id
    )
    .fetch_all(&state.db)
    .await?;
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
    let done = sqlx::query!(
        "UPDATE pools SET sla_target_ppm = $2, sla_credit_percent = $3 WHERE id = $1",
        pool_id,
        target_ppm,
        sla.credit_percent
    )
    .execute(&state.db)
    .await?;
    if done.rows_affected() == 0 {
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
pub struct PoolRevenue {
    pub pool_id: Uuid,
    pub pool_name: String,
    pub currency: String,
    pub amount_minor: i64,
    pub gpu_seconds: i64,
    /// GPU-seconds sold / GPU-seconds the pool's GPUs existed in the period.
    pub sold_fraction: Option<f64>,
    /// Mean measured GPU utilization in the period (telemetry).
    pub avg_gpu_util: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TenantRevenue {
    pub tenant_id: Uuid,
    pub tenant_name: String,
    pub currency: String,
    pub amount_minor: i64,
    pub gpu_seconds: i64,
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
    let pools = sqlx::query_as!(
        PoolRevenue,
        r#"SELECT p.id AS pool_id, p.name AS pool_name, p.currency,
             COALESCE((SELECT sum(amount_minor) FROM usage_records r WHERE r.pool_id = p.id AND r.period_start >= $1 AND r.period_start < $2), 0)::bigint AS "amount_minor!",
             COALESCE((SELECT sum(gpu_seconds) FROM usage_records r WHERE r.pool_id = p.id AND r.period_start >= $1 AND r.period_start < $2), 0)::bigint AS "gpu_seconds!",
             (SELECT sum(gpu_seconds) FROM usage_records r WHERE r.pool_id = p.id AND r.period_start >= $1 AND r.period_start < $2)::float8
                 / NULLIF((SELECT sum(n.gpu_count) FROM nodes n WHERE n.pool_id = p.id) * EXTRACT(EPOCH FROM $2 - $1), 0) AS sold_fraction,
             (SELECT (sum(h.gpu_util_sum) / sum(h.samples))::float8 FROM node_hours h
                 WHERE h.pool_id = p.id AND h.hour >= date_trunc('hour', $1) AND h.hour < $2) AS avg_gpu_util
         FROM pools p ORDER BY p.name"#,
        period.from,
        period.to
    )
    .fetch_all(&state.db)
    .await?;
    let tenants = sqlx::query_as!(
        TenantRevenue,
        r#"SELECT t.id AS tenant_id, t.name AS tenant_name, r.currency, sum(r.amount_minor)::bigint AS "amount_minor!",
             sum(r.gpu_seconds)::bigint AS "gpu_seconds!"
         FROM usage_records r JOIN tenants t ON t.id = r.tenant_id
         WHERE r.period_start >= $1 AND r.period_start < $2 GROUP BY t.id, t.name, r.currency ORDER BY t.name"#,
        period.from,
        period.to
    )
    .fetch_all(&state.db)
    .await?;
    Ok(Json(Revenue { from: period.from, to: period.to, pools, tenants }))
}
