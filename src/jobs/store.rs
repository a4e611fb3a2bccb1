//! Job persistence. Every change to a job's nodes locks the job row first, then recomputes the job's state from
//! its nodes' in the same transaction ([`refresh_job`]), so concurrent reports from several nodes cannot lose an
//! update. Lock order: lease, then job, then its nodes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use gpuplane_protocol::lease_network::lease_address;

use super::launch_specs::LaunchSpec;
use super::protocol::{Assignment, AssignmentList, AssignmentStatus, LeasePeer, NodeLease, StopNotice, clamp_tail};
use super::{
    Desired, GenerationState, Job, JobGeneration, JobNode, JobState, NodeNotice, Retune, RetuneMode, StateChange,
    aggregate,
};
use crate::extract::new_id;
use crate::planner::Plan;
use crate::secrets::store::{read_error, reveal};
use crate::secrets::{Context, Keyring};

use gpuplane_store::jobs::history_push;
pub use gpuplane_store::jobs::{end_jobs_of_leases_ctes, job_end_for_lease};

/// A job about to be stored.
pub struct NewJob<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub lease_id: Uuid,
    pub template: &'a str,
    pub template_version: Option<i32>,
    pub request: serde_json::Value,
    pub plan: Option<&'a Plan>,
    pub created_by: Uuid,
    /// (node id, spec) in rank order.
    pub nodes: Vec<(Uuid, LaunchSpec)>,
    /// Secret environment values: stored apart from the specs, which the API returns.
    pub secrets: &'a BTreeMap<String, String>,
    pub retune: Retune,
    pub stop_grace_s: i32,
}

/// Store a job; its secret values sealed under the keyring's current key.
pub async fn insert_job(conn: &mut PgConnection, keyring: &Keyring, job: NewJob<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH job AS ( \
             INSERT INTO jobs (id, tenant_id, lease_id, template, template_version, request, plan, created_by, \
                 retune, retune_min_gain_pct, stop_grace_s) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id, plan, created_by, created_at) \
         INSERT INTO job_generations (job_id, generation, state, plan, reason, requested_by, created_at) \
         SELECT id, 1, 'running', plan, 'created', created_by, created_at FROM job",
    )
    .bind(job.id)
    .bind(job.tenant_id)
    .bind(job.lease_id)
    .bind(job.template)
    .bind(job.template_version)
    .bind(&job.request)
    .bind(job.plan.map(sqlx::types::Json))
    .bind(job.created_by)
    .bind(job.retune.mode)
    .bind(job.retune.min_gain_pct)
    .bind(job.stop_grace_s)
    .execute(&mut *conn)
    .await?;
    insert_parts(conn, job.id, 1, &job.nodes).await?;
    if !job.secrets.is_empty() {
        let names: Vec<&str> = job.secrets.keys().map(String::as_str).collect();
        let sealed: Vec<_> = job
            .secrets
            .iter()
            .map(|(name, value)| keyring.seal(Context::JobSecret { job_id: job.id, name }, value.as_bytes()))
            .collect();
        let key_ids: Vec<&str> = sealed.iter().map(|s| s.key_id.as_str()).collect();
        let bytes: Vec<&[u8]> = sealed.iter().map(|s| s.bytes.as_slice()).collect();
        sqlx::query(
            "INSERT INTO job_secrets (job_id, name, value_key_id, value_sealed) \
             SELECT $1, u.name, u.key_id, u.sealed FROM UNNEST($2::text[], $3::text[], $4::bytea[]) AS u(name, key_id, sealed)",
        )
        .bind(job.id)
        .bind(&names)
        .bind(&key_ids)
        .bind(&bytes)
        .execute(conn)
        .await?;
    }
    Ok(())
}

/// Insert a generation's parts of a job: (node id, spec) in rank order, pending.
async fn insert_parts(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
    parts: &[(Uuid, LaunchSpec)],
) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = parts.iter().map(|_| new_id()).collect();
    let nodes: Vec<Uuid> = parts.iter().map(|n| n.0).collect();
    let ranks: Vec<i32> = (0..parts.len() as i32).collect();
    let specs: Vec<serde_json::Value> = parts.iter().map(|n| serde_json::to_value(&n.1).unwrap_or_default()).collect();
    sqlx::query(
        "INSERT INTO job_nodes (id, job_id, generation, node_id, node_rank, spec, history) \
         SELECT u.id, $1, $2, u.node, u.rank, u.spec, \
             jsonb_build_array(jsonb_build_object('state', 'pending', 'at', now(), 'reason', NULL)) \
         FROM UNNEST($3::uuid[], $4::uuid[], $5::int[], $6::jsonb[]) AS u(id, node, rank, spec)",
    )
    .bind(job_id)
    .bind(generation)
    .bind(&ids)
    .bind(&nodes)
    .bind(&ranks)
    .bind(&specs)
    .execute(conn)
    .await?;
    Ok(())
}

