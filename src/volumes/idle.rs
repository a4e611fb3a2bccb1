//! The opt-in idle policy: a volume with `delete_after_idle_days` is deleted once it has been detached that many
//! days, after a `volume.idle` webhook a day before (never sooner than a day after that notice, so a policy set on
//! a volume detached long ago still warns first). Attaching it again, or changing its policy, starts over.
//! A `volume.deleted` webhook says when it went. Each step is one statement that locks what it takes (SKIP
//! LOCKED), so replicas share the work and no volume is noticed or deleted twice.

use sqlx::PgPool;

use crate::webhooks::{Audience, emit};
use gpuplane_store::volumes as stored;

/// Volumes acted on per statement.
const BATCH: i64 = 200;

/// One round: the notices due, then the deletions due. Returns (noticed, deleted).
pub async fn sweep_once(db: &PgPool) -> Result<(usize, usize), sqlx::Error> {
    let mut tx = db.begin().await?;
    let noticed = stored::take_idle_notices(&mut tx, BATCH).await?;
    for v in &noticed {
        let data = serde_json::json!({
            "volume_id": v.id, "name": v.name, "detached_since": v.detached_since,
            "delete_after_idle_days": v.delete_after_idle_days, "deletes_at": v.deletes_at,
        });
        emit(&mut tx, Audience::Tenant(v.tenant_id), "volume.idle", data).await?;
    }
    let deleted = stored::take_idle_deletions(&mut tx, BATCH).await?;
    for v in &deleted {
        let data = serde_json::json!({
            "volume_id": v.id, "name": v.name, "detached_since": v.detached_since,
            "reason": format!("detached for {} days (its idle policy)", v.delete_after_idle_days),
        });
        emit(&mut tx, Audience::Tenant(v.tenant_id), "volume.deleted", data).await?;
        tracing::info!(volume.id = %v.id, tenant.id = %v.tenant_id, "volume deleted by its idle policy");
    }
    tx.commit().await?;
    Ok((noticed.len(), deleted.len()))
}
