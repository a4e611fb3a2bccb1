//! GPU inventory: the model catalog, pools (one GPU model in one region at one price) and nodes with their GPUs.

pub mod gpu_models;
pub mod nodes;
pub mod pools;
pub mod readiness;

/// SQL predicate (over `nodes n`) for a node that new leases may draw from: an operator has not taken it out
/// of service and its agent is alive. The rule itself is the SQL function `node_allocatable` (migration 0034),
/// which the partial index `nodes_allocatable_free_idx` and every statement call; statements checked at
/// build time, which cannot embed this constant, call the function the same way.
pub const ALLOCATABLE_NODE: &str = "node_allocatable(n.admin_state, n.liveness)";
