//! Restarts (migration 0042): the statements that record why a job's part failed when the service detected it
//! from outside (a lost node, a failed GPU, a stall), open a restart as the job's pending generation, find the
//! restarts that may start, and record where a restart resumed. The rule is the server's `jobs::recovery`.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::lifecycle::history_push;
pub use super::types::FailureCause;
use super::types::GenerationPart;
use crate::StoreResult;

/// A job's restart policy as stored (JSON: the server's type) and how many restarts it has had.
pub async fn restart_state(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<(serde_json::Value, i32)> {
    let row = sqlx::query!("SELECT restart_policy, restarts FROM jobs WHERE id = $1", job_id).fetch_one(conn).await?;
    Ok((row.restart_policy, row.restarts))
}

/// Record a job's resolved restart policy (at its create).
pub async fn set_restart_policy(conn: &mut PgConnection, job_id: Uuid, policy: &serde_json::Value) -> StoreResult<()> {
    sqlx::query!("UPDATE jobs SET restart_policy = $2 WHERE id = $1", job_id, policy).execute(conn).await?;
    Ok(())
}

/// The first part of a job's current generation that failed of a cause the service detected, with its node.
pub async fn detected_failure(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
) -> StoreResult<Option<(FailureCause, Uuid)>> {
    let row = sqlx::query!(
        r#"SELECT failure_cause AS "cause!: FailureCause", node_id FROM job_nodes
         WHERE job_id = $1 AND generation = $2 AND failure_cause IS NOT NULL ORDER BY updated_at, node_rank LIMIT 1"#,
        job_id,
        generation
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.cause, r.node_id)))
}

/// Whether a part of the job's current generation failed of a cause the service detected (a stalled part that
/// is still being stopped counts).
pub async fn has_detected_failure(conn: &mut PgConnection, job_id: Uuid, generation: i32) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM job_nodes WHERE job_id = $1 AND generation = $2 AND failure_cause IS NOT NULL) AS "any!""#,
        job_id,
        generation
    )
    .fetch_one(conn)
    .await?)
}

/// A restart about to be opened.
pub struct NewRestart<'a> {
    pub job_id: Uuid,
    pub cause: FailureCause,
    pub node_id: Option<Uuid>,
    pub failed_at: DateTime<Utc>,
    pub reason: &'a str,
    pub backoff_s: i64,
}

/// Open a restart: the job's next generation, pending, with its cause, and one more restart counted; none when
/// another generation is pending (`job_generations_one_pending`: a replan is abandoned by the caller first).
/// The job row is locked by the caller. Returns its number.
pub async fn open_restart(conn: &mut PgConnection, new: &NewRestart<'_>) -> StoreResult<Option<i32>> {
    let generation = sqlx::query_scalar!(
        "INSERT INTO job_generations (job_id, generation, state, reason, cause, failed_node_id, failed_at, not_before, \
             last_step) \
         SELECT $1, max(generation) + 1, 'pending', $2, $3, $4, $5, now() + make_interval(secs => $6), \
             (SELECT max(step) FROM job_steps WHERE job_id = $1) \
         FROM job_generations WHERE job_id = $1 \
         ON CONFLICT (job_id) WHERE state = 'pending' DO NOTHING RETURNING generation",
        new.job_id,
        new.reason,
        new.cause as FailureCause,
        new.node_id,
        new.failed_at,
        new.backoff_s as f64
    )
    .fetch_optional(&mut *conn)
    .await?;
    if generation.is_some() {
        sqlx::query!("UPDATE jobs SET restarts = restarts + 1, updated_at = now() WHERE id = $1", new.job_id)
            .execute(conn)
            .await?;
    }
    Ok(generation)
}

/// A lost node is the root cause of a restart already opened for what followed from it (the other ranks died
/// when their peer went): the pending restart of each job says so, with the node, when it failed and why.
pub async fn blame_pending_restart(
    conn: &mut PgConnection,
    job_id: Uuid,
    cause: FailureCause,
    node_id: Uuid,
    failed_at: DateTime<Utc>,
    reason: &str,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_generations SET reason = CASE WHEN cause IS DISTINCT FROM $2 THEN $5 ELSE reason END, \
             cause = $2, failed_node_id = $3, failed_at = $4 \
         WHERE job_id = $1 AND state = 'pending' AND cause IS NOT NULL",
        job_id,
        cause as FailureCause,
        node_id,
        failed_at,
        reason
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Record on the pending restart what healing did to the lease.
pub async fn record_healing(conn: &mut PgConnection, job_id: Uuid, healing: &serde_json::Value) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_generations SET healing = $2 WHERE job_id = $1 AND state = 'pending' AND cause IS NOT NULL",
        job_id,
        healing
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Fail the unfinished parts of the open jobs of `lease_id` on node `node_id`, of `cause` (the node is lost, or
/// its GPU failed: no agent will report them). Returns the jobs, in id order, locked.
pub async fn fail_parts_on_node(
    conn: &mut PgConnection,
    lease_id: Uuid,
    node_id: Uuid,
    cause: FailureCause,
    reason: &str,
) -> StoreResult<Vec<Uuid>> {
    let jobs = sqlx::query_scalar!(
        "SELECT id FROM jobs WHERE lease_id = $1 AND state IN ('pending', 'assigned', 'running') \
         ORDER BY id FOR UPDATE",
        lease_id
    )
    .fetch_all(&mut *conn)
    .await?;
    // Runtime SQL: the history fragment `history_push` is shared by every statement that changes a part's state.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE job_nodes SET state = 'failed', failure_cause = $3, reason = $4, finished_at = now(), \
             updated_at = now(), desired = 'cancel', history = {} \
         WHERE job_id = ANY($1) AND node_id = $2 AND state IN ('pending', 'assigned', 'running')",
        history_push("'failed'", "$4")
    )))
    .bind(&jobs)
    .bind(node_id)
    .bind(cause.as_str())
    .bind(reason)
    .execute(conn)
    .await?;
    Ok(jobs)
}

