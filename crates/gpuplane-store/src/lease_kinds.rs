//! A lease's state and term: named by leases, by the jobs that end with them and by the billing that rates
//! them, so they sit below all three (a leaf of the store).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum LeaseState {
    /// Waiting for capacity; allocated in arrival order.
    Queued,
    /// Holds its GPUs.
    Active,
    /// Released by the tenant.
    Released,
    /// Reached its end time.
    Expired,
    /// Ended by an operator (or for lack of balance).
    Terminated,
    /// Its node failed; not charged past the node's last heartbeat.
    Interrupted,
}

impl LeaseState {
    pub fn is_live(self) -> bool {
        matches!(self, LeaseState::Queued | LeaseState::Active)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseState::Queued => "queued",
            LeaseState::Active => "active",
            LeaseState::Released => "released",
            LeaseState::Expired => "expired",
            LeaseState::Terminated => "terminated",
            LeaseState::Interrupted => "interrupted",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Term {
    /// `duration_hours` long.
    Hourly,
    /// `months` calendar months long.
    Monthly,
}
