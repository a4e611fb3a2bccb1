//! Billing: prices over time, per-second metering into an append-only prepaid ledger, invoices, exports and
//! revenue. Money is integer minor units everywhere; see `rating` for the rounding rule.

pub mod export;
pub mod invoices;
pub mod ledger;
pub mod metering;
pub mod prices;
pub mod rating;

use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::ApiError;
use gpuplane_store::leases::Term;
/// Refuse with 402 `insufficient_balance` unless the tenant's balance covers the first hour (hourly terms) or
/// the whole term (monthly terms) of `shares` (`(pool, GPU count)`, one per part of a lease across pools) at the
/// pools' current prices.
pub async fn require_balance(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    shares: &[(Uuid, i32)],
    term: Term,
    months: i32,
) -> Result<(), ApiError> {
    let due = gpuplane_store::billing::balance_due(conn, tenant_id, shares, term, months).await?;
    match due {
        Some(due) if !due.covers => Err(insufficient_balance(&due.currency, due.required, due.balance, term)),
        _ => Ok(()),
    }
}

/// 402 `insufficient_balance`: `balance` does not cover `required`, both in `currency` ([`gpuplane_store::billing::balance_covers_sql`]).
pub fn insufficient_balance(currency: &str, required: i64, balance: i64, term: Term) -> ApiError {
    ApiError::PaymentRequired {
        code: "insufficient_balance",
        message: format!(
            "the balance of {balance} {currency} minor units does not cover {required} ({})",
            match term {
                Term::Hourly => "the first hour",
                Term::Monthly => "the whole term",
            }
        ),
        context: Some(
            serde_json::json!({ "balance_minor": balance, "required_minor": required, "currency": currency }),
        ),
    }
}
