//! Liveness: nodes whose agent stops heartbeating become `unreachable`, then `offline` with their leases
//! `interrupted` at the last heartbeat (so billing never charges past it). Each transition is one UPDATE
//! guarded by the previous state, so on several replicas exactly one performs it.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::leases::store::{NewEvent, end_lease, record_event};
use crate::leases::{Actor, LeaseState};

/// Mark silent nodes unreachable, then offline; interrupt the leases on offline nodes. Returns the pools
/// whose capacity changed.
pub async fn sweep(
    db: &PgPool,
    unreachable_after: std::time::Duration,
    offline_after: std::time::Duration,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let unreachable: Vec<(Uuid, String, DateTime<Utc>)> = sqlx::query_as(
        "UPDATE nodes SET liveness = 'unreachable', updated_at = now() \
         WHERE agent_managed AND liveness = 'ready' AND last_heartbeat_at < now() - make_interval(secs => $1) \
         RETURNING id, hostname, last_heartbeat_at",
    )
    .bind(unreachable_after.as_secs_f64())
    .fetch_all(&mut *tx)
    .await?;
    for (node_id, hostname, last) in &unreachable {
        tracing::warn!(node.id = %node_id, %hostname, "node unreachable: no heartbeat since {last}");
        let reason = format!("node {hostname} unreachable: no heartbeat since {last}");
        for lease_id in active_leases_on(&mut tx, *node_id).await? {
            let event =
                NewEvent::new("node_unreachable", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
                    .reason(&reason)
                    .detail(serde_json::json!({ "node_id": node_id, "last_heartbeat_at": last }));
            record_event(&mut tx, lease_id, event).await?;
        }
    }
    let offline: Vec<(Uuid, Uuid, String, DateTime<Utc>)> = sqlx::query_as(
        "UPDATE nodes SET liveness = 'offline', updated_at = now() \
         WHERE agent_managed AND liveness <> 'offline' AND last_heartbeat_at < now() - make_interval(secs => $1) \
         RETURNING id, pool_id, hostname, last_heartbeat_at",
    )
    .bind(offline_after.as_secs_f64())
    .fetch_all(&mut *tx)
    .await?;
    let mut pools = Vec::new();
    for (node_id, pool_id, hostname, last) in &offline {
        tracing::warn!(node.id = %node_id, %hostname, "node offline: interrupting its leases");
        let reason = format!("node {hostname} offline: no heartbeat since {last}");
        for lease_id in active_leases_on(&mut tx, *node_id).await? {
            end_lease(&mut tx, lease_id, None, LeaseState::Interrupted, &reason, &Actor::System, Some(*last)).await?;
        }
        if !pools.contains(pool_id) {
            pools.push(*pool_id);
        }
    }
    tx.commit().await?;
    Ok(pools)
}

async fn active_leases_on(conn: &mut sqlx::PgConnection, node_id: Uuid) -> Result<Vec<Uuid>, sqlx::Error> {
    let rows: Vec<(Uuid,)> = sqlx::query_as(
        "SELECT DISTINCT l.id FROM leases l JOIN lease_gpus lg ON lg.lease_id = l.id \
         WHERE lg.node_id = $1 AND lg.released_at IS NULL AND l.state = 'active' ORDER BY l.id",
    )
    .bind(node_id)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

/// Delete telemetry older than the retention, in bounded batches.
pub async fn purge_telemetry(db: &PgPool, retention: std::time::Duration) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    loop {
        let done = sqlx::query(
            "DELETE FROM gpu_samples WHERE ctid = ANY (ARRAY(SELECT ctid FROM gpu_samples \
             WHERE at < now() - make_interval(secs => $1) LIMIT 10000))",
        )
        .bind(retention.as_secs_f64())
        .execute(db)
        .await?;
        total += done.rows_affected();
        if done.rows_affected() < 10000 {
            return Ok(total);
        }
    }
}

/// Run the liveness sweep every second and the telemetry purge every ten minutes, until `shutdown`.
pub async fn run(state: crate::app::AppState, shutdown: tokio_util::sync::CancellationToken) {
    let mut timer = tokio::time::interval(std::time::Duration::from_secs(1));
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = timer.tick() => {}
        }
        ticks += 1;
        let settings = &state.settings;
        match sweep(&state.db, settings.unreachable_after, settings.offline_after).await {
            Ok(pools) => {
                for pool_id in pools {
                    crate::leases::lifecycle::kick_queue(&state, pool_id);
                }
            }
            Err(err) => tracing::warn!(error = %err, "liveness sweep failed"),
        }
        if ticks % 600 == 1
            && let Err(err) = purge_telemetry(&state.db, settings.telemetry_retention).await
        {
            tracing::warn!(error = %err, "telemetry purge failed");
        }
    }
}
