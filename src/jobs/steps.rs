//! Measured optimizer steps: the gpuplane runtime in a job writes one line per step, the node's agent ships them
//! with its heartbeats, and they are kept per job ([`record`]) and set against the plan's prediction
//! ([`summarize`], pure).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::FieldError;
use crate::planner::Plan;
use gpuplane_protocol::jobs::{JobStep, MAX_STEPS_PER_HEARTBEAT};

/// Check a heartbeat's steps; every bad field is named.
pub fn validate(steps: &[JobStep], errors: &mut Vec<FieldError>) {
    if steps.len() > MAX_STEPS_PER_HEARTBEAT {
        errors.push(FieldError::new("steps", format!("at most {MAX_STEPS_PER_HEARTBEAT} steps per heartbeat")));
        return;
    }
    for (i, step) in steps.iter().enumerate() {
        if let Err((field, message)) = step.check() {
            errors.push(FieldError::new(format!("steps[{i}].{field}"), message));
        }
    }
}

/// Store the steps of this node's own assignments; steps of any other assignment are ignored (an agent speaks
/// only for its node), and a step already stored (a retried heartbeat) is kept as it was. Returns how many
/// were stored.
pub async fn record(conn: &mut PgConnection, node_id: Uuid, steps: &[JobStep]) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO job_steps (job_id, step, job_node_id, step_time_s, tokens, loss, peak_memory_bytes, at) \
         SELECT jn.job_id, u.step, u.job_node_id, u.step_time_s, u.tokens, u.loss, u.peak, u.at \
         FROM UNNEST($2::uuid[], $3::bigint[], $4::float8[], $5::bigint[], $6::float8[], $7::bigint[], \
                     $8::timestamptz[]) AS u(job_node_id, step, step_time_s, tokens, loss, peak, at) \
         JOIN job_nodes jn ON jn.id = u.job_node_id AND jn.node_id = $1 \
         ON CONFLICT (job_id, step) DO NOTHING",
    )
    .bind(node_id)
    .bind(steps.iter().map(|s| s.job_node_id).collect::<Vec<_>>())
    .bind(steps.iter().map(|s| s.step).collect::<Vec<_>>())
    .bind(steps.iter().map(|s| s.step_time_s).collect::<Vec<_>>())
    .bind(steps.iter().map(|s| s.tokens).collect::<Vec<_>>())
    .bind(steps.iter().map(|s| s.loss).collect::<Vec<_>>())
    .bind(steps.iter().map(|s| s.peak_memory_bytes).collect::<Vec<_>>())
    .bind(steps.iter().map(|s| s.at).collect::<Vec<_>>())
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// The first steps warm up (allocations, compilation, caches): the step time is judged from this step on when
/// the job has run more than this many.
pub const WARMUP_STEPS: i64 = 1;

/// What the steps stored for one job add up to.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StepTotals {
    pub job_id: Uuid,
    pub steps: i64,
    pub last_step: i64,
    pub first_loss: f64,
    pub last_loss: f64,
    /// Median step time past the warm-up (of all steps while there are no more).
    pub median_step_time_s: f64,
    /// Median tokens per step past the warm-up.
    pub median_tokens: f64,
    pub peak_memory_bytes: i64,
    pub last_at: DateTime<Utc>,
}

/// A job's measured steps against its plan's prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MeasuredSteps {
    /// Steps reported.
    pub steps: i64,
    pub last_step: i64,
    pub first_loss: f64,
    pub last_loss: f64,
    /// Median wall time of a step, seconds (past the first, warm-up step once there are more).
    pub median_step_time_s: f64,
    /// Tokens per second at the median step.
    pub tokens_per_s: f64,
    /// The highest peak memory any reported step saw on the reporting rank, bytes.
    pub peak_memory_bytes: i64,
    /// The plan's predicted step time and throughput (absent without a plan).
    pub predicted_step_time_s: Option<f64>,
    pub predicted_tokens_per_s: Option<f64>,
    /// Measured over predicted step time (above 1: slower than planned).
    pub step_time_vs_plan: Option<f64>,
    pub predicted_memory_per_gpu_bytes: Option<i64>,
    pub last_at: DateTime<Utc>,
}

/// Pure: the totals set against the plan.
pub fn summarize(totals: &StepTotals, plan: Option<&Plan>) -> MeasuredSteps {
    let tokens_per_s =
        if totals.median_step_time_s > 0.0 { totals.median_tokens / totals.median_step_time_s } else { 0.0 };
    let predicted = plan.filter(|p| p.step_time_s > 0.0);
    MeasuredSteps {
        steps: totals.steps,
        last_step: totals.last_step,
        first_loss: totals.first_loss,
        last_loss: totals.last_loss,
        median_step_time_s: totals.median_step_time_s,
        tokens_per_s,
        peak_memory_bytes: totals.peak_memory_bytes,
        predicted_step_time_s: predicted.map(|p| p.step_time_s),
        predicted_tokens_per_s: predicted.map(|p| p.tokens_per_s),
        step_time_vs_plan: predicted.map(|p| totals.median_step_time_s / p.step_time_s),
        predicted_memory_per_gpu_bytes: plan.map(|p| i64::try_from(p.memory_per_gpu_bytes).unwrap_or(i64::MAX)),
        last_at: totals.last_at,
    }
}