/// Mark the unfinished parts of a job's current generation stalled, and tell their agents to stop them: they
/// end when the agents have (the job row is locked by the caller).
pub async fn mark_stalled(conn: &mut PgConnection, job_id: Uuid, reason: &str) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_nodes SET failure_cause = 'stalled', reason = COALESCE(reason, $2), updated_at = now(), \
             desired = 'cancel' \
         WHERE job_id = $1 AND generation = (SELECT generation FROM jobs WHERE id = $1) \
             AND state IN ('pending', 'assigned', 'running')",
        job_id,
        reason
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// What the stall check reads of a running job: its policy, the current generation's start, its steps.
pub struct StallSubject {
    pub job_id: Uuid,
    pub restart_policy: serde_json::Value,
    pub generation_started_at: Option<DateTime<Utc>>,
    /// Steps the current generation measured, and the last one's time.
    pub steps: i64,
    pub last_step_at: Option<DateTime<Utc>>,
    /// Median step time of the current generation past its first step (NULL with fewer than 2 steps).
    pub median_step_time_s: Option<f64>,
}

/// The running `gpuplane-runtime` jobs with no pending generation and no part already failing, with what the
/// stall check reads (steps are what the runtime reports; other templates measure none).
pub async fn stall_subjects(conn: &mut PgConnection, template: &str) -> StoreResult<Vec<StallSubject>> {
    Ok(sqlx::query_as!(
        StallSubject,
        r#"SELECT j.id AS job_id, j.restart_policy, g.started_at AS generation_started_at,
             COALESCE(s.steps, 0) AS "steps!", s.last_at AS last_step_at, s.median AS median_step_time_s
         FROM jobs j JOIN job_generations g ON g.job_id = j.id AND g.generation = j.generation
         LEFT JOIN LATERAL (
             SELECT count(*) AS steps, max(st.at) AS last_at,
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY st.step_time_s)
                     FILTER (WHERE st.step > (SELECT min(step) FROM job_steps x JOIN job_nodes xn ON xn.id = x.job_node_id
                                              WHERE x.job_id = j.id AND xn.generation = j.generation)) AS median
             FROM job_steps st JOIN job_nodes jn ON jn.id = st.job_node_id
             WHERE st.job_id = j.id AND jn.generation = j.generation) s ON true
         WHERE j.state = 'running' AND j.template = $1 AND j.plan IS NOT NULL AND NOT j.cancel_requested
             AND NOT EXISTS (SELECT 1 FROM job_generations p WHERE p.job_id = j.id AND p.state = 'pending')
             AND NOT EXISTS (SELECT 1 FROM job_nodes f WHERE f.job_id = j.id AND f.generation = j.generation
                 AND (f.failure_cause IS NOT NULL OR f.desired <> 'run' OR f.notice_at IS NOT NULL))"#,
        template
    )
    .fetch_all(conn)
    .await?)
}

/// The jobs whose restart may start now: running, not cancelled, a restart pending past its backoff, every part
/// of the failed generation ended, the lease active and every node holding its GPUs heard from (a silent one is
/// either back soon or lost, and then healed first). At most 100, oldest first.
pub async fn restarts_due(conn: &mut PgConnection) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT j.id FROM job_generations g JOIN jobs j ON j.id = g.job_id JOIN leases l ON l.id = j.lease_id \
         WHERE g.state = 'pending' AND g.cause IS NOT NULL AND g.not_before <= now() \
             AND j.state = 'running' AND NOT j.cancel_requested AND l.state = 'active' \
             AND NOT EXISTS (SELECT 1 FROM job_nodes jn WHERE jn.job_id = j.id AND jn.generation = j.generation \
                 AND jn.state IN ('pending', 'assigned', 'running')) \
             AND NOT EXISTS (SELECT 1 FROM gpus x JOIN nodes n ON n.id = x.node_id \
                 WHERE x.held_by = l.id AND n.agent_managed AND n.liveness NOT IN ('ready', 'not_ready')) \
         ORDER BY g.not_before LIMIT 100"
    )
    .fetch_all(conn)
    .await?)
}

