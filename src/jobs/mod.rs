//! Jobs and templates: a tenant's job on a lease is planned for exactly the lease's GPUs, rendered into one launch
//! spec per node ([`render`]), fetched and run by the nodes' agents (`GET /v1/agent/assignments`), and watched
//! ([`insights`]). Templates are the six built-ins and operators' versioned argv templates ([`templates`]).

pub mod insights;
pub mod render;
pub mod routes;
pub mod steps;
pub mod store;
pub mod templates;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::planner::Plan;
/// The job wire protocol (crate `gpuplane-protocol`): assignments and their status.
pub use gpuplane_protocol::jobs as protocol;
pub use gpuplane_protocol::jobs::{Desired, JobState, LaunchSpec};
pub use routes::router;

/// The job's state from its nodes': failed as soon as any node failed (unless a cancel was asked for), succeeded
/// when all succeeded, cancelled when a cancel was asked for and every node stopped, running while any node
/// runs or has finished.
pub fn aggregate(cancel_requested: bool, nodes: &[JobState]) -> JobState {
    if nodes.is_empty() {
        return JobState::Pending;
    }
    let any = |s: JobState| nodes.contains(&s);
    if nodes.iter().all(|s| s.is_terminal()) {
        return if nodes.iter().all(|s| *s == JobState::Succeeded) {
            JobState::Succeeded
        } else if cancel_requested {
            JobState::Cancelled
        } else if any(JobState::Failed) {
            JobState::Failed
        } else {
            JobState::Cancelled
        };
    }
    if any(JobState::Failed) && !cancel_requested {
        JobState::Failed
    } else if any(JobState::Running) || nodes.iter().any(|s| s.is_terminal()) {
        JobState::Running
    } else if nodes.iter().all(|s| *s != JobState::Pending) {
        JobState::Assigned
    } else {
        JobState::Pending
    }
}

/// One recorded state change of a job's node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StateChange {
    pub state: JobState,
    #[serde(deserialize_with = "crate::extract::sane_time")]
    pub at: DateTime<Utc>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A job's part on one node of its lease.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobNode {
    pub id: Uuid,
    pub node_id: Uuid,
    pub hostname: String,
    /// `NODE_RANK`: 0 is the node `MASTER_ADDR` names.
    pub node_rank: i32,
    pub state: JobState,
    pub desired: Desired,
    pub exit_code: Option<i32>,
    /// The last lines of the process's output (stdout and stderr), at most 50.
    pub output_tail: Vec<String>,
    pub reason: Option<String>,
    /// Every state change, oldest first.
    pub history: Vec<StateChange>,
    /// What the node runs.
    pub spec: LaunchSpec,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A job on a lease.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: Uuid,
    pub lease_id: Uuid,
    /// The template's name (`auto` resolves to a built-in one).
    pub template: String,
    /// The custom template's version (absent for built-in templates).
    pub template_version: Option<i32>,
    pub state: JobState,
    pub cancel_requested: bool,
    /// Why it failed or was cancelled.
    pub reason: Option<String>,
    /// The planner's best plan for the lease's GPUs (absent for a custom template run without a model).
    pub plan: Option<Plan>,
    /// Per node, in rank order.
    pub nodes: Vec<JobNode>,
    /// The optimizer steps the gpuplane runtime measured, against the plan's predicted step time and throughput
    /// (absent until a step is reported; the steps themselves: `GET /v1/jobs/{job_id}/steps`).
    pub measured: Option<steps::MeasuredSteps>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::JobState::*;
    use super::aggregate;

    #[test]
    fn job_state_follows_its_nodes() {
        assert_eq!(aggregate(false, &[Pending, Pending]), Pending);
        assert_eq!(aggregate(false, &[Assigned, Pending]), Pending);
        assert_eq!(aggregate(false, &[Assigned, Assigned]), Assigned);
        assert_eq!(aggregate(false, &[Running, Assigned]), Running);
        assert_eq!(aggregate(false, &[Succeeded, Running]), Running);
        assert_eq!(aggregate(false, &[Succeeded, Succeeded]), Succeeded);
        assert_eq!(aggregate(false, &[Failed, Running]), Failed);
        assert_eq!(aggregate(true, &[Cancelled, Running]), Running, "cancelled once every node stopped");
        assert_eq!(aggregate(true, &[Cancelled, Cancelled]), Cancelled);
        assert_eq!(aggregate(true, &[Cancelled, Failed]), Cancelled);
        assert_eq!(aggregate(false, &[Cancelled, Succeeded]), Cancelled);
    }
}
