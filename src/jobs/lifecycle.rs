//! Jobs over the store (`gpuplane_store::jobs`, where their statements are). Every change to a job's nodes locks
//! the job row first, then recomputes the job's state from its nodes' in the same transaction ([`refresh_job`]),
//! so concurrent reports from several nodes cannot lose an update. Lock order: lease, then job, then its nodes.

use std::collections::BTreeMap;

use chrono::Utc;
use sqlx::PgConnection;
use uuid::Uuid;

use gpuplane_protocol::lease_network::lease_address;
use gpuplane_protocol::volumes::{LeaseVolume, VolumeKind};
use gpuplane_store::jobs as stored;

use super::launch_specs::LaunchSpec;
use super::policy::policy_of;
use super::protocol::{Assignment, AssignmentList, AssignmentStatus, LeasePeer, NodeLease, StopNotice, clamp_tail};
use super::restarts::{FailureCause, Verdict, decide};
use super::{Desired, Job, JobGeneration, JobState, Retune, aggregate};
use crate::db::decode_json;
use crate::extract::new_id;
use crate::planner::Plan;
use crate::secrets::sealing::{read_error, reveal};
use crate::secrets::{Context, Keyring};
use chrono::DateTime;

use gpuplane_store::jobs::replicas;
use gpuplane_store::jobs::{GenerationPart, give_notice};

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
    pub restart: &'a super::restarts::RestartPolicy,
}

/// Store a job; its secret values sealed under the keyring's current key.
pub async fn insert_job(conn: &mut PgConnection, keyring: &Keyring, job: NewJob<'_>) -> Result<(), sqlx::Error> {
    let row = stored::NewJobRow {
        id: job.id,
        tenant_id: job.tenant_id,
        lease_id: job.lease_id,
        template: job.template,
        template_version: job.template_version,
        request: &job.request,
        plan: job.plan.map(serde_json::to_value).transpose().map_err(|e| sqlx::Error::Encode(Box::new(e)))?,
        created_by: job.created_by,
        retune: job.retune.mode,
        retune_min_gain_pct: job.retune.min_gain_pct,
        stop_grace_s: job.stop_grace_s,
        restart_policy: serde_json::to_value(job.restart).map_err(|e| sqlx::Error::Encode(Box::new(e)))?,
    };
    stored::insert_job(conn, &row).await?;
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
        stored::insert_job_secrets(conn, job.id, &names, &key_ids, &bytes).await?;
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
    stored::insert_parts(conn, job_id, generation, &ids, &nodes, &ranks, &specs).await?;
    Ok(())
}

