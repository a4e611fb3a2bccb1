//! A service's replicas as its job's parts: a failed one run again as its part's next attempt, and the parts a
//! rolling replan starts one node at a time (the rules: the server's `jobs::replicas`).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::types::FailureCause;
use crate::StoreResult;
use gpuplane_protocol::jobs::JobState;

/// A failed replica of a job's generation whose restart is not decided yet.
pub struct FailedReplica {
    pub id: Uuid,
    pub failure_cause: Option<FailureCause>,
    /// The attempts of its rank in a row, this one included, that failed without their server ever answering its
    /// health probe.
    pub failures_unready: i64,
}

/// The failed last attempts of a generation's parts with no restart set.
pub async fn undecided_failures(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
) -> StoreResult<Vec<FailedReplica>> {
    Ok(sqlx::query_as!(
        FailedReplica,
        r#"SELECT jn.id, jn.failure_cause AS "failure_cause: FailureCause",
             (SELECT count(*) FROM job_nodes a
               WHERE a.job_id = jn.job_id AND a.generation = jn.generation AND a.node_rank = jn.node_rank
                 AND a.state = 'failed' AND a.ready_at IS NULL
                 AND a.attempt > coalesce((SELECT max(b.attempt) FROM job_nodes b
                     WHERE b.job_id = jn.job_id AND b.generation = jn.generation AND b.node_rank = jn.node_rank
                       AND b.ready_at IS NOT NULL), 0)) AS "failures_unready!"
         FROM job_nodes jn
         WHERE jn.job_id = $1 AND jn.generation = $2 AND jn.state = 'failed' AND jn.replaced_by IS NULL
           AND jn.restart_at IS NULL
         ORDER BY jn.node_rank"#,
        job_id,
        generation
    )
    .fetch_all(conn)
    .await?)
}

/// Run the failed replica `id` again in `backoff_s` seconds.
pub async fn schedule_restart(conn: &mut PgConnection, id: Uuid, backoff_s: i64) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_nodes SET restart_at = now() + make_interval(secs => $2::bigint::double precision), \
             updated_at = now() \
         WHERE id = $1 AND state = 'failed' AND restart_at IS NULL",
        id,
        backoff_s
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The jobs with a replica whose restart is due (the rule is the view `replica_restarts_due`).
pub async fn jobs_with_restarts_due(conn: &mut PgConnection) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(r#"SELECT DISTINCT job_id AS "job_id!" FROM replica_restarts_due"#).fetch_all(conn).await?)
}

/// A replica whose restart is due.
pub struct DueReplica {
    pub id: Uuid,
    pub node_id: Uuid,
    pub generation: i32,
    pub node_rank: i32,
    pub attempt: i32,
    pub spec: Value,
}

/// The due restarts of a job (the job row locked by the caller), each locked; none once the job left the state
/// that [`jobs_with_restarts_due`] found it in.
pub async fn lock_due_restarts(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<Vec<DueReplica>> {
    Ok(sqlx::query_as!(
        DueReplica,
        "SELECT jn.id, jn.node_id, jn.generation, jn.node_rank, jn.attempt, jn.spec
         FROM job_nodes jn JOIN replica_restarts_due due ON due.job_node_id = jn.id
         WHERE due.job_id = $1
         ORDER BY jn.node_rank
         FOR UPDATE OF jn",
        job_id
    )
    .fetch_all(conn)
    .await?)
}

/// The next attempt of a due replica, pending on the same node with the same spec: `new_id` takes its place.
pub async fn replace(conn: &mut PgConnection, job_id: Uuid, due: &DueReplica, new_id: Uuid) -> StoreResult<()> {
    let why = format!("attempt {} after attempt {} failed", due.attempt + 1, due.attempt);
    sqlx::query!(
        "INSERT INTO job_nodes (id, job_id, generation, node_id, node_rank, attempt, spec, history) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, \
             jsonb_build_array(jsonb_build_object('state', 'pending', 'at', now(), 'reason', $8::text)))",
        new_id,
        job_id,
        due.generation,
        due.node_id,
        due.node_rank,
        due.attempt + 1,
        due.spec,
        why
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("UPDATE job_nodes SET replaced_by = $2, updated_at = now() WHERE id = $1", due.id, new_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// A part of a generation as a rolling replan sees it (a replica's last attempt).
pub struct RollingPart {
    pub id: Uuid,
    pub node_id: Uuid,
    pub node_rank: i32,
    pub state: JobState,
    pub ready_at: Option<DateTime<Utc>>,
    pub noticed: bool,
}

/// The last attempts of a generation's parts, in rank order.
pub async fn generation_parts(conn: &mut PgConnection, job_id: Uuid, generation: i32) -> StoreResult<Vec<RollingPart>> {
    Ok(sqlx::query_as!(
        RollingPart,
        r#"SELECT id, node_id, node_rank, state AS "state: JobState", ready_at,
             (notice_at IS NOT NULL OR desired = 'cancel') AS "noticed!"
         FROM job_nodes WHERE job_id = $1 AND generation = $2 AND replaced_by IS NULL ORDER BY node_rank"#,
        job_id,
        generation
    )
    .fetch_all(conn)
    .await?)
}

/// Whether any part of the job, in any generation, is still open (pending, assigned or running).
pub async fn any_open(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM job_nodes WHERE job_id = $1 AND replaced_by IS NULL
             AND state IN ('pending', 'assigned', 'running')) AS "open!""#,
        job_id
    )
    .fetch_one(conn)
    .await?)
}

/// The jobs whose pending replan (not a restart) has one of these parts among its new ones: rolls that a new
/// replica's readiness may move on.
pub async fn rolling_jobs_of(conn: &mut PgConnection, part_ids: &[Uuid]) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT DISTINCT jn.job_id FROM job_nodes jn
         JOIN job_generations g ON g.job_id = jn.job_id AND g.generation = jn.generation
         WHERE jn.id = ANY($1) AND g.state = 'pending' AND g.cause IS NULL",
        part_ids
    )
    .fetch_all(conn)
    .await?)
}
