//! Usage exports: the usage records of a period, read as a stream.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgArguments, PgRow};
use utoipa::ToSchema;
use uuid::Uuid;

/// One exported usage record. Column order of the CSV is the field order here.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UsageRow {
    pub record_id: Uuid,
    pub tenant_id: Uuid,
    /// The lease metered (GPU time), or null for a volume's storage.
    pub lease_id: Option<Uuid>,
    pub pool_id: Uuid,
    pub pool_name: String,
    pub gpu_model: String,
    /// `hourly` or `monthly` (a lease's GPU time), or `storage` (a volume's).
    pub term: String,
    pub period_start: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
    pub gpu_count: i32,
    pub gpu_seconds: i64,
    /// Price per GPU-hour (hourly) or per GPU and 30-day month (monthly), minor units.
    pub unit_price_minor: i64,
    pub currency: String,
    /// What this record charged, minor units. The sum over a period equals the ledger's usage charges.
    pub amount_minor: i64,
    /// The volume metered (storage), or null for a lease's GPU time.
    pub volume_id: Option<Uuid>,
    /// The volume's size, GiB (storage records).
    pub gib: Option<i32>,
    /// GiB-seconds metered (storage records); their unit price is per GiB and 30-day month.
    pub gib_seconds: Option<i64>,
}

/// The statement of a usage export: the usage records whose period starts in [from, to), of one tenant when
/// given, oldest first. The caller runs it as a stream (`fetch`) on a connection of its own, so an export of any
/// size holds one row at a time.
pub fn usage_rows(
    tenant_id: Option<Uuid>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> sqlx::query::Map<'static, sqlx::Postgres, impl FnMut(PgRow) -> Result<UsageRow, sqlx::Error> + Send, PgArguments> {
    sqlx::query_as!(
        UsageRow,
        "SELECT r.id AS record_id, r.tenant_id, r.lease_id, r.pool_id, p.name AS pool_name, \
                 p.gpu_model, r.term, r.period_start, r.period_end, r.gpu_count, r.gpu_seconds, r.unit_price_minor, \
                 r.currency, r.amount_minor, r.volume_id, r.gib, r.gib_seconds \
             FROM usage_records r JOIN pools p ON p.id = r.pool_id \
             WHERE ($1::uuid IS NULL OR r.tenant_id = $1) AND r.period_start >= $2 AND r.period_start < $3 \
             ORDER BY r.period_start, r.id",
        tenant_id,
        from,
        to
    )
}
