//! Healing a lease whose node was lost (its agent silent past the offline limit) or whose GPU failed (a fatal
//! XID), instead of interrupting it, when a job on it restarts for that cause (`jobs::restarts`):
//!
//! 1. The node's parts of the lease's open jobs fail of the cause; each job opens its restart (or fails).
//! 2. Billing: the lease is metered up to the failure with every GPU it held (a lost node: its last heartbeat,
//!    so silence is never charged), then the node's GPUs leave the lease, and the time from the failure to now is
//!    metered for the GPUs left; from now the lease is metered for what it holds (the replacement's from its join).
//!    Each to the whole second of the metering grid (`billing::rating`).
//! 3. A replacement node of the same pool with as many free GPUs joins, all or nothing, through the one
//!    allocation core (`place` on one node, `write_lease` with `Join`). Without one the lease goes on with the
//!    GPUs left (the restart is planned for them), or, with none left, is interrupted as before.
//!
//! Not healed (interrupted as before): a lease with no job that restarts for the cause, a lease across pools, a
//! lease with a host volume (its host holds the data), and a tenant whose balance is used up.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::jobs::policy::policy_of;
use crate::jobs::restarts::{FailureCause, Verdict, decide};
use gpuplane_store::jobs::recovery as jobs_store;
use gpuplane_store::leases::allocation::{self, BestFit, LeaseWrite};
use gpuplane_store::leases::events::{NewEvent, record_event};
use gpuplane_store::leases::healing as store;
use gpuplane_store::leases::{Actor, LeaseState, Placement, Term};

/// What [`heal`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Healed {
    /// The node left the lease; a replacement joined (its id) or not.
    Yes { replacement: Option<Uuid> },
    /// Nothing was written: the caller interrupts the lease as before.
    No(&'static str),
}

/// Heal lease `lease_id` of node `node_id` (see the module). `failed_at`: when the failure happened (a lost
/// node: its last heartbeat). Runs in the caller's transaction.
pub async fn heal(
    conn: &mut PgConnection,
    lease_id: Uuid,
    node_id: Uuid,
    cause: FailureCause,
    failed_at: DateTime<Utc>,
    reason: &str,
) -> Result<Healed, sqlx::Error> {
    let Some(lease) = store::lock_subject(conn, lease_id).await? else { return Ok(Healed::No("not active")) };
    if lease.has_parts {
        return Ok(Healed::No("a lease across pools"));
    }
    if lease.host_volume {
        return Ok(Healed::No("a host volume holds its data on the lost host"));
    }
    if !restarts_for(conn, lease_id, cause).await? {
        return Ok(Healed::No("no job on it restarts for this cause"));
    }
    if lease.term == Term::Hourly
        && gpuplane_store::billing::ledger::balance(conn, lease.tenant_id, &lease.currency).await? <= 0
    {
        return Ok(Healed::No("the tenant's balance is used up"));
    }
    let removed = store::gpus_on_node(conn, lease_id, node_id).await?;
    if removed == 0 {
        return Ok(Healed::No("the lease holds no GPU there"));
    }
    // The replacement first: with none, a lease left without GPUs is not healed.
    let plan = allocation::place(conn, lease.pool_id, removed, Placement::SingleNode, BestFit::Search).await?;
    let plan = plan.filter(|p| p.0.iter().all(|(node, _)| *node != node_id));
    if plan.is_none() && removed >= lease.gpu_count {
        return Ok(Healed::No("no replacement is free and no GPU would be left"));
    }

    // 1. The node's parts fail; the jobs restart (their failure blamed on the node).
    let jobs = jobs_store::fail_parts_on_node(conn, lease_id, node_id, cause, reason).await?;
    for job_id in &jobs {
        // Opens the restart, or finds the one the job's other ranks opened when their peer went.
        crate::jobs::lifecycle::refresh_job(conn, *job_id).await?;
        jobs_store::blame_pending_restart(conn, *job_id, cause, node_id, failed_at, reason).await?;
    }

    // 2. Billing around the change (each step meters only what is left before its end), then the node's GPUs
    // leave.
    crate::billing::metering::meter_lease_to(conn, lease_id, failed_at).await?;
    store::remove_node(conn, lease_id, node_id).await?;
    crate::billing::metering::meter_lease_to(conn, lease_id, Utc::now()).await?;
    let detail = serde_json::json!({ "node_id": node_id, "gpus": removed, "cause": cause, "failed_at": failed_at });
    let event = NewEvent::new("node_removed", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
        .reason(reason)
        .detail(detail);
    record_event(conn, lease_id, event).await?;

    // 3. The replacement joins.
    let mut replacement = None;
    if let Some(plan) = plan {
        let joining = plan.0.first().map(|(node, _)| *node);
        let why = format!("replaces the lost node of the lease ({reason})");
        let event = NewEvent::new("node_replaced", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
            .reason(&why)
            .detail(serde_json::json!({ "replaced_node_id": node_id, "node_id": joining, "gpus": removed }));
        if allocation::write_lease(conn, LeaseWrite::Join(lease_id), Some(&plan), event).await?.is_some() {
            replacement = joining;
        } else {
            tracing::warn!(lease.id = %lease_id, "healing: the replacement's free GPUs were out of step; going on without it");
        }
    }
    let after = lease.gpu_count - removed + if replacement.is_some() { removed } else { 0 };
    let healing = serde_json::json!({
        "removed_node_id": node_id, "removed_gpus": removed, "replacement_node_id": replacement,
        "added_gpus": if replacement.is_some() { removed } else { 0 }, "gpus_before": lease.gpu_count,
        "gpus_after": after,
    });
    for job_id in &jobs {
        jobs_store::record_healing(conn, *job_id, &healing).await?;
    }
    tracing::warn!(lease.id = %lease_id, node.id = %node_id, ?replacement, gpus_after = after, cause = cause.as_str(),
        "lease healed");
    Ok(Healed::Yes { replacement })
}

/// Whether some open job of the lease restarts for `cause`: one with a restart pending, or whose policy allows
/// one more.
async fn restarts_for(conn: &mut PgConnection, lease_id: Uuid, cause: FailureCause) -> Result<bool, sqlx::Error> {
    for job_id in jobs_store::open_jobs_of_lease(conn, lease_id).await? {
        if gpuplane_store::jobs::pending_generation(conn, job_id).await?.is_some_and(|(_, restart)| restart) {
            return Ok(true);
        }
        let (policy, restarts) = policy_of(conn, job_id).await?;
        if matches!(decide(&policy, restarts, cause), Verdict::Restart { .. }) {
            return Ok(true);
        }
    }
    Ok(false)
}