/// Lock a job whose restart is due (as [`restarts_due`] says, checked again under the lock, skipping a job
/// another replica holds): the pending generation, the lease, the job's stored request and template.
pub struct DueRestart {
    pub generation: i32,
    pub current: i32,
    pub lease_id: Uuid,
    pub pool_id: Uuid,
    pub template: String,
    pub request: serde_json::Value,
    pub cause: FailureCause,
    pub failed_node_id: Option<Uuid>,
    pub failed_at: Option<DateTime<Utc>>,
    pub healing: Option<serde_json::Value>,
}

pub async fn lock_due_restart(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<Option<DueRestart>> {
    let locked = sqlx::query_scalar!(
        "SELECT id FROM jobs WHERE id = $1 AND state = 'running' AND NOT cancel_requested FOR UPDATE SKIP LOCKED",
        job_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    if locked.is_none() {
        return Ok(None);
    }
    Ok(sqlx::query_as!(
        DueRestart,
        r#"SELECT g.generation, j.generation AS current, j.lease_id, l.pool_id, j.template, j.request,
             g.cause AS "cause!: FailureCause", g.failed_node_id, g.failed_at, g.healing
         FROM job_generations g JOIN jobs j ON j.id = g.job_id JOIN leases l ON l.id = j.lease_id
         WHERE g.job_id = $1 AND g.state = 'pending' AND g.cause IS NOT NULL AND g.not_before <= now()
             AND l.state = 'active'
             AND NOT EXISTS (SELECT 1 FROM job_nodes jn WHERE jn.job_id = j.id AND jn.generation = j.generation
                 AND jn.state IN ('pending', 'assigned', 'running'))"#,
        job_id
    )
    .fetch_optional(conn)
    .await?)
}

/// Give a pending restart the plan and parts it starts with.
pub async fn set_restart_plan(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
    plan: Option<serde_json::Value>,
    parts: &[GenerationPart],
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_generations SET plan = $3, specs = $4 WHERE job_id = $1 AND generation = $2",
        job_id,
        generation,
        plan,
        sqlx::types::Json(parts) as _
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A restart whose first step just came in: where it resumed from and what it cost.
pub struct Resumed {
    pub job_id: Uuid,
    pub tenant_id: Uuid,
    pub lease_id: Uuid,
    pub generation: i32,
    pub cause: FailureCause,
    pub failed_node_id: Option<Uuid>,
    pub failed_hostname: Option<String>,
    pub failed_at: Option<DateTime<Utc>>,
    pub healing: Option<serde_json::Value>,
    pub plan: Option<serde_json::Value>,
    pub reason: String,
    pub resumed_from_step: i64,
    pub steps_lost: i64,
    pub first_step_at: DateTime<Utc>,
}

/// For the running restarts (on `node_id`'s jobs) whose first step is now stored: record the step they resumed
/// from (their first step - 1) and the steps lost (run again: the last step measured before the failure past
/// it), once. Returns them.
pub async fn note_resumed(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<Resumed>> {
    Ok(sqlx::query_as!(
        Resumed,
        r#"WITH firsts AS (
             SELECT g.job_id, g.generation, min(st.step) AS first_step, min(st.at) AS first_at
             FROM job_generations g JOIN job_nodes jn ON jn.job_id = g.job_id AND jn.generation = g.generation
             JOIN job_steps st ON st.job_node_id = jn.id
             WHERE g.cause IS NOT NULL AND g.first_step_at IS NULL AND g.state = 'running'
                 AND g.job_id IN (SELECT job_id FROM job_nodes WHERE node_id = $1 AND state IN ('assigned', 'running'))
             GROUP BY g.job_id, g.generation)
         UPDATE job_generations g SET resumed_from_step = f.first_step - 1,
             steps_lost = GREATEST(COALESCE(g.last_step, 0) - (f.first_step - 1), 0), first_step_at = f.first_at
         FROM firsts f, jobs j
         WHERE g.job_id = f.job_id AND g.generation = f.generation AND j.id = g.job_id AND g.first_step_at IS NULL
         RETURNING g.job_id, j.tenant_id, j.lease_id, g.generation, g.cause AS "cause!: FailureCause",
             g.failed_node_id, (SELECT hostname FROM nodes WHERE id = g.failed_node_id) AS failed_hostname,
             g.failed_at, g.healing, g.plan, g.reason, g.resumed_from_step AS "resumed_from_step!",
             g.steps_lost AS "steps_lost!", g.first_step_at AS "first_step_at!""#,
        node_id
    )
    .fetch_all(conn)
    .await?)
}

/// The jobs of a lease that have not ended, in id order.
pub async fn open_jobs_of_lease(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT id FROM jobs WHERE lease_id = $1 AND state IN ('pending', 'assigned', 'running') ORDER BY id",
        lease_id
    )
    .fetch_all(conn)
    .await?)
}