/// The secret environment values of the given jobs, opened: (job id, name, value).
async fn job_secrets(
    conn: &mut PgConnection,
    keyring: &Keyring,
    job_ids: &[Uuid],
) -> Result<Vec<(Uuid, String, String)>, sqlx::Error> {
    type Row = (Uuid, String, Option<String>, Option<String>, Option<Vec<u8>>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT job_id, name, value, value_key_id, value_sealed FROM job_secrets \
         WHERE job_id = ANY($1) ORDER BY job_id, name",
    )
    .bind(job_ids)
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|(job_id, name, clear, key_id, sealed)| {
            let value = reveal(
                keyring,
                Context::JobSecret { job_id, name: &name },
                clear.as_deref(),
                key_id.as_deref(),
                sealed.as_deref(),
            )
            .map_err(|e| read_error(&format!("secret {name} of job {job_id}"), e))?;
            Ok((job_id, name, value))
        })
        .collect()
}

/// What the service stores of a process's output: every secret value of its job replaced by `***`.
pub fn mask_secrets(text: &str, secrets: &[(String, String)]) -> String {
    secrets
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .fold(text.to_owned(), |text, (_, value)| text.replace(value.as_str(), "***"))
}

#[derive(sqlx::FromRow)]
struct JobRow {
    id: Uuid,
    lease_id: Uuid,
    template: String,
    template_version: Option<i32>,
    state: JobState,
    cancel_requested: bool,
    reason: Option<String>,
    plan: Option<sqlx::types::Json<Plan>>,
    generation: i32,
    retune: RetuneMode,
    retune_min_gain_pct: i32,
    stop_grace_s: i32,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
}

const JOB_COLUMNS: &str = "id, lease_id, template, template_version, state, cancel_requested, reason, plan, \
    generation, retune, retune_min_gain_pct, stop_grace_s, created_at, updated_at, started_at, finished_at";

#[derive(sqlx::FromRow)]
struct NodeRow {
    job_id: Uuid,
    id: Uuid,
    node_id: Uuid,
    hostname: String,
    node_rank: i32,
    state: JobState,
    desired: Desired,
    exit_code: Option<i32>,
    output_tail: sqlx::types::Json<Vec<String>>,
    reason: Option<String>,
    history: sqlx::types::Json<Vec<StateChange>>,
    spec: sqlx::types::Json<LaunchSpec>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    notice_reason: Option<String>,
    notice_grace_s: Option<i32>,
    notice_at: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
struct GenerationRow {
    job_id: Uuid,
    generation: i32,
    state: GenerationState,
    plan: Option<sqlx::types::Json<Plan>>,
    reason: String,
    requested_by: Option<Uuid>,
    measured: Option<serde_json::Value>,
    correction: Option<serde_json::Value>,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    ended_at: Option<DateTime<Utc>>,
}

async fn with_nodes(conn: &mut PgConnection, rows: Vec<JobRow>) -> Result<Vec<Job>, sqlx::Error> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let nodes: Vec<NodeRow> = sqlx::query_as(
        "SELECT jn.job_id, jn.id, jn.node_id, n.hostname, jn.node_rank, jn.state, jn.desired, jn.exit_code, \
             jn.output_tail, jn.reason, jn.history, jn.spec, jn.started_at, jn.finished_at, \
             jn.notice_reason, jn.notice_grace_s, jn.notice_at \
         FROM job_nodes jn JOIN jobs j ON j.id = jn.job_id AND j.generation = jn.generation \
         JOIN nodes n ON n.id = jn.node_id WHERE jn.job_id = ANY($1) ORDER BY jn.job_id, jn.node_rank",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    let generations: Vec<GenerationRow> = sqlx::query_as(
        "SELECT job_id, generation, state, plan, reason, requested_by, measured, correction, created_at, \
             started_at, ended_at \
         FROM job_generations WHERE job_id = ANY($1) ORDER BY job_id, generation",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    let mut steps = super::steps::totals(conn, &ids).await?;
    Ok(rows
        .into_iter()
        .map(|r| Job {
            measured: steps.remove(&r.id).map(|t| super::steps::summarize(&t, r.plan.as_ref().map(|p| &p.0))),
            nodes: nodes
                .iter()
                .filter(|n| n.job_id == r.id)
                .map(|n| JobNode {
                    id: n.id,
                    node_id: n.node_id,
                    hostname: n.hostname.clone(),
                    node_rank: n.node_rank,
                    state: n.state,
                    desired: n.desired,
                    exit_code: n.exit_code,
                    output_tail: n.output_tail.0.clone(),
                    reason: n.reason.clone(),
                    history: n.history.0.clone(),
                    spec: n.spec.0.clone(),
                    started_at: n.started_at,
                    finished_at: n.finished_at,
                    notice: match (&n.notice_reason, n.notice_grace_s, n.notice_at) {
                        (Some(reason), Some(grace_s), Some(at)) => {
                            Some(NodeNotice { reason: reason.clone(), grace_s, at })
                        }
                        _ => None,
                    },
                })
                .collect(),
            generations: generations
                .iter()
                .filter(|g| g.job_id == r.id)
                .map(|g| JobGeneration {
                    generation: g.generation,
                    state: g.state,
                    plan: g.plan.as_ref().map(|p| p.0.clone()),
                    reason: g.reason.clone(),
                    requested_by: g.requested_by,
                    measured: g.measured.clone(),
                    correction: g.correction.clone(),
                    created_at: g.created_at,
                    started_at: g.started_at,
                    ended_at: g.ended_at,
                })
                .collect(),
            generation: r.generation,
            retune: Retune { mode: r.retune, min_gain_pct: r.retune_min_gain_pct },
            stop_grace_s: r.stop_grace_s,
            id: r.id,
            lease_id: r.lease_id,
            template: r.template,
            template_version: r.template_version,
            state: r.state,
            cancel_requested: r.cancel_requested,
            reason: r.reason,
            plan: r.plan.map(|p| p.0),
            created_at: r.created_at,
            updated_at: r.updated_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
        })
        .collect())
}

/// A job; with `tenant_id`, only that tenant's (another tenant's job is "not found").
pub async fn load_job(conn: &mut PgConnection, tenant_id: Option<Uuid>, id: Uuid) -> Result<Option<Job>, sqlx::Error> {
    let rows: Vec<JobRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1 AND ($2::uuid IS NULL OR tenant_id = $2)"
    )))
    .bind(id)
    .bind(tenant_id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(with_nodes(conn, rows).await?.pop())
}

