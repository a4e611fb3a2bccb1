//! Reading telemetry: bucketed series of GPUs (from raw samples or the minute rollups), a lease's recent
//! utilization, and a pool's utilization per node.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

/// One bucket of one GPU.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct TelemetryPoint {
    /// Bucket start.
    pub t: DateTime<Utc>,
    /// Mean DCGM_FI_DEV_GPU_UTIL, percent.
    pub gpu_util: f64,
    /// Mean DCGM_FI_DEV_MEM_COPY_UTIL, percent.
    pub mem_copy_util: f64,
    /// Peak framebuffer used, MiB.
    pub fb_used_mib: i64,
    /// Mean power, watts.
    pub power_w: f64,
    /// Peak GPU temperature, Celsius.
    pub gpu_temp_c: f64,
    /// Mean SM clock, MHz.
    pub sm_clock_mhz: f64,
    /// XID events in the bucket.
    pub xid_count: i64,
    /// Samples in the bucket.
    pub samples: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct NodeUtilization {
    pub node_id: Uuid,
    pub hostname: String,
    pub avg_gpu_util: Option<f64>,
    pub avg_power_w: Option<f64>,
    pub samples: i64,
}

/// A GPU whose series is read, with where it is.
pub struct GpuRef {
    pub gpu_id: Uuid,
    pub node_id: Uuid,
    pub hostname: String,
    pub index: i32,
}

/// One bucket of one GPU's series.
pub struct SeriesRow {
    pub gpu_id: Uuid,
    pub point: TelemetryPoint,
}

/// The two series statements give the same columns; `series_row!` builds a `SeriesRow` from either's record.
macro_rules! series_row {
    () => {
        |r| SeriesRow {
            gpu_id: r.gpu_id,
            point: TelemetryPoint {
                t: r.t,
                gpu_util: r.gpu_util,
                mem_copy_util: r.mem_copy_util,
                fb_used_mib: r.fb_used_mib,
                power_w: r.power_w,
                gpu_temp_c: r.gpu_temp_c,
                sm_clock_mhz: r.sm_clock_mhz,
                xid_count: r.xid_count,
                samples: r.samples,
            },
        }
    };
}

/// Per-bucket aggregates of the GPUs `gpu_ids` (on the nodes `node_ids`) over [from, to) from raw samples, buckets
/// of `step_s` seconds from `from`, by GPU and bucket: each node's rows read once (by its primary key: the node's
/// key and the time range) and their packed records decoded once, in the `gpu_samples` view's units.
pub async fn raw_series(
    conn: &mut PgConnection,
    gpu_ids: &[Uuid],
    node_ids: &[Uuid],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step_s: f64,
) -> StoreResult<Vec<SeriesRow>> {
    Ok(sqlx::query!(
        r#"WITH agg AS (
                SELECT n.id AS node_id, d.idx, date_bin(make_interval(secs => $4), r.at, $2) AS t,
                    avg(d.gpu_util)::float8 AS gpu_util, avg(d.mem_copy_util)::float8 AS mem_copy_util,
                    max(d.fb_used_mib)::bigint AS fb_used_mib, avg(d.power_w)::float8 AS power_w,
                    max(d.gpu_temp_c)::float8 AS gpu_temp_c, avg(d.sm_clock_mhz)::float8 AS sm_clock_mhz,
                    sum(d.xid_count)::bigint AS xid_count, count(*) AS samples
                FROM nodes n JOIN telemetry_raw r ON r.node_key = n.telemetry_key
                    CROSS JOIN LATERAL telemetry_decode(r.samples) d
                WHERE n.id = ANY($5) AND r.at >= $2 AND r.at < $3 GROUP BY 1, 2, 3)
            SELECT g.id AS gpu_id, agg.t AS "t!", agg.gpu_util AS "gpu_util!", agg.mem_copy_util AS "mem_copy_util!",
                agg.fb_used_mib AS "fb_used_mib!", agg.power_w AS "power_w!", agg.gpu_temp_c AS "gpu_temp_c!",
                agg.sm_clock_mhz AS "sm_clock_mhz!", agg.xid_count AS "xid_count!", agg.samples AS "samples!"
            FROM agg JOIN gpus g ON g.node_id = agg.node_id AND g.idx = agg.idx WHERE g.id = ANY($1) ORDER BY 1, 2"#,
        gpu_ids,
        from,
        to,
        step_s,
        node_ids
    )
    .map(series_row!())
    .fetch_all(conn)
    .await?)
}

