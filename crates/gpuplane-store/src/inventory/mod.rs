//! Inventory: the GPU model catalog, pools (one GPU model in one region at one price), nodes with their GPUs,
//! and the driver/CUDA readiness reads and writes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub mod gpu_models;
pub mod model_cache;
pub mod nodes;
pub mod pools;
pub mod readiness;

/// SQL predicate (over `nodes n`) for a node that new leases may draw from: an operator has not taken it out
/// of service and its agent is alive. The rule itself is the SQL function `node_allocatable` (migration 0034),
/// which the partial index `nodes_allocatable_free_idx` and every statement call; statements checked at
/// build time, which cannot embed this constant, call the function the same way.
pub const ALLOCATABLE_NODE: &str = "node_allocatable(n.admin_state, n.liveness)";

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
