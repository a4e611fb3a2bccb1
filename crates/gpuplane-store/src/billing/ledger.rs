//! The prepaid ledger: append-only entries and the running balance kept beside them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use super::EntryKind;
use crate::StoreResult;

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
pub async fn append(conn: &mut PgConnection, entry: NewEntry<'_>) -> StoreResult<(LedgerEntry, i64)> {
    let row = sqlx::query_as!(
        LedgerEntry,
        r#"INSERT INTO ledger_entries (id, tenant_id, kind, amount_minor, currency, lease_id, usage_record_id, period_at,
               reason, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, now()), $9, $10)
           RETURNING id, tenant_id, kind AS "kind: EntryKind", amount_minor, currency, lease_id, usage_record_id,
               period_at, reason, created_by, created_at"#,
        crate::new_id(),
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
pub async fn move_balance(conn: &mut PgConnection, tenant_id: Uuid, currency: &str, delta: i64) -> StoreResult<i64> {
    Ok(sqlx::query_scalar!(
        "INSERT INTO tenant_balances (tenant_id, currency, balance_minor) VALUES ($1, $2, $3) \
         ON CONFLICT (tenant_id, currency) DO UPDATE SET balance_minor = tenant_balances.balance_minor + EXCLUDED.balance_minor \
         RETURNING balance_minor",
        tenant_id,
        currency,
        delta
    )
    .fetch_one(conn)
    .await?)
}

/// The tenant's balance in one currency (0 without entries).
pub async fn balance(conn: &mut PgConnection, tenant_id: Uuid, currency: &str) -> StoreResult<i64> {
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
pub struct Balance {
    pub currency: String,
    /// The sum of the tenant's ledger entries in this currency, minor units.
    pub balance_minor: i64,
}

/// Whether the tenant exists.
pub async fn tenant_exists(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1) AS "exists!""#, tenant_id)
        .fetch_one(conn)
        .await?)
}

/// The tenant's balances, by currency.
pub async fn balances(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<Vec<Balance>> {
    Ok(sqlx::query_as!(
        Balance,
        "SELECT currency, balance_minor FROM tenant_balances WHERE tenant_id = $1 ORDER BY currency",
        tenant_id
    )
    .fetch_all(conn)
    .await?)
}

/// A page of the tenant's ledger, oldest first: up to `limit` entries after `after`.
pub async fn list_entries(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    after: Uuid,
    limit: i64,
) -> StoreResult<Vec<LedgerEntry>> {
    Ok(sqlx::query_as!(
        LedgerEntry,
        r#"SELECT id, tenant_id, kind AS "kind: EntryKind", amount_minor, currency, lease_id, usage_record_id, period_at,
               reason, created_by, created_at
           FROM ledger_entries WHERE tenant_id = $1 AND id > $2 ORDER BY id LIMIT $3"#,
        tenant_id,
        after,
        limit
    )
    .fetch_all(conn)
    .await?)
}
