//! A job's life in the database: stored with its first generation, read back with its parts and generations,
//! its state recomputed from its parts', replanned, noticed, cancelled and ended. Every change to a job's parts
//! locks the job row first (the callers do, or the function says it does). Lock order: lease, then job, then its
//! nodes.

use chrono::{DateTime, Utc};
use gpuplane_protocol::jobs::{Desired, JobState, LaunchSpec};
use serde::Serialize;
use sqlx::PgConnection;
use sqlx::types::Json;
use uuid::Uuid;

use super::types::{GenerationPart, GenerationState, JobNode, NodeNotice, RetuneMode, StateChange};
use crate::StoreResult;
use crate::lease_kinds::LeaseState;

/// Append a state change to `history` (SQL fragment; `$s` the state, `$r` the reason).
pub fn history_push(state: &str, reason: &str) -> String {
    format!(
        "history || jsonb_build_array(jsonb_build_object('state', {state}::text, 'at', now(), 'reason', {reason}::text))"
    )
}

/// A job's row about to be stored (its plan as JSON: the planner's type is the server's).
pub struct NewJobRow<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub lease_id: Uuid,
    pub template: &'a str,
    pub template_version: Option<i32>,
    pub request: &'a serde_json::Value,
    pub plan: Option<serde_json::Value>,
    pub created_by: Uuid,
    pub retune: RetuneMode,
    pub retune_min_gain_pct: i32,
    pub stop_grace_s: i32,
    /// The restart policy as the server resolved it (`jobs::recovery::RestartPolicy`).
    pub restart_policy: serde_json::Value,
}

