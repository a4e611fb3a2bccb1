//! Lease persistence around the store's (`gpuplane_store::leases`, which callers name directly): the log of a
//! counter out of step, the 409 of a request that did not fit, the queue starts (after an ending freed GPUs)
//! and the expiries the sweeper runs.

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::error::ApiError;
use gpuplane_store::leases::{Actor, Lease, LeaseState};

use gpuplane_store::leases::allocation::{
    BestFit, Capacity, LeaseWrite, Plan, PoolSize, begin, place, place_parts, pool_size,
};
use gpuplane_store::leases::ending::{FreedPools, end_lease};
use gpuplane_store::leases::events::NewEvent;

/// 409 `insufficient_capacity`, with these figures as its context.
impl From<Capacity> for ApiError {
    fn from(capacity: Capacity) -> Self {
        ApiError::Conflict {
            code: "insufficient_capacity",
            message: format!(
                "{} GPUs requested; {} free in the pool, at most {} on one node{}",
                capacity.requested,
                capacity.free_gpus,
                capacity.largest_free_block,
                if capacity.queued_ahead > 0 {
                    format!(", {} leases queued", capacity.queued_ahead)
                } else {
                    String::new()
                }
            ),
            context: serde_json::to_value(capacity).ok(),
        }
    }
}

/// Write a lease with the GPUs of `plan` on nodes the transaction has locked (`allocation::write_lease`), and
/// return it; None, having written nothing, when a planned node has fewer free healthy GPUs than its counter
/// said (a counter out of step), which is logged.
pub async fn write_lease(
    conn: &mut PgConnection,
    lease: LeaseWrite<'_>,
    plan: Option<&Plan>,
    event: NewEvent<'_>,
) -> Result<Option<Lease>, sqlx::Error> {
    let written = gpuplane_store::leases::allocation::write_lease(conn, lease, plan, event).await?;
    if written.is_none()
        && let Some(plan) = plan
    {
        tracing::warn!(lease.id = %lease.lease_id(), plan = ?plan.0, "free_gpus counters disagree with the GPUs free on the planned nodes");
    }
    Ok(written)
}

/// Enforce the tenant's quotas for `gpu_count` more GPUs of `pool_id` (a lease across pools: once per part). The
/// tenant row is locked for the rest of the transaction, so concurrent requests of one tenant are checked one after
/// another and cannot jointly exceed a quota. Single-pool creates call it only for tenants the admission statement
/// found to have a quota: the others' requests lock nothing and run in parallel.
pub async fn check_quotas(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    pool_id: Uuid,
    gpu_count: i32,
) -> Result<(), ApiError> {
    let quotas = gpuplane_store::leases::changes::lock_quotas(conn, tenant_id, pool_id).await?;
    let in_use = gpuplane_store::leases::changes::in_use(conn, tenant_id, pool_id).await?;
    super::rules::check_quotas(&quotas, &in_use, gpu_count).map_err(|exceeded| ApiError::Conflict {
        code: "quota_exceeded",
        message: exceeded.message,
        context: Some(serde_json::json!({
            "quota": exceeded.quota, "limit": exceeded.limit, "in_use": exceeded.in_use, "requested": gpu_count,
        })),
    })
}

/// Why `gpu_count` GPUs of the pool laid out as `placement` can never fit, whatever is free: more than the pool
/// has, or than its largest node has for `single_node` (None: they may fit once GPUs are free).
pub async fn never_fits(
    conn: &mut PgConnection,
    pool_id: Uuid,
    gpu_count: i32,
    placement: gpuplane_store::leases::Placement,
) -> Result<Option<String>, sqlx::Error> {
    let PoolSize { total, largest_node } = pool_size(conn, pool_id).await?;
    Ok(if i64::from(gpu_count) > total {
        Some(format!("the pool has {total} GPUs in all"))
    } else if placement == gpuplane_store::leases::Placement::SingleNode && i64::from(gpu_count) > largest_node {
        Some(format!("single_node: the largest node in the pool has {largest_node} GPUs"))
    } else {
        None
    })
}

/// Start queued leases of a pool in arrival order while they fit (strict FIFO: a head that does not fit
/// blocks the ones behind it, so large requests are not starved). One replica at a time per pool.
pub async fn start_queued(db: &PgPool, pool_id: Uuid) -> Result<u32, sqlx::Error> {
    let mut tx = begin(db).await?;
    let locked = gpuplane_store::leases::ending::try_lock_queue(&mut tx, pool_id).await?;
    if !locked {
        return Ok(0);
    }
    let mut started = 0;
    loop {
        let head = gpuplane_store::leases::ending::lock_queue_head(&mut tx, pool_id).await?;
        let Some(head) = head else { break };
        let (lease_id, gpu_count, placement) = (head.id, head.gpu_count, head.placement);
        // A lease across pools waits in its first part's queue, and starts when every part fits.
        let parts = gpuplane_store::leases::parts::asked(&mut tx, lease_id).await?;
        let plan = if parts.is_empty() {
            place(&mut tx, pool_id, gpu_count, placement, BestFit::Search).await?
        } else {
            place_parts(&mut tx, &parts).await?
        };
        let Some(plan) = plan else { break };
        let event = NewEvent::new("allocated", Some(LeaseState::Queued), Some(LeaseState::Active), &Actor::System)
            .reason("capacity freed");
        if write_lease(&mut tx, LeaseWrite::Activate(lease_id), Some(&plan), event).await?.is_none() {
            break;
        }
        started += 1;
    }
    tx.commit().await?;
    Ok(started)
}

/// Expire up to `batch` active leases whose end time has passed. Safe on several replicas (SKIP LOCKED).
/// Returns how many it expired.
pub async fn expire_due(db: &PgPool, batch: i64) -> Result<usize, sqlx::Error> {
    let mut tx = db.begin().await?;
    let due = gpuplane_store::leases::ending::lock_due_expiries(&mut tx, batch).await?;
    let count = due.len();
    for (lease_id, ends_at) in due {
        end_lease(&mut tx, lease_id, None, LeaseState::Expired, "reached its end time", &Actor::System, Some(ends_at))
            .await?;
    }
    tx.commit().await?;
    Ok(count)
}

/// Start the queued leases of the pools an ending freed, in the background (for a request, which need not wait
/// for them).
pub fn wake(freed: FreedPools, db: &PgPool) {
    for pool_id in freed.pools() {
        let db = db.clone();
        tokio::spawn(async move {
            if let Err(err) = start_queued(&db, pool_id).await {
                tracing::warn!(error = %err, pool.id = %pool_id, "starting queued leases failed; the sweeper retries");
            }
        });
    }
}

/// Start the queued leases of the pools an ending freed, now (for a background loop).
pub async fn start(freed: FreedPools, db: &PgPool) -> Result<(), sqlx::Error> {
    for pool_id in freed.pools() {
        start_queued(db, pool_id).await?;
    }
    Ok(())
}
