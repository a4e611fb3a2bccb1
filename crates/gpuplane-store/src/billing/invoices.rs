//! Monthly invoices: the statements that write them from the month's usage and credits, move them on, and read
//! them (the rules are the server's `billing::invoices`).

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use sqlx::types::Json as DbJson;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InvoiceLine {
    /// The lease whose GPU time this line charges; null on a volume's line.
    pub lease_id: Option<Uuid>,
    /// The volume whose storage this line charges (term `storage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_id: Option<Uuid>,
    pub pool_id: Uuid,
    pub pool_name: String,
    /// `hourly` or `monthly` (GPU time), or `storage` (a volume: `gib_seconds`, priced per GiB and 30-day month).
    pub term: String,
    pub gpu_seconds: i64,
    /// GPU-hours, for people (gpu_seconds / 3600, to the thousandth).
    pub gpu_hours: String,
    pub unit_price_minor: i64,
    pub amount_minor: i64,
    /// GiB-seconds of storage (a volume's line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gib_seconds: Option<i64>,
}

/// An invoice as stored: `lines` is JSON in the row and decodes through `Json`.
pub struct InvoiceRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub month: NaiveDate,
    pub currency: String,
    pub state: String,
    pub usage_minor: i64,
    pub credits_minor: i64,
    pub total_minor: i64,
    pub lines: DbJson<Vec<InvoiceLine>>,
    pub created_at: DateTime<Utc>,
    pub issued_at: Option<DateTime<Utc>>,
    pub paid_at: Option<DateTime<Utc>>,
}

/// The instant before which every month is closed: now, or earlier while some lease can still be charged for a
/// second that begins before it. Metering charges a lease's seconds from its `metered_until` on, and each
/// second belongs to the month it begins in; a lease has nothing left to charge once it has ended and is
/// metered to its end. So no usage record can ever again begin before the smallest `metered_until` of the
/// leases with time left to charge, nor before now. A lease whose nodes are silent holds the month open until
/// they are heard from or the lease is interrupted at their last heartbeat.
pub async fn closed_until(conn: &mut PgConnection) -> StoreResult<DateTime<Utc>> {
    Ok(sqlx::query_scalar!(
        r#"SELECT LEAST(now(), (SELECT min(metered_until) FROM leases
               WHERE metered_until IS NOT NULL AND metered_until < COALESCE(ended_at, 'infinity'))) AS "at!""#
    )
    .fetch_one(conn)
    .await?)
}

/// A monthly lease of the month whose pool has an SLA and that was interrupted, not yet credited for the month.
pub struct SlaCreditDue {
    pub lease_id: Uuid,
    pub tenant_id: Uuid,
    pub currency: String,
    pub target_ppm: i32,
    pub percent: i32,
    /// Seconds the lease was due in the month.
    pub due_s: i64,
    /// Seconds metered in the month.
    pub up_s: i64,
    /// What the month charged it.
    pub charged: i64,
}

/// The monthly leases that may be owed an SLA credit for the month [start, end): availability = metered time /
/// time the lease was due in the month; only interruptions count against it.
pub async fn sla_credits_due(
    conn: &mut PgConnection,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> StoreResult<Vec<SlaCreditDue>> {
    Ok(sqlx::query_as!(
        SlaCreditDue,
        r#"WITH m AS (SELECT l.id, l.tenant_id, l.currency, p.sla_target_ppm, p.sla_credit_percent,
                 EXTRACT(EPOCH FROM LEAST(l.ends_at, $2) - GREATEST(l.starts_at, $1))::bigint AS due_s
             FROM leases l JOIN pools p ON p.id = l.pool_id
             WHERE l.term = 'monthly' AND p.sla_target_ppm IS NOT NULL AND l.state = 'interrupted'
                 AND l.starts_at < $2 AND l.ends_at > $1)
         SELECT m.id AS "lease_id!", m.tenant_id AS "tenant_id!", m.currency AS "currency!",
             m.sla_target_ppm AS "target_ppm!", m.sla_credit_percent AS "percent!", m.due_s AS "due_s!",
             COALESCE(sum(r.gpu_seconds / r.gpu_count), 0)::bigint AS "up_s!",
             COALESCE(sum(r.amount_minor), 0)::bigint AS "charged!"
         FROM m LEFT JOIN usage_records r ON r.lease_id = m.id AND r.period_start >= $1 AND r.period_start < $2
         WHERE NOT EXISTS (SELECT 1 FROM ledger_entries e WHERE e.lease_id = m.id AND e.kind = 'credit' AND e.period_at = $1)
         GROUP BY m.id, m.tenant_id, m.currency, m.sla_target_ppm, m.sla_credit_percent, m.due_s"#,
        start,
        end
    )
    .fetch_all(conn)
    .await?)
}

/// Take the transaction's lock on invoice runs (one at a time).
pub async fn lock_invoice_runs(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('gpuplane.invoices'))").execute(conn).await?;
    Ok(())
}

/// The month's usage of one lease at one unit price.
pub struct UsageLine {
    pub tenant_id: Uuid,
    pub currency: String,
    pub lease_id: Option<Uuid>,
    pub volume_id: Option<Uuid>,
    pub pool_id: Uuid,
    pub pool_name: String,
    pub term: String,
    pub unit_price_minor: i64,
    pub gpu_seconds: i64,
    pub gib_seconds: Option<i64>,
    pub amount_minor: i64,
}