/// A lease's jobs after `after`, oldest first, scoped to the tenant.
pub async fn list_jobs(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
    after: Uuid,
    limit: i64,
) -> Result<Vec<Job>, sqlx::Error> {
    let rows: Vec<JobRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE lease_id = $1 AND tenant_id = $2 AND id > $3 ORDER BY id LIMIT $4"
    )))
    .bind(lease_id)
    .bind(tenant_id)
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    with_nodes(conn, rows).await
}

/// Recompute a job's state from its current generation's nodes' (the job row must be locked by the caller). A
/// job that failed has its remaining nodes stopped: a distributed job with a dead rank cannot go on. A job that
/// has started stays `running` until it ends (a replan's next generation starts as `pending` parts).
///
/// With a replan pending: once every part of the running generation has ended cleanly (stopped on its notice,
/// or finished), the pending generation starts ([`start_pending_generation`]); a part that failed instead
/// fails the job as always, and the replan is abandoned (the last complete checkpoint is what the failed
/// generation left: the runtime replaces `latest` only once every rank has written).
pub async fn refresh_job(conn: &mut PgConnection, job_id: Uuid) -> Result<JobState, sqlx::Error> {
    let (current, cancel_requested, generation): (JobState, bool, i32) =
        sqlx::query_as("SELECT state, cancel_requested, generation FROM jobs WHERE id = $1")
            .bind(job_id)
            .fetch_one(&mut *conn)
            .await?;
    /// (state, hostname, rank, reason, exit code) of each node.
    type NodeOutcome = (JobState, String, i32, Option<String>, Option<i32>);
    let nodes: Vec<NodeOutcome> = sqlx::query_as(
        "SELECT jn.state, n.hostname, jn.node_rank, jn.reason, jn.exit_code FROM job_nodes jn \
         JOIN nodes n ON n.id = jn.node_id WHERE jn.job_id = $1 AND jn.generation = $2 ORDER BY jn.node_rank",
    )
    .bind(job_id)
    .bind(generation)
    .fetch_all(&mut *conn)
    .await?;
    if current.is_terminal() {
        return Ok(current);
    }
    let states: Vec<JobState> = nodes.iter().map(|n| n.0).collect();
    let replan: Option<i32> =
        sqlx::query_scalar("SELECT generation FROM job_generations WHERE job_id = $1 AND state = 'pending'")
            .bind(job_id)
            .fetch_optional(&mut *conn)
            .await?;
    let any_failed = states.contains(&JobState::Failed);
    if let Some(next_generation) = replan.filter(|_| !cancel_requested && !any_failed) {
        if states.iter().all(|s| s.is_terminal()) {
            start_pending_generation(conn, job_id, generation, next_generation).await?;
        }
        // Until then the job runs: its processes are checkpointing and stopping.
        return Ok(current);
    }
    let mut next = aggregate(cancel_requested, &states);
    if current == JobState::Running && matches!(next, JobState::Pending | JobState::Assigned) {
        next = JobState::Running;
    }
    if next == current {
        return Ok(current);
    }
    let mut reason = match next {
        JobState::Failed => nodes.iter().find(|n| n.0 == JobState::Failed).map(|(_, host, rank, reason, code)| {
            let why = match (reason, code) {
                (Some(r), _) => r.clone(),
                (None, Some(c)) => format!("exit code {c}"),
                (None, None) => "failed".into(),
            };
            format!("node {host} (rank {rank}): {why}")
        }),
        JobState::Cancelled if cancel_requested => Some("cancelled by the tenant".to_string()),
        // Stopped otherwise: on a stop notice (the lease's end), by its node.
        JobState::Cancelled => {
            nodes.iter().find_map(|(_, _, _, reason, _)| reason.clone()).or_else(|| Some("cancelled".to_string()))
        }
        _ => None,
    };
    if next.is_terminal() {
        let abandoned: Option<i32> = sqlx::query_scalar(
            "UPDATE job_generations SET state = 'abandoned', ended_at = now() \
             WHERE job_id = $1 AND state = 'pending' RETURNING generation",
        )
        .bind(job_id)
        .fetch_optional(&mut *conn)
        .await?;
        if let (Some(abandoned), JobState::Failed) = (abandoned, next) {
            reason = reason.map(|r| {
                format!("the replan to generation {abandoned} was abandoned: {r}; the last complete checkpoint is kept")
            });
        }
    }
    let (tenant_id, lease_id, reason): (Uuid, Uuid, Option<String>) = sqlx::query_as(
        "UPDATE jobs SET state = $2, reason = COALESCE(reason, $3), updated_at = now(), \
             started_at = CASE WHEN $2 = 'running' THEN COALESCE(started_at, now()) ELSE started_at END, \
             finished_at = CASE WHEN $2 IN ('succeeded', 'failed', 'cancelled') THEN now() ELSE NULL END \
         WHERE id = $1 RETURNING tenant_id, lease_id, reason",
    )
    .bind(job_id)
    .bind(next)
    .bind(reason)
    .fetch_one(&mut *conn)
    .await?;
    if next == JobState::Running {
        sqlx::query(
            "UPDATE job_generations SET started_at = COALESCE(started_at, now()) WHERE job_id = $1 AND generation = $2",
        )
        .bind(job_id)
        .bind(generation)
        .execute(&mut *conn)
        .await?;
    }
    let event_type = match next {
        JobState::Running => Some("job.started"),
        JobState::Succeeded => Some("job.succeeded"),
        JobState::Failed => Some("job.failed"),
        _ => None,
    };
    if let Some(event_type) = event_type {
        let data = serde_json::json!({ "job_id": job_id, "lease_id": lease_id, "reason": reason });
        crate::webhooks::emit(conn, crate::webhooks::Audience::Tenant(tenant_id), event_type, data).await?;
    }
    if next == JobState::Failed {
        stop_nodes(conn, job_id, "another node of the job failed").await?;
    }
    Ok(next)
}

