//! Monthly invoices: the usage records of a calendar month (UTC) per tenant and currency, grouped per lease
//! and price, minus the month's credits.
//!
//! A month's invoice is a draft until the month is closed: it has ended and no lease can still be charged for
//! a second that began in it ([`closed_until`]). Only then can a draft be issued, and issuing first refreshes
//! it from the final usage, so every usage charge lands on exactly one issued invoice and nothing charged later
//! belongs to an issued month. Once the month is closed, generating (or issuing) also posts SLA credits for
//! monthly leases whose availability fell below their pool's target.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use sqlx::types::Json as DbJson;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::ledger::{self, EntryKind, NewEntry};
use super::rating::next_month_start;
use crate::auth::{OperatorAuth, TenantAuth};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery, new_id};
use crate::state::AppState;
use crate::webhooks;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InvoiceLine {
    pub lease_id: Uuid,
    pub pool_id: Uuid,
    pub pool_name: String,
    /// `hourly` or `monthly`.
    pub term: String,
    pub gpu_seconds: i64,
    /// GPU-hours, for people (gpu_seconds / 3600, to the thousandth).
    pub gpu_hours: String,
    pub unit_price_minor: i64,
    pub amount_minor: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Invoice {
    pub id: Uuid,
    pub tenant_id: Uuid,
    /// The invoiced month, `YYYY-MM` (UTC).
    #[schema(example = "2026-11")]
    pub month: String,
    pub currency: String,
    /// `draft`, `issued` or `paid`.
    pub state: String,
    /// Whether the month is closed: it has ended and every second that began in it is metered, so the figures
    /// are final. A draft can be issued only then; until then it is refreshed by each generation.
    pub month_closed: bool,
    /// Usage charged in the month (equals the month's export total and ledger usage charges).
    pub usage_minor: i64,
    /// Credits posted for the month.
    pub credits_minor: i64,
    /// usage - credits.
    pub total_minor: i64,
    pub lines: Vec<InvoiceLine>,
    pub created_at: DateTime<Utc>,
    pub issued_at: Option<DateTime<Utc>>,
    pub paid_at: Option<DateTime<Utc>>,
}

/// An invoice as stored: `lines` is JSON in the row and decodes through `Json`.
struct InvoiceRow {
    id: Uuid,
    tenant_id: Uuid,
    month: NaiveDate,
    currency: String,
    state: String,
    usage_minor: i64,
    credits_minor: i64,
    total_minor: i64,
    lines: DbJson<Vec<InvoiceLine>>,
    created_at: DateTime<Utc>,
    issued_at: Option<DateTime<Utc>>,
    paid_at: Option<DateTime<Utc>>,
}

impl InvoiceRow {
    /// The invoice as the API shows it, given the instant before which every month is closed.
    fn into_invoice(self, closed_until: DateTime<Utc>) -> Invoice {
        Invoice {
            id: self.id,
            tenant_id: self.tenant_id,
            month: self.month.format("%Y-%m").to_string(),
            month_closed: Month::from_first_day(self.month).is_closed(closed_until),
            currency: self.currency,
            state: self.state,
            usage_minor: self.usage_minor,
            credits_minor: self.credits_minor,
            total_minor: self.total_minor,
            lines: self.lines.0,
            created_at: self.created_at,
            issued_at: self.issued_at,
            paid_at: self.paid_at,
        }
    }
}

/// A calendar month (UTC): its first day and the instants it starts and ends at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Month {
    pub first_day: NaiveDate,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Month {
    fn from_first_day(first_day: NaiveDate) -> Month {
        let start = Utc.from_utc_datetime(&first_day.and_hms_opt(0, 0, 0).unwrap_or_default());
        Month { first_day, start, end: next_month_start(start) }
    }

    /// Closed: it ended at or before `closed_until` (see [`closed_until`]).
    pub fn is_closed(&self, closed_until: DateTime<Utc>) -> bool {
        self.end <= closed_until
    }
}

/// The instant before which every month is closed: now, or earlier while some lease can still be charged for a
/// second that begins before it. Metering charges a lease's seconds from its `metered_until` on, and each
/// second belongs to the month it begins in; a lease has nothing left to charge once it has ended and is
/// metered to its end. So no usage record can ever again begin before the smallest `metered_until` of the
/// leases with time left to charge, nor before now. A lease whose nodes are silent holds the month open until
/// they are heard from or the lease is interrupted at their last heartbeat.
pub async fn closed_until(conn: &mut PgConnection) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT LEAST(now(), (SELECT min(metered_until) FROM leases
               WHERE metered_until IS NOT NULL AND metered_until < COALESCE(ended_at, 'infinity'))) AS "at!""#
    )
    .fetch_one(conn)
    .await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"month": "2026-11"}))]
