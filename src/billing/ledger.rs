//! The prepaid ledger: append-only entries and the running balance kept beside them.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{OperatorAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, new_id};
use crate::idempotency::{self, Claim, IdempotencyKey};
use crate::state::AppState;

crate::page_schema!(LedgerEntryPage, LedgerEntry);

/// Largest single top-up or adjustment, in minor units (10 billion major units): anything larger is a typo.
pub const MAX_ENTRY_MINOR: i64 = 1_000_000_000_000;

pub use gpuplane_store::billing::EntryKind;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LedgerEntry {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub kind: EntryKind,
    /// Signed amount in minor units: positive adds to the balance.
    pub amount_minor: i64,
    pub currency: String,
    pub lease_id: Option<Uuid>,
    pub usage_record_id: Option<Uuid>,
    pub period_at: DateTime<Utc>,
    pub reason: Option<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// An entry to append.
pub struct NewEntry<'a> {
    pub tenant_id: Uuid,
    pub kind: EntryKind,
    pub amount_minor: i64,
    pub currency: &'a str,
    pub lease_id: Option<Uuid>,
    pub usage_record_id: Option<Uuid>,
    pub period_at: Option<DateTime<Utc>>,
    pub reason: Option<&'a str>,
    pub created_by: &'a str,
}

/// Append an entry and move the balance by its amount, in the caller's transaction. Returns the new balance.
pub async fn append(conn: &mut PgConnection, entry: NewEntry<'_>) -> Result<(LedgerEntry, i64), sqlx::Error> {
    let row = sqlx::query_as!(
        LedgerEntry,
        r#"INSERT INTO ledger_entries (id, tenant_id, kind, amount_minor, currency, lease_id, usage_record_id, period_at,
               reason, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, now()), $9, $10)
           RETURNING id, tenant_id, kind AS "kind: EntryKind", amount_minor, currency, lease_id, usage_record_id,
               period_at, reason, created_by, created_at"#,
        new_id(),
        entry.tenant_id,
        entry.kind as EntryKind,
        entry.amount_minor,
        entry.currency,
        entry.lease_id,
        entry.usage_record_id,
        entry.period_at,
        entry.reason,
        entry.created_by,
    )
    .fetch_one(&mut *conn)
    .await?;
    let balance = move_balance(conn, entry.tenant_id, entry.currency, entry.amount_minor).await?;
    Ok((row, balance))
}

/// Add `delta` to the tenant's balance in `currency` (an atomic increment: concurrent moves never lose one).
pub async fn move_balance(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    currency: &str,
    delta: i64,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO tenant_balances (tenant_id, currency, balance_minor) VALUES ($1, $2, $3) \
         ON CONFLICT (tenant_id, currency) DO UPDATE SET balance_minor = tenant_balances.balance_minor + EXCLUDED.balance_minor \
         RETURNING balance_minor",
        tenant_id,
        currency,
        delta
    )
    .fetch_one(conn)
    .await
}

/// The tenant's balance in one currency (0 without entries).
pub async fn balance(conn: &mut PgConnection, tenant_id: Uuid, currency: &str) -> Result<i64, sqlx::Error> {
    let balance = sqlx::query_scalar!(
        "SELECT balance_minor FROM tenant_balances WHERE tenant_id = $1 AND currency = $2",
        tenant_id,
        currency
    )
    .fetch_optional(conn)
    .await?;
    Ok(balance.unwrap_or(0))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"kind": "topup", "amount_minor": 500000, "currency": "USD", "reason": "wire 2026-11-29"}))]
pub struct CreateLedgerEntryRequest {
    /// `topup`, `adjustment` or `credit` (usage is metered, never posted by hand).
    pub kind: EntryKind,
    /// Minor units: positive for top-ups and credits; adjustments may be negative.
    #[schema(minimum = -1000000000000i64, maximum = 1000000000000i64)]
    pub amount_minor: i64,
    #[schema(pattern = r"^[A-Z]{3}$")]
    pub currency: String,
    /// Why, for the tenant's statement (1-500 characters).
    #[schema(
        min_length = 1,
        max_length = 500,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub reason: Option<String>,
}