/// The replan's generation starts: the one that ran is ended with what it measured, the pending one's parts are
/// inserted (new assignments, pending, fetched by the agents as any job's) and it becomes the job's plan.
/// `job.replanned` announces it. The job row is locked by the caller.
async fn start_pending_generation(
    conn: &mut PgConnection,
    job_id: Uuid,
    ended: i32,
    next: i32,
) -> Result<(), sqlx::Error> {
    let (plan, specs, reason): (Option<sqlx::types::Json<Plan>>, sqlx::types::Json<Vec<GenerationPart>>, String) =
        sqlx::query_as("SELECT plan, specs, reason FROM job_generations WHERE job_id = $1 AND generation = $2")
            .bind(job_id)
            .bind(next)
            .fetch_one(&mut *conn)
            .await?;
    let old_plan: Option<sqlx::types::Json<Plan>> =
        sqlx::query_scalar("SELECT plan FROM jobs WHERE id = $1").bind(job_id).fetch_one(&mut *conn).await?;
    let measured = super::steps::totals(conn, &[job_id]).await?.remove(&job_id).map(|t| {
        serde_json::to_value(super::steps::summarize(&t, old_plan.as_ref().map(|p| &p.0))).unwrap_or_default()
    });
    sqlx::query(
        "UPDATE job_generations SET state = 'ended', ended_at = now(), measured = $3 WHERE job_id = $1 AND generation = $2",
    )
    .bind(job_id)
    .bind(ended)
    .bind(&measured)
    .execute(&mut *conn)
    .await?;
    sqlx::query("UPDATE job_generations SET state = 'running' WHERE job_id = $1 AND generation = $2")
        .bind(job_id)
        .bind(next)
        .execute(&mut *conn)
        .await?;
    let parts: Vec<(Uuid, LaunchSpec)> = specs.0.into_iter().map(|p| (p.node_id, p.spec)).collect();
    insert_parts(conn, job_id, next, &parts).await?;
    let (tenant_id, lease_id): (Uuid, Uuid) = sqlx::query_as(
        "UPDATE jobs SET generation = $2, plan = $3, updated_at = now() WHERE id = $1 RETURNING tenant_id, lease_id",
    )
    .bind(job_id)
    .bind(next)
    .bind(&plan)
    .fetch_one(&mut *conn)
    .await?;
    tracing::info!(job.id = %job_id, generation = next, "replan: the next generation starts");
    let data = serde_json::json!({
        "job_id": job_id, "lease_id": lease_id, "generation": next, "reason": reason,
        "plan": plan.as_ref().map(|p| super::retune::plan_shape(&p.0)),
    });
    crate::webhooks::emit(conn, crate::webhooks::Audience::Tenant(tenant_id), "job.replanned", data).await?;
    Ok(())
}

