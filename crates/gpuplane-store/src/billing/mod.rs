//! Billing: the kinds of ledger entry, and the statements of balances.

pub mod export;
pub mod invoices;
pub mod ledger;
pub mod metering;
pub mod prices;

use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;
use crate::lease_kinds::Term;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum EntryKind {
    /// Money paid in.
    Topup,
    /// A correction by an operator, either sign.
    Adjustment,
    /// Metered use (negative).
    Usage,
    /// A credit, e.g. for a missed SLA.
    Credit,
}

/// The one statement of "the balance covers what is due up front": a boolean SQL expression over a balance
/// and the amount due (`lease_upfront_minor`, migration 0006); no amount (the pool has no price) is covered.
/// Embedded by lease admission (`leases::allocation::admit`) and extension ([`balance_due`]).
pub fn balance_covers_sql(balance: &str, required: &str) -> String {
    format!("({required} IS NULL OR {balance} >= {required})")
}

/// What is due up front for a lease's GPUs at their pools' current prices, against a tenant's balance.
#[derive(sqlx::FromRow)]
pub struct BalanceDue {
    pub currency: String,
    pub required: i64,
    pub balance: i64,
    /// The balance covers it ([`balance_covers_sql`]).
    pub covers: bool,
}

/// What the first hour (hourly terms) or the whole term (monthly terms) of `shares` costs at the pools' current
/// prices (`(pool, GPU count)`: one share for a single-pool lease, one per part for a lease across pools, whose pools
/// have one currency; `lease_upfront_minor` of each, summed), and the tenant's balance in that currency; None: no
/// pool of them has a price.
pub async fn balance_due(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    shares: &[(Uuid, i32)],
    term: Term,
    months: i32,
) -> StoreResult<Option<BalanceDue>> {
    let pools: Vec<Uuid> = shares.iter().map(|s| s.0).collect();
    let counts: Vec<i32> = shares.iter().map(|s| s.1).collect();
    // Runtime SQL: it embeds the rule (`balance_covers_sql`) that lease admission embeds too.
    let sql = format!(
        "SELECT d.*, {covers} AS covers FROM ( \
             SELECT a.currency, a.required, COALESCE(b.balance_minor, 0) AS balance FROM ( \
                 SELECT min(p.currency) AS currency, \
                     LEAST(sum(lease_upfront_minor(s.gpu_count, $4, $5, cp.price_per_gpu_hour_minor, \
                         cp.price_per_gpu_month_minor)), 9223372036854775807)::bigint AS required \
                 FROM UNNEST($2::uuid[], $3::int[]) AS s(pool_id, gpu_count) \
                 JOIN pools p ON p.id = s.pool_id JOIN pool_current_prices cp ON cp.pool_id = p.id \
                 HAVING count(*) > 0) a \
             LEFT JOIN tenant_balances b ON b.tenant_id = $1 AND b.currency = a.currency) d",
        covers = balance_covers_sql("d.balance", "d.required")
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant_id)
        .bind(pools)
        .bind(counts)
        .bind(term)
        .bind(months)
        .fetch_optional(conn)
        .await?)
}
