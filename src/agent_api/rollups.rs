//! Telemetry storage upkeep: time partitions created ahead and dropped whole at retention, and the rollups
//! (per GPU per minute, per node per hour) folded incrementally from raw samples. See
//! `migrations/0011_telemetry_partitions.sql` and `0014_packed_telemetry.sql` for the layout.

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use gpuplane_store::agents::rollups as store;
use sqlx::PgPool;

use crate::config::Settings;

/// The sweeper folds only rows ingested at least this long ago: a heartbeat's transaction (whose `now()`
/// stamped `ingested_at`) has committed by then, so the fold never skips a row that becomes visible later.
pub const FOLD_LAG: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Span {
    Day,
    Month,
}

/// The partitioned telemetry tables, their partition span and which retention applies.
fn tables(settings: &Settings) -> [(&'static str, Span, std::time::Duration); 3] {
    [
        ("telemetry_raw", Span::Day, settings.telemetry_retention),
        ("gpu_minutes", Span::Day, settings.telemetry_minute_retention),
        ("node_hours", Span::Month, settings.telemetry_hour_retention),
    ]
}

fn start_of(span: Span, d: NaiveDate) -> NaiveDate {
    match span {
        Span::Day => d,
        Span::Month => d.with_day(1).unwrap_or(d),
    }
}

fn next(span: Span, d: NaiveDate) -> NaiveDate {
    match span {
        Span::Day => d + Duration::days(1),
        Span::Month => d.checked_add_months(chrono::Months::new(1)).unwrap_or(d),
    }
}

fn partition_name(table: &str, span: Span, d: NaiveDate) -> String {
    match span {
        Span::Day => format!("{table}_p{}", d.format("%Y%m%d")),
        Span::Month => format!("{table}_p{}", d.format("%Y%m")),
    }
}

fn utc(d: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default())
}

/// Create the partitions that cover the retention window up to two days (or months) ahead of `now`.
/// Idempotent and safe with several replicas (an advisory lock, and `IF NOT EXISTS`).
pub async fn ensure_partitions(db: &PgPool, settings: &Settings, now: DateTime<Utc>) -> Result<u32, sqlx::Error> {
    let mut tx = db.begin().await?;
    store::lock_partition_upkeep(&mut tx).await?;
    let mut created = 0;
    for (table, span, retention) in tables(settings) {
        let oldest = (now - Duration::from_std(retention).unwrap_or(Duration::days(1))).date_naive();
        let mut d = start_of(span, oldest);
        let last = start_of(span, (now + Duration::days(2)).date_naive());
        let last = if span == Span::Month { next(span, last) } else { last };
        while d <= last {
            let name = partition_name(table, span, d);
            let exists = store::relation_exists(&mut tx, &name).await?;
            if !exists {
                store::create_partition(&mut tx, table, &name, utc(d), utc(next(span, d))).await?;
                created += 1;
            }
            d = next(span, d);
        }
    }
    tx.commit().await?;
    Ok(created)
}

/// Drop the partitions wholly older than their table's retention: `DETACH PARTITION ... CONCURRENTLY` (which
/// does not block inserts into the other partitions), then `DROP TABLE`. No row is deleted. Returns the
/// partitions dropped.
pub async fn drop_expired_partitions(
    db: &PgPool,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Result<Vec<String>, sqlx::Error> {
    let mut dropped = Vec::new();
    for (table, span, retention) in tables(settings) {
        let horizon = now - Duration::from_std(retention).unwrap_or(Duration::days(1));
        let parts = store::partitions_of(&mut *db.acquire().await?, table).await?;
        for (name, pending) in parts {
            let Some(start) = parse_partition_start(table, span, &name) else { continue };
            if utc(next(span, start)) > horizon {
                continue;
            }
            // Another replica may be at the same partition: the lock makes one of us skip it.
            let mut conn = db.acquire().await?;
            let locked = store::try_lock_partition_drop(&mut conn).await?;
            if !locked {
                continue;
            }
            let result = async {
                let still = store::relation_exists(&mut conn, &name).await?;
                if still {
                    if store::is_attached(&mut conn, &name).await? {
                        store::detach_partition(&mut conn, table, &name, pending).await?;
                    }
                    store::drop_partition(&mut conn, &name).await?;
                }
                Ok::<_, gpuplane_store::StoreError>(still)
            }
            .await;
            store::unlock_partition_drop(&mut conn).await?;
            if result? {
                tracing::info!(partition = %name, "telemetry partition dropped at retention");
                dropped.push(name);
            }
        }
    }
    Ok(dropped)
}

fn parse_partition_start(table: &str, span: Span, name: &str) -> Option<NaiveDate> {
    let suffix = name.strip_prefix(table)?.strip_prefix("_p")?;
    match span {
        Span::Day => NaiveDate::parse_from_str(suffix, "%Y%m%d").ok(),
        Span::Month => NaiveDate::parse_from_str(&format!("{suffix}01"), "%Y%m%d").ok(),
    }
}

/// Recompute the minute rollups of every (node, minute) that received raw rows since the watermark, then
/// the hour rollups of the hours those minutes are in, and advance the watermark; one transaction, one
/// replica at a time. Recomputing (not adding) makes a rollup equal to the aggregate of what is stored
/// beneath it, whether samples arrive on time, late (an agent's buffer after an outage) or twice.
/// Folds rows ingested up to `lag` ago; returns the (node, minute) pairs folded.
pub async fn fold(db: &PgPool, lag: std::time::Duration) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    if !store::try_lock_fold(&mut tx).await? {
        return Ok(0);
    }
    let until = store::fold_until(&mut tx, lag.as_secs_f64()).await?;
    let folded = store::collect_touched_minutes(&mut tx, until).await?;
    if folded > 0 {
        store::fold_touched(&mut tx).await?;
    }
    store::advance_watermark(&mut tx, until).await?;
    tx.commit().await?;
    Ok(folded)
}

/// Partitions ahead, expired partitions dropped, then a fold: what the sweeper runs every minute.
pub async fn upkeep(db: &PgPool, settings: &Settings) -> Result<(), sqlx::Error> {
    let now = Utc::now();
    ensure_partitions(db, settings, now).await?;
    drop_expired_partitions(db, settings, now).await?;
    fold(db, FOLD_LAG).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_round_trip() {
        let d = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        assert_eq!(partition_name("telemetry_raw", Span::Day, d), "telemetry_raw_p20261130");
        assert_eq!(parse_partition_start("telemetry_raw", Span::Day, "telemetry_raw_p20261130"), Some(d));
        assert_eq!(partition_name("node_hours", Span::Month, start_of(Span::Month, d)), "node_hours_p202611");
        assert_eq!(
            parse_partition_start("node_hours", Span::Month, "node_hours_p202611"),
            NaiveDate::from_ymd_opt(2026, 11, 1)
        );
        assert_eq!(next(Span::Month, NaiveDate::from_ymd_opt(2026, 12, 1).unwrap()).to_string(), "2027-01-01");
        assert_eq!(parse_partition_start("gpu_minutes", Span::Day, "telemetry_raw_p20261130"), None);
    }
}