/// One node's part of a pending generation, as `job_generations.specs` keeps it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GenerationPart {
    pub node_id: Uuid,
    pub spec: LaunchSpec,
}

/// A replan about to be stored: the plan and every node's spec, rendered for the job's lease.
pub struct NewGeneration<'a> {
    pub job_id: Uuid,
    pub plan: &'a Plan,
    /// (node id, spec) in rank order.
    pub parts: Vec<(Uuid, LaunchSpec)>,
    pub reason: &'a str,
    pub requested_by: Option<Uuid>,
    pub correction: Option<serde_json::Value>,
}

/// Why a replan was not stored.
#[derive(Debug)]
pub enum ReplanError {
    /// The job is not running (its state).
    NotRunning(JobState),
    /// Another replan of the job is pending.
    InProgress,
    Database(sqlx::Error),
}

impl From<sqlx::Error> for ReplanError {
    fn from(err: sqlx::Error) -> Self {
        ReplanError::Database(err)
    }
}

/// Store a replan and give the running generation its stop notice (the job's grace). The job row is locked
/// here; a second replan racing this one fails on `job_generations_one_pending` whichever replica takes it.
/// Returns the pending generation's number.
pub async fn replan(conn: &mut PgConnection, new: NewGeneration<'_>) -> Result<i32, ReplanError> {
    let row: Option<(JobState, i32, i32)> =
        sqlx::query_as("SELECT state, generation, stop_grace_s FROM jobs WHERE id = $1 FOR UPDATE")
            .bind(new.job_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((state, generation, grace_s)) = row else { return Err(ReplanError::NotRunning(JobState::Cancelled)) };
    if state != JobState::Running {
        return Err(ReplanError::NotRunning(state));
    }
    let parts: Vec<GenerationPart> =
        new.parts.into_iter().map(|(node_id, spec)| GenerationPart { node_id, spec }).collect();
    let next: Option<i32> = sqlx::query_scalar(
        "INSERT INTO job_generations (job_id, generation, state, plan, specs, reason, requested_by, correction) \
         SELECT $1, max(generation) + 1, 'pending', $2, $3, $4, $5, $6 FROM job_generations WHERE job_id = $1 \
         ON CONFLICT (job_id) WHERE state = 'pending' DO NOTHING RETURNING generation",
    )
    .bind(new.job_id)
    .bind(sqlx::types::Json(new.plan))
    .bind(sqlx::types::Json(&parts))
    .bind(new.reason)
    .bind(new.requested_by)
    .bind(&new.correction)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(next) = next else { return Err(ReplanError::InProgress) };
    give_notice(conn, new.job_id, &format!("replan to generation {next}"), grace_s).await?;
    tracing::info!(job.id = %new.job_id, from = generation, to = next, "replan: notice given");
    refresh_job(conn, new.job_id).await?;
    Ok(next)
}

/// Give notice to the running jobs whose lease ends within their grace (`ends_at - stop_grace_s` has come) and
/// whose running parts have none yet: the grace is what is left until the lease's end, so the checkpoint fits
/// in the time paid for. Safe with several replicas (SKIP LOCKED). Returns the jobs noticed.
pub async fn notice_before_lease_end(conn: &mut PgConnection) -> Result<Vec<Uuid>, sqlx::Error> {
    let due: Vec<(Uuid, DateTime<Utc>)> = sqlx::query_as(
        "SELECT j.id, l.ends_at FROM jobs j JOIN leases l ON l.id = j.lease_id \
         WHERE l.state = 'active' AND l.ends_at IS NOT NULL AND j.state IN ('assigned', 'running') \
             AND j.stop_grace_s > 0 AND l.ends_at - make_interval(secs => j.stop_grace_s) <= now() \
             AND EXISTS (SELECT 1 FROM job_nodes jn WHERE jn.job_id = j.id AND jn.generation = j.generation \
                 AND jn.state IN ('assigned', 'running') AND jn.notice_at IS NULL) \
         ORDER BY j.id LIMIT 500 FOR UPDATE OF j SKIP LOCKED",
    )
    .fetch_all(&mut *conn)
    .await?;
    for (job_id, ends_at) in &due {
        let left = (*ends_at - Utc::now()).num_seconds().clamp(0, i64::from(i32::MAX)) as i32;
        give_notice(conn, *job_id, &format!("the lease ends at {}", ends_at.format("%Y-%m-%dT%H:%M:%SZ")), left)
            .await?;
        refresh_job(conn, *job_id).await?;
    }
    Ok(due.into_iter().map(|d| d.0).collect())
}

/// Give notice to the running jobs of leases (one tenant's hourly leases) that will be ended for want of balance
/// in about `seconds_left` seconds, where that comes within their grace and the next balance check (`round_s` away) could be too late
/// (`seconds_left <= stop_grace_s + round_s`): each is given what its grace allows of the time left, so its
/// checkpoint fits in the time paid for. A part keeps the first notice it got; jobs another replica holds are
/// left to it (SKIP LOCKED). Returns the jobs noticed.
pub async fn notice_before_balance_runs_out(
    conn: &mut PgConnection,
    lease_ids: &[Uuid],
    seconds_left: i64,
    round_s: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
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
    .fetch_all(&mut *conn)
    .await?;
    for job in &due {
        let grace = i64::from(job.stop_grace_s).min(seconds_left.max(0)) as i32;
        let reason = format!("the balance runs out in about {seconds_left} s");
        give_notice(conn, job.id, &reason, grace).await?;
        refresh_job(conn, job.id).await?;
    }
    Ok(due.into_iter().map(|d| d.id).collect())
}

/// Tell the current generation's unfinished parts of a job that they will be stopped after `grace_s` seconds:
/// a part no agent has fetched yet is cancelled at once (nothing runs to tell); the others get the notice,
/// which their agents pass on to the processes. A part keeps the first notice it got. The caller holds the
/// job's lock and refreshes it.
pub async fn give_notice(conn: &mut PgConnection, job_id: Uuid, reason: &str, grace_s: i32) -> Result<(), sqlx::Error> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE job_nodes SET state = 'cancelled', reason = $2, finished_at = now(), updated_at = now(), history = {} \
         WHERE job_id = $1 AND generation = (SELECT generation FROM jobs WHERE id = $1) AND state = 'pending'",
        history_push("'cancelled'", "$2")
    )))
    .bind(job_id)
    .bind(format!("stopped before it started: {reason}"))
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "UPDATE job_nodes SET notice_reason = $2, notice_grace_s = $3, notice_at = now(), updated_at = now() \
         WHERE job_id = $1 AND generation = (SELECT generation FROM jobs WHERE id = $1) \
             AND state IN ('assigned', 'running') AND notice_at IS NULL",
    )
    .bind(job_id)
    .bind(reason)
    .bind(grace_s)
    .execute(conn)
    .await?;
    Ok(())
}

