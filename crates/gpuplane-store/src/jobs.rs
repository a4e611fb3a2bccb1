//! Jobs: how measured steps retune them, and where each generation (plan) stands.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::leases::LeaseState;
use gpuplane_protocol::jobs::JobState;

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

/// Append a state change to `history` (SQL fragment; `$s` the state, `$r` the reason).
pub fn history_push(state: &str, reason: &str) -> String {
    format!(
        "history || jsonb_build_array(jsonb_build_object('state', {state}::text, 'at', now(), 'reason', {reason}::text))"
    )
}

/// The state and reason for the open jobs of a lease that ends in `lease_state` (a release cancels them; any
/// other end fails them), as the parameters of [`end_jobs_of_leases_ctes`].
pub fn job_end_for_lease(lease_state: LeaseState, reason: &str) -> (JobState, String) {
    let to = if lease_state == LeaseState::Released { JobState::Cancelled } else { JobState::Failed };
    (to, format!("lease {}: {reason}", lease_state.as_str()))
}

/// CTEs `open_jobs`, `ended_job_nodes` and `abandoned_generations` that end every open job (and its nodes' parts) of the leases whose ids
/// `lease_ids` (an SQL subquery) yields, in state `state_param` with reason `reason_param` (parameters, see
/// [`job_end_for_lease`]). Embedded by the statement that ends a lease, so ending its jobs costs no round trip.
/// Their nodes are finished at once; the agents stop the processes when the assignments disappear.
pub fn end_jobs_of_leases_ctes(lease_ids: &str, state_param: &str, reason_param: &str) -> String {
    format!(
        "open_jobs AS ( \
             UPDATE jobs SET state = {state_param}, reason = COALESCE(reason, {reason_param}), finished_at = now(), \
                 updated_at = now() \
             WHERE lease_id IN ({lease_ids}) AND state IN ('pending', 'assigned', 'running') RETURNING id), \
         ended_job_nodes AS ( \
             UPDATE job_nodes SET state = {state_param}, reason = COALESCE(reason, {reason_param}), finished_at = now(), \
                 updated_at = now(), history = {} \
             WHERE job_id IN (SELECT id FROM open_jobs) AND state IN ('pending', 'assigned', 'running')), \
         abandoned_generations AS ( \
             UPDATE job_generations SET state = 'abandoned', ended_at = now() \
             WHERE job_id IN (SELECT id FROM open_jobs) AND state = 'pending')",
        history_push(state_param, reason_param)
    )
}
