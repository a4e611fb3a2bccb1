//! Liveness: nodes whose agent stops heartbeating become `unreachable`, then `offline` with their leases
//! `interrupted` at the last heartbeat (so billing never charges past it). Each transition is one UPDATE
//! guarded by the previous state, so on several replicas exactly one performs it.
//!
//! Silence is only counted while the control plane was there to hear it. Every sweep stamps the
//! `control_plane_presence` row; a gap in the stamps longer than the heartbeat interval (no replica running,
//! or none reaching the database) moves `resumed_at` to now, and a node's silence is measured from
//! GREATEST(last heartbeat, resumed_at): after an outage every agent gets the full unreachable limit to come
//! back. Interruptions still end leases at the real last heartbeat.
//!
//! When at least `fleet_silence_threshold` of a pool's agent nodes (and at least `fleet_silence_min_nodes`)
//! are silent at once, the fault is more likely the network or the control plane than the hosts (Kubernetes'
//! unhealthy-zone rule): a liveness hold opens for the pool, every affected lease gets an
//! `interruption_held` event, and no lease in the pool is interrupted until the pool recovers or an operator
//! releases the hold (`POST /v1/admin/pools/{id}/liveness-hold/release`). Metering stops at the last
//! heartbeat meanwhile, so a held lease is only charged for time its nodes prove.

use chrono::{DateTime, Utc};
use gpuplane_store::agents::liveness as store;
use sqlx::PgPool;
use uuid::Uuid;

use crate::config::Settings;
use crate::jobs::restarts::FailureCause;
use crate::webhooks::{self, Audience};
use gpuplane_store::leases::ending::FreedPools;
use gpuplane_store::leases::ending::end_lease;
use gpuplane_store::leases::events::{NewEvent, record_event};
use gpuplane_store::leases::{Actor, LeaseState};

/// Stamp the control plane's presence; returns since when it has been present without a gap.
pub async fn stamp_presence(db: &PgPool, outage_gap: std::time::Duration) -> Result<DateTime<Utc>, sqlx::Error> {
    let mut conn = db.acquire().await?;
    Ok(store::stamp_presence(&mut conn, outage_gap.as_secs_f64()).await?)
}

/// The longest gap in presence stamps that is not an outage: the heartbeat interval, at least 2 s.
pub fn outage_gap(settings: &Settings) -> std::time::Duration {
    settings.heartbeat_interval.max(std::time::Duration::from_secs(2))
}

