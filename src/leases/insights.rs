//! What gpuplane sees of a lease's running job: its GPUs' measured utilization against its plan, the steps the
//! runtime measured, and the insights the pure rules (`jobs::insights`) draw from them; the `utilization.low`
//! alert check runs the same evaluation, and keeps each job's findings with the job (`GET /v1/jobs/{id}`'s
//! `insights`, there after the job ends).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::jobs::insights::{self, Insight, InsightInput, Measured};

use crate::db::decode_json;
use crate::error::ApiError;
use crate::planner::Plan;
use gpuplane_store::jobs as stored;

/// What gpuplane sees of the lease's running job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LeaseInsights {
    pub lease_id: Uuid,
    /// The job looked at: the latest running one (absent when none runs).
    pub job_id: Option<Uuid>,
    pub measured: Option<Measured>,
    /// The steps the gpuplane runtime measured in that job, against the plan's prediction.
    pub steps: Option<crate::jobs::steps::MeasuredSteps>,
    pub plan: Option<Plan>,
    /// Findings with the suggested change and the numbers behind each; empty when all is well.
    pub insights: Vec<Insight>,
}

/// The insights of a lease's running job now (`GET /v1/leases/{id}/insights` in `routes`, and the
/// `utilization.low` check below).
pub async fn evaluate_lease(
    conn: &mut sqlx::PgConnection,
    lease_id: Uuid,
    pool_id: Uuid,
) -> Result<LeaseInsights, ApiError> {
    let job = stored::running_job_of_lease(conn, lease_id).await?;
    let Some((job_id, plan, started_at)) = job else {
        return Ok(LeaseInsights {
            lease_id,
            job_id: None,
            measured: None,
            steps: None,
            plan: None,
            insights: Vec::new(),
        });
    };
    let plan: Option<Plan> = plan.map(decode_json).transpose()?;
    let measured = measure_lease(conn, lease_id, started_at, insights::WINDOW_S).await?;
    let topology = crate::jobs::service::lease_topology(conn, lease_id, pool_id).await?;
    let gpu_link = stored::pool_gpu_link(conn, pool_id).await?;
    let steps = crate::jobs::steps::totals(conn, &[job_id])
        .await?
        .remove(&job_id)
        .map(|totals| crate::jobs::steps::summarize(&totals, plan.as_ref()));
    let suggestion = stored::current_suggestion(conn, job_id).await?;
    let found = insights::assess(&InsightInput {
        plan: plan.as_ref(),
        measured,
        pcie_only: gpu_link == "none" || topology.pcie_nodes,
        min_gpus_per_node: topology.nodes.iter().map(|n| n.gpu_indices.len() as u32).min().unwrap_or(0),
        steps: steps.as_ref(),
        replan_suggestion: suggestion.as_ref(),
    });
    Ok(LeaseInsights { lease_id, job_id: Some(job_id), measured: Some(measured), steps, plan, insights: found })
}

/// What a lease's GPUs measured over the last `window_s` seconds, or since `since` when that is later (a job's
/// start, the lease's): the mean of every sample, the busiest GPU's mean, how many of the lease's GPUs reported,
/// and how long it has been since `since`. From raw samples, to the heartbeat: each node's rows in the window are
/// read and decoded once (by the primary key: the node's key and the time). The one measurement of a lease's
/// utilization: the `low_utilization` insight and the idle-lease judgement (`leases::idle`) both read it.
pub async fn measure_lease(
    conn: &mut PgConnection,
    lease_id: Uuid,
    since: DateTime<Utc>,
    window_s: i64,
) -> Result<Measured, sqlx::Error> {
    let m = gpuplane_store::agents::telemetry::measure_lease(conn, lease_id, since, window_s as f64).await?;
    Ok(Measured {
        avg_gpu_util: m.avg_gpu_util,
        samples: m.samples,
        window_s: m.window_s.max(0.0) as i64,
        running_for_s: m.running_for_s.max(0.0) as i64,
        busiest_gpu_util: m.busiest_gpu_util,
        gpus_reporting: m.gpus_reporting,
        gpus: m.gpus,
    })
}

/// Active leases whose running job's GPUs are underused (the `low_utilization` insight).
pub async fn check_utilization(db: &sqlx::PgPool) -> anyhow::Result<usize> {
    let mut conn = db.acquire().await?;
    let running = gpuplane_store::webhooks::leases_running_jobs(&mut conn).await?;
    let mut low = Vec::new();
    for gpuplane_store::webhooks::RunningLease { lease_id, tenant_id, pool_id } in running {
        let found = evaluate_lease(&mut conn, lease_id, pool_id)
            .await
            .map_err(|e| anyhow::anyhow!("insights of lease {lease_id}: {e}"))?;
        // Kept with the job, so it still says what it saw once the job has ended.
        if let Some(job_id) = found.job_id {
            stored::save_insights(&mut conn, job_id, &serde_json::to_value(&found.insights)?).await?;
        }
        if let Some(insight) = found.insights.into_iter().find(|i| i.kind == "low_utilization") {
            low.push((lease_id, tenant_id, found.job_id, insight));
        }
    }
    let mut tx = db.begin().await?;
    crate::webhooks::alerts::clear_except(&mut tx, "utilization.low", &low.iter().map(|l| l.0).collect::<Vec<_>>())
        .await?;
    let mut raised = 0;
    for (lease_id, tenant_id, job_id, insight) in low {
        if crate::webhooks::alerts::raise(&mut tx, "utilization.low", lease_id).await? {
            let data = serde_json::json!({
                "lease_id": lease_id, "job_id": job_id, "message": insight.message,
                "suggestion": insight.suggestion, "figures": insight.figures,
            });
            crate::webhooks::emit(&mut tx, crate::webhooks::Audience::Tenant(tenant_id), "utilization.low", data)
                .await?;
            raised += 1;
        }
    }
    tx.commit().await?;
    Ok(raised)
}
