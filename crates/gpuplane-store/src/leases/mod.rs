//! Leases: what a lease is (its states, placements, terms, who changed it), and every statement on leases.
//! Allocation (`allocation`) is all-or-nothing, best-fit over node free counters under row locks, and backed by
//! a unique index that makes a double-booked GPU impossible.

pub mod allocation;
pub mod changes;
pub mod ending;
pub mod events;
pub mod healing;
pub mod idle;
pub mod network;
pub mod parts;
pub mod placement;
pub mod read;
pub mod release;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

pub use crate::lease_kinds::{LeaseState, Term};

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

/// A GPU held by a lease, with where to reach it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct LeaseGpu {
    pub gpu_id: Uuid,
    pub node_id: Uuid,
    pub hostname: String,
    pub address: String,
    /// Index on the node (CUDA_VISIBLE_DEVICES numbering).
    pub index: i32,
    pub uuid: String,
    /// On an external node (created so by the operator): no gpuplane agent runs there, so no jobs run on this
    /// GPU and its liveness is not proven.
    pub external: bool,
}

/// One part of a lease across pools (`parts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LeasePart {
    /// The pool its GPUs come from.
    pub pool_id: Uuid,
    /// The pool's GPU model.
    pub gpu_model: String,
    /// GPUs it asked for.
    pub gpu_count: i32,
    /// How its GPUs are laid over the pool's nodes.
    pub placement: Placement,
    /// Its GPUs (ids of `Lease.gpus`); empty while the lease is queued.
    pub gpu_ids: Vec<Uuid>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Lease {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub pool_id: Uuid,
    pub gpu_count: i32,
    pub placement: Placement,
    pub term: Term,
    pub duration_hours: Option<i32>,
    pub months: Option<i32>,
    pub state: LeaseState,
    /// When the GPUs were allocated (absent while queued).
    pub starts_at: Option<DateTime<Utc>>,
    /// When the lease expires (absent while queued).
    pub ends_at: Option<DateTime<Utc>>,
    /// When it actually ended.
    pub ended_at: Option<DateTime<Utc>>,
    pub end_reason: Option<String>,
    /// Incremented on every change; send it as `If-Match` to extend safely.
    pub generation: i64,
    /// Its GPUs (empty while queued); after its end, the ones it held.
    pub gpus: Vec<LeaseGpu>,
    /// Some of its GPUs are on external nodes (see `LeaseGpu.external`): the platform runs no jobs on them and
    /// does not prove they are alive, so the lease is billed from its start to its end on the operator's word,
    /// not up to its nodes' last heartbeat as on agent nodes.
    pub external: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Opt-in: release the lease once it has been idle this many minutes (10-10080), its running jobs first given
    /// their stop notice; null: never released for idleness. Set at creation or with `PATCH /v1/leases/{id}`.
    #[schema(minimum = 10, maximum = 10080)]
    pub idle_release_after_minutes: Option<i32>,
    /// The start of the lease's current idle spell: its GPUs, every one of them reporting, stayed under the
    /// service's idle threshold since then (`lease.idle` announced it). Null while it is not idle, and always
    /// for a lease with a GPU that reports no telemetry (on an external node, which has no agent).
    pub idle_since: Option<DateTime<Utc>>,
    /// A release is under way (the tenant's, or the idle release): the lease's running jobs were given their
    /// stop notice, and it is released once they have stopped, at the latest at this time. Billed until then.
    pub release_deadline: Option<DateTime<Utc>>,
    /// A lease across pools only (absent for a single-pool lease): its parts, one per pool, in the order asked,
    /// each billed at its own pool's price. `pool_id` and `placement` above are then the first part's, `gpu_count`
    /// the sum of the parts', and `gpus` every part's GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<LeasePart>>,
}

/// One entry of a lease's history.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct LeaseEvent {
    pub id: Uuid,
    pub at: DateTime<Utc>,
    /// e.g. `created`, `queued`, `allocated`, `extended`, `released`, `expired`, `terminated`, `interrupted`.
    pub kind: String,
    pub from_state: Option<String>,
    pub to_state: Option<String>,
    /// `tenant:<key id>`, `operator:<key id>` or `system`.
    pub actor: String,
    pub reason: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub detail: Option<serde_json::Value>,
}