/// Insert a job and its first generation (running, reason `created`).
pub async fn insert_job(conn: &mut PgConnection, job: &NewJobRow<'_>) -> StoreResult<()> {
    sqlx::query!(
        "WITH job AS ( \
             INSERT INTO jobs (id, tenant_id, lease_id, template, template_version, request, plan, created_by, \
                 retune, retune_min_gain_pct, stop_grace_s, restart_policy) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id, plan, created_by, created_at) \
         INSERT INTO job_generations (job_id, generation, state, plan, reason, requested_by, created_at) \
         SELECT id, 1, 'running', plan, 'created', created_by, created_at FROM job",
        job.id,
        job.tenant_id,
        job.lease_id,
        job.template,
        job.template_version,
        job.request,
        job.plan,
        job.created_by,
        job.retune as _,
        job.retune_min_gain_pct,
        job.stop_grace_s,
        job.restart_policy
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Store a job's secret environment values, sealed: names, key ids and sealed bytes, one each per value.
pub async fn insert_job_secrets(
    conn: &mut PgConnection,
    job_id: Uuid,
    names: &[&str],
    key_ids: &[&str],
    sealed: &[&[u8]],
) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO job_secrets (job_id, name, value_key_id, value_sealed) \
         SELECT $1, u.name, u.key_id, u.sealed FROM UNNEST($2::text[], $3::text[], $4::bytea[]) AS u(name, key_id, sealed)",
        job_id,
        names as _,
        key_ids as _,
        sealed as _
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Insert a generation's parts of a job, pending: ids, node ids, ranks and specs, one each per part. A rank
/// already inserted (a service's replica that a rolling replan started early) is left as it is.
pub async fn insert_parts(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
    ids: &[Uuid],
    nodes: &[Uuid],
    ranks: &[i32],
    specs: &[serde_json::Value],
) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO job_nodes (id, job_id, generation, node_id, node_rank, spec, history) \
         SELECT u.id, $1, $2, u.node, u.rank, u.spec, \
             jsonb_build_array(jsonb_build_object('state', 'pending', 'at', now(), 'reason', NULL)) \
         FROM UNNEST($3::uuid[], $4::uuid[], $5::int[], $6::jsonb[]) AS u(id, node, rank, spec) \
         ON CONFLICT ON CONSTRAINT job_nodes_rank_unique DO NOTHING",
        job_id,
        generation,
        ids,
        nodes,
        ranks,
        specs
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A job's secret value as stored: in clear (stored before values were sealed) or sealed under a key.
pub struct SecretRow {
    pub job_id: Uuid,
    pub name: String,
    pub value: Option<String>,
    pub value_key_id: Option<String>,
    pub value_sealed: Option<Vec<u8>>,
}

/// The secret values of the given jobs as stored, by job then name.
pub async fn job_secret_rows(conn: &mut PgConnection, job_ids: &[Uuid]) -> StoreResult<Vec<SecretRow>> {
    Ok(sqlx::query_as!(
        SecretRow,
        "SELECT job_id, name, value, value_key_id, value_sealed FROM job_secrets \
         WHERE job_id = ANY($1) ORDER BY job_id, name",
        job_ids
    )
    .fetch_all(conn)
    .await?)
}

/// A job's row (its plan as JSON: the planner's type is the server's).
pub struct JobRow {
    pub id: Uuid,
    pub lease_id: Uuid,
    pub template: String,
    pub template_version: Option<i32>,
    pub state: JobState,
    pub cancel_requested: bool,
    pub reason: Option<String>,
    pub plan: Option<serde_json::Value>,
    pub generation: i32,
    pub retune: RetuneMode,
    pub retune_min_gain_pct: i32,
    pub stop_grace_s: i32,
    pub restart_policy: serde_json::Value,
    pub restarts: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A job's row; with `tenant_id`, only that tenant's (another tenant's job is not found).
pub async fn job_rows_by_id(conn: &mut PgConnection, tenant_id: Option<Uuid>, id: Uuid) -> StoreResult<Vec<JobRow>> {
    Ok(sqlx::query_as!(
        JobRow,
        r#"SELECT id, lease_id, template, template_version, state AS "state: JobState", cancel_requested, reason, plan,
             generation, retune AS "retune: RetuneMode", retune_min_gain_pct, stop_grace_s, restart_policy, restarts,
             created_at, updated_at,
             started_at, finished_at
         FROM jobs WHERE id = $1 AND ($2::uuid IS NULL OR tenant_id = $2)"#,
        id,
        tenant_id
    )
    .fetch_all(conn)
    .await?)
}

/// A lease's job rows after `after`, oldest first, scoped to the tenant.
pub async fn lease_job_rows(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
    after: Uuid,
    limit: i64,
) -> StoreResult<Vec<JobRow>> {
    Ok(sqlx::query_as!(
        JobRow,
        r#"SELECT id, lease_id, template, template_version, state AS "state: JobState", cancel_requested, reason, plan,
             generation, retune AS "retune: RetuneMode", retune_min_gain_pct, stop_grace_s, restart_policy, restarts,
             created_at, updated_at,
             started_at, finished_at
         FROM jobs WHERE lease_id = $1 AND tenant_id = $2 AND id > $3 ORDER BY id LIMIT $4"#,
        lease_id,
        tenant_id,
        after,
        limit
    )
    .fetch_all(conn)
    .await?)
}

/// The current generation's parts of the given jobs: (job id, part), by job then rank.
pub async fn current_parts(conn: &mut PgConnection, job_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, JobNode)>> {
    let rows = sqlx::query!(
        r#"SELECT jn.job_id, jn.id, jn.node_id, n.hostname, jn.node_rank, jn.state AS "state: JobState",
             jn.desired AS "desired: Desired", jn.exit_code,
             jn.output_tail AS "output_tail: Json<Vec<String>>", jn.reason,
             jn.history AS "history: Json<Vec<StateChange>>", jn.spec AS "spec: Json<LaunchSpec>",
             jn.started_at, jn.finished_at, jn.notice_reason, jn.notice_grace_s, jn.notice_at,
             jn.progress_done, jn.progress_total, jn.attempt
         FROM job_nodes jn JOIN jobs j ON j.id = jn.job_id AND j.generation = jn.generation
         JOIN nodes n ON n.id = jn.node_id WHERE jn.job_id = ANY($1) AND jn.replaced_by IS NULL
         ORDER BY jn.job_id, jn.node_rank"#,
        job_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|n| {
            let notice = match (n.notice_reason, n.notice_grace_s, n.notice_at) {
                (Some(reason), Some(grace_s), Some(at)) => Some(NodeNotice { reason, grace_s, at }),
                _ => None,
            };
            let part = JobNode {
                id: n.id,
                node_id: n.node_id,
                hostname: n.hostname,
                node_rank: n.node_rank,
                attempt: n.attempt,
                state: n.state,
                desired: n.desired,
                exit_code: n.exit_code,
                output_tail: n.output_tail.0,
                reason: n.reason,
                history: n.history.0,
                spec: n.spec.0,
                started_at: n.started_at,
                finished_at: n.finished_at,
                notice,
                progress: n
                    .progress_done
                    .zip(n.progress_total)
                    .map(|(done, total)| gpuplane_protocol::jobs::Progress { done, total }),
            };
            (n.job_id, part)
        })
        .collect())
}

/// A generation's row (its plan as JSON: the planner's type is the server's).
pub struct GenerationRow {
    pub job_id: Uuid,
    pub generation: i32,
    pub state: GenerationState,
    pub plan: Option<serde_json::Value>,
    pub reason: String,
    pub requested_by: Option<Uuid>,
    pub measured: Option<serde_json::Value>,
    pub correction: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub cause: Option<super::types::FailureCause>,
    pub failed_node_id: Option<Uuid>,
    pub failed_at: Option<DateTime<Utc>>,
    pub healing: Option<serde_json::Value>,
    pub last_step: Option<i64>,
    pub resumed_from_step: Option<i64>,
    pub steps_lost: Option<i64>,
    pub first_step_at: Option<DateTime<Utc>>,
}

/// Every generation of the given jobs, by job then generation.
pub async fn generation_rows(conn: &mut PgConnection, job_ids: &[Uuid]) -> StoreResult<Vec<GenerationRow>> {
    Ok(sqlx::query_as!(
        GenerationRow,
        r#"SELECT job_id, generation, state AS "state: GenerationState", plan, reason, requested_by, measured,
             correction, created_at, started_at, ended_at, cause AS "cause: super::types::FailureCause",
             failed_node_id, failed_at, healing, last_step, resumed_from_step, steps_lost, first_step_at
         FROM job_generations WHERE job_id = ANY($1) ORDER BY job_id, generation"#,
        job_ids
    )
    .fetch_all(conn)
    .await?)
}

/// A job's state, whether a cancel was asked for, and its current generation.
pub async fn job_progress(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<(JobState, bool, i32)> {
    let row = sqlx::query!(
        r#"SELECT state AS "state: JobState", cancel_requested, generation FROM jobs WHERE id = $1"#,
        job_id
    )
    .fetch_one(conn)
    .await?;
    Ok((row.state, row.cancel_requested, row.generation))
}

/// (state, hostname, rank, reason, exit code) of each part of a job's generation, in rank order (a restarted
/// replica's last attempt).
pub async fn part_outcomes(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
) -> StoreResult<Vec<(JobState, String, i32, Option<String>, Option<i32>)>> {
    let rows = sqlx::query!(
        r#"SELECT jn.state AS "state: JobState", n.hostname, jn.node_rank, jn.reason, jn.exit_code FROM job_nodes jn
         JOIN nodes n ON n.id = jn.node_id WHERE jn.job_id = $1 AND jn.generation = $2 AND jn.replaced_by IS NULL
         ORDER BY jn.node_rank"#,
        job_id,
        generation
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.state, r.hostname, r.node_rank, r.reason, r.exit_code)).collect())
}

/// The job's pending generation, if any, and whether it is a restart (it has a cause) rather than a replan.
pub async fn pending_generation(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<Option<(i32, bool)>> {
    let row = sqlx::query!(
        r#"SELECT generation, cause IS NOT NULL AS "restart!" FROM job_generations WHERE job_id = $1 AND state = 'pending'"#,
        job_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.generation, r.restart)))
}

/// Abandon the job's pending generation, if any; returns its number.
pub async fn abandon_pending_generation(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<Option<i32>> {
    Ok(sqlx::query_scalar!(
        "UPDATE job_generations SET state = 'abandoned', ended_at = now() \
         WHERE job_id = $1 AND state = 'pending' RETURNING generation",
        job_id
    )
    .fetch_optional(conn)
    .await?)
}

/// Set a job's state (and its reason, where it has none yet; its start and finish times as the state says).
/// Returns its tenant, its lease and its reason now.
pub async fn set_job_state(
    conn: &mut PgConnection,
    job_id: Uuid,
    next: JobState,
    reason: Option<String>,
) -> StoreResult<(Uuid, Uuid, Option<String>)> {
    let row = sqlx::query!(
        "UPDATE jobs SET state = $2, reason = COALESCE(reason, $3), updated_at = now(), \
             started_at = CASE WHEN $2 = 'running' THEN COALESCE(started_at, now()) ELSE started_at END, \
             finished_at = CASE WHEN $2 IN ('succeeded', 'failed', 'cancelled') THEN now() ELSE NULL END \
         WHERE id = $1 RETURNING tenant_id, lease_id, reason",
        job_id,
        next as _,
        reason
    )
    .fetch_one(conn)
    .await?;
    Ok((row.tenant_id, row.lease_id, row.reason))
}

/// Mark a job's generation started (the first time only: once started, nothing is written).
pub async fn mark_generation_started(conn: &mut PgConnection, job_id: Uuid, generation: i32) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_generations SET started_at = now() WHERE job_id = $1 AND generation = $2 AND started_at IS NULL",
        job_id,
        generation
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A pending generation to start: its plan (as JSON), its parts, and why it was asked for.
pub async fn generation_to_start(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
) -> StoreResult<(Option<serde_json::Value>, Vec<GenerationPart>, String)> {
    let row = sqlx::query!(
        r#"SELECT plan, specs AS "specs: Json<Vec<GenerationPart>>", reason FROM job_generations
         WHERE job_id = $1 AND generation = $2"#,
        job_id,
        generation
    )
    .fetch_one(conn)
    .await?;
    Ok((row.plan, row.specs.0, row.reason))
}

/// The plan a job runs now (as JSON).
pub async fn job_plan(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<Option<serde_json::Value>> {
    Ok(sqlx::query_scalar!("SELECT plan FROM jobs WHERE id = $1", job_id).fetch_one(conn).await?)
}

/// End a job's generation with what it measured.
pub async fn end_generation(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
    measured: Option<serde_json::Value>,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_generations SET state = 'ended', ended_at = now(), measured = $3 WHERE job_id = $1 AND generation = $2",
        job_id,
        generation,
        measured
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Make a job's generation the running one.
pub async fn run_generation(conn: &mut PgConnection, job_id: Uuid, generation: i32) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_generations SET state = 'running' WHERE job_id = $1 AND generation = $2",
        job_id,
        generation
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Move a job to its generation `generation` and that generation's plan; returns its tenant and lease.
pub async fn switch_generation(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
    plan: Option<serde_json::Value>,
) -> StoreResult<(Uuid, Uuid)> {
    let row = sqlx::query!(
        "UPDATE jobs SET generation = $2, plan = $3, updated_at = now() WHERE id = $1 RETURNING tenant_id, lease_id",
        job_id,
        generation,
        plan
    )
    .fetch_one(conn)
    .await?;
    Ok((row.tenant_id, row.lease_id))
}

/// Lock a job to replan it: its state, current generation and stop grace; none when there is no such job.
pub async fn lock_job_for_replan(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<Option<(JobState, i32, i32)>> {
    let row = sqlx::query!(
        r#"SELECT state AS "state: JobState", generation, stop_grace_s FROM jobs WHERE id = $1 FOR UPDATE"#,
        job_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.state, r.generation, r.stop_grace_s)))
}

/// Insert a job's next generation, pending (a replan); none when another one is pending already
/// (`job_generations_one_pending`). Returns its number.
pub async fn insert_pending_generation(
    conn: &mut PgConnection,
    job_id: Uuid,
    plan: &(impl Serialize + Sync),
    parts: &[GenerationPart],
    reason: &str,
    requested_by: Option<Uuid>,
    correction: Option<serde_json::Value>,
) -> StoreResult<Option<i32>> {
    Ok(sqlx::query_scalar!(
        "INSERT INTO job_generations (job_id, generation, state, plan, specs, reason, requested_by, correction) \
         SELECT $1, max(generation) + 1, 'pending', $2, $3, $4, $5, $6 FROM job_generations WHERE job_id = $1 \
         ON CONFLICT (job_id) WHERE state = 'pending' DO NOTHING RETURNING generation",
        job_id,
        Json(plan) as _,
        Json(parts) as _,
        reason,
        requested_by,
        correction
    )
    .fetch_optional(conn)
    .await?)
}

/// Lock the running jobs whose lease ends within their grace (`ends_at - stop_grace_s` has come) and whose
/// running parts have no notice yet, skipping those another replica holds: (job id, the lease's end), at most
/// 500.
pub async fn lock_jobs_due_before_lease_end(conn: &mut PgConnection) -> StoreResult<Vec<(Uuid, DateTime<Utc>)>> {
    let rows = sqlx::query!(
        r#"SELECT j.id, l.ends_at AS "ends_at!" FROM jobs j JOIN leases l ON l.id = j.lease_id
         WHERE l.state = 'active' AND l.ends_at IS NOT NULL AND j.state IN ('assigned', 'running')
             AND j.stop_grace_s > 0 AND l.ends_at - make_interval(secs => j.stop_grace_s) <= now()
             AND EXISTS (SELECT 1 FROM job_nodes jn WHERE jn.job_id = j.id AND jn.generation = j.generation
                 AND jn.state IN ('assigned', 'running') AND jn.notice_at IS NULL)
         ORDER BY j.id LIMIT 500 FOR UPDATE OF j SKIP LOCKED"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.ends_at)).collect())
}

/// Lock the running jobs of these leases whose grace reaches past `seconds_left` less a balance round
/// (`seconds_left <= stop_grace_s + round_s`) and whose running parts have no notice yet, skipping those another
/// replica holds: (job id, stop grace).
pub async fn lock_jobs_due_before_balance_runs_out(
    conn: &mut PgConnection,
    lease_ids: &[Uuid],
    seconds_left: i64,
    round_s: i64,
) -> StoreResult<Vec<(Uuid, i32)>> {
    let due = sqlx::query!(
        "SELECT j.id, j.stop_grace_s FROM jobs j
         WHERE j.lease_id = ANY($1) AND j.state IN ('assigned', 'running') AND j.stop_grace_s > 0
             AND j.stop_grace_s::bigint + $3 >= $2
             AND EXISTS (SELECT 1 FROM job_nodes jn WHERE jn.job_id = j.id AND jn.generation = j.generation
                 AND jn.state IN ('assigned', 'running') AND jn.notice_at IS NULL)
         ORDER BY j.id FOR UPDATE OF j SKIP LOCKED",
        lease_ids,
        seconds_left,
        round_s
    )
    .fetch_all(conn)
    .await?;
    Ok(due.into_iter().map(|d| (d.id, d.stop_grace_s)).collect())
}

/// Tell the current generation's unfinished parts of a job that they will be stopped after `grace_s` seconds:
/// a part no agent has fetched yet is cancelled at once (nothing runs to tell); the others get the notice,
/// which their agents pass on to the processes. A part keeps the first notice it got. The caller holds the
/// job's lock and refreshes it. `parts`: only those of them (a rolling replan's, one node at a time).
pub async fn give_notice(
    conn: &mut PgConnection,
    job_id: Uuid,
    parts: Option<&[Uuid]>,
    reason: &str,
    grace_s: i32,
) -> StoreResult<()> {
    // Runtime SQL: the history fragment `history_push` is shared by every statement that changes a part's state.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE job_nodes SET state = 'cancelled', reason = $2, finished_at = now(), updated_at = now(), history = {} \
         WHERE job_id = $1 AND generation = (SELECT generation FROM jobs WHERE id = $1) AND state = 'pending' \
             AND ($3::uuid[] IS NULL OR id = ANY($3))",
        history_push("'cancelled'", "$2")
    )))
    .bind(job_id)
    .bind(format!("stopped before it started: {reason}"))
    .bind(parts)
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE job_nodes SET notice_reason = $2, notice_grace_s = $3, notice_at = now(), updated_at = now() \
         WHERE job_id = $1 AND generation = (SELECT generation FROM jobs WHERE id = $1) \
             AND state IN ('assigned', 'running') AND notice_at IS NULL AND ($4::uuid[] IS NULL OR id = ANY($4))",
        job_id,
        reason,
        grace_s,
        parts
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Stop a job's unfinished parts: not yet fetched ones are cancelled at once, the others are told to stop.
pub async fn stop_parts(conn: &mut PgConnection, job_id: Uuid, reason: &str) -> StoreResult<()> {
    // Runtime SQL: the history fragment `history_push` is shared by every statement that changes a part's state.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE job_nodes SET state = 'cancelled', reason = $2, finished_at = now(), updated_at = now(), history = {} \
         WHERE job_id = $1 AND state = 'pending'",
        history_push("'cancelled'", "$2")
    )))
    .bind(job_id)
    .bind(reason)
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE job_nodes SET desired = 'cancel', updated_at = now() \
         WHERE job_id = $1 AND state IN ('assigned', 'running') AND desired = 'run'",
        job_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Lock a tenant's job: its state; none when the tenant has no such job.