/// Stop a job's unfinished nodes: not yet fetched ones are cancelled at once, the others are told to stop.
async fn stop_nodes(conn: &mut PgConnection, job_id: Uuid, reason: &str) -> Result<(), sqlx::Error> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE job_nodes SET state = 'cancelled', reason = $2, finished_at = now(), updated_at = now(), history = {} \
         WHERE job_id = $1 AND state = 'pending'",
        history_push("'cancelled'", "$2")
    )))
    .bind(job_id)
    .bind(reason)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "UPDATE job_nodes SET desired = 'cancel', updated_at = now() \
         WHERE job_id = $1 AND state IN ('assigned', 'running') AND desired = 'run'",
    )
    .bind(job_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Ask every node of a job to stop. Returns false when there is no such job of the tenant; a finished job is
/// left as it is.
pub async fn cancel_job(conn: &mut PgConnection, tenant_id: Uuid, job_id: Uuid) -> Result<bool, sqlx::Error> {
    let row: Option<(JobState,)> = sqlx::query_as("SELECT state FROM jobs WHERE id = $1 AND tenant_id = $2 FOR UPDATE")
        .bind(job_id)
        .bind(tenant_id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some((state,)) = row else { return Ok(false) };
    if state.is_terminal() {
        return Ok(true);
    }
    sqlx::query("UPDATE jobs SET cancel_requested = true, updated_at = now() WHERE id = $1")
        .bind(job_id)
        .execute(&mut *conn)
        .await?;
    stop_nodes(conn, job_id, "cancelled before it started").await?;
    refresh_job(conn, job_id).await?;
    Ok(true)
}

/// Fail the job parts that their node's agent has not fetched within `bound` of their creation (the
/// service's `--assignment-pickup-timeout-secs`), each with a reason naming the node; their jobs then fail (and
/// stop their other parts) as when a node reports a failure. Run by the liveness sweeper every second. Returns
/// the jobs it failed.
pub async fn fail_unfetched_assignments(
    conn: &mut PgConnection,
    bound: std::time::Duration,
) -> Result<Vec<Uuid>, sqlx::Error> {
    // Jobs before their nodes, in id order, as every other writer locks them.
    let jobs: Vec<Uuid> = sqlx::query_scalar(
        "SELECT j.id FROM jobs j WHERE j.id IN (SELECT job_id FROM job_nodes WHERE state = 'pending' \
                 AND created_at < now() - make_interval(secs => $1)) \
             AND j.state IN ('pending', 'assigned', 'running') \
         ORDER BY j.id FOR UPDATE SKIP LOCKED",
    )
    .bind(bound.as_secs_f64())
    .fetch_all(&mut *conn)
    .await?;
    if jobs.is_empty() {
        return Ok(jobs);
    }
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
    .bind(&jobs)
    .bind(bound.as_secs() as i64)
    .execute(&mut *conn)
    .await?;
    for job_id in &jobs {
        refresh_job(conn, *job_id).await?;
    }
    Ok(jobs)
}

// Whether a node has an assignment it has not fetched or a cancel it has not applied (the heartbeat's hint)
// is evaluated inside the heartbeat statement itself (`agent_api::routes::store_heartbeat`), at no round trip.

/// Whether the node's credential generation is current.
async fn agent_current(conn: &mut PgConnection, node_id: Uuid, generation: i64) -> Result<bool, sqlx::Error> {
    let (ok,): (bool,) = sqlx::query_as("SELECT EXISTS (SELECT 1 FROM nodes WHERE id = $1 AND agent_generation = $2)")
        .bind(node_id)
        .bind(generation)
        .fetch_one(conn)
        .await?;
    Ok(ok)
}

/// The node's unfinished assignments; the pending ones become `assigned` (delivered). None when the agent's
/// credential generation is stale.
pub async fn fetch_assignments(
    conn: &mut PgConnection,
    keyring: &Keyring,
    node_id: Uuid,
    generation: i64,
) -> Result<Option<AssignmentList>, sqlx::Error> {
    if !agent_current(conn, node_id, generation).await? {
        return Ok(None);
    }
    // Jobs before their nodes, in id order, as every other writer locks them.
    let jobs: Vec<(Uuid,)> = sqlx::query_as(
        "SELECT id FROM jobs WHERE id IN (SELECT job_id FROM job_nodes WHERE node_id = $1 AND state = 'pending') \
         ORDER BY id FOR UPDATE",
    )
    .bind(node_id)
    .fetch_all(&mut *conn)
    .await?;
    if !jobs.is_empty() {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE job_nodes SET state = 'assigned', updated_at = now(), history = {} \
             WHERE node_id = $1 AND state = 'pending'",
            history_push("'assigned'", "NULL")
        )))
        .bind(node_id)
        .execute(&mut *conn)
        .await?;
        for (job_id,) in &jobs {
            refresh_job(conn, *job_id).await?;
        }
    }
    type Row = (Uuid, Uuid, Uuid, Desired, JobState, sqlx::types::Json<LaunchSpec>, Option<String>, Option<i32>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT jn.id, jn.job_id, j.lease_id, jn.desired, jn.state, jn.spec, jn.notice_reason, jn.notice_grace_s \
         FROM job_nodes jn \
         JOIN jobs j ON j.id = jn.job_id \
         WHERE jn.node_id = $1 AND jn.state IN ('pending', 'assigned', 'running') ORDER BY jn.id",
    )
    .bind(node_id)
    .fetch_all(&mut *conn)
    .await?;
    // Secret values reach only the agents of the job's own nodes, in the assignment's environment.
    let job_ids: Vec<Uuid> = rows.iter().map(|r| r.1).collect();
    let secrets = job_secrets(conn, keyring, &job_ids).await?;
    let assignments = rows
        .into_iter()
        .map(|(job_node_id, job_id, lease_id, desired, state, spec, notice_reason, notice_grace_s)| {
            let mut spec = spec.0;
            for (_, name, value) in secrets.iter().filter(|s| s.0 == job_id) {
                spec.env.insert(name.clone(), value.clone());
            }
            let notice = notice_reason
                .zip(notice_grace_s)
                .map(|(reason, grace_s)| StopNotice { reason, grace_s: u32::try_from(grace_s).unwrap_or(0) });
            Assignment { job_node_id, job_id, lease_id, desired, state, spec, notice }
        })
        .collect();
    let leases: Vec<(Uuid, Vec<i32>)> = sqlx::query_as(
        "SELECT g.held_by, array_agg(g.idx ORDER BY g.idx) FROM gpus g \
         WHERE g.node_id = $1 AND g.held_by IS NOT NULL GROUP BY g.held_by ORDER BY g.held_by",
    )
    .bind(node_id)
    .fetch_all(&mut *conn)
    .await?;
    let lease_ids: Vec<Uuid> = leases.iter().map(|l| l.0).collect();
    type PeerRow = (Uuid, Uuid, String, Option<i32>, Option<String>, Vec<i32>);
    let peers: Vec<PeerRow> = sqlx::query_as(
        "SELECT l.id, n.id, n.address, n.echo_port, n.lease_subnet, array_agg(g.idx ORDER BY g.idx) FROM leases l \
         JOIN gpus g ON g.id = ANY(l.gpu_ids) AND g.held_by = l.id JOIN nodes n ON n.id = g.node_id \
         WHERE l.id = ANY($1) AND g.node_id <> $2 GROUP BY l.id, n.id ORDER BY l.id, n.id",
    )
    .bind(&lease_ids)
    .bind(node_id)
    .fetch_all(&mut *conn)
    .await?;
    let leases = leases
        .into_iter()
        .map(|(lease_id, gpu_indices)| NodeLease {
            lease_id,
            gpu_indices,
            peers: peers
                .iter()
                .filter(|p| p.0 == lease_id)
                .map(|p| LeasePeer {
                    node_id: p.1,
                    address: p.2.clone(),
                    echo_port: p.3,
                    lease_address: lease_address(p.4.as_deref(), &p.5).map(|a| a.to_string()),
                })
                .collect(),
        })
        .collect();
    let environments = crate::environments::routes::node_environments(conn, node_id).await?;
    Ok(Some(AssignmentList { assignments, leases, environments }))
}

