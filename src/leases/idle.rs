//! Idle leases. Every round ([`sweep_once`]) each active lease is judged over the service's idle window
//! (`--lease-idle-after-minutes`) by the utilization rule of `jobs::insights` ([`insights::idle`]): idle when
//! every one of its GPUs reported in the window and even the busiest one averaged under the idle threshold
//! (`--lease-idle-gpu-util-percent`). A lease with a GPU that reports nothing (an external node has no agent) is
//! never idle.
//!
//! Leases are judged once a minute.
//!
//! An idle spell is a run of idle verdicts whose windows overlap: it starts at the start of its first window
//! (`idle_since`), is announced once (lease event `idle`, webhook `lease.idle`), and ends at the first verdict
//! that is not idle (event `active_again`, webhook `lease.active_again`); a verdict whose window does not reach
//! back to the spell's last recorded one (written at most every half window, so the service was away about that
//! long) starts the spell anew, unannounced.
//!
//! A lease with `idle_release_after_minutes` is released once a spell has lasted that long: in the transaction
//! of the verdict that finds it so, its release begins as every release of a lease with jobs does
//! ([`release::begin`]: the jobs' stop notice, the deadline), and it ends as soon as those jobs have stopped or at
//! the deadline ([`release::finish_due`]). Without open jobs that is the same round. Safe with several
//! replicas: one judges at a time (an advisory lock), every change is made under the lease's row lock, and the
//! releases under way are taken with SKIP LOCKED.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use gpuplane_store::leases::idle::{self as stored, Candidate};

use super::release::{self, Release};
use crate::config::Settings;
use crate::error::FieldError;
use crate::jobs::insights::{self, Measured};
use gpuplane_store::leases::events::NewEvent;
use gpuplane_store::leases::{Actor, LeaseState};

/// The shortest and longest `idle_release_after_minutes` (10 minutes, a week).
pub const MIN_RELEASE_AFTER_MINUTES: i32 = 10;
pub const MAX_RELEASE_AFTER_MINUTES: i32 = 10_080;

/// Leases judged, or releases finished, per statement.
const BATCH: i64 = 500;

/// A field error unless `minutes` is a valid `idle_release_after_minutes`.
pub fn check_release_after(minutes: i32) -> Result<(), FieldError> {
    if (MIN_RELEASE_AFTER_MINUTES..=MAX_RELEASE_AFTER_MINUTES).contains(&minutes) {
        Ok(())
    } else {
        Err(FieldError::new(
            "idle_release_after_minutes",
            format!("minutes, between {MIN_RELEASE_AFTER_MINUTES} and {MAX_RELEASE_AFTER_MINUTES}"),
        ))
    }
}

/// What one round did, by lease.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Round {
    /// Idle spells that began (announced).
    pub idle: Vec<Uuid>,
    /// Idle spells that ended (announced).
    pub active_again: Vec<Uuid>,
    /// Idle releases that began: their jobs were given notice.
    pub releasing: Vec<Uuid>,
    /// Leases whose release under way ended this round ([`release::finish_due`]).
    pub released: Vec<Uuid>,
}

/// "5", "2.5": a threshold as people write it.
fn percent(p: f64) -> String {
    format!("{p}%")
}

/// The lease's end reason when it is released after `minutes` idle.
pub fn release_reason(minutes: i64, below_percent: f64) -> String {
    format!("released: idle for {minutes} minutes under {} GPU utilization", percent(below_percent))
}

/// One round: judge the active leases (and begin the releases that are due), then finish the releases whose
/// jobs have stopped or whose deadline has passed (which the lease sweeper also does every second).
pub async fn sweep_once(db: &PgPool, settings: &Settings) -> anyhow::Result<Round> {
    let mut round = Round::default();
    judge_all(db, settings, &mut round).await?;
    round.released = release::finish_due(db).await?;
    Ok(round)
}

/// Judge every active lease that has been active a whole window and is not being released, on one connection
/// holding the judging lock (another replica judging now: nothing to do).
async fn judge_all(db: &PgPool, settings: &Settings, round: &mut Round) -> anyhow::Result<()> {
    let mut conn = db.acquire().await?;
    let locked = stored::try_lock_judging(&mut conn).await?;
    if !locked {
        return Ok(());
    }
    let result = async {
        let mut after = Uuid::nil();
        loop {
            // Leases with a GPU on an external node are left out (see `candidates`).
            let due = stored::candidates(&mut conn, after, settings.idle.window.as_secs_f64(), BATCH).await?;
            for lease in &due {
                judge(&mut conn, settings, lease, round).await?;
            }
            match due.last() {
                Some(last) if due.len() == BATCH as usize => after = last.id,
                _ => return Ok::<_, anyhow::Error>(()),
            }
        }
    }
    .await;
    stored::unlock_judging(&mut conn).await?;
    result
}

