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
use crate::leases::Term;

/// The one statement of "the balance covers what is due up front": a boolean SQL expression over a balance
/// and the amount due (`lease_upfront_minor`, migration 0006); no amount (the pool has no price) is covered.
/// Embedded by lease admission (`leases::store::admit`) and extension ([`require_balance`]).
pub fn balance_covers_sql(balance: &str, required: &str) -> String {
    format!("({required} IS NULL OR {balance} >= {required})")
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
    #[derive(sqlx::FromRow)]
    struct Due {
        currency: String,
        required: i64,
        balance: i64,
        covers: bool,
    }
    // Runtime SQL on purpose: it embeds the rule (`balance_covers_sql`) that lease admission embeds too.
    let sql = format!(
        "SELECT d.*, {covers} AS covers FROM ( \
             SELECT p.currency, \
                 lease_upfront_minor($3, $4, $5, cp.price_per_gpu_hour_minor, cp.price_per_gpu_month_minor) AS required, \
                 COALESCE(b.balance_minor, 0) AS balance \
             FROM pools p JOIN pool_current_prices cp ON cp.pool_id = p.id \
             LEFT JOIN tenant_balances b ON b.tenant_id = $1 AND b.currency = p.currency WHERE p.id = $2) d",
        covers = balance_covers_sql("d.balance", "d.required")
    );
    let due: Option<Due> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant_id)
        .bind(pool_id)
        .bind(gpu_count)
        .bind(term)
        .bind(months)
        .fetch_optional(conn)
        .await?;
    match due {
        Some(due) if !due.covers => Err(insufficient_balance(&due.currency, due.required, due.balance, term)),
        _ => Ok(()),
    }
}

/// 402 `insufficient_balance`: `balance` does not cover `required`, both in `currency` ([`balance_covers_sql`]).
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
