//! Inventory: a node's state as shown.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What the API shows: derived from the operator's `admin_state` and the agent's `liveness`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum NodeState {
    /// Takes new leases.
    Ready,
    /// Keeps its leases, takes no new ones.
    Cordoned,
    /// Takes no new leases; becomes `drained` when its last lease ends.
    Draining,
    /// Draining and empty.
    Drained,
    /// Out of service for maintenance.
    Maintenance,
    /// Created by an operator without the `external` mark, and no agent has registered it yet: takes no leases
    /// until one does (install the agent on the host and allow its re-registration; see docs/agent-install.md).
    AwaitingAgent,
    /// Its agent reports a driver or CUDA version below the minimum (see `not_ready_reason`): takes no new
    /// leases until the agent reports a sufficient one.
    NotReady,
    /// Missed heartbeats for the unreachable timeout.
    Unreachable,
    /// Missed heartbeats for the offline timeout; its leases were interrupted.
    Offline,
}
