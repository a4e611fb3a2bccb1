//! Monthly invoices: the usage records of a calendar month (UTC) per tenant and currency, grouped per lease
//! and price, minus the month's credits. Generating also posts SLA credits for monthly leases whose
//! availability fell below their pool's target.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use sqlx::types::Json as DbJson;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::ledger::{self, EntryKind, NewEntry};
use super::rating::next_month_start;
use crate::app::AppState;
use crate::auth::{OperatorAuth, TenantAuth};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery, new_id};
use crate::webhooks;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(generate_invoices))
        .routes(routes!(admin_list_invoices))
        .routes(routes!(issue_invoice))
        .routes(routes!(pay_invoice))
        .routes(routes!(list_invoices))
        .routes(routes!(get_invoice))
}

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
    /// First day of the invoiced month.
    pub month: NaiveDate,
    pub currency: String,
    /// `draft`, `issued` or `paid`.
    pub state: String,
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

impl From<InvoiceRow> for Invoice {
    fn from(row: InvoiceRow) -> Self {
        Invoice {
            id: row.id,
            tenant_id: row.tenant_id,
            month: row.month,
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

fn parse_month(month: &str) -> ApiResult<(NaiveDate, DateTime<Utc>, DateTime<Utc>)> {
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
    let start = Utc.from_utc_datetime(&day.and_hms_opt(0, 0, 0).unwrap_or_default());
    Ok((day, start, next_month_start(start)))
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

/// Generate (or refresh, while still drafts) the invoices of a month for every tenant with usage or credits.
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
    let (month, start, end) = parse_month(&req.month)?;
    if start > Utc::now() {
        return Err(ApiError::field("month", "cannot invoice a month that has not started"));
    }
    let mut tx = state.db.begin().await?;
    // One generation at a time, so two operators clicking at once do not double the SLA credits.
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('gpuplane.invoices'))").execute(&mut *tx).await?;
    post_sla_credits(&mut tx, start, end).await?;
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
    .fetch_all(&mut *tx)
    .await?;
    let credits = sqlx::query!(
        r#"SELECT tenant_id, currency, sum(amount_minor)::bigint AS "amount_minor!" FROM ledger_entries
         WHERE kind = 'credit' AND period_at >= $1 AND period_at < $2 GROUP BY tenant_id, currency"#,
        start,
        end
    )
    .fetch_all(&mut *tx)
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
            month,
            &currency,
            usage,
            credit,
            usage - credit,
            DbJson(&invoice_lines) as _
        )
        .execute(&mut *tx)
        .await?;
    }
    let invoices = sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE month = $1 ORDER BY id"#,
        month
    )
    .fetch_all(&mut *tx)
    .await?;
    let invoices = invoices.into_iter().map(Invoice::from).collect();
    tx.commit().await?;
    Ok(Json(invoices))
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
    let month = filter.month.as_deref().map(parse_month).transpose()?.map(|m| m.0);
    let invoices = sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE ($1::date IS NULL OR month = $1)
           AND ($2::uuid IS NULL OR tenant_id = $2) ORDER BY month, id"#,
        month,
        filter.tenant_id
    )
    .fetch_all(&state.db)
    .await?;
    Ok(Json(invoices.into_iter().map(Invoice::from).collect()))
}

/// Move an invoice from `from` to `to`, stamping the column of the new state (`issued_at` or `paid_at`); an
/// issued invoice is announced to the tenant (`invoice.issued`) in the same transaction.
async fn transition(state: &AppState, id: Uuid, from: &str, to: &str) -> ApiResult<Json<Invoice>> {
    let mut tx = state.db.begin().await?;
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
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(invoice) = updated {
        let invoice = Invoice::from(invoice);
        if to == "issued" {
            let data = serde_json::to_value(&invoice).map_err(anyhow::Error::from)?;
            webhooks::emit(&mut tx, webhooks::Audience::Tenant(invoice.tenant_id), "invoice.issued", data).await?;
        }
        tx.commit().await?;
        return Ok(Json(invoice));
    }
    drop(tx);
    let current = sqlx::query_scalar!("SELECT state FROM invoices WHERE id = $1", id).fetch_optional(&state.db).await?;
    match current {
        None => Err(ApiError::NotFound("invoice")),
        Some(state) => Err(ApiError::conflict("invoice_state", format!("the invoice is {state}, not {from}"))),
    }
}

/// Issue a draft invoice (it no longer changes).
#[utoipa::path(
    post, path = "/v1/admin/invoices/{invoice_id}/issue", tag = "billing", operation_id = "issue_invoice",
    params(("invoice_id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The issued invoice", body = Invoice),
        (status = 409, description = "Not a draft (`invoice_state`)", body = crate::error::Problem, content_type = "application/problem+json"),
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
    let invoices = sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE tenant_id = $1 ORDER BY month, id"#,
        auth.tenant_id
    )
    .fetch_all(&state.db)
    .await?;
    Ok(Json(invoices.into_iter().map(Invoice::from).collect()))
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
    let invoice = sqlx::query_as!(
        InvoiceRow,
        r#"SELECT id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor,
               lines AS "lines: DbJson<Vec<InvoiceLine>>", created_at, issued_at, paid_at
           FROM invoices WHERE id = $1 AND tenant_id = $2"#,
        id,
        auth.tenant_id
    )
    .fetch_optional(&state.db)
    .await?;
    invoice.map(|row| Json(row.into())).ok_or(ApiError::NotFound("invoice"))
}

/// The first day of `t`'s month.
pub fn month_of(t: DateTime<Utc>) -> NaiveDate {
    NaiveDate::from_ymd_opt(t.year(), t.month(), 1).unwrap_or_default()
}