pub async fn lock_tenant_job(conn: &mut PgConnection, tenant_id: Uuid, job_id: Uuid) -> StoreResult<Option<JobState>> {
    Ok(sqlx::query_scalar!(
        r#"SELECT state AS "state: JobState" FROM jobs WHERE id = $1 AND tenant_id = $2 FOR UPDATE"#,
        job_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?)
}

/// Record that a cancel of the job was asked for.
pub async fn request_cancel(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<()> {
    sqlx::query!("UPDATE jobs SET cancel_requested = true, updated_at = now() WHERE id = $1", job_id)
        .execute(conn)
        .await?;
    Ok(())
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

/// Lock, in id order and skipping those another replica holds, the open jobs with a part no agent has fetched
/// within `bound_s` seconds of its creation.
pub async fn lock_jobs_with_unfetched_parts(conn: &mut PgConnection, bound_s: f64) -> StoreResult<Vec<Uuid>> {
    // Jobs before their nodes, in id order, as every other writer locks them.
    Ok(sqlx::query_scalar!(
        "SELECT j.id FROM jobs j WHERE j.id IN (SELECT job_id FROM job_nodes WHERE state = 'pending' \
                 AND created_at < now() - make_interval(secs => $1)) \
             AND j.state IN ('pending', 'assigned', 'running') \
         ORDER BY j.id FOR UPDATE SKIP LOCKED",
        bound_s
    )
    .fetch_all(conn)
    .await?)
}

/// Fail these jobs' parts that no agent has fetched within `bound_s` seconds of their creation, each with a
/// reason naming the node.
pub async fn fail_unfetched_parts(conn: &mut PgConnection, job_ids: &[Uuid], bound_s: i64) -> StoreResult<()> {
    // Runtime SQL: the history fragment `history_push` is shared by every statement that changes a part's state.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE job_nodes jn SET state = 'failed', finished_at = now(), updated_at = now(), \
             reason = format('the agent of node %s did not fetch its assignment within %s s', n.hostname, $2::bigint), \
             history = {} \
         FROM nodes n WHERE n.id = jn.node_id AND jn.job_id = ANY($1) AND jn.state = 'pending' \
             AND jn.created_at < now() - make_interval(secs => $2::bigint)",
        history_push(
            "'failed'",
            "format('the agent of node %s did not fetch its assignment within %s s', n.hostname, $2::bigint)"
        )
    )))
    .bind(job_ids)
    .bind(bound_s)
    .execute(conn)
    .await?;
    Ok(())
}