/// The usage of the month [start, end) per tenant, currency, lease and unit price.
pub async fn usage_lines(
    conn: &mut PgConnection,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> StoreResult<Vec<UsageLine>> {
    Ok(sqlx::query_as!(
        UsageLine,
        r#"SELECT r.tenant_id, r.currency, r.lease_id, r.volume_id, r.pool_id, p.name AS pool_name, r.term,
             r.unit_price_minor, sum(r.gpu_seconds)::bigint AS "gpu_seconds!", sum(r.gib_seconds)::bigint AS gib_seconds,
             sum(r.amount_minor)::bigint AS "amount_minor!"
         FROM usage_records r JOIN pools p ON p.id = r.pool_id
         WHERE r.period_start >= $1 AND r.period_start < $2
         GROUP BY r.tenant_id, r.currency, r.lease_id, r.volume_id, r.pool_id, p.name, r.term, r.unit_price_minor
         ORDER BY r.tenant_id, r.currency, r.lease_id NULLS LAST, r.volume_id, r.unit_price_minor"#,
        start,
        end
    )
    .fetch_all(conn)
    .await?)
}

/// The credits of a tenant in one currency for a month.
pub struct CreditSum {
    pub tenant_id: Uuid,
    pub currency: String,
    pub amount_minor: i64,
}

/// The credits posted for the month [start, end), per tenant and currency.
pub async fn credit_sums(
    conn: &mut PgConnection,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> StoreResult<Vec<CreditSum>> {
    Ok(sqlx::query_as!(
        CreditSum,
        r#"SELECT tenant_id, currency, sum(amount_minor)::bigint AS "amount_minor!" FROM ledger_entries
         WHERE kind = 'credit' AND period_at >= $1 AND period_at < $2 GROUP BY tenant_id, currency"#,
        start,
        end
    )
    .fetch_all(conn)
    .await?)
}

/// A draft invoice about to be written.
pub struct Draft<'a> {
    pub tenant_id: Uuid,
    pub month: NaiveDate,
    pub currency: &'a str,
    pub usage: i64,
    pub credit: i64,
    pub lines: &'a [InvoiceLine],
}

/// Write a draft invoice, or refresh it while it is still a draft (an issued or paid invoice is never changed).
pub async fn upsert_draft(conn: &mut PgConnection, d: &Draft<'_>) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO invoices (id, tenant_id, month, currency, usage_minor, credits_minor, total_minor, lines) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (tenant_id, month, currency) DO UPDATE SET usage_minor = EXCLUDED.usage_minor, \
                 credits_minor = EXCLUDED.credits_minor, total_minor = EXCLUDED.total_minor, lines = EXCLUDED.lines \
             WHERE invoices.state = 'draft'",
        crate::new_id(),
        d.tenant_id,
        d.month,
        d.currency,
        d.usage,
        d.credit,
        d.usage - d.credit,
        DbJson(d.lines) as _
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The invoices of a month, by id.
pub async fn month_invoices(conn: &mut PgConnection, first_day: NaiveDate) -> StoreResult<Vec<InvoiceRow>> {
    Ok(sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE month = $1 ORDER BY id"#,
        first_day
    )
    .fetch_all(conn)
    .await?)
}

/// Invoices across tenants, of one month and of one tenant when given, by month then id.
pub async fn list_invoices(
    conn: &mut PgConnection,
    month: Option<NaiveDate>,
    tenant_id: Option<Uuid>,
) -> StoreResult<Vec<InvoiceRow>> {
    Ok(sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE ($1::date IS NULL OR month = $1)
           AND ($2::uuid IS NULL OR tenant_id = $2) ORDER BY month, id"#,
        month,
        tenant_id
    )
    .fetch_all(conn)
    .await?)
}

/// Where an invoice stands.
pub struct InvoiceState {
    pub state: String,
    /// The first day of its month.
    pub month: NaiveDate,
}

/// An invoice's state and month; None: no such invoice.
pub async fn invoice_state(conn: &mut PgConnection, id: Uuid) -> StoreResult<Option<InvoiceState>> {
    Ok(sqlx::query_as!(InvoiceState, "SELECT state, month FROM invoices WHERE id = $1", id)
        .fetch_optional(conn)
        .await?)
}

/// Move an invoice from state `from` to `to`, stamping the column of the new state.
pub async fn transition_invoice(conn: &mut PgConnection, id: Uuid, from: &str, to: &str) -> StoreResult<InvoiceRow> {
    Ok(sqlx::query_as!(
        InvoiceRow,
        r#"UPDATE invoices SET state = $3,
               issued_at = CASE WHEN $3 = 'issued' THEN now() ELSE issued_at END,
               paid_at = CASE WHEN $3 = 'paid' THEN now() ELSE paid_at END
           WHERE id = $1 AND state = $2
           RETURNING id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at"#,
        id,
        from,
        to
    )
    .fetch_one(conn)
    .await?)
}

/// A tenant's invoices, by month then id.
pub async fn tenant_invoices(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<Vec<InvoiceRow>> {
    Ok(sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE tenant_id = $1 ORDER BY month, id"#,
        tenant_id
    )
    .fetch_all(conn)
    .await?)
}

/// One of a tenant's invoices.
pub async fn tenant_invoice(conn: &mut PgConnection, tenant_id: Uuid, id: Uuid) -> StoreResult<Option<InvoiceRow>> {
    Ok(sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE id = $1 AND tenant_id = $2"#,
        id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?)
}
