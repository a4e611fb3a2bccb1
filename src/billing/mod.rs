//! Billing: prices over time, per-second metering into an append-only prepaid ledger, invoices, exports and
//! revenue. Money is integer minor units everywhere; see `rating` for the rounding rule.

pub mod export;
pub mod invoices;
pub mod ledger;
pub mod metering;
pub mod prices;
pub mod rating;

use sqlx::PgConnection;
use utoipa_axum::router::OpenApiRouter;
use uuid::Uuid;

use crate::app::AppState;
use crate::error::ApiError;
use crate::leases::Term;

pub fn router() -> OpenApiRouter<AppState> {
    ledger::router().merge(export::router()).merge(invoices::router()).merge(prices::router())
}

/// Refuse with 402 `insufficient_balance` unless the tenant's balance covers the first hour (hourly terms) or
/// the whole term (monthly terms) of `gpu_count` GPUs of the pool at its current price.
pub async fn require_balance(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    pool_id: Uuid,
    gpu_count: i32,
    term: Term,
    months: i32,
) -> Result<(), ApiError> {
    // The amount is computed by lease_upfront_minor() (migration 0006), the one definition; lease creation's
    // admission statement (leases::store::admit) asks it too and compares with check_balance.
    let row = sqlx::query!(
        r#"SELECT p.currency,
                lease_upfront_minor($3, $4, $5, cp.price_per_gpu_hour_minor, cp.price_per_gpu_month_minor) AS "required!",
                COALESCE(b.balance_minor, 0) AS "balance!"
         FROM pools p
         JOIN pool_current_prices cp ON cp.pool_id = p.id
         LEFT JOIN tenant_balances b ON b.tenant_id = $1 AND b.currency = p.currency WHERE p.id = $2"#,
        tenant_id,
        pool_id,
        gpu_count,
        term as Term,
        months
    )
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(()) };
    check_balance(&row.currency, row.required, row.balance, term)
}

/// 402 `insufficient_balance` unless `balance` covers `required` (`lease_upfront_minor`), both in `currency`.
pub fn check_balance(currency: &str, required: i64, balance: i64, term: Term) -> Result<(), ApiError> {
    if balance >= required {
        return Ok(());
    }
    Err(ApiError::PaymentRequired {
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
    })
}
