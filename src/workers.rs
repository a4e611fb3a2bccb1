//! The background workers: every loop the service runs beside its requests, each a round of its domain's work
//! on one shared loop ([`every`]): the interval, the stop on shutdown, the error to the log and the
//! `gpuplane_sweeper_runs_total` / `gpuplane_sweeper_duration_seconds` metrics under the worker's name.
//! Several replicas run them side by side: every round is written to be safe beside another replica's.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::state::AppState;

/// What a round asks of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Wait for the next interval.
    Wait,
    /// More is due now (a full batch was done): go again at once.
    Again,
}

/// Run `round` every `interval` (the first at once) until `shutdown`, under the worker's `name`: each round's
/// outcome and duration go to the metrics, a failed one to the log, and the next round comes all the same.
/// `round` gets the round's number, from 1.
pub async fn every<F, Fut>(name: &'static str, interval: Duration, shutdown: CancellationToken, mut round: F)
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = anyhow::Result<Pace>>,
{
    let mut timer = tokio::time::interval(interval);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut number: u64 = 0;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = timer.tick() => {}
        }
        number += 1;
        let started = Instant::now();
        let result = round(number).await;
        crate::observability::record_sweep(name, started, &result);
        match result {
            Ok(Pace::Again) => timer.reset_immediately(),
            Ok(Pace::Wait) => {}
            Err(err) => tracing::warn!(worker = name, error = format!("{err:#}"), "background round failed"),
        }
    }
}

/// Start every background worker; they stop when `shutdown` is cancelled.
pub fn spawn_background(state: &AppState, shutdown: &CancellationToken) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(leases(state.clone(), Duration::from_secs(1), shutdown.clone())),
        tokio::spawn(node_vacuum(state.clone(), shutdown.clone())),
        tokio::spawn(liveness(state.clone(), shutdown.clone())),
        tokio::spawn(assignment_pickup(state.clone(), shutdown.clone())),
        tokio::spawn(telemetry_upkeep(state.clone(), shutdown.clone())),
        tokio::spawn(retention(state.clone(), shutdown.clone())),
        tokio::spawn(metering(state.clone(), Duration::from_secs(15), shutdown.clone())),
        tokio::spawn(credentials(state.clone(), Duration::from_secs(30), shutdown.clone())),
        tokio::spawn(webhook_delivery(state.clone(), shutdown.clone())),
        tokio::spawn(alerts(state.clone(), shutdown.clone())),
        tokio::spawn(retune(state.clone(), shutdown.clone())),
        tokio::spawn(recovery(state.clone(), shutdown.clone())),
        tokio::spawn(idle_leases(state.clone(), shutdown.clone())),
        tokio::spawn(idle_volumes(state.clone(), shutdown.clone())),
    ]
}

