//! Metering: the statements of a metering round and of the balance checks after it (the rule is the server's
//! `billing::metering`, the arithmetic its `billing::rating`).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;
use crate::lease_kinds::Term;

/// A price in force from `effective_from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub effective_from: DateTime<Utc>,
    pub per_gpu_hour_minor: i64,
    pub per_gpu_month_minor: Option<i64>,
}

/// A lease with unmetered time, locked, and how far it is to be metered.
pub struct Due {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub pool_id: Uuid,
    pub gpu_count: i32,
    pub term: Term,
    pub metered_until: DateTime<Utc>,
    pub meter_to: DateTime<Utc>,
    pub ended: bool,
    /// Exact cost so far (numeric, read as text: it can exceed 64 bits).
    pub cost_units: String,
    pub charged_minor: i64,
    pub currency: String,
    /// A lease across pools: each part is metered on its own ([`lock_parts`]); the figures above are their sums.
    pub has_parts: bool,
}

/// Lock up to `batch` leases with unmetered time, skipping those locked by others, oldest metered first. A running
/// lease is metered up to now, its end, and the last heartbeat of every agent node holding its GPUs: a silent
/// node's time is not charged unless the node proves it was alive (then the next step catches up); if it goes
/// offline, the lease ends at that same last heartbeat.
pub async fn lock_due(conn: &mut PgConnection, batch: i64) -> StoreResult<Vec<Due>> {
    Ok(sqlx::query_as!(
        Due,
        r#"SELECT l.id, l.tenant_id, l.pool_id, l.gpu_count, l.term AS "term: Term", l.metered_until AS "metered_until!",
                 COALESCE(l.ended_at, LEAST(now(), l.ends_at, heard.at)) AS "meter_to!",
                 l.ended_at IS NOT NULL AS "ended!",
                 l.cost_units::text AS "cost_units!", l.charged_minor, l.currency AS "currency!",
                 EXISTS (SELECT 1 FROM lease_parts p WHERE p.lease_id = l.id) AS "has_parts!"
             FROM leases l
             LEFT JOIN LATERAL (SELECT min(COALESCE(n.last_heartbeat_at, '-infinity')) AS at
                 FROM gpus g JOIN nodes n ON n.id = g.node_id
                 WHERE g.id = ANY(l.gpu_ids) AND g.held_by = l.id AND n.agent_managed) heard ON l.ended_at IS NULL
             WHERE l.metered_until IS NOT NULL
                 AND l.metered_until < COALESCE(l.ended_at, LEAST(now(), l.ends_at, heard.at) - interval '1 second')
             ORDER BY l.metered_until LIMIT $1 FOR UPDATE OF l SKIP LOCKED"#,
        batch
    )
    .fetch_all(conn)
    .await?)
}

/// One active lease (locked by the caller) as [`lock_due`] gives it, to be metered up to `to` (a change of the
/// GPUs it holds is metered first: healing); none when it has nothing to meter before `to`.
pub async fn due_until(conn: &mut PgConnection, lease_id: Uuid, to: DateTime<Utc>) -> StoreResult<Option<Due>> {
    Ok(sqlx::query_as!(
        Due,
        r#"SELECT l.id, l.tenant_id, l.pool_id, l.gpu_count, l.term AS "term: Term", l.metered_until AS "metered_until!",
                 LEAST($2::timestamptz, l.ends_at) AS "meter_to!", false AS "ended!",
                 l.cost_units::text AS "cost_units!", l.charged_minor, l.currency AS "currency!",
                 EXISTS (SELECT 1 FROM lease_parts p WHERE p.lease_id = l.id) AS "has_parts!"
             FROM leases l
             WHERE l.id = $1 AND l.state = 'active' AND l.metered_until IS NOT NULL
                 AND l.metered_until < LEAST($2::timestamptz, l.ends_at) - interval '1 second'"#,
        lease_id,
        to
    )
    .fetch_optional(conn)
    .await?)
}

/// The prices of a pool that took effect before `until`, oldest first.
pub async fn prices_before(conn: &mut PgConnection, pool_id: Uuid, until: DateTime<Utc>) -> StoreResult<Vec<Price>> {
    Ok(sqlx::query_as!(
        Price,
        "SELECT effective_from, price_per_gpu_hour_minor AS per_gpu_hour_minor, \
             price_per_gpu_month_minor AS per_gpu_month_minor FROM pool_prices \
         WHERE pool_id = $1 AND effective_from < $2 ORDER BY effective_from",
        pool_id,
        until
    )
    .fetch_all(conn)
    .await?)
}

