//! The jobs' domain values: how measured steps retune them, where each generation stands, their parts on nodes
//! and the state changes those went through.

use chrono::{DateTime, Utc};
use gpuplane_protocol::jobs::{Desired, JobState, LaunchSpec};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// What the service does with a running job's measured steps (the gpuplane runtime's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum RetuneMode {
    /// Nothing: the tenant replans by hand (`POST /v1/jobs/{job_id}/replan`).
    #[default]
    Off,
    /// When the corrected planner's best plan beats the running one by the minimum gain, say so once per
    /// generation (the `replan_suggested` insight and the `job.replan_suggested` event); change nothing.
    Suggest,
    /// Then replan: checkpoint, stop, start under the better plan on the same GPUs, resume.
    Auto,
}

/// Where a generation (one plan a job ran) stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum GenerationState {
    /// Asked for: the running generation is checkpointing and stopping.
    Pending,
    /// The job's current plan (it stays so after the job ends).
    Running,
    /// A later generation replaced it.
    Ended,
    /// The replan did not happen: the job ended first, or the running processes did not stop cleanly.
    Abandoned,
}

/// One recorded state change of a job's node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StateChange {
    pub state: JobState,
    #[serde(deserialize_with = "gpuplane_protocol::time::sane_time")]
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
    /// 1, or more for a service's replica run again after it failed (the failed attempts are not listed).
    pub attempt: i32,
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
    /// The stop notice its process was given (a replan, the lease ending), with the grace it had.
    pub notice: Option<NodeNotice>,
    /// How far it is through its work, as it says (a batch generation's inputs done of its share); absent for a
    /// job that keeps no progress file.
    pub progress: Option<gpuplane_protocol::jobs::Progress>,
}

/// A stop notice as a job's part received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodeNotice {
    pub reason: String,
    /// Seconds the process had to checkpoint and exit before it was stopped.
    pub grace_s: i32,
    pub at: DateTime<Utc>,
}

/// One node's part of a pending generation, as `job_generations.specs` keeps it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GenerationPart {
    pub node_id: Uuid,
    pub spec: LaunchSpec,
}

/// Why a job's generation failed, as the service tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum FailureCause {
    /// The node's agent was silent past the offline limit (the host, its agent or its link died).
    NodeLost,
    /// A GPU the lease holds reported a fatal XID.
    GpuFailed,
    /// A process of the job exited with an error (its agent reported it).
    ProcessDied,
    /// Steps stopped arriving (or the first one never came) within the job's bound.
    Stalled,
}

impl FailureCause {
    pub const ALL: [FailureCause; 4] =
        [FailureCause::NodeLost, FailureCause::GpuFailed, FailureCause::ProcessDied, FailureCause::Stalled];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureCause::NodeLost => "node_lost",
            FailureCause::GpuFailed => "gpu_failed",
            FailureCause::ProcessDied => "process_died",
            FailureCause::Stalled => "stalled",
        }
    }
}
