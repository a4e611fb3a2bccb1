//! Metering: charge every lease for the whole seconds it has held its GPUs, exactly once.
//!
//! Each lease carries `metered_until`; one metering step takes the lease row lock (SKIP LOCKED, so replicas
//! share the work and never meter one lease twice), rates [metered_until, end) with `rating`, writes the
//! usage records and their ledger entries, and moves `metered_until`, all in one transaction. A crash before
//! the commit leaves nothing; after it, the next step starts where this one stopped. A running lease is never
//! metered past the last heartbeat of its nodes, and an interrupted one ends at that heartbeat, so silence
//! is never charged: for every ended lease, charged = floor(exact cost of its whole seconds to `ended_at`); for a
//! lease across pools, that holds for each part at its own pool's prices.

use gpuplane_store::billing::metering::{self as stored, Due};
use sqlx::PgPool;
use uuid::Uuid;

use super::ledger::{self, EntryKind, NewEntry};
use super::rating::{Charge, Metered, meter};
use crate::extract::new_id;
use gpuplane_store::leases::ending::FreedPools;
use gpuplane_store::leases::ending::end_lease;
use gpuplane_store::leases::events::{NewEvent, record_event};
use gpuplane_store::leases::{Actor, LeaseState};
/// Leases metered per transaction.
const BATCH: i64 = 200;

