//! Jobs that survive a failure: the recovery worker's round ([`round`]) detects the running jobs whose steps
//! stopped arriving and starts the restarts that are due, and [`note_resumed`] records where a restart resumed.
//! The rules are [`super::restarts`] (pure); a failure opens a restart in `lifecycle::on_failure`; a lost node
//! is healed by `agent_api::healing`.
//!
//! A restart is the job's next generation (as a replan is), pending with its cause until every part of the
//! failed generation has ended, its backoff has passed and every node of the lease is heard from; it is then
//! planned for the GPUs the lease holds at that moment (a lost node healed or left out) and started, and the
//! runtime resumes from the last complete checkpoint. One pending generation per job
//! (`job_generations_one_pending`) and the job row's lock make concurrent failures one restart.

use chrono::Utc;
use sqlx::PgConnection;
use uuid::Uuid;

use super::lifecycle;
use super::policy::policy_of;
use super::requests::CreateJobRequest;
use super::restarts::{FailureCause, RestartPolicy, Verdict, decide, restart_port, stalled};
use super::service;
use super::templates::Builtin;
use crate::db::decode_json;
use crate::error::ApiError;
use crate::planner::Plan;
use crate::state::AppState;
use gpuplane_protocol::jobs::JobState;
use gpuplane_store::jobs as stored;
use gpuplane_store::jobs::recovery as store;

/// One round of the recovery worker: stalled jobs are detected (and restarted or failed), a service's failed
/// replicas whose backoff has passed run again, then the restarts that are due start. Returns the jobs it acted on.
pub async fn round(state: &AppState) -> anyhow::Result<Vec<Uuid>> {
    let mut acted = detect_stalls(state).await?;
    acted.extend(super::replicas::start_due(state).await?);
    let mut conn = state.db.acquire().await?;
    let due = store::restarts_due(&mut conn).await?;
    drop(conn);
    for job_id in due {
        match start_restart(state, job_id).await {
            Ok(true) => acted.push(job_id),
            Ok(false) => {}
            Err(err) => tracing::warn!(job.id = %job_id, error = ?err, "recovery: starting a restart failed"),
        }
    }
    Ok(acted)
}

/// Detect the running runtime jobs whose steps stopped arriving: their parts are stopped and the job restarts
/// (cause `stalled`), or, without a restart left, fails with the reason.
async fn detect_stalls(state: &AppState) -> anyhow::Result<Vec<Uuid>> {
    let mut conn = state.db.acquire().await?;
    let subjects = store::stall_subjects(&mut conn, Builtin::Runtime.name()).await?;
    drop(conn);
    let now = Utc::now();
    let mut acted = Vec::new();
    for s in subjects {
        let policy: RestartPolicy = decode_json(s.restart_policy)?;
        if !policy.detect_stalls {
            continue;
        }
        let Some(why) = stalled(&policy, now, s.generation_started_at, s.last_step_at, s.median_step_time_s) else {
            continue;
        };
        let mut tx = state.db.begin().await?;
        let Some(job_state) = stored::lock_job_if_running(&mut tx, s.job_id).await? else { continue };
        if job_state != JobState::Running || stored::pending_generation(&mut tx, s.job_id).await?.is_some() {
            continue;
        }
        let (_, restarts) = policy_of(&mut tx, s.job_id).await?;
        match decide(&policy, restarts, FailureCause::Stalled) {
            Verdict::Restart { .. } => {
                // Its processes are told to stop; the restart opens now and starts once they have ended.
                store::mark_stalled(&mut tx, s.job_id, &why).await?;
                let generation = stored::job_progress(&mut tx, s.job_id).await?.2;
                let since = s.last_step_at.or(s.generation_started_at).unwrap_or(now);
                lifecycle::on_failure(&mut tx, s.job_id, generation, &why, since).await?;
            }
            Verdict::LimitReached(_) | Verdict::Fail => {
                store::mark_stalled(&mut tx, s.job_id, &why).await?;
                stored::fail_stalled_parts(&mut tx, s.job_id, &why).await?;
                lifecycle::refresh_job(&mut tx, s.job_id).await?;
            }
        }
        tx.commit().await?;
        tracing::warn!(job.id = %s.job_id, %why, "job stalled");
        acted.push(s.job_id);
    }
    Ok(acted)
}