/// The totals of each of these jobs that has steps in its current generation.
pub async fn totals(conn: &mut PgConnection, job_ids: &[Uuid]) -> Result<HashMap<Uuid, StepTotals>, sqlx::Error> {
    // The current generation's steps: a replanned job is judged by what its plan now measures.
    let rows: Vec<StepTotals> = sqlx::query_as(
        "WITH current AS ( \
             SELECT s.* FROM job_steps s JOIN job_nodes jn ON jn.id = s.job_node_id \
             JOIN jobs j ON j.id = s.job_id AND j.generation = jn.generation WHERE s.job_id = ANY($1)) \
         SELECT s.job_id, count(*) AS steps, max(s.step) AS last_step, \
             (array_agg(s.loss ORDER BY s.step))[1] AS first_loss, \
             (array_agg(s.loss ORDER BY s.step DESC))[1] AS last_loss, \
             coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY s.step_time_s) \
                 FILTER (WHERE s.step > w.warmup), 0) AS median_step_time_s, \
             coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY s.tokens) \
                 FILTER (WHERE s.step > w.warmup), 0) AS median_tokens, \
             max(s.peak_memory_bytes) AS peak_memory_bytes, max(s.at) AS last_at \
         FROM current s \
         JOIN (SELECT job_id, CASE WHEN count(*) > $2 THEN min(step) + $2 - 1 ELSE 0 END AS warmup \
               FROM current GROUP BY job_id) w ON w.job_id = s.job_id \
         GROUP BY s.job_id",
    )
    .bind(job_ids)
    .bind(WARMUP_STEPS)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.job_id, r)).collect())
}

/// One stored step as the tenant reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct StepView {
    pub step: i64,
    pub step_time_s: f64,
    pub tokens: i64,
    pub loss: f64,
    pub peak_memory_bytes: i64,
    /// The node whose process measured it.
    pub node_id: Uuid,
    pub at: DateTime<Utc>,
}

/// The job's steps after `after`, in step order.
pub async fn list(conn: &mut PgConnection, job_id: Uuid, after: i64, limit: i64) -> Result<Vec<StepView>, sqlx::Error> {
    sqlx::query_as(
        "SELECT s.step, s.step_time_s, s.tokens, s.loss, s.peak_memory_bytes, jn.node_id, s.at \
         FROM job_steps s JOIN job_nodes jn ON jn.id = s.job_node_id \
         WHERE s.job_id = $1 AND s.step > $2 ORDER BY s.step LIMIT $3",
    )
    .bind(job_id)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(median_step_time_s: f64) -> StepTotals {
        StepTotals {
            job_id: Uuid::nil(),
            steps: 10,
            last_step: 10,
            first_loss: 10.5,
            last_loss: 6.0,
            median_step_time_s,
            median_tokens: 4096.0,
            peak_memory_bytes: 1 << 30,
            last_at: DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn measured_steps_are_set_against_the_plan() {
        let no_plan = summarize(&totals(0.5), None);
        assert_eq!(no_plan.tokens_per_s, 8192.0);
        assert_eq!((no_plan.predicted_step_time_s, no_plan.step_time_vs_plan), (None, None));
        let plan =
            Plan { step_time_s: 0.25, tokens_per_s: 16384.0, ..super::super::insights::tests::plan(1, 0, 0.1, 0.5) };
        let vs = summarize(&totals(0.5), Some(&plan));
        assert_eq!(vs.step_time_vs_plan, Some(2.0));
        assert_eq!(vs.predicted_tokens_per_s, Some(16384.0));
        assert_eq!(summarize(&totals(0.0), Some(&plan)).tokens_per_s, 0.0, "no division by a zero step time");
    }

    #[test]
    fn bad_steps_are_named_by_field() {
        let good = JobStep {
            job_node_id: Uuid::nil(),
            step: 1,
            step_time_s: 0.5,
            tokens: 10,
            loss: 1.0,
            peak_memory_bytes: 0,
            at: DateTime::UNIX_EPOCH,
        };
        let mut errors = Vec::new();
        validate(std::slice::from_ref(&good), &mut errors);
        assert!(errors.is_empty());
        let bad = [
            JobStep { step: 0, ..good.clone() },
            JobStep { loss: f64::NAN, ..good.clone() },
            JobStep { step_time_s: -1.0, ..good.clone() },
            JobStep { tokens: -5, ..good.clone() },
        ];
        validate(&bad, &mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["steps[0].step", "steps[1].loss", "steps[2].step_time_s", "steps[3].tokens"]);
    }
}
