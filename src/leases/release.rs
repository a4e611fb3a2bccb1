//! Releases with notice: how a lease whose jobs are running is released, whoever asks (the tenant, or the idle
//! release of [`super::idle`]).
//!
//! A release of a lease without a running job is immediate ([`super::lifecycle::end_lease`]). A lease with open jobs
//! gives them their stop notice first ([`begin`], under the lease's row lock): each job its own `stop_grace_s`
//! (a replan waiting for a job is abandoned: the job is stopping), and the release's deadline is set to the
//! longest grace plus one heartbeat (the agents learn of a notice at their next heartbeat and count the grace
//! from then). The lease stays `active`, and billed, until [`finish_due`] ends it: as soon as its jobs have
//! stopped, or at the deadline, whichever comes first (jobs still open then end with the lease, as any release
//! ends them). The lease sweeper runs [`finish_due`] every second, so a lease is billed at most about a second
//! past its last job's stop. A release under way is never taken back, and asking again changes nothing.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use gpuplane_store::leases::release as stored;

use super::lifecycle;
use gpuplane_store::leases::ending::FreedPools;
use gpuplane_store::leases::events::NewEvent;
use gpuplane_store::leases::{Actor, LeaseState};
/// Releases finished per statement.
const BATCH: i64 = 500;

/// A release about to begin: what it tells the jobs and records.
pub struct Release<'a> {
    /// The jobs' notice, e.g. `lease released by the tenant`.
    pub notice: &'a str,
    /// The lease's end reason once it is released.
    pub end_reason: &'a str,
    /// The lease event that records the beginning (`release_requested`, `idle_release`).
    pub event_kind: &'a str,
    /// How that event's reason begins, e.g. `released by the tenant`.
    pub why: &'a str,
    pub actor: &'a Actor,
}

/// Begin the release of a lease whose row the transaction holds (`FOR UPDATE`): every open job is given its
/// stop notice, the deadline and what the release will record are set, and the event is written.
pub async fn begin(
    conn: &mut PgConnection,
    lease_id: Uuid,
    release: &Release<'_>,
    heartbeat: Duration,
) -> Result<(), sqlx::Error> {
    // Jobs in id order, as every other writer locks them.
    let jobs = stored::lock_open_jobs(conn, lease_id).await?;
    let mut waits_s: i64 = 0;
    let mut noticed = Vec::new();
    for (job_id, grace_s) in &jobs {
        stored::abandon_pending_generation(conn, *job_id).await?;
        gpuplane_store::jobs::give_notice(conn, *job_id, None, release.notice, *grace_s).await?;
        let state = crate::jobs::lifecycle::refresh_job(conn, *job_id).await?;
        if !state.is_terminal() {
            waits_s = waits_s.max(i64::from(*grace_s));
            noticed.push(serde_json::json!({ "job_id": job_id, "stop_grace_s": grace_s }));
        }
    }
    let wait = if noticed.is_empty() { 0.0 } else { waits_s as f64 + heartbeat.as_secs_f64() };
    let deadline: DateTime<Utc> =
        stored::start_release(conn, lease_id, wait, release.end_reason, &release.actor.label()).await?;
    let reason = if noticed.is_empty() {
        format!("{}: released now (no job runs)", release.why)
    } else {
        format!(
            "{}: {} given their stop notice; released once they stop, by {} at the latest",
            release.why,
            if noticed.len() == 1 { "1 job".to_string() } else { format!("{} jobs", noticed.len()) },
            deadline.to_rfc3339()
        )
    };
    let event = NewEvent::new(release.event_kind, Some(LeaseState::Active), Some(LeaseState::Active), release.actor)
        .reason(&reason)
        .detail(serde_json::json!({ "deadline": deadline, "jobs": noticed }));
    gpuplane_store::leases::events::record_event(conn, lease_id, event).await?;
    tracing::info!(lease.id = %lease_id, jobs = noticed.len(), %deadline, why = release.why, "release: begun");
    Ok(())
}

/// Release the leases whose release has begun and whose open jobs have all stopped, or whose deadline has passed,
/// with the reason and actor recorded when it began; then start what their GPUs let start in the pools' queues.
/// Several replicas share them (SKIP LOCKED). Returns the leases released.
pub async fn finish_due(db: &PgPool) -> Result<Vec<Uuid>, sqlx::Error> {
    let mut released = Vec::new();
    loop {
        let mut tx = db.begin().await?;
        let due = stored::lock_due_releases(&mut tx, BATCH).await?;
        let count = due.len();
        let mut freed = FreedPools::default();
        for stored::DueRelease { id: lease_id, release_reason: reason, release_actor: actor } in due {
            let actor = Actor::from_label(&actor);
            let ended = gpuplane_store::leases::ending::end_lease(
                &mut tx,
                lease_id,
                None,
                LeaseState::Released,
                &reason,
                &actor,
                None,
            )
            .await?;
            if ended.is_some() {
                tracing::info!(lease.id = %lease_id, %reason, "release: lease released");
                released.push(lease_id);
            }
            freed.note(ended.as_ref());
        }
        tx.commit().await?;
        lifecycle::start(freed, db).await?;
        if count < BATCH as usize {
            return Ok(released);
        }
    }
}

/// What a tenant's release found when the one-statement release wrote nothing.
pub enum Asked {
    /// The lease has running jobs: their notice was given now, or already (the release was under way).
    Noticed,
    /// Not live, or not the tenant's: nothing to do.
    NotLive,
    /// Live without a job to notice after all (its last job just ended): release it at once.
    ReleaseNow,
}

/// A tenant's release of a lease with jobs to notice ([`gpuplane_store::leases::release::has_jobs_to_notice_sql`]): begin it, in one transaction
/// under the lease's row lock. Asking while the release is under way changes nothing.
pub async fn ask(
    db: &PgPool,
    tenant_id: Uuid,
    lease_id: Uuid,
    actor: &Actor,
    heartbeat: Duration,
) -> Result<Asked, sqlx::Error> {
    let mut tx = db.begin().await?;
    let row = stored::lock_for_release(&mut tx, tenant_id, lease_id).await?;
    let asked = match row {
        None => Asked::NotLive,
        Some((true, _)) => Asked::Noticed,
        Some((false, false)) => Asked::ReleaseNow,
        Some((false, true)) => {
            let release = Release {
                notice: "lease released by the tenant",
                end_reason: TENANT_RELEASE_REASON,
                event_kind: "release_requested",
                why: TENANT_RELEASE_REASON,
                actor,
            };
            begin(&mut tx, lease_id, &release, heartbeat).await?;
            Asked::Noticed
        }
    };
    tx.commit().await?;
    Ok(asked)
}

/// The end reason of a lease the tenant released.
pub const TENANT_RELEASE_REASON: &str = "released by the tenant";
