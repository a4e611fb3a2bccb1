//! Background checks that raise alerts no single change causes: `lease.expiring` (a lead before a lease's end),
//! `utilization.low` (raised by `leases::insights::check_utilization` through [`raise`]), `queue.stalled` (a pool's queue head
//! waiting too long). One alert per condition and subject until it clears (`webhook_alerts`): the raise and the
//! event commit together, so replicas running the same check never raise it twice. Node readiness
//! (`inventory::readiness`) raises and clears its causes through [`raise`] and [`clear`] too.

use std::time::Duration;

use gpuplane_store::webhooks as store;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::{Audience, emit};
use crate::config::WebhookSettings;

/// Record that `condition` holds for `subject`; true when it was not raised already (then raise it now). A
/// compare-and-set: of two transactions raising the same alert, the second waits for the first and finds it.
pub(crate) async fn raise(conn: &mut PgConnection, condition: &str, subject: Uuid) -> Result<bool, sqlx::Error> {
    Ok(store::raise_alert(conn, condition, subject).await?)
}

/// Forget that `condition` was raised for `subject`; true when it was (it cleared now, and may be raised again).
pub(crate) async fn clear(conn: &mut PgConnection, condition: &str, subject: Uuid) -> Result<bool, sqlx::Error> {
    Ok(store::clear_alert(conn, condition, subject).await?)
}

/// Forget raised alerts of `condition` whose subject is not in `still`: they cleared, and may be raised again.
pub(crate) async fn clear_except(conn: &mut PgConnection, condition: &str, still: &[Uuid]) -> Result<(), sqlx::Error> {
    Ok(store::clear_alerts_except(conn, condition, still).await?)
}

/// Leases that end within the lead.
pub async fn check_expiring(db: &PgPool, lead: Duration) -> Result<usize, sqlx::Error> {
    let mut tx = db.begin().await?;
    let due = store::expiring_leases(&mut tx, lead.as_secs_f64()).await?;
    clear_except(&mut tx, "lease.expiring", &due.iter().map(|d| d.lease_id).collect::<Vec<_>>()).await?;
    let mut raised = 0;
    for store::ExpiringLease { lease_id, tenant_id, ends_at } in due {
        if raise(&mut tx, "lease.expiring", lease_id).await? {
            let data = serde_json::json!({ "lease_id": lease_id, "ends_at": ends_at, "lead_seconds": lead.as_secs() });
            emit(&mut tx, Audience::Tenant(tenant_id), "lease.expiring", data).await?;
            raised += 1;
        }
    }
    tx.commit().await?;
    Ok(raised)
}

/// Pools whose oldest queued lease has waited longer than `after`.
pub async fn check_queue_stalled(db: &PgPool, after: Duration) -> Result<usize, sqlx::Error> {
    let mut tx = db.begin().await?;
    let stalled = store::stalled_queues(&mut tx, after.as_secs_f64()).await?;
    clear_except(&mut tx, "queue.stalled", &stalled.iter().map(|s| s.pool_id).collect::<Vec<_>>()).await?;
    let mut raised = 0;
    for store::StalledQueue { pool_id, queued, since } in stalled {
        if raise(&mut tx, "queue.stalled", pool_id).await? {
            let data = serde_json::json!({ "pool_id": pool_id, "queued_leases": queued, "oldest_queued_at": since });
            emit(&mut tx, Audience::Operators, "queue.stalled", data).await?;
            raised += 1;
        }
    }
    tx.commit().await?;
    Ok(raised)
}

/// Every check once.
pub async fn check_once(db: &PgPool, settings: &WebhookSettings) -> anyhow::Result<()> {
    check_expiring(db, settings.lease_expiring_lead).await?;
    check_queue_stalled(db, settings.queue_stalled_after).await?;
    Ok(())
}
