//! The retune loop: every few seconds, each running job with `retune` on is judged by what its current
//! generation measured ([`super::retune`], pure); `suggest` announces a better plan once per generation,
//! `auto` replans to it ([`super::service::start_replan`]).

use std::time::Duration;

use uuid::Uuid;

use super::retune::{self, MIN_MEASURED_STEPS, Proposal};
use super::{RetuneMode, lifecycle, service};
use crate::error::ApiError;
use crate::state::AppState;

/// How often running jobs are judged.
pub const INTERVAL: Duration = Duration::from_secs(5);

/// Judge every running job with retune on whose current generation has measured enough steps and has no
/// replan pending (nor, for `suggest`, a suggestion already made). Returns the jobs suggested or replanned.
pub async fn judge_all(state: &AppState) -> anyhow::Result<Vec<Uuid>> {
    let mut conn = state.db.acquire().await?;
    let due = gpuplane_store::jobs::due_for_retune(&mut conn).await?;
    drop(conn);
    let mut acted = Vec::new();
    for (job_id, mode) in due {
        match judge(state, job_id, mode).await {
            Ok(true) => acted.push(job_id),
            Ok(false) => {}
            // Another replan won the race, or the job ended meanwhile: nothing to do.
            Err(ApiError::Conflict { .. }) | Err(ApiError::NotFound(_)) => {}
            Err(err) => tracing::warn!(job.id = %job_id, error = ?err, "retune: judging the job failed"),
        }
    }
    Ok(acted)
}

async fn judge(state: &AppState, job_id: Uuid, mode: RetuneMode) -> Result<bool, ApiError> {
    let mut conn = state.db.acquire().await?;
    let Some(job) = lifecycle::load_job(&mut conn, None, job_id).await? else { return Ok(false) };
    drop(conn);
    let (Some(plan), Some(measured)) = (&job.plan, &job.measured) else { return Ok(false) };
    // Past the warm-up step: `steps` counts it.
    if measured.steps - 1 < MIN_MEASURED_STEPS || measured.median_step_time_s <= 0.0 {
        return Ok(false);
    }
    let candidates = service::retune_candidates(state, &job).await?;
    let Some(proposal) = retune::propose(plan, measured.median_step_time_s, &candidates, job.retune.min_gain_pct)
    else {
        return Ok(false);
    };
    let best = &candidates[proposal.index];
    let reason = describe(&proposal, plan, best);
    let correction = serde_json::json!({
        "measured_step_s": proposal.measured_step_s,
        "predicted_step_s": proposal.predicted_step_s,
        "gain_pct": proposal.gain_pct,
        "measured_vs_predicted": proposal.correction.measured_vs_predicted,
        "compute_scale": proposal.correction.compute_scale,
        "overhead_scale": proposal.correction.overhead_scale,
        "from": retune::plan_shape(plan),
        "to": retune::plan_shape(best),
    });
    match mode {
        RetuneMode::Off => Ok(false),
        RetuneMode::Suggest => {
            let mut tx = state.db.begin().await?;
            let suggestion = serde_json::json!({ "reason": reason, "correction": correction });
            let tenant = gpuplane_store::jobs::record_suggestion(&mut tx, job_id, &suggestion).await?;
            let Some(tenant_id) = tenant else { return Ok(false) };
            let data = serde_json::json!({
                "job_id": job_id, "lease_id": job.lease_id, "generation": job.generation, "reason": reason,
                "correction": correction,
            });
            crate::webhooks::emit(&mut tx, crate::webhooks::Audience::Tenant(tenant_id), "job.replan_suggested", data)
                .await?;
            tx.commit().await?;
            tracing::info!(job.id = %job_id, %reason, "retune: replan suggested");
            Ok(true)
        }
        RetuneMode::Auto => {
            let generation = service::start_replan(
                state,
                None,
                job_id,
                retune::pins_of(best),
                &format!("retune auto: {reason}"),
                None,
                Some(correction),
            )
            .await?;
            tracing::info!(job.id = %job_id, generation, %reason, "retune: replanned");
            Ok(true)
        }
    }
}

/// One line: what was measured, the corrected prediction, and the move.
fn describe(p: &Proposal, from: &crate::planner::Plan, to: &crate::planner::Plan) -> String {
    format!(
        "measured {:.3} s/step ({:.2}x the prediction); the corrected planner predicts {:.3} s/step ({:.0}% faster) \
         for tp {} pp {} dp {} zero {} instead of tp {} pp {} dp {} zero {}",
        p.measured_step_s,
        p.correction.measured_vs_predicted,
        p.predicted_step_s,
        p.gain_pct,
        to.tp,
        to.pp,
        to.dp,
        to.zero_stage,
        from.tp,
        from.pp,
        from.dp,
        from.zero_stage
    )
}
