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
use sqlx::PgPool;
use uuid::Uuid;

use crate::config::Settings;
use crate::leases::store::FreedPools;
use crate::leases::store::{NewEvent, end_lease, record_event};
use crate::leases::{Actor, LeaseState};
use crate::webhooks::{self, Audience};

/// Stamp the control plane's presence; returns since when it has been present without a gap.
pub async fn stamp_presence(db: &PgPool, outage_gap: std::time::Duration) -> Result<DateTime<Utc>, sqlx::Error> {
    let resumed_at = sqlx::query_scalar!(
        "INSERT INTO control_plane_presence AS p (singleton, last_seen_at, resumed_at) VALUES (true, now(), now()) \
         ON CONFLICT (singleton) DO UPDATE SET last_seen_at = GREATEST(p.last_seen_at, now()), \
             resumed_at = CASE WHEN p.last_seen_at < now() - make_interval(secs => $1) THEN now() ELSE p.resumed_at END \
         RETURNING resumed_at",
        outage_gap.as_secs_f64()
    )
    .fetch_one(db)
    .await?;
    Ok(resumed_at)
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
    let unreachable = sqlx::query!(
        r#"UPDATE nodes SET liveness = 'unreachable', updated_at = now()
         WHERE agent_managed AND liveness IN ('ready', 'not_ready')
             AND GREATEST(last_heartbeat_at, $2) < now() - make_interval(secs => $1)
         RETURNING id, hostname, last_heartbeat_at AS "last_heartbeat_at!""#,
        settings.unreachable_after.as_secs_f64(),
        resumed_at
    )
    .fetch_all(&mut *tx)
    .await?;
    for node in &unreachable {
        let (node_id, hostname, last) = (&node.id, &node.hostname, &node.last_heartbeat_at);
        tracing::warn!(node.id = %node_id, %hostname, "node unreachable: no heartbeat since {last}");
        let data = serde_json::json!({ "node_id": node_id, "hostname": hostname, "last_heartbeat_at": last });
        webhooks::emit(&mut tx, Audience::Operators, "node.unreachable", data).await?;
        let reason = format!("node {hostname} unreachable: no heartbeat since {last}");
        for lease_id in active_leases_on(&mut tx, *node_id).await? {
            let event =
                NewEvent::new("node_unreachable", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
                    .reason(&reason)
                    .detail(serde_json::json!({ "node_id": node_id, "last_heartbeat_at": last }));
            record_event(&mut tx, lease_id, event).await?;
        }
    }
    update_holds(&mut tx, settings).await?;
    let offline = sqlx::query!(
        r#"UPDATE nodes n SET liveness = 'offline', updated_at = now()
         WHERE agent_managed AND liveness <> 'offline'
             AND GREATEST(last_heartbeat_at, $2) < now() - make_interval(secs => $1)
         RETURNING id, pool_id, hostname, last_heartbeat_at AS "last_heartbeat_at!",
             EXISTS (SELECT 1 FROM liveness_holds h WHERE h.pool_id = n.pool_id AND h.released_at IS NULL) AS "held!""#,
        settings.offline_after.as_secs_f64(),
        resumed_at
    )
    .fetch_all(&mut *tx)
    .await?;
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
        for lease_id in active_leases_on(&mut tx, *node_id).await? {
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
    let opened = sqlx::query!(
        "WITH silence AS ( \
             SELECT pool_id, count(*) FILTER (WHERE liveness IN ('unreachable', 'offline'))::int AS silent, count(*)::int AS total \
             FROM nodes WHERE agent_managed GROUP BY pool_id), \
         cleared AS ( \
             UPDATE liveness_holds h SET cleared_at = now(), released_at = COALESCE(h.released_at, now()), \
                 released_by = COALESCE(h.released_by, 'system: the pool recovered') \
             WHERE h.cleared_at IS NULL AND NOT EXISTS (SELECT 1 FROM silence s \
                 WHERE s.pool_id = h.pool_id AND s.silent >= $2 AND s.silent >= $1::float8 * s.total) \
             RETURNING h.pool_id) \
         INSERT INTO liveness_holds (id, pool_id, silent_nodes, total_nodes) \
         SELECT gen_random_uuid(), pool_id, silent, total FROM silence \
         WHERE silent >= $2 AND silent >= $1 * total \
         ON CONFLICT (pool_id) WHERE cleared_at IS NULL DO NOTHING \
         RETURNING pool_id, silent_nodes, total_nodes",
        settings.fleet_silence_threshold,
        settings.fleet_silence_min_nodes as i32
    )
    .fetch_all(&mut *conn)
    .await?;
    for hold in opened {
        let (pool_id, silent, total) = (hold.pool_id, hold.silent_nodes, hold.total_nodes);
        tracing::error!(pool.id = %pool_id, silent, total,
            "fleet-level silence: {silent} of {total} agent nodes of the pool are silent at once; \
             holding interruptions in the pool until it recovers or an operator releases the hold");
    }
    Ok(())
}

/// End the active leases on offline nodes of pools without an open hold, at the node's last heartbeat.
async fn interrupt_offline_leases(conn: &mut sqlx::PgConnection) -> Result<FreedPools, sqlx::Error> {
    // Several nodes of one lease may be offline: the earliest last heartbeat ends it.
    let due = sqlx::query!(
        r#"SELECT DISTINCT ON (l.id) l.id, n.hostname, n.last_heartbeat_at AS "last_heartbeat_at!"
         FROM nodes n JOIN gpus g ON g.node_id = n.id AND g.held_by IS NOT NULL
         JOIN leases l ON l.id = g.held_by AND l.state = 'active'
         WHERE n.agent_managed AND n.liveness = 'offline'
             AND NOT EXISTS (SELECT 1 FROM liveness_holds h WHERE h.pool_id = n.pool_id AND h.released_at IS NULL)
         ORDER BY l.id, n.last_heartbeat_at"#
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut freed = FreedPools::default();
    for row in due {
        let (lease_id, hostname, last) = (row.id, row.hostname, row.last_heartbeat_at);
        let reason = format!("node {hostname} offline: no heartbeat since {last}");
        let ended =
            end_lease(conn, lease_id, None, LeaseState::Interrupted, &reason, &Actor::System, Some(last)).await?;
        freed.note(ended.as_ref());
    }
    Ok(freed)
}

async fn active_leases_on(conn: &mut sqlx::PgConnection, node_id: Uuid) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT DISTINCT l.id FROM leases l JOIN gpus g ON g.held_by = l.id \
         WHERE g.node_id = $1 AND l.state = 'active' ORDER BY l.id",
        node_id
    )
    .fetch_all(conn)
    .await
}

/// Fail the jobs whose nodes never fetched their parts within the bound (`--assignment-pickup-timeout-secs`).
pub async fn fail_unfetched_assignments(state: &crate::state::AppState) -> Result<Vec<Uuid>, sqlx::Error> {
    let mut tx = state.db.begin().await?;
    let failed =
        crate::jobs::store::fail_unfetched_assignments(&mut tx, state.settings.assignment_pickup_timeout).await?;
    tx.commit().await?;
    for job_id in &failed {
        tracing::warn!(job.id = %job_id, "job failed: a node never fetched its assignment");
    }
    Ok(failed)
}