/// A usage record about to be written: one rated piece of a lease's time.
pub struct NewUsageRecord<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub lease_id: Uuid,
    pub pool_id: Uuid,
    pub period_start: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
    pub gpu_count: i32,
    pub gpu_seconds: i64,
    pub term: Term,
    pub unit_price_minor: i64,
    pub currency: &'a str,
    /// The exact cost, numeric as text (it can exceed 64 bits).
    pub cost_units: String,
    pub amount_minor: i64,
}

/// Write a usage record.
pub async fn insert_usage_record(conn: &mut PgConnection, r: &NewUsageRecord<'_>) -> StoreResult<()> {
    // The exact cost is numeric (it can exceed 64 bits): it travels as text.
    sqlx::query!(
        "INSERT INTO usage_records (id, tenant_id, lease_id, pool_id, period_start, period_end, gpu_count, gpu_seconds, \
             term, unit_price_minor, currency, cost_units, amount_minor) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::text::numeric, $13)",
        r.id,
        r.tenant_id,
        r.lease_id,
        r.pool_id,
        r.period_start,
        r.period_end,
        r.gpu_count,
        r.gpu_seconds,
        r.term as Term,
        r.unit_price_minor,
        r.currency,
        &r.cost_units,
        r.amount_minor
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Move a lease's metering forward: metered up to `metered_until`, its exact cost (numeric as text) and charge.
pub async fn set_metered(
    conn: &mut PgConnection,
    lease_id: Uuid,
    metered_until: DateTime<Utc>,
    cost_units: String,
    charged_minor: i64,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE leases SET metered_until = $2, cost_units = $3::text::numeric, charged_minor = $4 WHERE id = $1",
        lease_id,
        metered_until,
        cost_units,
        charged_minor
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// An active hourly lease of a tenant, locked, with what it costs an hour at the current price.
pub struct HourlyLease {
    pub id: Uuid,
    pub burn_per_hour: i64,
    pub balance_warned_at: Option<DateTime<Utc>>,
}

/// Lock the tenant's active hourly leases billed in `currency`, in id order, with what each burns per hour at its
/// pools' current prices (`lease_shares`: every part of a lease across pools at its own pool's price).
pub async fn lock_hourly_leases(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    currency: &str,
) -> StoreResult<Vec<HourlyLease>> {
    Ok(sqlx::query_as!(
        HourlyLease,
        r#"SELECT l.id, burn.per_hour AS "burn_per_hour!", l.balance_warned_at
             FROM leases l
             CROSS JOIN LATERAL (SELECT sum(s.gpu_count::bigint * cp.price_per_gpu_hour_minor)::bigint AS per_hour
                 FROM lease_shares s JOIN pool_current_prices cp ON cp.pool_id = s.pool_id WHERE s.lease_id = l.id) burn
             WHERE l.tenant_id = $1 AND l.currency = $2 AND l.state = 'active' AND l.term = 'hourly'
                 AND burn.per_hour IS NOT NULL ORDER BY l.id FOR UPDATE OF l"#,
        tenant_id,
        currency
    )
    .fetch_all(conn)
    .await?)
}

/// Note that the lease was warned of a low balance.
pub async fn mark_balance_warned(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<()> {
    sqlx::query!("UPDATE leases SET balance_warned_at = now() WHERE id = $1", lease_id).execute(conn).await?;
    Ok(())
}

/// One part of a lease across pools as metering sees it: its pool and size, its exact cost so far and its charge.
pub struct PartDue {
    pub part: i16,
    pub pool_id: Uuid,
    pub gpu_count: i32,
    /// Exact cost so far (numeric, read as text: it can exceed 64 bits).
    pub cost_units: String,
    pub charged_minor: i64,
}

/// Lock the parts of a lease across pools (whose lease row the transaction holds), part 0 first.
pub async fn lock_parts(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<PartDue>> {
    Ok(sqlx::query_as!(
        PartDue,
        r#"SELECT part, pool_id, gpu_count, cost_units::text AS "cost_units!", charged_minor
             FROM lease_parts WHERE lease_id = $1 ORDER BY part FOR UPDATE"#,
        lease_id
    )
    .fetch_all(conn)
    .await?)
}

/// Move a part's metering forward: its exact cost (numeric as text) and charge.
pub async fn set_part_metered(
    conn: &mut PgConnection,
    lease_id: Uuid,
    part: i16,
    cost_units: String,
    charged_minor: i64,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE lease_parts SET cost_units = $3::text::numeric, charged_minor = $4 WHERE lease_id = $1 AND part = $2",
        lease_id,
        part,
        cost_units,
        charged_minor
    )
    .execute(conn)
    .await?;
    Ok(())
}
