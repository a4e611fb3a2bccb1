//! Pool prices over time, SLA terms, and revenue reports.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PoolPrice {
    pub id: Uuid,
    pub pool_id: Uuid,
    pub effective_from: DateTime<Utc>,
    pub price_per_gpu_hour_minor: i64,
    /// Monthly terms: price per GPU per 30-day month (absent: monthly terms use the hourly price).
    pub price_per_gpu_month_minor: Option<i64>,
}

/// Insert a price row (the caller's transaction); `effective_from` None means now.
pub async fn insert_price(
    conn: &mut PgConnection,
    pool_id: Uuid,
    hour: i64,
    month: Option<i64>,
    effective_from: Option<DateTime<Utc>>,
) -> StoreResult<PoolPrice> {
    Ok(sqlx::query_as!(
        PoolPrice,
        "INSERT INTO pool_prices (id, pool_id, effective_from, price_per_gpu_hour_minor, price_per_gpu_month_minor) \
         VALUES ($1, $2, COALESCE($3, now()), $4, $5) \
         ON CONFLICT (pool_id, effective_from) DO UPDATE SET price_per_gpu_hour_minor = EXCLUDED.price_per_gpu_hour_minor, \
             price_per_gpu_month_minor = EXCLUDED.price_per_gpu_month_minor \
         RETURNING id, pool_id, effective_from, price_per_gpu_hour_minor, price_per_gpu_month_minor",
        crate::new_id(),
        pool_id,
        effective_from,
        hour,
        month
    )
    .fetch_one(conn)
    .await?)
}

/// Whether the pool exists.
pub async fn pool_exists(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM pools WHERE id = $1) AS "exists!""#, pool_id)
        .fetch_one(conn)
        .await?)
}

/// A pool's prices, by effective time.
pub async fn list_prices(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<Vec<PoolPrice>> {
    Ok(sqlx::query_as!(
        PoolPrice,
        "SELECT id, pool_id, effective_from, price_per_gpu_hour_minor, price_per_gpu_month_minor FROM pool_prices \
         WHERE pool_id = $1 ORDER BY effective_from",
        pool_id
    )
    .fetch_all(conn)
    .await?)
}

/// Set a pool's SLA for monthly leases (target in parts per million; None: no SLA); false: no such pool.
pub async fn set_sla(
    conn: &mut PgConnection,
    pool_id: Uuid,
    target_ppm: Option<i32>,
    credit_percent: Option<i32>,
) -> StoreResult<bool> {
    let done = sqlx::query!(
        "UPDATE pools SET sla_target_ppm = $2, sla_credit_percent = $3 WHERE id = $1",
        pool_id,
        target_ppm,
        credit_percent
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() > 0)
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

/// Revenue and utilization per pool for the period [from, to).
pub async fn pool_revenue(
    conn: &mut PgConnection,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> StoreResult<Vec<PoolRevenue>> {
    Ok(sqlx::query_as!(
        PoolRevenue,
        r#"SELECT p.id AS pool_id, p.name AS pool_name, p.currency,
             COALESCE((SELECT sum(amount_minor) FROM usage_records r WHERE r.pool_id = p.id AND r.period_start >= $1 AND r.period_start < $2), 0)::bigint AS "amount_minor!",
             COALESCE((SELECT sum(gpu_seconds) FROM usage_records r WHERE r.pool_id = p.id AND r.period_start >= $1 AND r.period_start < $2), 0)::bigint AS "gpu_seconds!",
             (SELECT sum(gpu_seconds) FROM usage_records r WHERE r.pool_id = p.id AND r.period_start >= $1 AND r.period_start < $2)::float8
                 / NULLIF((SELECT sum(n.gpu_count) FROM nodes n WHERE n.pool_id = p.id) * EXTRACT(EPOCH FROM $2 - $1), 0) AS sold_fraction,
             (SELECT (sum(h.gpu_util_sum) / sum(h.samples))::float8 FROM node_hours h
                 WHERE h.pool_id = p.id AND h.hour >= date_trunc('hour', $1) AND h.hour < $2) AS avg_gpu_util
         FROM pools p ORDER BY p.name"#,
        from,
        to
    )
    .fetch_all(conn)
    .await?)
}

/// Revenue per tenant and currency for the period [from, to).
pub async fn tenant_revenue(
    conn: &mut PgConnection,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> StoreResult<Vec<TenantRevenue>> {
    Ok(sqlx::query_as!(
        TenantRevenue,
        r#"SELECT t.id AS tenant_id, t.name AS tenant_name, r.currency, sum(r.amount_minor)::bigint AS "amount_minor!",
             sum(r.gpu_seconds)::bigint AS "gpu_seconds!"
         FROM usage_records r JOIN tenants t ON t.id = r.tenant_id
         WHERE r.period_start >= $1 AND r.period_start < $2 GROUP BY t.id, t.name, r.currency ORDER BY t.name"#,
        from,
        to
    )
    .fetch_all(conn)
    .await?)
}