/// Plan the due restart of `job_id` for the GPUs its lease holds now and start it. The job's own pins are kept
/// when the lease kept its size; after a shrink the planner's best for what is left is taken. No plan for them:
/// the job fails with the planner's reason. Returns whether it started.
async fn start_restart(state: &AppState, job_id: Uuid) -> Result<bool, ApiError> {
    let mut conn = state.db.acquire().await?;
    let due = store::lock_due_restart(&mut conn, job_id).await?;
    drop(conn);
    let Some(due) = due else { return Ok(false) };
    let mut req: CreateJobRequest = serde_json::from_value(due.request.clone())
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("job {job_id}'s stored request: {e}")))?;
    req.template = due.template.clone();
    let shrunk = due.healing.as_ref().is_some_and(|h| h["gpus_after"].as_i64() < h["gpus_before"].as_i64());
    if shrunk {
        req.pins = Default::default();
    }
    // A port of its own per generation: a process of the failed generation that is still alive somewhere (a
    // partitioned host) cannot join the new one's rendezvous.
    let base = req.master_port.unwrap_or(super::launch_specs::DEFAULT_MASTER_PORT);
    req.master_port = Some(restart_port(base, due.generation));
    // Secret values are not in the stored request: the parts get them from `job_secrets` when fetched.
    let rendered = service::plan_and_render(state, due.lease_id, due.pool_id, job_id, &req).await;
    let mut tx = state.db.begin().await?;
    let Some(locked) = store::lock_due_restart(&mut tx, job_id).await? else { return Ok(false) };
    if locked.generation != due.generation {
        return Ok(false);
    }
    match rendered {
        Ok(rendered) => {
            let plan = rendered.planned.as_ref().map(|p| serde_json::to_value(&p.1)).transpose().unwrap_or(None);
            let parts: Vec<stored::GenerationPart> =
                rendered.parts.into_iter().map(|(node_id, spec)| stored::GenerationPart { node_id, spec }).collect();
            store::set_restart_plan(&mut tx, job_id, due.generation, plan, &parts).await?;
            lifecycle::start_restart_generation(&mut tx, job_id, due.current, due.generation).await?;
        }
        Err(err) => {
            let why = match &err {
                ApiError::Validation(errors) => {
                    errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; ")
                }
                ApiError::Database(_) | ApiError::Internal(_) => return Err(err),
                other => other.to_string(),
            };
            let reason = format!("the restart could not be planned for the lease's GPUs now: {why}");
            lifecycle::fail_job(&mut tx, job_id, &reason).await?;
        }
    }
    tx.commit().await?;
    Ok(true)
}

/// The restarts on `node_id`'s jobs whose first step just came in: their generations record where they resumed
/// and what was lost, and `job.restarted` announces each once. Called after the node's steps are stored.
pub async fn note_resumed(conn: &mut PgConnection, node_id: Uuid) -> Result<(), sqlx::Error> {
    for r in store::note_resumed(conn, node_id).await? {
        let plan: Option<Plan> = r.plan.map(decode_json).transpose()?;
        let recovery_s = r.failed_at.map(|at| (r.first_step_at - at).num_milliseconds() as f64 / 1000.0);
        let data = serde_json::json!({
            "job_id": r.job_id, "lease_id": r.lease_id, "generation": r.generation, "cause": r.cause,
            "node_id": r.failed_node_id, "hostname": r.failed_hostname, "failed_at": r.failed_at,
            "healing": r.healing, "plan": plan.as_ref().map(super::retune::plan_shape), "reason": r.reason,
            "resumed_from_step": r.resumed_from_step, "steps_lost": r.steps_lost, "recovery_s": recovery_s,
        });
        tracing::info!(job.id = %r.job_id, generation = r.generation, resumed_from = r.resumed_from_step,
            steps_lost = r.steps_lost, "restart resumed");
        crate::webhooks::emit(conn, crate::webhooks::Audience::Tenant(r.tenant_id), "job.restarted", data).await?;
    }
    Ok(())
}
