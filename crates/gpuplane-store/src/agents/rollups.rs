//! Telemetry storage upkeep: time partitions created ahead and dropped whole at retention, and the rollups
//! (per GPU per minute, per node per hour) folded incrementally from raw samples. See
//! `migrations/0011_telemetry_partitions.sql` and `0014_packed_telemetry.sql` for the layout.

use chrono::{DateTime, Utc};
use sqlx::{AssertSqlSafe, PgConnection};

use crate::StoreResult;

/// Serializes partition upkeep and folds across replicas (an arbitrary constant: "telemetry" in ASCII).
const TELEMETRY_LOCK: i64 = 0x74656c656d657472;

/// Take the transaction's lock on partition creation (waits for another replica's).
pub async fn lock_partition_upkeep(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock($1)", TELEMETRY_LOCK).execute(conn).await?;
    Ok(())
}

/// Does a table (or any relation) of this name exist?
pub async fn relation_exists(conn: &mut PgConnection, name: &str) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(r#"SELECT to_regclass($1) IS NOT NULL AS "exists!""#, name).fetch_one(conn).await?)
}

/// Create the partition `name` of `table` for [from, to), unless it exists. `name` and `table` are SQL
/// identifiers the caller built (never user input).
pub async fn create_partition(
    conn: &mut PgConnection,
    table: &str,
    name: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> StoreResult<()> {
    // Runtime SQL: DDL naming a partition and its bounds, which cannot be parameters.
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {name} PARTITION OF {table} FOR VALUES FROM ('{}') TO ('{}')",
        from.to_rfc3339(),
        to.to_rfc3339()
    )))
    .execute(conn)
    .await?;
    Ok(())
}

/// The partitions of a table, by name, and whether each is pending a concurrent detach.
pub async fn partitions_of(conn: &mut PgConnection, table: &str) -> StoreResult<Vec<(String, bool)>> {
    Ok(sqlx::query!(
        r#"SELECT c.relname::text AS "name!", i.inhdetachpending AS pending
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = $1::text::regclass ORDER BY 1"#,
        table
    )
    .map(|p| (p.name, p.pending))
    .fetch_all(conn)
    .await?)
}

/// Try to take the session's lock on dropping partitions; false when another replica holds it.
pub async fn try_lock_partition_drop(conn: &mut PgConnection) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(r#"SELECT pg_try_advisory_lock($1) AS "locked!""#, TELEMETRY_LOCK + 1)
        .fetch_one(conn)
        .await?)
}

/// Release the session's lock on dropping partitions.
pub async fn unlock_partition_drop(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query_scalar!("SELECT pg_advisory_unlock($1)", TELEMETRY_LOCK + 1).fetch_one(conn).await?;
    Ok(())
}

/// Is this table still attached to a partitioned table?
pub async fn is_attached(conn: &mut PgConnection, name: &str) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = $1::text::regclass) AS "attached!""#,
        name
    )
    .fetch_one(conn)
    .await?)
}

/// Detach the partition `name` from `table`: `CONCURRENTLY`, or `FINALIZE` for a detach left pending.
/// `name` and `table` are SQL identifiers the caller built (never user input).
pub async fn detach_partition(conn: &mut PgConnection, table: &str, name: &str, pending: bool) -> StoreResult<()> {
    let detach = if pending { "FINALIZE" } else { "CONCURRENTLY" };
    // Runtime SQL: DDL naming the partition, which cannot be a parameter.
    sqlx::raw_sql(AssertSqlSafe(format!("ALTER TABLE {table} DETACH PARTITION {name} {detach}"))).execute(conn).await?;
    Ok(())
}

/// Drop a (detached) partition, if it exists. `name` is an SQL identifier the caller built.
pub async fn drop_partition(conn: &mut PgConnection, name: &str) -> StoreResult<()> {
    // Runtime SQL: DDL naming the partition, which cannot be a parameter.
    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE IF EXISTS {name}"))).execute(conn).await?;
    Ok(())
}

/// Try to take the transaction's lock on folding; false when another replica is folding.
pub async fn try_lock_fold(conn: &mut PgConnection) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(r#"SELECT pg_try_advisory_xact_lock($1) AS "locked!""#, TELEMETRY_LOCK + 2)
        .fetch_one(conn)
        .await?)
}

/// Where this fold ends: `lag_s` seconds before now. Locks the watermark row until the transaction ends.
pub async fn fold_until(conn: &mut PgConnection, lag_s: f64) -> StoreResult<DateTime<Utc>> {
    // The watermark starts at -infinity, which chrono cannot hold: it stays in SQL.
    Ok(sqlx::query_scalar!(
        r#"SELECT now() - make_interval(secs => $1) AS "until!" FROM telemetry_rollup_state FOR UPDATE"#,
        lag_s
    )
    .fetch_one(conn)
    .await?)
}

/// Collect, in the transaction's temporary table `fold_touched`, the (node, minute) pairs that received raw
/// rows ingested from the watermark up to `until`; returns how many.
pub async fn collect_touched_minutes(conn: &mut PgConnection, until: DateTime<Utc>) -> StoreResult<u64> {
    Ok(sqlx::query!(
        "CREATE TEMP TABLE fold_touched ON COMMIT DROP AS \
         SELECT DISTINCT node_key, date_trunc('minute', at) AS minute FROM telemetry_raw \
         WHERE ingested_at >= (SELECT folded_until FROM telemetry_rollup_state) AND ingested_at < $1",
        until
    )
    .execute(conn)
    .await?
    .rows_affected())
}

/// Recompute the minute rollups of the touched minutes, then the hour rollups of the hours they are in.
pub async fn fold_touched(conn: &mut PgConnection) -> StoreResult<()> {
    // Runtime SQL: these two read `fold_touched`, the temporary table this transaction made, which does not
    // exist when the macros would describe them at build time.
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
    .execute(&mut *conn)
    .await?;
    // Runtime SQL: reads `fold_touched` (see above).
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
    .execute(conn)
    .await?;
    Ok(())
}

/// Advance the fold's watermark to `until`.
pub async fn advance_watermark(conn: &mut PgConnection, until: DateTime<Utc>) -> StoreResult<()> {
    sqlx::query!("UPDATE telemetry_rollup_state SET folded_until = $1", until).execute(conn).await?;
    Ok(())
}
