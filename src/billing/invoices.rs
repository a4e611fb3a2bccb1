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
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::ledger::{self, EntryKind, NewEntry};
use super::rating::next_month_start;
use gpuplane_store::billing::invoices as stored;

use crate::auth::{OperatorAuth, TenantAuth};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::state::AppState;
use crate::webhooks;

use gpuplane_store::billing::invoices::{InvoiceLine, InvoiceRow, closed_until};

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

/// The invoice as the API shows it, given the instant before which every month is closed.
fn into_invoice(row: InvoiceRow, closed_until: DateTime<Utc>) -> Invoice {
    Invoice {
        id: row.id,
        tenant_id: row.tenant_id,
        month: row.month.format("%Y-%m").to_string(),
        month_closed: Month::from_first_day(row.month).is_closed(closed_until),
        currency: row.currency,
        state: row.state,
        usage_minor: row.usage_minor,
        credits_minor: row.credits_minor,
        total_minor: row.total_minor,
        lines: row.lines.0,
        created_at: row.created_at,
        issued_at: row.issued_at,
        paid_at: row.paid_at,
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
    let due = stored::sla_credits_due(conn, start, end).await?;
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
    Ok(stored::lock_invoice_runs(conn).await?)
}

/// Write the month's drafts from its usage records and credits, one per tenant and currency with either; an
/// issued or paid invoice is never changed. Once the month is closed, its SLA credits are posted first (once).
async fn refresh_month(conn: &mut PgConnection, month: Month, closed: bool) -> Result<(), sqlx::Error> {
    let (start, end) = (month.start, month.end);
    if closed {
        post_sla_credits(conn, start, end).await?;
    }
    let lines = stored::usage_lines(conn, start, end).await?;
    let credits = stored::credit_sums(conn, start, end).await?;
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
                volume_id: l.volume_id,
                gib_seconds: l.gib_seconds,
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
        let draft = stored::Draft {
            tenant_id,
            month: month.first_day,
            currency: &currency,
            usage,
            credit,
            lines: &invoice_lines,
        };
        stored::upsert_draft(conn, &draft).await?;
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
    let invoices = stored::month_invoices(&mut tx, month.first_day).await?;
    tx.commit().await?;
    Ok(Json(invoices.into_iter().map(|row| into_invoice(row, closed_until)).collect()))
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
    let invoices = stored::list_invoices(&mut conn, month, filter.tenant_id).await?;
    let closed_until = closed_until(&mut conn).await?;
    Ok(Json(invoices.into_iter().map(|row| into_invoice(row, closed_until)).collect()))
}

/// Move an invoice from `from` to `to`, stamping the column of the new state (`issued_at` or `paid_at`); an
/// issued invoice is announced to the tenant (`invoice.issued`) in the same transaction. An invoice is issued
/// only once its month is closed, and then first refreshed from the month's final usage and credits.
async fn transition(state: &AppState, id: Uuid, from: &str, to: &str) -> ApiResult<Json<Invoice>> {
    let mut tx = state.db.begin().await?;
    lock_invoice_runs(&mut tx).await?;
    let current = stored::invoice_state(&mut tx, id).await?;
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
    let updated = stored::transition_invoice(&mut tx, id, from, to).await?;
    let invoice = into_invoice(updated, closed_until);
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
    let invoices = stored::tenant_invoices(&mut conn, auth.tenant_id).await?;
    let closed_until = closed_until(&mut conn).await?;
    Ok(Json(invoices.into_iter().map(|row| into_invoice(row, closed_until)).collect()))
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
    let invoice = stored::tenant_invoice(&mut conn, auth.tenant_id, id).await?.ok_or(ApiError::NotFound("invoice"))?;
    let closed_until = closed_until(&mut conn).await?;
    Ok(Json(into_invoice(invoice, closed_until)))
}

/// The first day of `t`'s month.
pub fn month_of(t: DateTime<Utc>) -> NaiveDate {
    NaiveDate::from_ymd_opt(t.year(), t.month(), 1).unwrap_or_default()
}
