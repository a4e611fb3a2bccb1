//! Reading telemetry: a tenant's leased GPUs during the lease, an operator's nodes and pools.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use gpuplane_store::agents::telemetry::{self as store, GpuRef};

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

pub use gpuplane_store::agents::telemetry::{NodeUtilization, TelemetryPoint};

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
    // The nodes too: raw rows are keyed by node, so each node's rows are read once, not once per GPU.
    let mut nodes: Vec<Uuid> = gpus.iter().map(|g| g.node_id).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let rows = if from_raw(state, from, to) {
        store::raw_series(conn, &ids, &nodes, from, to, step as f64).await?
    } else {
        store::minute_series(conn, &ids, &nodes, from, to, step as f64).await?
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
    let rows = store::lease_gpus(&mut conn, lease_id, auth.tenant_id).await?;
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
    let gpus = store::node_gpus(&mut conn, node_id).await?;
    if gpus.is_empty() {
        return Err(ApiError::NotFound("node"));
    }
    let (from, to, step) = range.resolve(None, Utc::now())?;
    Ok(Json(series(&state, &mut conn, gpus, from, to, step).await?))
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
    let mut conn = state.db.acquire().await?;
    if !store::pool_exists(&mut conn, pool_id).await? {
        return Err(ApiError::NotFound("pool"));
    }
    let (from, to, _) = range.resolve(None, Utc::now())?;
    // Short recent ranges from raw samples; longer ones from the hourly rollups (whole hours from `from`'s).
    let nodes = if from_raw(&state, from, to) {
        store::pool_utilization_raw(&mut conn, pool_id, from, to).await?
    } else {
        store::pool_utilization_hourly(&mut conn, pool_id, from, to).await?
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