fn to_i128(units: &str) -> i128 {
    units.split('.').next().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Meter every lease with unmetered time, in batches. Returns the tenants whose balance moved.
pub async fn meter_once(db: &PgPool) -> Result<Vec<(Uuid, String)>, sqlx::Error> {
    let mut touched: Vec<(Uuid, String)> = Vec::new();
    loop {
        let mut tx = db.begin().await?;
        // A running lease is metered up to now, its end, and the last heartbeat of every agent node holding its
        // GPUs: a silent node's time is not charged unless the node proves it was alive (then the next step
        // catches up); if it goes offline, the lease ends at that same last heartbeat.
        let due = stored::lock_due(&mut tx, BATCH).await?;
        let count = due.len();
        for lease in due {
            if meter_lease(&mut tx, &lease).await? {
                let key = (lease.tenant_id, lease.currency.clone());
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

/// Meter one active lease (locked by the caller) up to `to` with the GPUs it holds now: a change of its GPUs
/// (healing) is metered before it is made. Returns whether money moved.
pub async fn meter_lease_to(
    conn: &mut sqlx::PgConnection,
    lease_id: Uuid,
    to: chrono::DateTime<chrono::Utc>,
) -> Result<bool, sqlx::Error> {
    let Some(due) = stored::due_until(conn, lease_id, to).await? else { return Ok(false) };
    meter_lease(conn, &due).await
}

/// What one share of a lease (the lease itself, or one part of a lease across pools) has been metered at.
struct Share {
    /// The part, for a lease across pools.
    part: Option<i16>,
    pool_id: Uuid,
    gpu_count: i32,
    cost_units: i128,
    charged_minor: i64,
}

/// Meter one locked lease up to its last whole second (or its end). Each share is rated at its own pool's prices
/// and charged floor(its exact cost): a single-pool lease is one share, a lease across pools one per part. Returns
/// whether money moved.
async fn meter_lease(conn: &mut sqlx::PgConnection, lease: &Due) -> Result<bool, sqlx::Error> {
    let shares: Vec<Share> = if lease.has_parts {
        let parts = stored::lock_parts(conn, lease.id).await?;
        parts
            .into_iter()
            .map(|p| Share {
                part: Some(p.part),
                pool_id: p.pool_id,
                gpu_count: p.gpu_count,
                cost_units: to_i128(&p.cost_units),
                charged_minor: p.charged_minor,
            })
            .collect()
    } else {
        vec![Share {
            part: None,
            pool_id: lease.pool_id,
            gpu_count: lease.gpu_count,
            cost_units: to_i128(&lease.cost_units),
            charged_minor: lease.charged_minor,
        }]
    };
    let mut moved = false;
    let (mut total_units, mut total_charged, mut metered_until) = (0i128, 0i64, lease.metered_until);
    for share in shares {
        let (after, share_moved) = meter_share(conn, lease, &share).await?;
        moved |= share_moved;
        total_units += after.cost_units;
        total_charged += after.charged_minor;
        metered_until = after.metered_until;
        if let Some(part) = share.part {
            stored::set_part_metered(conn, lease.id, part, after.cost_units.to_string(), after.charged_minor).await?;
        }
    }
    stored::set_metered(conn, lease.id, metered_until, total_units.to_string(), total_charged).await?;
    Ok(moved)
}

/// Rate and charge one share of a locked lease: its usage records and ledger entries. Returns where its metering
/// stands now, and whether money moved.
async fn meter_share(
    conn: &mut sqlx::PgConnection,
    lease: &Due,
    share: &Share,
) -> Result<(Metered, bool), sqlx::Error> {
    let prices = stored::prices_before(
        conn,
        share.pool_id,
        lease.meter_to.max(lease.metered_until + chrono::Duration::seconds(1)),
    )
    .await?;
    let before = Metered {
        metered_until: lease.metered_until,
        cost_units: share.cost_units,
        charged_minor: share.charged_minor,
    };
    let (after, charges) = meter(before, lease.meter_to, lease.ended, share.gpu_count, lease.term, &prices);
    let mut moved = false;
    for Charge { piece, amount_minor: amount } in charges {
        let record_id = new_id();
        let record = stored::NewUsageRecord {
            id: record_id,
            tenant_id: lease.tenant_id,
            lease_id: lease.id,
            pool_id: share.pool_id,
            period_start: piece.start,
            period_end: piece.end,
            gpu_count: share.gpu_count,
            gpu_seconds: piece.seconds * share.gpu_count as i64,
            term: lease.term,
            unit_price_minor: piece.unit_price_minor,
            currency: &lease.currency,
            cost_units: piece.cost_units.to_string(),
            amount_minor: amount,
        };
        stored::insert_usage_record(conn, &record).await?;
        if amount > 0 {
            ledger::append(
                conn,
                NewEntry {
                    tenant_id: lease.tenant_id,
                    kind: EntryKind::Usage,
                    amount_minor: -amount,
                    currency: &lease.currency,
                    lease_id: Some(lease.id),
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
    Ok((after, moved))
}

/// Warn the hourly leases of tenants with less than an hour of balance left, give their running jobs a stop
/// notice once the balance would run out within a job's grace before the next round (`round` from now), and end
/// the leases when it is gone. The burn counts the tenant's volumes too (their storage runs the balance down
/// with the leases); volumes themselves are never ended by the balance: their data is kept.
pub async fn enforce_balances(
    db: &PgPool,
    tenants: &[(Uuid, String)],
    round: std::time::Duration,
) -> Result<FreedPools, sqlx::Error> {
    let mut freed = FreedPools::default();
    for (tenant_id, currency) in tenants {
        let mut tx = db.begin().await?;
        let balance = ledger::balance(&mut tx, *tenant_id, currency).await?;
        // The tenant's hourly burn: its active hourly leases and its volumes at the current prices.
        let leases = stored::lock_hourly_leases(&mut tx, *tenant_id, currency).await?;
        let storage_per_hour = gpuplane_store::volumes::storage_burn_per_hour(&mut tx, *tenant_id, currency).await?;
        let burn_per_hour: i64 = leases.iter().map(|l| l.burn_per_hour).sum::<i64>().saturating_add(storage_per_hour);
        if balance > 0 && burn_per_hour > 0 {
            // Seconds the balance pays for at the tenant's burn (every hourly lease runs on it).
            let seconds_left = balance.saturating_mul(3600) / burn_per_hour;
            let lease_ids: Vec<Uuid> = leases.iter().map(|l| l.id).collect();
            let round_s = round.as_secs() as i64;
            crate::jobs::lifecycle::notice_before_balance_runs_out(&mut tx, &lease_ids, seconds_left, round_s).await?;
        }
        for lease in &leases {
            let (lease_id, warned) = (&lease.id, lease.balance_warned_at);
            if balance <= 0 {
                let reason = format!("balance exhausted ({balance} {currency} minor units)");
                let ended =
                    end_lease(&mut tx, *lease_id, None, LeaseState::Terminated, &reason, &Actor::System, None).await?;
                freed.note(ended.as_ref());
                continue;
            }
            if balance < burn_per_hour && warned.is_none() {
                let reason = format!(
                    "balance low: {balance} {currency} minor units cover less than an hour at {burn_per_hour} per hour; \
                     hourly leases end when it reaches zero"
                );
                let event =
                    NewEvent::new("balance_low", Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
                        .reason(&reason);
                record_event(&mut tx, *lease_id, event).await?;
                stored::mark_balance_warned(&mut tx, *lease_id).await?;
            }
        }
        tx.commit().await?;
    }
    Ok(freed)
}