/// Why a status report was not recorded.
pub enum ReportError {
    /// The agent's credential generation is stale.
    StaleCredential,
    /// No such assignment on this node.
    NotFound,
    Database(sqlx::Error),
}

impl From<sqlx::Error> for ReportError {
    fn from(err: sqlx::Error) -> Self {
        ReportError::Database(err)
    }
}

/// Record a node's report. Idempotent, and forward only: a report that would move the state back is ignored
/// (a terminal state is final), though a finished node without an exit code (ended with its lease) gets the one
/// reported. Returns the node's state and desired state as recorded now.
pub async fn report_status(
    conn: &mut PgConnection,
    keyring: &Keyring,
    node_id: Uuid,
    generation: i64,
    job_node_id: Uuid,
    report: &AssignmentStatus,
) -> Result<(JobState, Desired), ReportError> {
    if !agent_current(conn, node_id, generation).await? {
        return Err(ReportError::StaleCredential);
    }
    let job: Option<(Uuid,)> = sqlx::query_as("SELECT job_id FROM job_nodes WHERE id = $1 AND node_id = $2")
        .bind(job_node_id)
        .bind(node_id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some((job_id,)) = job else { return Err(ReportError::NotFound) };
    sqlx::query("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE").bind(job_id).execute(&mut *conn).await?;
    let (current, exit_code): (JobState, Option<i32>) =
        sqlx::query_as("SELECT state, exit_code FROM job_nodes WHERE id = $1 FOR UPDATE")
            .bind(job_node_id)
            .fetch_one(&mut *conn)
            .await?;
    let next: JobState = report.state.into();
    let secrets: Vec<(String, String)> =
        job_secrets(conn, keyring, &[job_id]).await?.into_iter().map(|(_, name, value)| (name, value)).collect();
    let masked: Vec<String> = report.output_tail.iter().map(|line| mask_secrets(line, &secrets)).collect();
    let tail = sqlx::types::Json(clamp_tail(&masked));
    let reason = report.reason.as_ref().map(|r| mask_secrets(r, &secrets).chars().take(500).collect::<String>());
    if next.rank() > current.rank() {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE job_nodes SET state = $2, exit_code = $3, output_tail = $4, reason = COALESCE($5, reason), \
                 updated_at = now(), history = {}, \
                 started_at = CASE WHEN $2 = 'running' THEN now() ELSE started_at END, \
                 finished_at = CASE WHEN $2 IN ('succeeded', 'failed', 'cancelled') THEN now() ELSE NULL END \
             WHERE id = $1",
            history_push("$2", "$5")
        )))
        .bind(job_node_id)
        .bind(next)
        .bind(report.exit_code)
        .bind(&tail)
        .bind(&reason)
        .execute(&mut *conn)
        .await?;
        refresh_job(conn, job_id).await?;
    } else if (next == current && next == JobState::Running) || (current.is_terminal() && exit_code.is_none()) {
        // More output from a running process; or the exit code of one whose node ended with its lease.
        sqlx::query(
            "UPDATE job_nodes SET output_tail = $2, exit_code = COALESCE(exit_code, $3), updated_at = now() WHERE id = $1",
        )
        .bind(job_node_id)
        .bind(&tail)
        .bind(report.exit_code.filter(|_| next.is_terminal()))
        .execute(&mut *conn)
        .await?;
    }
    let now: (JobState, Desired) =
        sqlx::query_as("SELECT state, desired FROM job_nodes WHERE id = $1").bind(job_node_id).fetch_one(conn).await?;
    Ok(now)
}