/// Stamp presence, mark silent nodes unreachable, then offline; open and clear liveness holds; interrupt the
/// leases on offline nodes of pools that are not held. Returns the pools whose queues the freed GPUs may start.
pub async fn sweep(db: &PgPool, settings: &Settings) -> Result<FreedPools, sqlx::Error> {
    let resumed_at = stamp_presence(db, outage_gap(settings)).await?;
    let mut tx = db.begin().await?;
    let unreachable = store::mark_unreachable(&mut tx, settings.unreachable_after.as_secs_f64(), resumed_at).await?;
    for node in &unreachable {
        let (node_id, hostname, last) = (&node.id, &node.hostname, &node.last_heartbeat_at);
        tracing::warn!(node.id = %node_id, %hostname, "node unreachable: no heartbeat since {last}");
        let data = serde_json::json!({ "node_id": node_id, "hostname": hostname, "last_heartbeat_at": last });
        webhooks::emit(&mut tx, Audience::Operators, "node.unreachable", data).await?;
        let reason = format!("node {hostname} unreachable: no heartbeat since {last}");
        for lease_id in store::active_leases_on(&mut tx, *node_id).await? {
            let event =
                NewEvent::new("node_unreachable", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
                    .reason(&reason)
                    .detail(serde_json::json!({ "node_id": node_id, "last_heartbeat_at": last }));
            record_event(&mut tx, lease_id, event).await?;
        }
    }
    update_holds(&mut tx, settings).await?;
    let offline = store::mark_offline(&mut tx, settings.offline_after.as_secs_f64(), resumed_at).await?;
    for node in &offline {
        let (node_id, pool_id, hostname, last, held) =
            (&node.id, &node.pool_id, &node.hostname, &node.last_heartbeat_at, &node.held);
        let data = serde_json::json!({
            "node_id": node_id, "pool_id": pool_id, "hostname": hostname, "last_heartbeat_at": last,
            "interruptions_held": held,
        });
        webhooks::emit(&mut tx, Audience::Operators, "node.offline", data).await?;
        if !held {
            tracing::warn!(node.id = %node_id, %hostname, "node offline: interrupting its leases");
            continue;
        }
        tracing::warn!(node.id = %node_id, %hostname, "node offline in a held pool: its leases are not interrupted");
        let reason = format!(
            "node {hostname} offline (no heartbeat since {last}) while most of its pool is silent: \
             the interruption is held until the pool recovers or an operator releases the hold"
        );
        for lease_id in store::active_leases_on(&mut tx, *node_id).await? {
            let event =
                NewEvent::new("interruption_held", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
                    .reason(&reason)
                    .detail(serde_json::json!({ "node_id": node_id, "last_heartbeat_at": last }));
            record_event(&mut tx, lease_id, event).await?;
        }
    }
    let freed = interrupt_offline_leases(&mut tx).await?;
    tx.commit().await?;
    Ok(freed)
}

/// Open a hold for every pool where too many agent nodes are silent at once, and clear the holds of pools
/// that recovered (releasing them if no operator did).
async fn update_holds(conn: &mut sqlx::PgConnection, settings: &Settings) -> Result<(), sqlx::Error> {
    let opened =
        store::update_holds(conn, settings.fleet_silence_threshold, settings.fleet_silence_min_nodes as i32).await?;
    for hold in opened {
        let (pool_id, silent, total) = (hold.pool_id, hold.silent_nodes, hold.total_nodes);
        tracing::error!(pool.id = %pool_id, silent, total,
            "fleet-level silence: {silent} of {total} agent nodes of the pool are silent at once; \
             holding interruptions in the pool until it recovers or an operator releases the hold");
    }
    Ok(())
}

/// End the active leases on offline nodes of pools without an open hold, at the node's last heartbeat; heal
/// those whose jobs restart when a node is lost instead.
async fn interrupt_offline_leases(conn: &mut sqlx::PgConnection) -> Result<FreedPools, sqlx::Error> {
    // Several nodes of one lease may be offline: the earliest last heartbeat ends it.
    let due = store::due_interruptions(conn).await?;
    let mut freed = FreedPools::default();
    for row in due {
        let (lease_id, hostname, last) = (row.id, row.hostname, row.last_heartbeat_at);
        let reason = format!("node {hostname} offline: no heartbeat since {last}");
        // A lease whose job restarts when a node is lost is healed instead (`healing`).
        let lost = format!("node {hostname} lost: its agent was silent past the offline limit (last heartbeat {last})");
        let healed = super::healing::heal(conn, lease_id, row.node_id, FailureCause::NodeLost, last, &lost).await?;
        if let super::healing::Healed::Yes { .. } = healed {
            continue;
        }
        let ended =
            end_lease(conn, lease_id, None, LeaseState::Interrupted, &reason, &Actor::System, Some(last)).await?;
        freed.note(ended.as_ref());
    }
    Ok(freed)
}

/// Fail the jobs whose nodes never fetched their parts within the bound (`--assignment-pickup-timeout-secs`).
pub async fn fail_unfetched_assignments(state: &crate::state::AppState) -> Result<Vec<Uuid>, sqlx::Error> {
    let mut tx = state.db.begin().await?;
    let failed =
        crate::jobs::lifecycle::fail_unfetched_assignments(&mut tx, state.settings.assignment_pickup_timeout).await?;
    tx.commit().await?;
    for job_id in &failed {
        tracing::warn!(job.id = %job_id, "job failed: a node never fetched its assignment");
    }
    Ok(failed)
}
