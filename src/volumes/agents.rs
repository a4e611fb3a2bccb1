//! What agents report of volumes with their heartbeats, and the orders they get back: every volume of their
//! node's to hold (make, grow, keep mounted) or destroy.

use gpuplane_protocol::volumes::{VolumeAction, VolumeKind, VolumeOrder, VolumeReport, VolumeStore};
use gpuplane_store::volumes::{self as store, GIB};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::FieldError;

/// The most bytes a store or volume reports (an exabyte: beyond any disk).
const MAX_BYTES: i64 = 1_000_000_000_000_000_000;

/// Check the heartbeat's volume fields.
pub fn validate(stores: &[VolumeStore], reports: &[VolumeReport], errors: &mut Vec<FieldError>) {
    if stores.len() > 2 {
        errors.push(FieldError::new("volume_stores", "at most 2: one host store and one pool store"));
    }
    for (i, s) in stores.iter().enumerate() {
        if stores[..i].iter().any(|o| o.kind == s.kind) {
            errors.push(FieldError::new(format!("volume_stores[{i}].kind"), "one store of each kind"));
        }
        if s.total_bytes > MAX_BYTES || s.free_bytes < 0 || s.free_bytes > s.total_bytes {
            errors
                .push(FieldError::new(format!("volume_stores[{i}]"), "bytes: 0 <= free_bytes <= total_bytes <= 10^18"));
        }
    }
    if reports.len() > 4096 {
        errors.push(FieldError::new("volumes", "at most 4096 per heartbeat"));
    }
    for (i, r) in reports.iter().enumerate() {
        let out = |b: Option<i64>| b.is_some_and(|b| !(0..=MAX_BYTES).contains(&b));
        if out(r.size_bytes) || out(r.used_bytes) {
            errors.push(FieldError::new(format!("volumes[{i}]"), "bytes, 0-10^18"));
        }
        if let Some(m) = &r.message
            && (m.chars().count() > 1000 || m.chars().any(|c| c.is_control() && c != '\n'))
        {
            errors.push(FieldError::new(
                format!("volumes[{i}].message"),
                "at most 1000 characters, no control characters",
            ));
        }
    }
}

/// Save what the agent reported and answer its orders. An agent that offers no store gets none (and its
/// reports of volumes it no longer offers a store for still apply).
pub async fn on_heartbeat(
    conn: &mut PgConnection,
    node_id: Uuid,
    stores: &[VolumeStore],
    reports: &[VolumeReport],
) -> gpuplane_store::StoreResult<Vec<VolumeOrder>> {
    store::record_stores(conn, node_id, stores).await?;
    if !reports.is_empty() {
        let changed = store::apply_reports(conn, node_id, reports).await?;
        if changed > 0 {
            tracing::info!(node.id = %node_id, changed, "volumes changed state");
        }
    }
    if stores.is_empty() {
        return Ok(Vec::new());
    }
    let volumes = store::node_volumes(conn, node_id).await?;
    Ok(volumes
        .into_iter()
        .map(|v| VolumeOrder {
            volume_id: v.id,
            kind: VolumeKind::parse(&v.kind).unwrap_or(VolumeKind::Host),
            action: if v.state == "deleting" { VolumeAction::Destroy } else { VolumeAction::Hold },
            size_bytes: i64::from(v.size_gib) * GIB,
        })
        .collect())
}
