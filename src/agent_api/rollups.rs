//! Telemetry storage upkeep: time partitions created ahead and dropped whole at retention, and the rollups
//! (per GPU per minute, per node per hour) folded incrementally from raw samples. See
//! `migrations/0011_telemetry_partitions.sql` and `0014_packed_telemetry.sql` for the layout.

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use sqlx::{AssertSqlSafe, PgPool};

use crate::config::Settings;

/// Serializes partition upkeep and folds across replicas (an arbitrary constant: "telemetry" in ASCII).
const TELEMETRY_LOCK: i64 = 0x74656c656d657472;

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
    sqlx::query!("SELECT pg_advisory_xact_lock($1)", TELEMETRY_LOCK).execute(&mut *tx).await?;
    let mut created = 0;
    for (table, span, retention) in tables(settings) {
        let oldest = (now - Duration::from_std(retention).unwrap_or(Duration::days(1))).date_naive();
        let mut d = start_of(span, oldest);
        let last = start_of(span, (now + Duration::days(2)).date_naive());
        let last = if span == Span::Month { next(span, last) } else { last };
        while d <= last {
            let name = partition_name(table, span, d);
            let exists = sqlx::query_scalar!(r#"SELECT to_regclass($1) IS NOT NULL AS "exists!""#, &name)
                .fetch_one(&mut *tx)
                .await?;
            if !exists {
                // Runtime SQL on purpose: DDL naming a partition and its bounds, which cannot be parameters.
                sqlx::query(AssertSqlSafe(format!(
                    "CREATE TABLE IF NOT EXISTS {name} PARTITION OF {table} FOR VALUES FROM ('{}') TO ('{}')",
                    utc(d).to_rfc3339(),
                    utc(next(span, d)).to_rfc3339()
                )))
                .execute(&mut *tx)
                .await?;
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
        let parts = sqlx::query!(
            r#"SELECT c.relname::text AS "name!", i.inhdetachpending AS pending
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = $1::text::regclass ORDER BY 1"#,
            table
        )
        .fetch_all(db)
        .await?;
        for part in parts {
            let (name, pending) = (part.name, part.pending);
            let Some(start) = parse_partition_start(table, span, &name) else { continue };
            if utc(next(span, start)) > horizon {
                continue;
            }
            // Another replica may be at the same partition: the lock makes one of us skip it.
            let mut conn = db.acquire().await?;
            let locked = sqlx::query_scalar!(r#"SELECT pg_try_advisory_lock($1) AS "locked!""#, TELEMETRY_LOCK + 1)
                .fetch_one(&mut *conn)
                .await?;
            if !locked {
                continue;
            }
            let result = async {
                let still = sqlx::query_scalar!(r#"SELECT to_regclass($1) IS NOT NULL AS "exists!""#, &name)
                    .fetch_one(&mut *conn)
                    .await?;
                if still {
                    let detach = if pending { "FINALIZE" } else { "CONCURRENTLY" };
                    let attached = sqlx::query_scalar!(
                        r#"SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = $1::text::regclass) AS "attached!""#,
                        &name
                    )
                    .fetch_one(&mut *conn)
                    .await?;
                    // Runtime SQL on purpose below: DDL naming the partition, which cannot be a parameter.
                    if attached {
                        sqlx::raw_sql(AssertSqlSafe(format!("ALTER TABLE {table} DETACH PARTITION {name} {detach}")))
                            .execute(&mut *conn)
                            .await?;
                    }
                    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE IF EXISTS {name}"))).execute(&mut *conn).await?;
                }
                Ok::<_, sqlx::Error>(still)
            }
            .await;
            sqlx::query_scalar!("SELECT pg_advisory_unlock($1)", TELEMETRY_LOCK + 1).fetch_one(&mut *conn).await?;
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
    let locked = sqlx::query_scalar!(r#"SELECT pg_try_advisory_xact_lock($1) AS "locked!""#, TELEMETRY_LOCK + 2)
        .fetch_one(&mut *tx)
        .await?;
    if !locked {
        return Ok(0);
    }
    // The watermark starts at -infinity, which chrono cannot hold: it stays in SQL.
    let until = sqlx::query_scalar!(
        r#"SELECT now() - make_interval(secs => $1) AS "until!" FROM telemetry_rollup_state FOR UPDATE"#,
        lag.as_secs_f64()
    )
    .fetch_one(&mut *tx)
    .await?;
    let folded = sqlx::query!(
        "CREATE TEMP TABLE fold_touched ON COMMIT DROP AS \
         SELECT DISTINCT node_key, date_trunc('minute', at) AS minute FROM telemetry_raw \
         WHERE ingested_at >= (SELECT folded_until FROM telemetry_rollup_state) AND ingested_at < $1",
        until
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if folded > 0 {
        // These two stay runtime SQL: they read `fold_touched`, the temporary table this transaction made, which
        // does not exist when the macros would describe them at build time.
        sqlx::query(
            "INSERT INTO gpu_minutes (gpu_id, minute, node_id, samples, gpu_util_sum, gpu_util_max, mem_copy_sum, \
                 fb_used_max, power_sum, power_max, temp_max, clock_sum, xid_count, energy_j) \
             SELECT g.id, t.minute, n.id, count(*), sum(d.gpu_util::float8), max(d.gpu_util), \
                 sum(d.mem_copy_util::float8), max(d.fb_used_mib), sum(d.power_w::float8), max(d.power_w), \
                 max(d.gpu_temp_c), sum(d.sm_clock_mhz), \
                 sum(d.xid_count), ((array_agg(d.energy_j ORDER BY r.at DESC))[1] \
                     - (array_agg(d.energy_j ORDER BY r.at))[1] + 4294967296) % 4294967296 \
             FROM fold_touched t JOIN telemetry_raw r ON r.node_key = t.node_key AND r.at >= t.minute \
                 AND r.at < t.minute + interval '1 minute' \
             JOIN nodes n ON n.telemetry_key = t.node_key \
             CROSS JOIN LATERAL telemetry_decode(r.samples) d \
             JOIN gpus g ON g.node_id = n.id AND g.idx = d.idx \
             GROUP BY g.id, t.minute, n.id \
             ON CONFLICT (gpu_id, minute) DO UPDATE SET samples = EXCLUDED.samples, \
                 gpu_util_sum = EXCLUDED.gpu_util_sum, gpu_util_max = EXCLUDED.gpu_util_max, \
                 mem_copy_sum = EXCLUDED.mem_copy_sum, fb_used_max = EXCLUDED.fb_used_max, \
                 power_sum = EXCLUDED.power_sum, power_max = EXCLUDED.power_max, temp_max = EXCLUDED.temp_max, \
                 clock_sum = EXCLUDED.clock_sum, xid_count = EXCLUDED.xid_count, energy_j = EXCLUDED.energy_j",
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO node_hours (node_id, hour, pool_id, samples, gpu_util_sum, gpu_util_max, mem_copy_sum, \
                 fb_used_max, power_sum, power_max, xid_count, energy_j) \
             SELECT m.node_id, h.hour, n.pool_id, sum(m.samples), sum(m.gpu_util_sum), max(m.gpu_util_max), \
                 sum(m.mem_copy_sum), max(m.fb_used_max), sum(m.power_sum), max(m.power_max), sum(m.xid_count), \
                 sum(m.energy_j) \
             FROM (SELECT DISTINCT n.id AS node_id, date_trunc('hour', t.minute) AS hour \
                   FROM fold_touched t JOIN nodes n ON n.telemetry_key = t.node_key) h \
             JOIN gpu_minutes m ON m.node_id = h.node_id AND m.minute >= h.hour \
                 AND m.minute < h.hour + interval '1 hour' \
             JOIN nodes n ON n.id = m.node_id \
             GROUP BY m.node_id, h.hour, n.pool_id \
             ON CONFLICT (node_id, hour) DO UPDATE SET pool_id = EXCLUDED.pool_id, samples = EXCLUDED.samples, \
                 gpu_util_sum = EXCLUDED.gpu_util_sum, gpu_util_max = EXCLUDED.gpu_util_max, \
                 mem_copy_sum = EXCLUDED.mem_copy_sum, fb_used_max = EXCLUDED.fb_used_max, \
                 power_sum = EXCLUDED.power_sum, power_max = EXCLUDED.power_max, xid_count = EXCLUDED.xid_count, \
                 energy_j = EXCLUDED.energy_j",
        )
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query!("UPDATE telemetry_rollup_state SET folded_until = $1", until).execute(&mut *tx).await?;
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
