//! Jobs: how measured steps retune them, and where each generation (plan) stands.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