/// The same as [`raw_series`] from the minute rollups: minutes starting in [from, to), each in the bucket its
/// start falls in.
pub async fn minute_series(
    conn: &mut PgConnection,
    gpu_ids: &[Uuid],
    node_ids: &[Uuid],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step_s: f64,
) -> StoreResult<Vec<SeriesRow>> {
    Ok(sqlx::query!(
        r#"SELECT gpu_id, date_bin(make_interval(secs => $4), minute, $2) AS "t!",
                (sum(gpu_util_sum) / sum(samples))::float8 AS "gpu_util!",
                (sum(mem_copy_sum) / sum(samples))::float8 AS "mem_copy_util!",
                max(fb_used_max)::bigint AS "fb_used_mib!", (sum(power_sum) / sum(samples))::float8 AS "power_w!",
                max(temp_max)::float8 AS "gpu_temp_c!", (sum(clock_sum) / sum(samples))::float8 AS "sm_clock_mhz!",
                sum(xid_count)::bigint AS "xid_count!", sum(samples)::bigint AS "samples!"
            FROM gpu_minutes WHERE gpu_id = ANY($1) AND node_id = ANY($5) AND minute >= $2 AND minute < $3
            GROUP BY 1, 2 ORDER BY 1, 2"#,
        gpu_ids,
        from,
        to,
        step_s,
        node_ids
    )
    .map(series_row!())
    .fetch_all(conn)
    .await?)
}

/// What a lease's GPUs measured in a window, as [`measure_lease`] reads it.
pub struct LeaseMeasurement {
    /// Mean of every sample; None without samples.
    pub avg_gpu_util: Option<f64>,
    pub samples: i64,
    /// The busiest GPU's mean.
    pub busiest_gpu_util: Option<f64>,
    /// The lease's GPUs that reported.
    pub gpus_reporting: i64,
    /// The lease's GPUs.
    pub gpus: i64,
    /// Seconds measured (possibly negative: callers clamp).
    pub window_s: f64,
    /// Seconds since `since` (possibly negative: callers clamp).
    pub running_for_s: f64,
}

/// What a lease's GPUs measured over the last `window_s` seconds, or since `since` when that is later. From raw
/// samples, to the heartbeat: each node's rows in the window are read and decoded once (by the primary key: the
/// node's key and the time).
pub async fn measure_lease(
    conn: &mut PgConnection,
    lease_id: Uuid,
    since: DateTime<Utc>,
    window_s: f64,
) -> StoreResult<LeaseMeasurement> {
    Ok(sqlx::query_as!(
        LeaseMeasurement,
        r#"WITH lease AS (SELECT gpu_ids FROM leases WHERE id = $1),
         held AS (
             SELECT g.id, g.idx, n.telemetry_key FROM gpus g JOIN nodes n ON n.id = g.node_id
             WHERE g.id = ANY((SELECT gpu_ids FROM lease)::uuid[])),
         per_gpu AS (
             SELECT h.id, sum(d.gpu_util::float8) AS util_sum, count(*) AS n
             FROM (SELECT DISTINCT telemetry_key FROM held) k
             JOIN telemetry_raw r ON r.node_key = k.telemetry_key
                 AND r.at >= GREATEST(now() - make_interval(secs => $3), $2)
             CROSS JOIN LATERAL telemetry_decode(r.samples) d
             JOIN held h ON h.telemetry_key = r.node_key AND h.idx = d.idx
             GROUP BY h.id)
         SELECT (sum(util_sum) / NULLIF(sum(n), 0))::float8 AS "avg_gpu_util?",
             COALESCE(sum(n), 0)::bigint AS "samples!", max(util_sum / n)::float8 AS "busiest_gpu_util?",
             count(*) AS "gpus_reporting!", COALESCE((SELECT cardinality(gpu_ids) FROM lease), 0)::bigint AS "gpus!",
             extract(epoch FROM now() - GREATEST(now() - make_interval(secs => $3), $2))::float8 AS "window_s!",
             extract(epoch FROM now() - $2)::float8 AS "running_for_s!"
         FROM per_gpu"#,
        lease_id,
        since,
        window_s
    )
    .fetch_one(conn)
    .await?)
}