pub struct GenerateInvoicesRequest {
    /// The month, `YYYY-MM`.
    #[schema(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-(0[1-9]|1[0-2])$")]
    pub month: String,
}

/// `YYYY-MM`, years 1970-9999 (chrono alone would take `-9999-01` or `+12345-01`).
pub const MONTH_PATTERN: &str = "^(19[7-9][0-9]|[2-9][0-9]{3})-(0[1-9]|1[0-2])$";

fn parse_month(month: &str) -> ApiResult<Month> {
    let bad = || ApiError::field("month", "a month as YYYY-MM, years 1970-9999");
    let b = month.as_bytes();
    let shaped = b.len() == 7 && b[4] == b'-' && b.iter().enumerate().all(|(i, c)| i == 4 || c.is_ascii_digit());
    if !shaped {
        return Err(bad());
    }
    let day = NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d").map_err(|_| bad())?;
    if day.year() < 1970 {
        return Err(bad());
    }
    Ok(Month::from_first_day(day))
}

fn gpu_hours(seconds: i64) -> String {
    let thousandths = (seconds as i128 * 1000 + 1800) / 3600;
    format!("{}.{:03}", thousandths / 1000, thousandths % 1000)
}

/// Post SLA credits for monthly leases of the month whose availability was below their pool's target.
/// Availability = metered time / time the lease was due in the month; only interruptions count against it.
async fn post_sla_credits(
    conn: &mut PgConnection,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let due = sqlx::query!(
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
    .fetch_all(&mut *conn)
    .await?;
    for row in due {
        let (due_s, percent, target_ppm) = (row.due_s, row.percent, row.target_ppm);
        if due_s <= 0 {
            continue;
        }
        let availability_ppm = row.up_s.min(due_s) * 1_000_000 / due_s;
        let credit = row.charged * percent as i64 / 100;
        if availability_ppm >= target_ppm as i64 || credit <= 0 {
            continue;
        }
        let reason = format!(
            "SLA credit: availability {:.3}% below the {:.3}% target; {percent}% of the month's charge",
            availability_ppm as f64 / 10_000.0,
            target_ppm as f64 / 10_000.0
        );
        ledger::append(
            conn,
            NewEntry {
                tenant_id: row.tenant_id,
                kind: EntryKind::Credit,
                amount_minor: credit,
                currency: &row.currency,
                lease_id: Some(row.lease_id),
                usage_record_id: None,
                period_at: Some(start),
                reason: Some(&reason),
                created_by: "system:sla",
            },
        )
        .await?;
    }
    Ok(())
}

/// One invoice run at a time, so two operators (or an issue and a generation) at once do not double the SLA
/// credits or refresh a draft while it is being issued.
async fn lock_invoice_runs(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('gpuplane.invoices'))").execute(conn).await?;
    Ok(())
}

