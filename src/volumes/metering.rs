//! Metering storage: every volume is charged for the whole seconds it has existed at its size, exactly once, as
//! GPU time is ([`crate::billing::metering`], the same rating and rounding rule).
//!
//! A volume's meter starts when its agent has made it (`ready_at`) and stops at its deletion. Each step takes the
//! volume's row lock (SKIP LOCKED: replicas share the work, none meters a volume twice), rates
//! [metered_until, to) at `size_gib` GiB with the pool's storage prices (per GiB and 30-day month, one cost unit
//! per GiB-second per minor unit of price), writes one usage record per price and calendar month with its ledger
//! entry, and moves the meter, all in one transaction. A grow meters the volume up to that instant at the old
//! size first ([`meter_before_resize`]), so every second is charged at the size it had. A host volume is metered
//! up to its host's last heartbeat: a silent host's time waits until the host proves it was alive (its data was
//! kept all along); a host that never returns is never charged past its last heartbeat.

use gpuplane_store::leases::Term;
use gpuplane_store::volumes::{self as stored, DueVolume};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::billing::ledger::{self, EntryKind, NewEntry};
use crate::billing::rating::{Charge, Metered, meter};
use crate::extract::new_id;

/// Volumes metered per transaction.
const BATCH: i64 = 200;

fn to_i128(units: &str) -> i128 {
    units.split('.').next().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Meter every volume with unmetered time, in batches. Returns the tenants whose balance moved.
pub async fn meter_once(db: &PgPool) -> Result<Vec<(Uuid, String)>, sqlx::Error> {
    let mut touched: Vec<(Uuid, String)> = Vec::new();
    loop {
        let mut tx = db.begin().await?;
        let due = stored::lock_due(&mut tx, BATCH).await?;
        let count = due.len();
        for volume in due {
            if meter_volume(&mut tx, &volume).await? {
                let key = (volume.tenant_id, volume.currency.clone());
                if !touched.contains(&key) {
                    touched.push(key);
                }
            }
        }
        tx.commit().await?;
        if count < BATCH as usize {
            return Ok(touched);
        }
    }
}

/// Before a ready volume's size changes: meter it up to now at the size it has, in the caller's transaction
/// (which then changes the size under the same row lock).
pub async fn meter_before_resize(conn: &mut PgConnection, volume_id: Uuid) -> Result<(), sqlx::Error> {
    if let Some(volume) = stored::lock_for_metering(conn, volume_id).await? {
        meter_volume(conn, &volume).await?;
    }
    Ok(())
}

/// Meter one locked volume up to its `meter_to`. Returns whether money moved.
async fn meter_volume(conn: &mut PgConnection, volume: &DueVolume) -> Result<bool, sqlx::Error> {
    let until = volume.meter_to.max(volume.metered_until + chrono::Duration::seconds(1));
    let prices = stored::storage_prices_before(conn, volume.pool_id, until).await?;
    let before = Metered {
        metered_until: volume.metered_until,
        cost_units: to_i128(&volume.cost_units),
        charged_minor: volume.charged_minor,
    };
    // A monthly price per GiB: one cost unit per GiB-second per minor unit of price.
    let (after, charges) = meter(before, volume.meter_to, volume.ended, volume.size_gib, Term::Monthly, &prices);
    let mut moved = false;
    for Charge { piece, amount_minor } in charges {
        let record_id = new_id();
        let record = stored::NewVolumeUsage {
            id: record_id,
            tenant_id: volume.tenant_id,
            volume_id: volume.id,
            pool_id: volume.pool_id,
            period_start: piece.start,
            period_end: piece.end,
            gib: volume.size_gib,
            gib_seconds: piece.seconds * i64::from(volume.size_gib),
            unit_price_minor: piece.unit_price_minor,
            currency: &volume.currency,
            cost_units: piece.cost_units.to_string(),
            amount_minor,
        };
        stored::insert_usage(conn, &record).await?;
        if amount_minor > 0 {
            ledger::append(
                conn,
                NewEntry {
                    tenant_id: volume.tenant_id,
                    kind: EntryKind::Usage,
                    amount_minor: -amount_minor,
                    currency: &volume.currency,
                    lease_id: None,
                    usage_record_id: Some(record_id),
                    period_at: Some(piece.start),
                    reason: None,
                    created_by: "system:metering",
                },
            )
            .await?;
            moved = true;
        }
    }
    if after != before {
        stored::set_metered(conn, volume.id, after.metered_until, after.cost_units.to_string(), after.charged_minor)
            .await?;
    }
    Ok(moved)
}
