//! Jobs and templates: a tenant's job on a lease is planned for exactly the lease's GPUs, rendered into one launch
//! spec per node ([`render`]), fetched and run by the nodes' agents (`GET /v1/agent/assignments`), and watched
//! ([`insights`]). Templates are the six built-ins and operators' versioned argv templates ([`templates`]).

pub mod checkpoints;
pub mod insights;
pub mod launch_specs;
pub mod lifecycle;
pub mod log_routes;
pub mod logs;
pub mod mixed;
pub mod policy;
pub mod problems;
pub mod reachability;
pub mod recovery;
pub mod replicas;
pub mod requests;
pub mod restarts;
pub mod retune;
pub mod retuning;
pub mod routes;
pub mod runtime_capabilities;
pub mod service;
pub mod steps;
pub mod templates;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::planner::Plan;
/// The job wire protocol (crate `gpuplane-protocol`): assignments and their status.
pub use gpuplane_protocol::jobs as protocol;
pub use gpuplane_protocol::jobs::{Desired, JobState, LaunchSpec};
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

pub use gpuplane_store::jobs::{JobNode, NodeNotice, StateChange};

pub use gpuplane_store::jobs::RetuneMode;

/// Re-planning from measurements; see [`retune`] for how the planner is corrected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Retune {
    #[serde(default)]
    pub mode: RetuneMode,
    /// The least predicted gain in step time, percent of the measured step, that suggests or makes a replan.
    #[serde(default = "default_min_gain_pct")]
    #[schema(minimum = 1, maximum = 90, default = 20)]
    pub min_gain_pct: i32,
}

fn default_min_gain_pct() -> i32 {
    20
}

impl Default for Retune {
    fn default() -> Self {
        Retune { mode: RetuneMode::Off, min_gain_pct: default_min_gain_pct() }
    }
}

pub use gpuplane_store::jobs::GenerationState;

/// One plan a job ran, in its history.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobGeneration {
    /// 1 for the plan the job was created with, then one more per replan.
    pub generation: i32,
    pub state: GenerationState,
    pub plan: Option<Plan>,
    /// `created`, or why it was asked for (by whom, the pins, the measured figures for a retune).
    pub reason: String,
    /// The API key that asked for it (absent when the service did).
    pub requested_by: Option<Uuid>,
    /// What it measured while it ran (set when it ended).
    #[schema(value_type = Option<Object>)]
    pub measured: Option<serde_json::Value>,
    /// How the planner's prediction was corrected by the previous generation's measurements.
    #[schema(value_type = Option<Object>)]
    pub correction: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    /// A restart: why the generation before it failed (absent for the first plan and replans).
    pub cause: Option<restarts::FailureCause>,
    /// A restart: the node the failure was detected on, and when (a lost node: its last heartbeat).
    pub failed_node_id: Option<Uuid>,
    pub failed_at: Option<DateTime<Utc>>,
    /// A restart: what happened to the lease (`removed_node_id`, `removed_gpus`, `replacement_node_id`,
    /// `added_gpus`, `gpus_before`, `gpus_after`).
    #[schema(value_type = Option<Object>)]
    pub healing: Option<serde_json::Value>,
    /// A restart: the last step measured before the failure, and once its first step is in, the step it resumed
    /// from (the last complete checkpoint) and the steps run again, with when that first step came.
    pub last_step: Option<i64>,
    pub resumed_from_step: Option<i64>,
    pub steps_lost: Option<i64>,
    pub first_step_at: Option<DateTime<Utc>>,
}

/// The insights last evaluated for a job, and when.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobInsights {
    pub at: DateTime<Utc>,
    /// Findings with the suggested change and the numbers behind each; empty when all was well.
    pub insights: Vec<insights::Insight>,
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
    /// The plan it runs now, its current generation's (absent for a custom template run without a model).
    pub plan: Option<Plan>,
    /// The current generation: 1, then one more per replan.
    pub generation: i32,
    /// Every plan it ran, oldest first, and a pending replan last.
    pub generations: Vec<JobGeneration>,
    pub retune: Retune,
    /// Seconds a stop notice gives the job to checkpoint and exit (a replan, its lease released or expiring, the
    /// tenant's balance running out).
    pub stop_grace_s: i32,
    /// What a failure does to the job: restarts as a new generation (a lost node healed or left out, the plan
    /// made for the GPUs left, resumed from the last complete checkpoint), within its limit.
    pub restart: restarts::RestartPolicy,
    /// Restarts so far.
    pub restarts: i32,
    /// The current generation's parts, per node in rank order.
    pub nodes: Vec<JobNode>,
    /// The optimizer steps the gpuplane runtime measured in the current generation, against its plan's predicted
    /// step time and throughput (absent until a step is reported; every step: `GET /v1/jobs/{job_id}/steps`).
    pub measured: Option<steps::MeasuredSteps>,
    /// What gpuplane last saw of the job while it ran (its insights, evaluated every alert interval, as
    /// `GET /v1/leases/{id}/insights` shows them), kept when it ends; absent until first evaluated.
    pub insights: Option<JobInsights>,
    /// How far its current generation is, summed over its parts that say (a batch generation: inputs done of
    /// all); absent for a job that keeps no progress file.
    pub progress: Option<gpuplane_protocol::jobs::Progress>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A job's progress: its parts' summed, when any part says.
pub fn progress_of(parts: &[JobNode]) -> Option<gpuplane_protocol::jobs::Progress> {
    parts.iter().filter_map(|p| p.progress).reduce(|a, b| gpuplane_protocol::jobs::Progress {
        done: a.done.saturating_add(b.done),
        total: a.total.saturating_add(b.total),
    })
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