/// Write the month's drafts from its usage records and credits, one per tenant and currency with either; an
/// issued or paid invoice is never changed. Once the month is closed, its SLA credits are posted first (once).
async fn refresh_month(conn: &mut PgConnection, month: Month, closed: bool) -> Result<(), sqlx::Error> {
    let (start, end) = (month.start, month.end);
    if closed {
        post_sla_credits(conn, start, end).await?;
    }
    let lines = sqlx::query!(
        r#"SELECT r.tenant_id, r.currency, r.lease_id, r.pool_id, p.name AS pool_name, r.term, r.unit_price_minor,
             sum(r.gpu_seconds)::bigint AS "gpu_seconds!", sum(r.amount_minor)::bigint AS "amount_minor!"
         FROM usage_records r JOIN pools p ON p.id = r.pool_id
         WHERE r.period_start >= $1 AND r.period_start < $2
         GROUP BY r.tenant_id, r.currency, r.lease_id, r.pool_id, p.name, r.term, r.unit_price_minor
         ORDER BY r.tenant_id, r.currency, r.lease_id, r.unit_price_minor"#,
        start,
        end
    )
    .fetch_all(&mut *conn)
    .await?;
    let credits = sqlx::query!(
        r#"SELECT tenant_id, currency, sum(amount_minor)::bigint AS "amount_minor!" FROM ledger_entries
         WHERE kind = 'credit' AND period_at >= $1 AND period_at < $2 GROUP BY tenant_id, currency"#,
        start,
        end
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut keys: Vec<(Uuid, String)> = lines.iter().map(|l| (l.tenant_id, l.currency.clone())).collect();
    keys.extend(credits.iter().map(|c| (c.tenant_id, c.currency.clone())));
    keys.sort();
    keys.dedup();
    for (tenant_id, currency) in keys {
        let invoice_lines: Vec<InvoiceLine> = lines
            .iter()
            .filter(|l| l.tenant_id == tenant_id && l.currency == currency)
            .map(|l| InvoiceLine {
                lease_id: l.lease_id,
                pool_id: l.pool_id,
                pool_name: l.pool_name.clone(),
                term: l.term.clone(),
                unit_price_minor: l.unit_price_minor,
                gpu_seconds: l.gpu_seconds,
                gpu_hours: gpu_hours(l.gpu_seconds),
                amount_minor: l.amount_minor,
            })
            .collect();
        let usage: i64 = invoice_lines.iter().map(|l| l.amount_minor).sum();
        let credit: i64 =
            credits.iter().filter(|c| c.tenant_id == tenant_id && c.currency == currency).map(|c| c.amount_minor).sum();
        sqlx::query!(
            "INSERT INTO invoices (id, tenant_id, month, currency, usage_minor, credits_minor, total_minor, lines) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (tenant_id, month, currency) DO UPDATE SET usage_minor = EXCLUDED.usage_minor, \
                 credits_minor = EXCLUDED.credits_minor, total_minor = EXCLUDED.total_minor, lines = EXCLUDED.lines \
             WHERE invoices.state = 'draft'",
            new_id(),
            tenant_id,
            month.first_day,
            &currency,
            usage,
            credit,
            usage - credit,
            DbJson(&invoice_lines) as _
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Generate (or refresh, while still drafts) the invoices of a month for every tenant with usage or credits.
/// A month that has not ended, or whose usage is not all metered yet (`month_closed` false), gets drafts that
/// the next generation refreshes and that cannot be issued yet.
#[utoipa::path(
    post, path = "/v1/admin/invoices", tag = "billing", operation_id = "generate_invoices",
    request_body = GenerateInvoicesRequest,
    responses((status = 200, description = "The month's invoices", body = Vec<Invoice>))
)]
pub async fn generate_invoices(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiJson(req): ApiJson<GenerateInvoicesRequest>,
) -> ApiResult<Json<Vec<Invoice>>> {
    let month = parse_month(&req.month)?;
    if month.start > Utc::now() {
        return Err(ApiError::field("month", "cannot invoice a month that has not started"));
    }
    let mut tx = state.db.begin().await?;
    lock_invoice_runs(&mut tx).await?;
    let closed_until = closed_until(&mut tx).await?;
    refresh_month(&mut tx, month, month.is_closed(closed_until)).await?;
    let invoices = sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE month = $1 ORDER BY id"#,
        month.first_day
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Json(invoices.into_iter().map(|row| row.into_invoice(closed_until)).collect()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InvoiceFilter {
    /// `YYYY-MM`.
    #[param(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-(0[1-9]|1[0-2])$")]
    pub month: Option<String>,
    pub tenant_id: Option<Uuid>,
}

/// List invoices across tenants.
#[utoipa::path(
    get, path = "/v1/admin/invoices", tag = "billing", operation_id = "admin_list_invoices",
    params(InvoiceFilter),
    responses((status = 200, description = "Invoices", body = Vec<Invoice>))
)]
pub async fn admin_list_invoices(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiQuery(filter): ApiQuery<InvoiceFilter>,
) -> ApiResult<Json<Vec<Invoice>>> {
    let month = filter.month.as_deref().map(parse_month).transpose()?.map(|m| m.first_day);
    let mut conn = state.db.acquire().await?;
    let invoices = sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE ($1::date IS NULL OR month = $1)
           AND ($2::uuid IS NULL OR tenant_id = $2) ORDER BY month, id"#,
        month,
        filter.tenant_id
    )
    .fetch_all(&mut *conn)
    .await?;
    let closed_until = closed_until(&mut conn).await?;
    Ok(Json(invoices.into_iter().map(|row| row.into_invoice(closed_until)).collect()))
}

/// Move an invoice from `from` to `to`, stamping the column of the new state (`issued_at` or `paid_at`); an
/// issued invoice is announced to the tenant (`invoice.issued`) in the same transaction. An invoice is issued
/// only once its month is closed, and then first refreshed from the month's final usage and credits.
async fn transition(state: &AppState, id: Uuid, from: &str, to: &str) -> ApiResult<Json<Invoice>> {
    let mut tx = state.db.begin().await?;
    lock_invoice_runs(&mut tx).await?;
    let current = sqlx::query!("SELECT state, month FROM invoices WHERE id = $1", id).fetch_optional(&mut *tx).await?;
    let Some(current) = current else {
        return Err(ApiError::NotFound("invoice"));
    };
    if current.state != from {
        return Err(ApiError::conflict("invoice_state", format!("the invoice is {}, not {from}", current.state)));
    }
    let month = Month::from_first_day(current.month);
    let closed_until = closed_until(&mut tx).await?;
    if to == "issued" {
        if !month.is_closed(closed_until) {
            let why = if month.end > Utc::now() {
                format!("the month {} has not ended yet", current.month.format("%Y-%m"))
            } else {
                format!(
                    "the month {} still has usage to meter (metered up to {})",
                    current.month.format("%Y-%m"),
                    closed_until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            };
            return Err(ApiError::conflict("month_open", format!("{why}: its invoices can be issued once it closes")));
        }
        refresh_month(&mut tx, month, true).await?;
    }
    let updated = sqlx::query_as!(
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
    .fetch_one(&mut *tx)
    .await?;
    let invoice = updated.into_invoice(closed_until);
    if to == "issued" {
        let data = serde_json::to_value(&invoice).map_err(anyhow::Error::from)?;
        webhooks::emit(&mut tx, webhooks::Audience::Tenant(invoice.tenant_id), "invoice.issued", data).await?;
    }
    tx.commit().await?;
    Ok(Json(invoice))
}

/// Issue a draft invoice (it no longer changes). Only a closed month's invoices can be issued: the month has
/// ended and every second that began in it is metered (`month_closed`); issuing refreshes the draft from the
/// month's final usage first, so what is issued holds every charge of the month.
#[utoipa::path(
    post, path = "/v1/admin/invoices/{invoice_id}/issue", tag = "billing", operation_id = "issue_invoice",
    params(("invoice_id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The issued invoice", body = Invoice),
        (status = 409, description = "Not a draft (`invoice_state`), or its month is not closed yet (`month_open`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn issue_invoice(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Invoice>> {
    transition(&state, id, "draft", "issued").await
}

/// Mark an issued invoice paid.
#[utoipa::path(
    post, path = "/v1/admin/invoices/{invoice_id}/pay", tag = "billing", operation_id = "pay_invoice",
    params(("invoice_id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The paid invoice", body = Invoice),
        (status = 409, description = "Not issued (`invoice_state`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn pay_invoice(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Invoice>> {
    transition(&state, id, "issued", "paid").await
}

/// The caller's invoices.
#[utoipa::path(
    get, path = "/v1/billing/invoices", tag = "billing", operation_id = "list_invoices",
    responses((status = 200, description = "The tenant's invoices, oldest month first", body = Vec<Invoice>))
)]
pub async fn list_invoices(State(state): State<AppState>, auth: TenantAuth) -> ApiResult<Json<Vec<Invoice>>> {
    let mut conn = state.db.acquire().await?;
    let invoices = sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE tenant_id = $1 ORDER BY month, id"#,
        auth.tenant_id
    )
    .fetch_all(&mut *conn)
    .await?;
    let closed_until = closed_until(&mut conn).await?;
    Ok(Json(invoices.into_iter().map(|row| row.into_invoice(closed_until)).collect()))
}

/// One of the caller's invoices.
#[utoipa::path(
    get, path = "/v1/billing/invoices/{invoice_id}", tag = "billing", operation_id = "get_invoice",
    params(("invoice_id" = Uuid, Path, description = "Invoice id")),
    responses((status = 200, description = "The invoice", body = Invoice))
)]
pub async fn get_invoice(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Invoice>> {
    let mut conn = state.db.acquire().await?;
    let invoice = sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE id = $1 AND tenant_id = $2"#,
        id,
        auth.tenant_id
    )
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(ApiError::NotFound("invoice"))?;
    let closed_until = closed_until(&mut conn).await?;
    Ok(Json(invoice.into_invoice(closed_until)))
}

/// The first day of `t`'s month.
pub fn month_of(t: DateTime<Utc>) -> NaiveDate {
    NaiveDate::from_ymd_opt(t.year(), t.month(), 1).unwrap_or_default()
}