/// The GPUs of a tenant's lease with their nodes, one row per GPU (by hostname and index), or one row with no
/// GPU for a lease without GPUs; none when the tenant has no such lease.
pub struct LeaseGpuRow {
    pub starts_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub gpu_id: Option<Uuid>,
    pub node_id: Option<Uuid>,
    pub hostname: Option<String>,
    pub idx: Option<i32>,
}

/// A tenant's lease and its GPUs in one round trip: a row per GPU, one without GPUs, none without the lease.
pub async fn lease_gpus(conn: &mut PgConnection, lease_id: Uuid, tenant_id: Uuid) -> StoreResult<Vec<LeaseGpuRow>> {
    Ok(sqlx::query_as!(
        LeaseGpuRow,
        r#"SELECT l.starts_at, l.ended_at, g.id AS "gpu_id?", n.id AS "node_id?", n.hostname AS "hostname?",
             g.idx AS "idx?" FROM leases l
         LEFT JOIN gpus g ON g.id = ANY(l.gpu_ids)
         LEFT JOIN nodes n ON n.id = g.node_id WHERE l.id = $1 AND l.tenant_id = $2 ORDER BY n.hostname, g.idx"#,
        lease_id,
        tenant_id
    )
    .fetch_all(conn)
    .await?)
}

/// A node's GPUs, by index (empty when there is no such node).
pub async fn node_gpus(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<GpuRef>> {
    Ok(sqlx::query_as!(
        GpuRef,
        "SELECT g.id AS gpu_id, n.id AS node_id, n.hostname, g.idx AS index \
         FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.id = $1 ORDER BY g.idx",
        node_id
    )
    .fetch_all(conn)
    .await?)
}

/// Does the pool exist?
pub async fn pool_exists(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM pools WHERE id = $1) AS "exists!""#, pool_id)
        .fetch_one(conn)
        .await?)
}

/// Each node of a pool (by hostname) with its mean utilization and power over [from, to), from raw samples.
pub async fn pool_utilization_raw(
    conn: &mut PgConnection,
    pool_id: Uuid,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> StoreResult<Vec<NodeUtilization>> {
    Ok(sqlx::query_as!(
        NodeUtilization,
        r#"SELECT n.id AS node_id, n.hostname, avg(s.gpu_util)::float8 AS avg_gpu_util,
                 avg(s.power_w)::float8 AS avg_power_w, count(s.gpu_id) AS "samples!"
             FROM nodes n LEFT JOIN gpu_samples s ON s.node_id = n.id AND s.at >= $2 AND s.at < $3
             WHERE n.pool_id = $1 GROUP BY n.id ORDER BY n.hostname"#,
        pool_id,
        from,
        to
    )
    .fetch_all(conn)
    .await?)
}

/// The same as [`pool_utilization_raw`] from the hourly rollups: whole hours from `from`'s.
pub async fn pool_utilization_hourly(
    conn: &mut PgConnection,
    pool_id: Uuid,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> StoreResult<Vec<NodeUtilization>> {
    Ok(sqlx::query_as!(
        NodeUtilization,
        r#"SELECT n.id AS node_id, n.hostname, (sum(h.gpu_util_sum) / sum(h.samples))::float8 AS avg_gpu_util,
                 (sum(h.power_sum) / sum(h.samples))::float8 AS avg_power_w,
                 COALESCE(sum(h.samples), 0)::bigint AS "samples!"
             FROM nodes n LEFT JOIN node_hours h ON h.node_id = n.id AND h.pool_id = $1
                 AND h.hour >= date_trunc('hour', $2::timestamptz) AND h.hour < $3
             WHERE n.pool_id = $1 GROUP BY n.id ORDER BY n.hostname"#,
        pool_id,
        from,
        to
    )
    .fetch_all(conn)
    .await?)
}
