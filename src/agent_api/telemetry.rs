//! Reading telemetry: a tenant's leased GPUs during the lease, an operator's nodes and pools.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::{OperatorAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiPath, ApiQuery};
use crate::state::AppState;

#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TelemetryRange {
    /// Start (RFC 3339, UTC). Default: an hour before `to`.
    #[serde(default, deserialize_with = "crate::extract::sane_time_opt")]
    #[param(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-")]
    pub from: Option<DateTime<Utc>>,
    /// End (RFC 3339, UTC). Default: now (or the lease's end).
    #[serde(default, deserialize_with = "crate::extract::sane_time_opt")]
    #[param(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-")]
    pub to: Option<DateTime<Utc>>,
    /// Bucket width in seconds (default 60). At most 10,000 buckets per range.
    #[param(minimum = 1, maximum = 86400)]
    pub step_s: Option<i64>,
}

/// Most buckets one query may ask for.
pub const MAX_BUCKETS: i64 = 10_000;

impl TelemetryRange {
    /// Resolve defaults and clamp to `[floor, ceiling]` (a lease's period). Errors name the parameter.
    fn resolve(
        &self,
        floor: Option<DateTime<Utc>>,
        ceiling: DateTime<Utc>,
    ) -> ApiResult<(DateTime<Utc>, DateTime<Utc>, i64)> {
        let step = self.step_s.unwrap_or(60);
        let mut errors = Vec::new();
        if !(1..=86_400).contains(&step) {
            errors.push(FieldError::new("step_s", "seconds, 1-86400"));
        }
        let to = self.to.unwrap_or(ceiling).min(ceiling);
        let from = self.from.unwrap_or(to - Duration::hours(1));
        let from = floor.map_or(from, |f| from.max(f));
        if let (Some(f), Some(t)) = (self.from, self.to)
            && f >= t
        {
            errors.push(FieldError::new("from", "must be before `to`"));
        }
        if step > 0 && (to - from).num_seconds() / step > MAX_BUCKETS {
            errors.push(FieldError::new("step_s", format!("too many buckets: at most {MAX_BUCKETS} per query")));
        }
        if errors.is_empty() { Ok((from, to.max(from), step)) } else { Err(ApiError::Validation(errors)) }
    }
}

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

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GpuSeries {
    pub gpu_id: Uuid,
    pub node_id: Uuid,
    pub hostname: String,
    pub index: i32,
    pub points: Vec<TelemetryPoint>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Telemetry {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub step_s: i64,
    /// Mean GPU utilization over every sample in range (absent without samples).
    pub avg_gpu_util: Option<f64>,
    pub gpus: Vec<GpuSeries>,
}

/// Ranges longer than this are read from the rollups even while raw samples cover them.
const RAW_RANGE_MAX: Duration = Duration::hours(6);

/// Whether [from, to) is answered from raw samples (exact, to the sample) rather than the rollups (to the
/// minute or hour): short ranges within the raw retention.
fn from_raw(state: &AppState, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
    let raw_since = Utc::now() - Duration::from_std(state.settings.telemetry_retention).unwrap_or_default();
    from >= raw_since && to - from <= RAW_RANGE_MAX
}

/// A GPU whose series is read, with where it is.
struct GpuRef {
    gpu_id: Uuid,
    node_id: Uuid,
    hostname: String,
    index: i32,
}

/// Bucketed series for the given GPUs over [from, to): from raw samples for short recent ranges, else from
/// the minute rollups.
async fn series(
    state: &AppState,
    conn: &mut PgConnection,
    gpus: Vec<GpuRef>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step: i64,
) -> Result<Telemetry, sqlx::Error> {
    let ids: Vec<Uuid> = gpus.iter().map(|g| g.gpu_id).collect();
    struct Row {
        gpu_id: Uuid,
        point: TelemetryPoint,
    }
    // The nodes too: raw rows are keyed by node, so each node's rows are read once, not once per GPU.
    let mut nodes: Vec<Uuid> = gpus.iter().map(|g| g.node_id).collect();
    nodes.sort_unstable();
    nodes.dedup();
    // The two statements give the same columns; `series_row!` builds a `Row` from either's record.
    macro_rules! series_row {
        () => {
            |r| Row {
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
    let rows: Vec<Row> = if from_raw(state, from, to) {
        // Per-bucket aggregates over raw samples: each node's rows read once (by its primary key: the node's key
        // and the time range) and their packed records decoded once, in the `gpu_samples` view's units.
        sqlx::query!(
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
            &ids,
            from,
            to,
            step as f64,
            &nodes
        )
        .map(series_row!())
        .fetch_all(conn)
        .await?
    } else {
        // The same from the minute rollups: minutes starting in [from, to), each in the bucket its start falls in.
        sqlx::query!(
            r#"SELECT gpu_id, date_bin(make_interval(secs => $4), minute, $2) AS "t!",
                (sum(gpu_util_sum) / sum(samples))::float8 AS "gpu_util!",
                (sum(mem_copy_sum) / sum(samples))::float8 AS "mem_copy_util!",
                max(fb_used_max)::bigint AS "fb_used_mib!", (sum(power_sum) / sum(samples))::float8 AS "power_w!",
                max(temp_max)::float8 AS "gpu_temp_c!", (sum(clock_sum) / sum(samples))::float8 AS "sm_clock_mhz!",
                sum(xid_count)::bigint AS "xid_count!", sum(samples)::bigint AS "samples!"
            FROM gpu_minutes WHERE gpu_id = ANY($1) AND node_id = ANY($5) AND minute >= $2 AND minute < $3
            GROUP BY 1, 2 ORDER BY 1, 2"#,
            &ids,
            from,
            to,
            step as f64,
            &nodes
        )
        .map(series_row!())
        .fetch_all(conn)
        .await?
    };
    let (weighted, count) =
        rows.iter().fold((0.0, 0i64), |(w, c), r| (w + r.point.gpu_util * r.point.samples as f64, c + r.point.samples));
    let gpus = gpus
        .into_iter()
        .map(|GpuRef { gpu_id, node_id, hostname, index }| GpuSeries {
            points: rows.iter().filter(|r| r.gpu_id == gpu_id).map(|r| r.point.clone()).collect(),
            gpu_id,
            node_id,
            hostname,
            index,
        })
        .collect();
    Ok(Telemetry { from, to, step_s: step, avg_gpu_util: (count > 0).then(|| weighted / count as f64), gpus })
}

/// What a lease's GPUs measured over the last `window_s` seconds, or since `since` when that is later (a job's
/// start, the lease's): the mean of every sample, the busiest GPU's mean, how many of the lease's GPUs reported,
/// and how long it has been since `since`. From raw samples, to the heartbeat: each node's rows in the window are
/// read and decoded once (by the primary key: the node's key and the time). The one measurement of a lease's
/// utilization: the `low_utilization` insight and the idle-lease judgement (`leases::idle`) both read it.
pub async fn measure_lease(
    conn: &mut PgConnection,
    lease_id: Uuid,
    since: DateTime<Utc>,
    window_s: i64,
) -> Result<crate::jobs::insights::Measured, sqlx::Error> {
    type Row = (Option<f64>, i64, Option<f64>, i64, i64, f64, f64);
    let (avg, samples, busiest, reporting, gpus, window_s, running_for_s): Row = sqlx::query_as(
        "WITH lease AS (SELECT gpu_ids FROM leases WHERE id = $1), \
         held AS ( \
             SELECT g.id, g.idx, n.telemetry_key FROM gpus g JOIN nodes n ON n.id = g.node_id \
             WHERE g.id = ANY((SELECT gpu_ids FROM lease)::uuid[])), \
         per_gpu AS ( \
             SELECT h.id, sum(d.gpu_util::float8) AS util_sum, count(*) AS n \
             FROM (SELECT DISTINCT telemetry_key FROM held) k \
             JOIN telemetry_raw r ON r.node_key = k.telemetry_key \
                 AND r.at >= GREATEST(now() - make_interval(secs => $3), $2) \
             CROSS JOIN LATERAL telemetry_decode(r.samples) d \
             JOIN held h ON h.telemetry_key = r.node_key AND h.idx = d.idx \
             GROUP BY h.id) \
         SELECT (sum(util_sum) / NULLIF(sum(n), 0))::float8, COALESCE(sum(n), 0)::bigint, max(util_sum / n)::float8, \
             count(*), COALESCE((SELECT cardinality(gpu_ids) FROM lease), 0)::bigint, \
             extract(epoch FROM now() - GREATEST(now() - make_interval(secs => $3), $2))::float8, \
             extract(epoch FROM now() - $2)::float8 \
         FROM per_gpu",
    )
    .bind(lease_id)
    .bind(since)
    .bind(window_s as f64)
    .fetch_one(conn)
    .await?;
    Ok(crate::jobs::insights::Measured {
        avg_gpu_util: avg,
        samples,
        window_s: window_s.max(0.0) as i64,
        running_for_s: running_for_s.max(0.0) as i64,
        busiest_gpu_util: busiest,
        gpus_reporting: reporting,
        gpus,
    })
}

/// Telemetry of the lease's GPUs, only within the lease's own period.
#[utoipa::path(
    get, path = "/v1/leases/{lease_id}/telemetry", tag = "leases", operation_id = "get_lease_telemetry",
    params(("lease_id" = Uuid, Path, description = "Lease id"), TelemetryRange),
    responses((status = 200, description = "Bucketed series per GPU", body = Telemetry))
)]
pub async fn get_lease_telemetry(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
    ApiQuery(range): ApiQuery<TelemetryRange>,
) -> ApiResult<Json<Telemetry>> {
    let mut conn = state.db.acquire().await?;
    // The lease (only the tenant's own) and its GPUs in one round trip: a row per GPU, one without GPUs.
    let rows = sqlx::query!(
        r#"SELECT l.starts_at, l.ended_at, g.id AS "gpu_id?", n.id AS "node_id?", n.hostname AS "hostname?",
             g.idx AS "idx?" FROM leases l
         LEFT JOIN gpus g ON g.id = ANY(l.gpu_ids)
         LEFT JOIN nodes n ON n.id = g.node_id WHERE l.id = $1 AND l.tenant_id = $2 ORDER BY n.hostname, g.idx"#,
        lease_id,
        auth.tenant_id
    )
    .fetch_all(&mut *conn)
    .await?;
    let Some(first) = rows.first() else { return Err(ApiError::NotFound("lease")) };
    let (starts_at, ended_at) = (first.starts_at, first.ended_at);
    let now = Utc::now();
    let (from, to, step) = range.resolve(Some(starts_at.unwrap_or(now)), ended_at.unwrap_or(now))?;
    let gpus: Vec<GpuRef> = rows
        .into_iter()
        .filter_map(|r| Some(GpuRef { gpu_id: r.gpu_id?, node_id: r.node_id?, hostname: r.hostname?, index: r.idx? }))
        .collect();
    Ok(Json(series(&state, &mut conn, gpus, from, to, step).await?))
}

/// Telemetry of a node's GPUs.
#[utoipa::path(
    get, path = "/v1/admin/nodes/{node_id}/telemetry", tag = "admin", operation_id = "get_node_telemetry",
    params(("node_id" = Uuid, Path, description = "Node id"), TelemetryRange),
    responses((status = 200, description = "Bucketed series per GPU", body = Telemetry))
)]
pub async fn get_node_telemetry(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(node_id): ApiPath<Uuid>,
    ApiQuery(range): ApiQuery<TelemetryRange>,
) -> ApiResult<Json<Telemetry>> {
    let mut conn = state.db.acquire().await?;
    let gpus = sqlx::query_as!(
        GpuRef,
        "SELECT g.id AS gpu_id, n.id AS node_id, n.hostname, g.idx AS index \
         FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.id = $1 ORDER BY g.idx",
        node_id
    )
    .fetch_all(&mut *conn)
    .await?;
    if gpus.is_empty() {
        return Err(ApiError::NotFound("node"));
    }
    let (from, to, step) = range.resolve(None, Utc::now())?;
    Ok(Json(series(&state, &mut conn, gpus, from, to, step).await?))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct NodeUtilization {
    pub node_id: Uuid,
    pub hostname: String,
    pub avg_gpu_util: Option<f64>,
    pub avg_power_w: Option<f64>,
    pub samples: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PoolUtilization {
    pub pool_id: Uuid,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub avg_gpu_util: Option<f64>,
    pub samples: i64,
    pub nodes: Vec<NodeUtilization>,
}

/// Utilization summary of a pool, per node.
#[utoipa::path(
    get, path = "/v1/admin/pools/{pool_id}/utilization", tag = "admin", operation_id = "get_pool_utilization",
    params(("pool_id" = Uuid, Path, description = "Pool id"), TelemetryRange),
    responses((status = 200, description = "Mean utilization of the pool and each node", body = PoolUtilization))
)]
pub async fn get_pool_utilization(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
    ApiQuery(range): ApiQuery<TelemetryRange>,
) -> ApiResult<Json<PoolUtilization>> {
    let exists = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM pools WHERE id = $1) AS "exists!""#, pool_id)
        .fetch_one(&state.db)
        .await?;
    if !exists {
        return Err(ApiError::NotFound("pool"));
    }
    let (from, to, _) = range.resolve(None, Utc::now())?;
    // Short recent ranges from raw samples; longer ones from the hourly rollups (whole hours from `from`'s).
    let nodes = if from_raw(&state, from, to) {
        sqlx::query_as!(
            NodeUtilization,
            r#"SELECT n.id AS node_id, n.hostname, avg(s.gpu_util)::float8 AS avg_gpu_util,
                 avg(s.power_w)::float8 AS avg_power_w, count(s.gpu_id) AS "samples!"
             FROM nodes n LEFT JOIN gpu_samples s ON s.node_id = n.id AND s.at >= $2 AND s.at < $3
             WHERE n.pool_id = $1 GROUP BY n.id ORDER BY n.hostname"#,
            pool_id,
            from,
            to
        )
        .fetch_all(&state.db)
        .await?
    } else {
        sqlx::query_as!(
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
        .fetch_all(&state.db)
        .await?
    };
    let samples: i64 = nodes.iter().map(|n| n.samples).sum();
    let weighted: f64 = nodes.iter().map(|n| n.avg_gpu_util.unwrap_or(0.0) * n.samples as f64).sum();
    Ok(Json(PoolUtilization {
        pool_id,
        from,
        to,
        avg_gpu_util: (samples > 0).then(|| weighted / samples as f64),
        samples,
        nodes,
    }))
}
