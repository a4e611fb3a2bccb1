//! Background work for leases: tell running jobs before their lease's end time (their stop notice), finish the
//! releases under way whose jobs have stopped, expire leases at their end time, start queued leases when
//! capacity frees,
//! forget old idempotency records, keep the node table free of dead row versions. Every step is safe with
//! several replicas on one database.

use std::time::Duration;

use super::lifecycle;
use crate::state::AppState;

/// One round of the sweeper: stop notices to the jobs of leases about to end, the releases under way that are
/// due, expiries, then every pool with a queue, then (rarely) idempotency records.
pub async fn sweep_once(state: &AppState, purge_idempotency: bool) -> anyhow::Result<()> {
    // Batches, so a backlog after downtime is cleared quickly without one huge transaction.
    const BATCH: i64 = 500;
    let mut tx = state.db.begin().await?;
    crate::jobs::lifecycle::notice_before_lease_end(&mut tx).await?;
    tx.commit().await?;
    super::release::finish_due(&state.db).await?;
    while lifecycle::expire_due(&state.db, BATCH).await? == BATCH as usize {}
    let queued = gpuplane_store::leases::ending::queued_pools(&mut *state.db.acquire().await?).await?;
    for pool_id in queued {
        lifecycle::start_queued(&state.db, pool_id).await?;
    }
    if purge_idempotency {
        crate::idempotency::purge_expired(&state.db).await?;
    }
    Ok(())
}

/// How often the service vacuums the `nodes` table itself.
pub const NODE_VACUUM_INTERVAL: Duration = Duration::from_secs(5);

/// Remove the dead row versions of `nodes`. Every allocation and release rewrites its nodes' free counters, and
/// the counter is indexed (best fit is an index lookup), so those updates cannot be HOT and their dead versions
/// are only removed by VACUUM. Left to autovacuum (off on some servers, at best once a minute on others) a
/// 1,000-node table collects tens of thousands of dead versions a minute and allocation slows several-fold as
/// every lookup wades through them. The table is small, so this takes milliseconds; SKIP_LOCKED: a replica
/// already vacuuming it is enough.
pub async fn vacuum_nodes(db: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    let mut conn = db.acquire().await?;
    Ok(gpuplane_store::leases::allocation::vacuum_nodes(&mut conn).await?)
}