/// The secret environment values of the given jobs, opened: (job id, name, value).
async fn job_secrets(
    conn: &mut PgConnection,
    keyring: &Keyring,
    job_ids: &[Uuid],
) -> Result<Vec<(Uuid, String, String)>, sqlx::Error> {
    let rows = stored::job_secret_rows(conn, job_ids).await?;
    rows.into_iter()
        .map(|stored::SecretRow { job_id, name, value: clear, value_key_id: key_id, value_sealed: sealed }| {
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

/// One job's secret environment values, opened: (name, value), for [`mask_secrets`].
pub async fn secrets_of(
    conn: &mut PgConnection,
    keyring: &Keyring,
    job_id: Uuid,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    Ok(job_secrets(conn, keyring, &[job_id]).await?.into_iter().map(|(_, name, value)| (name, value)).collect())
}

/// What the service stores of a process's output: every secret value of its job replaced by `***`.
pub fn mask_secrets(text: &str, secrets: &[(String, String)]) -> String {
    secrets
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .fold(text.to_owned(), |text, (_, value)| text.replace(value.as_str(), "***"))
}

async fn with_nodes(conn: &mut PgConnection, rows: Vec<stored::JobRow>) -> Result<Vec<Job>, sqlx::Error> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let nodes = stored::current_parts(conn, &ids).await?;
    let generations = stored::generation_rows(conn, &ids).await?;
    let mut steps = super::steps::totals(conn, &ids).await?;
    let mut saved: std::collections::HashMap<Uuid, super::JobInsights> = std::collections::HashMap::new();
    for (job_id, insights, at) in stored::saved_insights(conn, &ids).await? {
        saved.insert(job_id, super::JobInsights { at, insights: decode_json(insights)? });
    }
    let mut jobs = Vec::with_capacity(rows.len());
    for r in rows {
        let plan: Option<Plan> = r.plan.map(decode_json).transpose()?;
        let mut job_generations = Vec::new();
        for g in generations.iter().filter(|g| g.job_id == r.id) {
            job_generations.push(JobGeneration {
                generation: g.generation,
                state: g.state,
                plan: g.plan.clone().map(decode_json).transpose()?,
                reason: g.reason.clone(),
                requested_by: g.requested_by,
                measured: g.measured.clone(),
                correction: g.correction.clone(),
                created_at: g.created_at,
                started_at: g.started_at,
                ended_at: g.ended_at,
                cause: g.cause,
                failed_node_id: g.failed_node_id,
                failed_at: g.failed_at,
                healing: g.healing.clone(),
                last_step: g.last_step,
                resumed_from_step: g.resumed_from_step,
                steps_lost: g.steps_lost,
                first_step_at: g.first_step_at,
            });
        }
        let parts: Vec<super::JobNode> = nodes.iter().filter(|n| n.0 == r.id).map(|n| n.1.clone()).collect();
        jobs.push(Job {
            measured: steps.remove(&r.id).map(|t| super::steps::summarize(&t, plan.as_ref())),
            insights: saved.remove(&r.id),
            progress: super::progress_of(&parts),
            nodes: parts,
            generations: job_generations,
            generation: r.generation,
            retune: Retune { mode: r.retune, min_gain_pct: r.retune_min_gain_pct },
            stop_grace_s: r.stop_grace_s,
            restart: decode_json(r.restart_policy)?,
            restarts: r.restarts,
            id: r.id,
            lease_id: r.lease_id,
            template: r.template,
            template_version: r.template_version,
            state: r.state,
            cancel_requested: r.cancel_requested,
            reason: r.reason,
            plan,
            created_at: r.created_at,
            updated_at: r.updated_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
        });
    }
    Ok(jobs)
}

/// A job; with `tenant_id`, only that tenant's (another tenant's job is "not found").
pub async fn load_job(conn: &mut PgConnection, tenant_id: Option<Uuid>, id: Uuid) -> Result<Option<Job>, sqlx::Error> {
    let rows = stored::job_rows_by_id(conn, tenant_id, id).await?;
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
    let rows = stored::lease_job_rows(conn, tenant_id, lease_id, after, limit).await?;
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
    let (current, cancel_requested, generation) = stored::job_progress(conn, job_id).await?;
    // (state, hostname, rank, reason, exit code) of each node.
    let nodes = stored::part_outcomes(conn, job_id, generation).await?;
    if current.is_terminal() {
        return Ok(current);
    }
    let mut states: Vec<JobState> = nodes.iter().map(|n| n.0).collect();
    let serves = gpuplane_store::services::job_serves(conn, job_id).await?;
    let pending = stored::pending_generation(conn, job_id).await?;
    // A service's replica that failed leaves the others serving (the gateway passes it over; a rolling replan's
    // new replicas count among them) and runs again after its backoff when its policy says so: its job fails, or
    // restarts, only once no part is left.
    if serves && states.contains(&JobState::Failed) && replicas::any_open(conn, job_id).await? {
        states.retain(|s| *s != JobState::Failed);
        if pending.is_none() && !cancel_requested {
            super::replicas::decide_restarts(conn, job_id, generation).await?;
        }
    }
    let any_failed = states.contains(&JobState::Failed);
    // A restart pending: the job runs on while the failed generation's parts end; the recovery worker starts it.
    let restart_pending = pending.is_some_and(|(_, restart)| restart);
    if restart_pending && !cancel_requested {
        return Ok(current);
    }
    // A failed part restarts the job where its policy says so.
    let mut limit_note = None;
    if any_failed && !cancel_requested && !restart_pending {
        let failed_reason = failure_reason(&nodes).unwrap_or_else(|| "failed".into());
        match on_failure(conn, job_id, generation, &failed_reason, Utc::now()).await? {
            Outcome::Restarting => return Ok(current),
            Outcome::Fails(note) => limit_note = note,
        }
    }
    // (A restart that did not open changed nothing: `pending` stands.)
    let replan = pending.map(|(generation, _)| generation);
    if let Some(next_generation) = replan.filter(|_| !cancel_requested && !any_failed) {
        // A service rolls over its nodes; any other job stops every part first.
        let ended = match serves {
            true => {
                let grace_s = stored::lock_job_for_replan(conn, job_id).await?.map_or(0, |(_, _, grace_s)| grace_s);
                super::replicas::roll(conn, job_id, generation, next_generation, grace_s).await?
            }
            false => states.iter().all(|s| s.is_terminal()),
        };
        if ended {
            start_pending_generation(conn, job_id, generation, next_generation).await?;
        }
        // Until then the job runs: its processes are checkpointing and stopping.
        return Ok(current);
    }
    let mut next = aggregate(cancel_requested, &states);
    if current == JobState::Running && matches!(next, JobState::Pending | JobState::Assigned) {
        next = JobState::Running;
    }
    // A generation starts when one of its parts runs: the job's first with the job, a replan's while the job
    // stays running (its start is not a change of the job's state).
    if current == JobState::Running && generation > 1 && states.contains(&JobState::Running) {
        stored::mark_generation_started(conn, job_id, generation).await?;
    }
    if next == current {
        return Ok(current);
    }
    let mut reason = match next {
        JobState::Failed => failure_reason(&nodes).map(|r| match &limit_note {
            Some(note) => format!("{note}: {r}"),
            None => r,
        }),
        JobState::Cancelled if cancel_requested => Some("cancelled by the tenant".to_string()),
        // Stopped otherwise: on a stop notice (the lease's end), by its node.
        JobState::Cancelled => {
            nodes.iter().find_map(|(_, _, _, reason, _)| reason.clone()).or_else(|| Some("cancelled".to_string()))
        }
        _ => None,
    };
    if next.is_terminal() {
        // The generation that ran ends with the job, with what it measured (not left `running`).
        end_generation(conn, job_id, generation).await?;
        let abandoned = stored::abandon_pending_generation(conn, job_id).await?;
        if let (Some(abandoned), JobState::Failed) = (abandoned, next) {
            reason = reason.map(|r| {
                format!("the replan to generation {abandoned} was abandoned: {r}; the last complete checkpoint is kept")
            });
        }
    }
    let (tenant_id, lease_id, reason) = stored::set_job_state(conn, job_id, next, reason).await?;
    if next == JobState::Running {
        stored::mark_generation_started(conn, job_id, generation).await?;
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
        stored::stop_parts(conn, job_id, "another node of the job failed").await?;
    }
    Ok(next)
}

/// A part's outcome: (state, hostname, rank, reason, exit code).
type PartOutcome = (JobState, String, i32, Option<String>, Option<i32>);

/// Why a generation failed: its first failed part's node, rank and reason (or exit code).
fn failure_reason(nodes: &[PartOutcome]) -> Option<String> {
    nodes.iter().find(|n| n.0 == JobState::Failed).map(|(_, host, rank, reason, code)| {
        let why = match (reason, code) {
            (Some(r), _) => r.clone(),
            (None, Some(c)) => format!("exit code {c}"),
            (None, None) => "failed".into(),
        };
        format!("node {host} (rank {rank}): {why}")
    })
}

/// A restart's generation starts (its plan and parts set, the job row locked by the caller): the failed one
/// ends with what it measured, the new parts are inserted (pending, fetched by the agents as any job's) and its
/// plan becomes the job's. `job.restarted` follows with its first step ([`super::recovery::note_resumed`]).
pub async fn start_restart_generation(
    conn: &mut PgConnection,
    job_id: Uuid,
    ended: i32,
    next: i32,
) -> Result<(), sqlx::Error> {
    switch_to_generation(conn, job_id, ended, next).await?;
    tracing::info!(job.id = %job_id, generation = next, "restart: the next generation starts");
    Ok(())
}

/// The job moves from generation `ended` to its pending generation `next` (a replan's or a restart's): the one
/// that ran ends with what it measured, the pending one's parts are inserted (new assignments, pending, fetched
/// by the agents as any job's) and it becomes the job's plan. Returns its plan (as JSON), why it was asked for,
/// and the job's tenant and lease.
async fn switch_to_generation(
    conn: &mut PgConnection,
    job_id: Uuid,
    ended: i32,
    next: i32,
) -> Result<(Option<serde_json::Value>, String, Uuid, Uuid), sqlx::Error> {
    let (plan, specs, reason) = stored::generation_to_start(conn, job_id, next).await?;
    end_generation(conn, job_id, ended).await?;
    stored::run_generation(conn, job_id, next).await?;
    let parts: Vec<(Uuid, LaunchSpec)> = specs.into_iter().map(|p| (p.node_id, p.spec)).collect();
    insert_parts(conn, job_id, next, &parts).await?;
    let (tenant_id, lease_id) = stored::switch_generation(conn, job_id, next, plan.clone()).await?;
    Ok((plan, reason, tenant_id, lease_id))
}

/// Fail a job that cannot go on (the job row locked by the caller): a pending restart that could not be planned.
/// Its pending generation is abandoned, its open parts stopped, `job.failed` announces it.
pub async fn fail_job(conn: &mut PgConnection, job_id: Uuid, reason: &str) -> Result<(), sqlx::Error> {
    let (_, _, generation) = stored::job_progress(conn, job_id).await?;
    stored::abandon_pending_generation(conn, job_id).await?;
    end_generation(conn, job_id, generation).await?;
    let (tenant_id, lease_id, reason) =
        stored::set_job_state(conn, job_id, JobState::Failed, Some(reason.into())).await?;
    stored::stop_parts(conn, job_id, "the job failed").await?;
    let data = serde_json::json!({ "job_id": job_id, "lease_id": lease_id, "reason": reason });
    crate::webhooks::emit(conn, crate::webhooks::Audience::Tenant(tenant_id), "job.failed", data).await?;
    Ok(())
}

/// The job's running generation ends, with the steps it measured against its plan.
async fn end_generation(conn: &mut PgConnection, job_id: Uuid, generation: i32) -> Result<(), sqlx::Error> {
    let plan: Option<Plan> = stored::job_plan(conn, job_id).await?.map(decode_json).transpose()?;
    let measured = super::steps::totals(conn, &[job_id])
        .await?
        .remove(&job_id)
        .map(|t| serde_json::to_value(super::steps::summarize(&t, plan.as_ref())).unwrap_or_default());
    stored::end_generation(conn, job_id, generation, measured).await?;
    Ok(())
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
    let (plan, reason, tenant_id, lease_id) = switch_to_generation(conn, job_id, ended, next).await?;
    let plan: Option<Plan> = plan.map(decode_json).transpose()?;
    tracing::info!(job.id = %job_id, generation = next, "replan: the next generation starts");
    let data = serde_json::json!({
        "job_id": job_id, "lease_id": lease_id, "generation": next, "reason": reason,
        "plan": plan.as_ref().map(super::retune::plan_shape),
    });
    crate::webhooks::emit(conn, crate::webhooks::Audience::Tenant(tenant_id), "job.replanned", data).await?;
    Ok(())
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

impl From<gpuplane_store::StoreError> for ReplanError {
    fn from(err: gpuplane_store::StoreError) -> Self {
        ReplanError::Database(err.into())
    }
}

/// Store a replan and give the running generation its stop notice (the job's grace). The job row is locked
/// here; a second replan racing this one fails on `job_generations_one_pending` whichever replica takes it.
/// Returns the pending generation's number.
pub async fn replan(conn: &mut PgConnection, new: NewGeneration<'_>) -> Result<i32, ReplanError> {
    let row = stored::lock_job_for_replan(conn, new.job_id).await?;
    let Some((state, generation, grace_s)) = row else { return Err(ReplanError::NotRunning(JobState::Cancelled)) };
    if state != JobState::Running {
        return Err(ReplanError::NotRunning(state));
    }
    let parts: Vec<GenerationPart> =
        new.parts.into_iter().map(|(node_id, spec)| GenerationPart { node_id, spec }).collect();
    let next = stored::insert_pending_generation(
        conn,
        new.job_id,
        new.plan,
        &parts,
        new.reason,
        new.requested_by,
        new.correction,
    )
    .await?;
    let Some(next) = next else { return Err(ReplanError::InProgress) };
    // A service's replicas are noticed one node at a time, as its roll goes (in `refresh_job`).
    if !gpuplane_store::services::job_serves(conn, new.job_id).await? {
        give_notice(conn, new.job_id, None, &format!("replan to generation {next}"), grace_s).await?;
    }
    tracing::info!(job.id = %new.job_id, from = generation, to = next, "replan: notice given");
    refresh_job(conn, new.job_id).await?;
    Ok(next)
}

/// Replicas reported ready: the rolling replans among whose new replicas they are go on (each job locked and
/// refreshed in a transaction of its own).
pub async fn continue_rolls(db: &sqlx::PgPool, ready_parts: &[Uuid]) -> Result<(), sqlx::Error> {
    if ready_parts.is_empty() {
        return Ok(());
    }
    let mut conn = db.acquire().await?;
    let jobs = replicas::rolling_jobs_of(&mut conn, ready_parts).await?;
    drop(conn);
    for job_id in jobs {
        let mut tx = db.begin().await?;
        stored::lock_job(&mut tx, job_id).await?;
        refresh_job(&mut tx, job_id).await?;
        tx.commit().await?;
    }
    Ok(())
}

/// Give notice to the running jobs whose lease ends within their grace (`ends_at - stop_grace_s` has come) and
/// whose running parts have none yet: the grace is what is left until the lease's end, so the checkpoint fits
/// in the time paid for. Safe with several replicas (SKIP LOCKED). Returns the jobs noticed.
pub async fn notice_before_lease_end(conn: &mut PgConnection) -> Result<Vec<Uuid>, sqlx::Error> {
    let due = stored::lock_jobs_due_before_lease_end(conn).await?;
    for (job_id, ends_at) in &due {
        let left = (*ends_at - Utc::now()).num_seconds().clamp(0, i64::from(i32::MAX)) as i32;
        give_notice(conn, *job_id, None, &format!("the lease ends at {}", ends_at.format("%Y-%m-%dT%H:%M:%SZ")), left)
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
    let due = stored::lock_jobs_due_before_balance_runs_out(conn, lease_ids, seconds_left, round_s).await?;
    for (job_id, stop_grace_s) in &due {
        let grace = i64::from(*stop_grace_s).min(seconds_left.max(0)) as i32;
        let reason = format!("the balance runs out in about {seconds_left} s");
        give_notice(conn, *job_id, None, &reason, grace).await?;
        refresh_job(conn, *job_id).await?;
    }
    Ok(due.into_iter().map(|d| d.0).collect())
}

/// Ask every node of a job to stop. Returns false when there is no such job of the tenant; a finished job is
/// left as it is.
pub async fn cancel_job(conn: &mut PgConnection, tenant_id: Uuid, job_id: Uuid) -> Result<bool, sqlx::Error> {
    let Some(state) = stored::lock_tenant_job(conn, tenant_id, job_id).await? else { return Ok(false) };
    if state.is_terminal() {
        return Ok(true);
    }
    stored::request_cancel(conn, job_id).await?;
    stored::stop_parts(conn, job_id, "cancelled before it started").await?;
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
    let jobs = stored::lock_jobs_with_unfetched_parts(conn, bound.as_secs_f64()).await?;
    if jobs.is_empty() {
        return Ok(jobs);
    }
    stored::fail_unfetched_parts(conn, &jobs, bound.as_secs() as i64).await?;
    for job_id in &jobs {
        refresh_job(conn, *job_id).await?;
    }
    Ok(jobs)
}

// Whether a node has an assignment it has not fetched or a cancel it has not applied (the heartbeat's hint)
// is evaluated inside the heartbeat statement itself (`store_heartbeat` of the agents' API), at no round trip.

/// The node's unfinished assignments; the pending ones become `assigned` (delivered). None when the agent's
/// credential generation is stale.
pub async fn fetch_assignments(
    conn: &mut PgConnection,
    keyring: &Keyring,
    node_id: Uuid,
    generation: i64,
) -> Result<Option<AssignmentList>, sqlx::Error> {
    if !stored::agent_current(conn, node_id, generation).await? {
        return Ok(None);
    }
    let jobs = stored::lock_jobs_with_pending_parts(conn, node_id).await?;
    if !jobs.is_empty() {
        stored::mark_parts_assigned(conn, node_id).await?;
        for job_id in &jobs {
            refresh_job(conn, *job_id).await?;
        }
    }
    let rows = stored::open_assignments(conn, node_id).await?;
    // Secret values reach only the agents of the job's own nodes, in the assignment's environment.
    let job_ids: Vec<Uuid> = rows.iter().map(|r| r.job_id).collect();
    let secrets = job_secrets(conn, keyring, &job_ids).await?;
    let assignments = rows
        .into_iter()
        .map(|row| {
            let stored::AssignmentRow {
                job_node_id,
                job_id,
                lease_id,
                desired,
                state,
                mut spec,
                notice_reason,
                notice_grace_s,
            } = row;
            for (_, name, value) in secrets.iter().filter(|s| s.0 == job_id) {
                spec.env.insert(name.clone(), value.clone());
            }
            let notice = notice_reason
                .zip(notice_grace_s)
                .map(|(reason, grace_s)| StopNotice { reason, grace_s: u32::try_from(grace_s).unwrap_or(0) });
            Assignment { job_node_id, job_id, lease_id, desired, state, spec, notice }
        })
        .collect();
    let leases = stored::node_lease_gpus(conn, node_id).await?;
    let lease_ids: Vec<Uuid> = leases.iter().map(|l| l.0).collect();
    let peers = stored::lease_peers(conn, &lease_ids, node_id).await?;
    let volumes = gpuplane_store::volumes::volumes_of_leases(conn, &lease_ids).await?;
    let leases = leases
        .into_iter()
        .map(|(lease_id, gpu_indices)| NodeLease {
            lease_id,
            gpu_indices,
            volumes: volumes
                .iter()
                .filter(|v| v.lease_id == lease_id)
                .map(|v| LeaseVolume {
                    volume_id: v.volume_id,
                    kind: VolumeKind::parse(&v.kind).unwrap_or(VolumeKind::Host),
                    mount: v.mount_name.clone(),
                    read_only: v.read_only,
                })
                .collect(),
            peers: peers
                .iter()
                .filter(|p| p.lease_id == lease_id)
                .map(|p| LeasePeer {
                    node_id: p.node_id,
                    address: p.address.clone(),
                    echo_port: p.echo_port,
                    lease_address: lease_address(p.lease_subnet.as_deref(), &p.gpu_indices).map(|a| a.to_string()),
                })
                .collect(),
        })
        .collect();
    let environments = gpuplane_store::environments::node_environments(conn, node_id).await?;
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

/// What an agent is answered when its report is not recorded.
impl From<ReportError> for crate::error::ApiError {
    fn from(err: ReportError) -> Self {
        match err {
            ReportError::StaleCredential => super::problems::stale_credential(),
            ReportError::NotFound => crate::error::ApiError::NotFound("assignment"),
            ReportError::Database(err) => err.into(),
        }
    }
}

impl From<sqlx::Error> for ReportError {
    fn from(err: sqlx::Error) -> Self {
        ReportError::Database(err)
    }
}

impl From<gpuplane_store::StoreError> for ReportError {
    fn from(err: gpuplane_store::StoreError) -> Self {
        ReportError::Database(err.into())
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
    if !stored::agent_current(conn, node_id, generation).await? {
        return Err(ReportError::StaleCredential);
    }
    let Some(job_id) = stored::assignment_job(conn, job_node_id, node_id).await? else {
        return Err(ReportError::NotFound);
    };
    stored::lock_job(conn, job_id).await?;
    let (current, exit_code) = stored::lock_part(conn, job_node_id).await?;
    let next: JobState = report.state.into();
    let secrets = secrets_of(conn, keyring, job_id).await?;
    let masked: Vec<String> = report.output_tail.iter().map(|line| mask_secrets(line, &secrets)).collect();
    let tail = clamp_tail(&masked);
    let reason = report.reason.as_ref().map(|r| mask_secrets(r, &secrets).chars().take(500).collect::<String>());
    if let Some(progress) = report.progress {
        let part = gpuplane_protocol::jobs::PartProgress { job_node_id, progress };
        gpuplane_store::jobs::agents::record_progress(conn, node_id, &[part]).await?;
    }
    if next.rank() > current.rank() {
        stored::advance_part(conn, job_node_id, next, report.exit_code, &tail, reason.as_deref()).await?;
        refresh_job(conn, job_id).await?;
    } else if (next == current && next == JobState::Running) || (current.is_terminal() && exit_code.is_none()) {
        // More output from a running process; or the exit code of one whose node ended with its lease.
        stored::update_part_output(conn, job_node_id, &tail, report.exit_code.filter(|_| next.is_terminal())).await?;
    }
    Ok(stored::part_state(conn, job_node_id).await?)
}

/// What [`on_failure`] did.
pub enum Outcome {
    /// A restart is pending: the job runs on.
    Restarting,
    /// The job fails; with the policy's word when its restarts are used up.
    Fails(Option<String>),
}

/// A part of the job's current generation failed (the job row is locked): open a restart if its policy says
/// so, abandoning a pending replan (the restart plans anew) and stopping the parts still running. The cause is
/// the one the service detected (a lost node, a failed GPU, a stall), else the process died; `failed_at` when
/// (a stall: its last step; a lost node: its last heartbeat, set by the healing).
pub async fn on_failure(
    conn: &mut PgConnection,
    job_id: Uuid,
    generation: i32,
    failed_reason: &str,
    failed_at: DateTime<Utc>,
) -> Result<Outcome, sqlx::Error> {
    let detected = gpuplane_store::jobs::recovery::detected_failure(conn, job_id, generation).await?;
    let cause = detected.map_or(FailureCause::ProcessDied, |d| d.0);
    let failed_node = match detected {
        Some((_, node)) => Some(node),
        None => stored::first_failed_node(conn, job_id, generation).await?,
    };
    let (policy, restarts) = policy_of(conn, job_id).await?;
    match decide(&policy, restarts, cause) {
        Verdict::Fail => Ok(Outcome::Fails(None)),
        Verdict::LimitReached(why) => Ok(Outcome::Fails(Some(why))),
        Verdict::Restart { backoff_s } => {
            stored::abandon_pending_generation(conn, job_id).await?;
            let reason =
                format!("restart {} of {} ({}): {failed_reason}", restarts + 1, policy.max_restarts, cause.as_str());
            let reason: String = reason.chars().take(1000).collect();
            let new = gpuplane_store::jobs::recovery::NewRestart {
                job_id,
                cause,
                node_id: failed_node,
                failed_at,
                reason: &reason,
                backoff_s,
            };
            let Some(next) = gpuplane_store::jobs::recovery::open_restart(conn, &new).await? else {
                // Another generation is pending after all: it is the restart.
                return Ok(Outcome::Restarting);
            };
            stored::stop_parts(conn, job_id, &format!("restarting as generation {next}: {failed_reason}")).await?;
            tracing::warn!(job.id = %job_id, generation = next, cause = cause.as_str(), backoff_s, "job restarting");
            Ok(Outcome::Restarting)
        }
    }
}
