//! Billing: the kinds of ledger entry, and balances.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Balance {
    pub currency: String,
    /// The sum of the tenant's ledger entries in this currency, minor units.
    pub balance_minor: i64,
}