/// One lease: measure it; when the verdict changes something (a spell begins or ends, is recorded again, or has
/// lasted long enough for the lease's release), write that in one transaction under the lease's row lock, from
/// the row as it is then.
async fn judge(
    conn: &mut PgConnection,
    settings: &Settings,
    lease: &Candidate,
    round: &mut Round,
) -> anyhow::Result<()> {
    let window_s = settings.idle.window.as_secs() as i64;
    let below = settings.idle.below_percent;
    let measured = super::insights::measure_lease(conn, lease.id, lease.starts_at, window_s).await?;
    let verdict = insights::idle(&measured, window_s, below);
    let unchanged = match verdict {
        Some(_) => lease.in_spell && lease.recorded_recently && !lease.release_due,
        None => !lease.in_spell,
    };
    if unchanged {
        return Ok(());
    }
    let lease_id = lease.id;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let locked = stored::lock_for_verdict(&mut tx, lease_id).await?;
    // Ended, being released, or locked by a release or a change right now: judged again next round.
    let Some(stored::Locked {
        idle_since,
        idle_checked_at: checked_at,
        idle_release_after_minutes: release_after,
        now,
    }) = locked
    else {
        return Ok(());
    };
    let window_min = window_s / 60;
    match verdict {
        Some(busiest) => {
            let window_start = now - chrono::Duration::seconds(window_s);
            // The spell goes on when this window reaches back to its last recorded verdict; else it starts with
            // this window.
            let since = match (idle_since, checked_at) {
                (Some(since), Some(checked)) if checked >= window_start => since,
                _ => window_start,
            };
            stored::record_idle(&mut tx, lease_id, since, now).await?;
            if idle_since.is_none() {
                let reason = format!(
                    "idle: every GPU under {} utilization over the last {window_min} minutes (the busiest at \
                     {busiest:.1}%)",
                    percent(below)
                );
                let detail = verdict_detail(&measured, settings, since, release_after);
                let event = NewEvent::new("idle", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
                    .reason(&reason)
                    .detail(detail);
                gpuplane_store::leases::events::record_event(&mut tx, lease_id, event).await?;
                round.idle.push(lease_id);
            }
            if let Some(minutes) = release_after
                && since <= now - chrono::Duration::minutes(minutes.into())
            {
                let minutes = (now - since).num_minutes();
                let notice = format!(
                    "lease released: idle for {minutes} minutes under {} GPU utilization",
                    percent(settings.idle.below_percent)
                );
                let release = Release {
                    notice: &notice,
                    end_reason: &release_reason(minutes, settings.idle.below_percent),
                    event_kind: "idle_release",
                    why: &format!("idle for {minutes} minutes"),
                    actor: &Actor::System,
                };
                release::begin(&mut tx, lease_id, &release, settings.heartbeat_interval).await?;
                round.releasing.push(lease_id);
            }
        }
        None => {
            if let Some(since) = idle_since {
                stored::clear_idle(&mut tx, lease_id).await?;
                let reason = match measured.busiest_gpu_util {
                    Some(busiest) if measured.gpus_reporting == measured.gpus => format!(
                        "active again: the busiest GPU averaged {busiest:.1}% over the last {window_min} minutes, \
                         not under {}",
                        percent(below)
                    ),
                    _ => format!(
                        "no longer known to be idle: {} of its {} GPUs reported over the last {window_min} minutes",
                        measured.gpus_reporting, measured.gpus
                    ),
                };
                let detail = verdict_detail(&measured, settings, since, release_after);
                let event =
                    NewEvent::new("active_again", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
                        .reason(&reason)
                        .detail(detail);
                gpuplane_store::leases::events::record_event(&mut tx, lease_id, event).await?;
                round.active_again.push(lease_id);
            }
        }
    }
    tx.commit().await?;
    Ok(())
}

/// The figures behind a verdict, as the events (and their webhooks) carry them.
fn verdict_detail(
    m: &Measured,
    settings: &Settings,
    idle_since: DateTime<Utc>,
    release_after: Option<i32>,
) -> serde_json::Value {
    serde_json::json!({
        "idle_since": idle_since,
        "threshold_percent": settings.idle.below_percent,
        "window_s": settings.idle.window.as_secs(),
        "busiest_gpu_util": m.busiest_gpu_util,
        "avg_gpu_util": m.avg_gpu_util,
        "gpus_reporting": m.gpus_reporting,
        "gpus": m.gpus,
        "samples": m.samples,
        "idle_release_after_minutes": release_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_after_bounds_and_reason() {
        assert!(check_release_after(10).is_ok() && check_release_after(10_080).is_ok());
        for bad in [i32::MIN, -1, 0, 9, 10_081, i32::MAX] {
            assert_eq!(check_release_after(bad).unwrap_err().field, "idle_release_after_minutes", "{bad}");
        }
        assert_eq!(release_reason(42, 5.0), "released: idle for 42 minutes under 5% GPU utilization");
        assert_eq!(release_reason(30, 2.5), "released: idle for 30 minutes under 2.5% GPU utilization");
    }
}
