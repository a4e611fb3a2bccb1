//! The prepaid ledger: append-only entries and the running balance kept beside them.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use gpuplane_store::billing::ledger as stored;

use crate::auth::{OperatorAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams};
use crate::idempotency::{self, Claim, IdempotencyKey};
use crate::state::AppState;

crate::page_schema!(LedgerEntryPage, LedgerEntry);

/// Largest single top-up or adjustment, in minor units (10 billion major units): anything larger is a typo.
pub const MAX_ENTRY_MINOR: i64 = 1_000_000_000_000;

pub use gpuplane_store::billing::EntryKind;

pub use gpuplane_store::billing::ledger::{LedgerEntry, NewEntry, append, balance};

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
    let exists = stored::tenant_exists(&mut tx, tenant_id).await?;
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

pub use gpuplane_store::billing::ledger::Balance;

/// The caller's prepaid balance, per currency.
#[utoipa::path(
    get, path = "/v1/billing/balance", tag = "billing", operation_id = "get_balance",
    responses((status = 200, description = "Balances by currency", body = Vec<Balance>))
)]
pub async fn get_balance(State(state): State<AppState>, auth: TenantAuth) -> ApiResult<Json<Vec<Balance>>> {
    let balances = stored::balances(&mut *state.db.acquire().await?, auth.tenant_id).await?;
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
    let rows = stored::list_entries(&mut *state.db.acquire().await?, auth.tenant_id, page.after(), limit).await?;
    Ok(Json(Page::from_rows(rows, limit, |e| e.id)))
}
