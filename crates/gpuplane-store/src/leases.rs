//! Leases: their states, placements, terms and who changed them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

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

/// How a lease's GPUs are laid over nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Placement {
    /// Fewest nodes; among nodes that fit, the smallest sufficient free block (best fit).
    #[default]
    Pack,
    /// All GPUs on one node, or fail.
    SingleNode,
    /// One GPU per node per round, over as many nodes as possible.
    Spread,
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

/// Who caused a transition, as recorded in events.
#[derive(Debug, Clone)]
pub enum Actor {
    Tenant(Uuid),
    Operator(Uuid),
    System,
}

impl Actor {
    pub fn label(&self) -> String {
        match self {
            Actor::Tenant(key) => format!("tenant:{key}"),
            Actor::Operator(key) => format!("operator:{key}"),
            Actor::System => "system".into(),
        }
    }

    /// The actor a [`Actor::label`] names (anything else: the system).
    pub fn from_label(label: &str) -> Actor {
        let key = |rest: &str| rest.parse::<Uuid>().ok();
        match label.split_once(':') {
            Some(("tenant", rest)) => key(rest).map_or(Actor::System, Actor::Tenant),
            Some(("operator", rest)) => key(rest).map_or(Actor::System, Actor::Operator),
            _ => Actor::System,
        }
    }
}