impl CreateLedgerEntryRequest {
    fn validate(&self) -> Result<(), ApiError> {
        let mut errors = Vec::new();
        match self.kind {
            EntryKind::Usage => {
                errors.push(FieldError::new("kind", "usage is metered; post topup, adjustment or credit"))
            }
            EntryKind::Topup | EntryKind::Credit if !(1..=MAX_ENTRY_MINOR).contains(&self.amount_minor) => {
                errors.push(FieldError::new("amount_minor", format!("must be between 1 and {MAX_ENTRY_MINOR}")));
            }
            EntryKind::Adjustment
                if self.amount_minor == 0 || self.amount_minor.unsigned_abs() > MAX_ENTRY_MINOR as u64 =>
            {
                errors.push(FieldError::new("amount_minor", format!("non-zero, at most {MAX_ENTRY_MINOR} either way")));
            }
            _ => {}
        }
        if !(self.currency.len() == 3 && self.currency.bytes().all(|b| b.is_ascii_uppercase())) {
            errors.push(FieldError::new("currency", "an ISO 4217 code of 3 uppercase letters"));
        }
        if let Some(reason) = &self.reason {
            errors.extend(crate::extract::check_name("reason", reason, 500).err());
        }
        if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
    }
}

/// Post a top-up, adjustment or credit to a tenant's ledger. Send an `Idempotency-Key` to make retries safe.
#[utoipa::path(
    post, path = "/v1/admin/tenants/{tenant_id}/ledger", tag = "billing", operation_id = "create_ledger_entry",
    params(
        ("tenant_id" = Uuid, Path, description = "Tenant id"),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to retry for 24 h", pattern = r"^[!-~]{1,255}$"),
    ),
    request_body = CreateLedgerEntryRequest,
    responses((status = 201, description = "The entry", body = LedgerEntry))
)]
pub async fn create_ledger_entry(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiPath(tenant_id): ApiPath<Uuid>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<CreateLedgerEntryRequest>,
) -> ApiResult<Response> {
    req.validate()?;
    let mut tx = state.db.begin().await?;
    let exists = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1) AS "exists!""#, tenant_id)
        .fetch_one(&mut *tx)
        .await?;
    if !exists {
        return Err(ApiError::NotFound("tenant"));
    }
    let idem = IdempotencyKey::from_headers(&headers, tenant_id, "ledger_entry", &req)?;
    if let Some(key) = &idem
        && let Claim::Replay(response) = idempotency::claim(&mut tx, key).await?
    {
        return Ok(response);
    }
    let created_by = format!("operator:{}", op.key_id);
    let (entry, _) = append(
        &mut tx,
        NewEntry {
            tenant_id,
            kind: req.kind,
            amount_minor: req.amount_minor,
            currency: &req.currency,
            lease_id: None,
            usage_record_id: None,
            period_at: None,
            reason: req.reason.as_deref().map(str::trim),
            created_by: &created_by,
        },
    )
    .await?;
    if let Some(key) = &idem {
        idempotency::complete(&mut tx, key, StatusCode::CREATED, &entry).await?;
    }
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(entry)).into_response())
}

pub use gpuplane_store::billing::Balance;

/// The caller's prepaid balance, per currency.
#[utoipa::path(
    get, path = "/v1/billing/balance", tag = "billing", operation_id = "get_balance",
    responses((status = 200, description = "Balances by currency", body = Vec<Balance>))
)]
pub async fn get_balance(State(state): State<AppState>, auth: TenantAuth) -> ApiResult<Json<Vec<Balance>>> {
    let balances = sqlx::query_as!(
        Balance,
        "SELECT currency, balance_minor FROM tenant_balances WHERE tenant_id = $1 ORDER BY currency",
        auth.tenant_id
    )
    .fetch_all(&state.db)
    .await?;
    Ok(Json(balances))
}

/// The caller's ledger, oldest first.
#[utoipa::path(
    get, path = "/v1/billing/ledger", tag = "billing", operation_id = "list_ledger",
    params(PageParams),
    responses((status = 200, description = "A page of ledger entries", body = LedgerEntryPage))
)]
pub async fn list_ledger(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<Page<LedgerEntry>>> {
    let limit = page.fetch_limit()?;
    let rows = sqlx::query_as!(
        LedgerEntry,
        r#"SELECT id, tenant_id, kind AS "kind: EntryKind", amount_minor, currency, lease_id, usage_record_id, period_at,
               reason, created_by, created_at
           FROM ledger_entries WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3"#,
        auth.tenant_id,
        page.after(),
        limit
    )
    .fetch_all(&state.db)
    .await?;
    Ok(Json(Page::from_rows(rows, limit, |e| e.id)))
}