/// The node of the first failed part of a job's generation (by rank).
pub async fn first_failed_node(conn: &mut PgConnection, job_id: Uuid, generation: i32) -> StoreResult<Option<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT node_id FROM job_nodes WHERE job_id = $1 AND generation = $2 AND state = 'failed' \
         ORDER BY node_rank LIMIT 1",
        job_id,
        generation
    )
    .fetch_optional(conn)
    .await?)
}

/// Lock a job, skipping it when another transaction holds it: its state; none when held or gone.
pub async fn lock_job_if_running(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<Option<JobState>> {
    Ok(sqlx::query_scalar!(
        r#"SELECT state AS "state: JobState" FROM jobs WHERE id = $1 FOR UPDATE SKIP LOCKED"#,
        job_id
    )
    .fetch_optional(conn)
    .await?)
}

/// The job's stalled parts fail now, with `reason` (their agents stop the processes when the assignments
/// disappear).
pub async fn fail_stalled_parts(conn: &mut PgConnection, job_id: Uuid, reason: &str) -> StoreResult<()> {
    // Runtime SQL: the history fragment `history_push` is shared by every statement that changes a part's state.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE job_nodes SET state = 'failed', reason = $2, finished_at = now(), updated_at = now(), history = {} \
         WHERE job_id = $1 AND failure_cause = 'stalled' AND state IN ('pending', 'assigned', 'running')",
        history_push("'failed'", "$2")
    )))
    .bind(job_id)
    .bind(reason)
    .execute(conn)
    .await?;
    Ok(())
}
