//! Measured optimizer steps: stored per job as the agents ship them, added up per job's current generation, and
//! listed.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use gpuplane_protocol::jobs::JobStep;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

/// Store the steps of this node's own assignments; steps of any other assignment are ignored (an agent speaks
/// only for its node), and a step already stored (a retried heartbeat) is kept as it was, unless a later
/// generation ran it again (a restart resumed from a checkpoint before it): then that run is the step's record.
/// Returns how many were stored.
pub async fn record(conn: &mut PgConnection, node_id: Uuid, steps: &[JobStep]) -> StoreResult<u64> {
    let done = sqlx::query!(
        "INSERT INTO job_steps (job_id, step, job_node_id, step_time_s, tokens, loss, peak_memory_bytes, at) \
         SELECT jn.job_id, u.step, u.job_node_id, u.step_time_s, u.tokens, u.loss, u.peak, u.at \
         FROM UNNEST($2::uuid[], $3::bigint[], $4::float8[], $5::bigint[], $6::float8[], $7::bigint[], \
                     $8::timestamptz[]) AS u(job_node_id, step, step_time_s, tokens, loss, peak, at) \
         JOIN job_nodes jn ON jn.id = u.job_node_id AND jn.node_id = $1 \
         ON CONFLICT (job_id, step) DO UPDATE SET job_node_id = EXCLUDED.job_node_id, \
             step_time_s = EXCLUDED.step_time_s, tokens = EXCLUDED.tokens, loss = EXCLUDED.loss, \
             peak_memory_bytes = EXCLUDED.peak_memory_bytes, at = EXCLUDED.at \
         WHERE (SELECT generation FROM job_nodes WHERE id = job_steps.job_node_id) \
             < (SELECT generation FROM job_nodes WHERE id = EXCLUDED.job_node_id)",
        node_id,
        &steps.iter().map(|s| s.job_node_id).collect::<Vec<_>>(),
        &steps.iter().map(|s| s.step).collect::<Vec<_>>(),
        &steps.iter().map(|s| s.step_time_s).collect::<Vec<_>>(),
        &steps.iter().map(|s| s.tokens).collect::<Vec<_>>(),
        &steps.iter().map(|s| s.loss).collect::<Vec<_>>(),
        &steps.iter().map(|s| s.peak_memory_bytes).collect::<Vec<_>>(),
        &steps.iter().map(|s| s.at).collect::<Vec<_>>()
    )
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

/// The totals of each of these jobs that has steps in its current generation.
pub async fn totals(conn: &mut PgConnection, job_ids: &[Uuid]) -> StoreResult<HashMap<Uuid, StepTotals>> {
    // The current generation's steps: a replanned job is judged by what its plan now measures.
    let rows: Vec<StepTotals> = sqlx::query_as!(
        StepTotals,
        r#"WITH current AS (
             SELECT s.* FROM job_steps s JOIN job_nodes jn ON jn.id = s.job_node_id
             JOIN jobs j ON j.id = s.job_id AND j.generation = jn.generation WHERE s.job_id = ANY($1))
         SELECT s.job_id AS "job_id!", count(*) AS "steps!", max(s.step) AS "last_step!",
             (array_agg(s.loss ORDER BY s.step))[1] AS "first_loss!",
             (array_agg(s.loss ORDER BY s.step DESC))[1] AS "last_loss!",
             coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY s.step_time_s)
                 FILTER (WHERE s.step > w.warmup), 0) AS "median_step_time_s!",
             coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY s.tokens)
                 FILTER (WHERE s.step > w.warmup), 0) AS "median_tokens!",
             max(s.peak_memory_bytes) AS "peak_memory_bytes!", max(s.at) AS "last_at!"
         FROM current s
         JOIN (SELECT job_id, CASE WHEN count(*) > $2 THEN min(step) + $2 - 1 ELSE 0 END AS warmup
               FROM current GROUP BY job_id) w ON w.job_id = s.job_id
         GROUP BY s.job_id"#,
        job_ids,
        WARMUP_STEPS
    )
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
pub async fn list(conn: &mut PgConnection, job_id: Uuid, after: i64, limit: i64) -> StoreResult<Vec<StepView>> {
    Ok(sqlx::query_as!(
        StepView,
        "SELECT s.step, s.step_time_s, s.tokens, s.loss, s.peak_memory_bytes, jn.node_id, s.at \
         FROM job_steps s JOIN job_nodes jn ON jn.id = s.job_node_id \
         WHERE s.job_id = $1 AND s.step > $2 ORDER BY s.step LIMIT $3",
        job_id,
        after,
        limit
    )
    .fetch_all(conn)
    .await?)
}