/// Leases: expiry, stop notices before the end, releases under way, the pools' queues (and, once every 600
/// rounds, expired idempotency records).
pub async fn leases(state: AppState, interval: Duration, shutdown: CancellationToken) {
    every("leases", interval, shutdown, |n| {
        let state = state.clone();
        async move {
            crate::leases::sweeper::sweep_once(&state, n % 600 == 1).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}

/// The `nodes` table's own vacuum ([`crate::leases::sweeper::vacuum_nodes`] says why).
pub async fn node_vacuum(state: AppState, shutdown: CancellationToken) {
    every("node_vacuum", crate::leases::sweeper::NODE_VACUUM_INTERVAL, shutdown, |_| {
        let db = state.db.clone();
        async move {
            crate::leases::sweeper::vacuum_nodes(&db).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}

/// Node liveness (unreachable, offline, back) every second; the fleet is judged against the minimum
/// driver/CUDA versions first, as those may have changed since the last start.
pub async fn liveness(state: AppState, shutdown: CancellationToken) {
    match crate::inventory::readiness::evaluate_all(&state.db, &state.settings).await {
        Ok(0) => {}
        Ok(not_ready) => tracing::warn!(not_ready, "nodes below the minimum driver/CUDA versions are not ready"),
        Err(err) => tracing::warn!(error = %err, "judging the nodes' driver/CUDA versions failed"),
    }
    every("liveness", Duration::from_secs(1), shutdown, |_| {
        let state = state.clone();
        async move {
            crate::leases::lifecycle::wake(
                crate::agent_api::liveness::sweep(&state.db, &state.settings).await?,
                &state.db,
            );
            Ok(Pace::Wait)
        }
    })
    .await
}

/// Jobs whose parts no agent fetched within the pickup bound fail, naming the node.
pub async fn assignment_pickup(state: AppState, shutdown: CancellationToken) {
    every("assignment_pickup", Duration::from_secs(1), shutdown, |_| {
        let state = state.clone();
        async move {
            crate::agent_api::liveness::fail_unfetched_assignments(&state).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}

/// Telemetry partitions and rollups, once a minute.
pub async fn telemetry_upkeep(state: AppState, shutdown: CancellationToken) {
    every("telemetry_upkeep", Duration::from_secs(60), shutdown, |_| {
        let state = state.clone();
        async move {
            crate::agent_api::rollups::upkeep(&state.db, &state.settings).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}

/// What the service keeps only so long: ended jobs' log lines, unused uploads and services' old request counts, a
/// batch at a time.
pub async fn retention(state: AppState, shutdown: CancellationToken) {
    every("retention", Duration::from_secs(300), shutdown, |_| {
        let state = state.clone();
        async move {
            let more_logs = crate::jobs::logs::expire(&state.db, state.settings.job_log_retention).await?;
            let more_uploads = crate::uploads::expire(&state.db, state.settings.upload_retention).await?;
            let retention = state.settings.telemetry_minute_retention;
            let more_minutes = crate::services::expire_request_minutes(&state.db, retention).await?;
            Ok(if more_logs || more_uploads || more_minutes { Pace::Again } else { Pace::Wait })
        }
    })
    .await
}

/// Metering, then the balances it moved: notices, warnings and ends for balances running out.
pub async fn metering(state: AppState, interval: Duration, shutdown: CancellationToken) {
    every("metering", interval, shutdown, |_| {
        let db = state.db.clone();
        async move {
            let mut tenants = crate::billing::metering::meter_once(&db).await?;
            for touched in crate::volumes::metering::meter_once(&db).await? {
                if !tenants.contains(&touched) {
                    tenants.push(touched);
                }
            }
            crate::leases::lifecycle::wake(
                crate::billing::metering::enforce_balances(&db, &tenants, interval).await?,
                &db,
            );
            Ok(Pace::Wait)
        }
    })
    .await
}

/// Keys past their grace are marked revoked; expired console sessions are deleted.
pub async fn credentials(state: AppState, interval: Duration, shutdown: CancellationToken) {
    every("credentials", interval, shutdown, |_| {
        let db = state.db.clone();
        async move {
            crate::auth::key_lifecycle::revoke_expired_keys(&db).await?;
            crate::auth::sessions::delete_expired(&db).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}

/// Webhook deliveries that are due, a batch at a time, at once again while batches come full.
pub async fn webhook_delivery(state: AppState, shutdown: CancellationToken) {
    let worker = Arc::new(crate::webhooks::delivery::Worker::new(
        state.db.clone(),
        state.settings.webhooks.clone(),
        state.settings.keyring.clone(),
    ));
    every("webhook_delivery", state.settings.webhooks.poll_interval, shutdown, |_| {
        let worker = worker.clone();
        async move {
            let delivered = worker.deliver_due(crate::webhooks::delivery::BATCH).await?;
            Ok(if delivered > 0 { Pace::Again } else { Pace::Wait })
        }
    })
    .await
}

/// The alerts judged over time (latency, utilization, ...).
pub async fn alerts(state: AppState, shutdown: CancellationToken) {
    let settings = state.settings.webhooks.clone();
    every("alerts", settings.alert_interval, shutdown, |_| {
        let (db, settings) = (state.db.clone(), settings.clone());
        async move {
            crate::webhooks::alerts::check_once(&db, &settings).await?;
            crate::leases::insights::check_utilization(&db).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}

/// Running jobs with retune on, judged by what they measured.
pub async fn retune(state: AppState, shutdown: CancellationToken) {
    every("retune", crate::jobs::retuning::INTERVAL, shutdown, |_| {
        let state = state.clone();
        async move {
            crate::jobs::retuning::judge_all(&state).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}

/// Failed jobs: stalls detected, due restarts planned and started (`jobs::recovery`).
pub async fn recovery(state: AppState, shutdown: CancellationToken) {
    every("recovery", Duration::from_secs(1), shutdown, |_| {
        let state = state.clone();
        async move {
            crate::jobs::recovery::round(&state).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}

/// Volumes detached past their idle policy: noticed, then deleted.
pub async fn idle_volumes(state: AppState, shutdown: CancellationToken) {
    every("idle_volumes", Duration::from_secs(60), shutdown, |_| {
        let db = state.db.clone();
        async move {
            crate::volumes::idle::sweep_once(&db).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}

/// Idle leases: announced, and released where the tenant opted in.
pub async fn idle_leases(state: AppState, shutdown: CancellationToken) {
    every("idle_leases", state.settings.idle.judge_every, shutdown, |_| {
        let state = state.clone();
        async move {
            crate::leases::idle::sweep_once(&state.db, &state.settings).await?;
            Ok(Pace::Wait)
        }
    })
    .await
}
