//! Operators' reads that span domains: health, metrics gauges, the CLI's and the planner API's inventory reads.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;
use crate::inventory::gpu_models::GpuModel;

/// Check that the database answers.
pub async fn ping(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query!("SELECT 1 AS one").fetch_one(conn).await?;
    Ok(())
}

/// One figure of the fleet: (family, pool, state, value).
pub type FleetRow = (String, String, String, f64);

/// Every fleet figure in one round trip. Zeros are explicit (each pool has a series for each state), so a graph
/// or an alert never confuses "none" with "not reported". Cost: one aggregation over GPUs (with their current
/// holder), one over nodes and one over the live leases, then joined to the small pools x states grid: about
/// 80 ms at 10,000 nodes and 80,000 GPUs on the 2-core test machine (docs/operations.md). Labels are pool names
/// and fixed state names only.
pub async fn fleet_figures(conn: &mut PgConnection) -> StoreResult<Vec<FleetRow>> {
    let rows = sqlx::query!(
        r#"
WITH gpu_counts AS (
    SELECT n.pool_id,
           CASE WHEN g.held_by IS NOT NULL THEN 'allocated'
                WHEN NOT g.healthy THEN 'unhealthy'
                WHEN n.admin_state <> 'active' OR n.liveness <> 'ready' THEN 'unavailable'
                ELSE 'free' END AS state,
           count(*) AS n
      FROM gpus g
      JOIN nodes n ON n.id = g.node_id
     GROUP BY 1, 2
), node_counts AS (
    SELECT pool_id, liveness, admin_state, count(*) AS n,
           min(last_heartbeat_at) FILTER (WHERE liveness = 'ready') AS oldest_heartbeat
      FROM nodes GROUP BY 1, 2, 3
), lease_counts AS (
    SELECT pool_id, state, count(*) AS n, min(created_at) AS oldest
      FROM leases WHERE state IN ('queued', 'active') GROUP BY 1, 2
)
SELECT 'gpus' AS "family!", p.name AS "pool!", s.state AS "state!", COALESCE(c.n, 0)::float8 AS "value!"
  FROM pools p CROSS JOIN (VALUES ('free'), ('allocated'), ('unhealthy'), ('unavailable')) s(state)
  LEFT JOIN gpu_counts c ON c.pool_id = p.id AND c.state = s.state
UNION ALL
SELECT 'nodes_liveness', p.name, s.state, COALESCE((SELECT sum(c.n) FROM node_counts c WHERE c.pool_id = p.id AND c.liveness = s.state), 0)::float8
  FROM pools p CROSS JOIN (VALUES ('ready'), ('unreachable'), ('offline')) s(state)
UNION ALL
SELECT 'nodes_admin', p.name, s.state, COALESCE((SELECT sum(c.n) FROM node_counts c WHERE c.pool_id = p.id AND c.admin_state = s.state), 0)::float8
  FROM pools p CROSS JOIN (VALUES ('active'), ('cordoned'), ('draining'), ('maintenance')) s(state)
UNION ALL
SELECT 'leases', p.name, s.state, COALESCE(c.n, 0)::float8
  FROM pools p CROSS JOIN (VALUES ('queued'), ('active')) s(state)
  LEFT JOIN lease_counts c ON c.pool_id = p.id AND c.state = s.state
UNION ALL
SELECT 'queue_oldest_age', p.name, '', COALESCE(EXTRACT(EPOCH FROM now() - c.oldest), 0)::float8
  FROM pools p LEFT JOIN lease_counts c ON c.pool_id = p.id AND c.state = 'queued'
UNION ALL
SELECT 'heartbeat_age_max', p.name, '',
       COALESCE(EXTRACT(EPOCH FROM now() - (SELECT min(c.oldest_heartbeat) FROM node_counts c WHERE c.pool_id = p.id)), 0)::float8
  FROM pools p
UNION ALL
SELECT 'metering_lag', '', '',
       COALESCE(EXTRACT(EPOCH FROM max(LEAST(now(), l.ends_at) - l.metered_until)), 0)::float8
  FROM leases l
 WHERE l.state = 'active' AND l.metered_until IS NOT NULL
"#
    )
    .map(|r| (r.family, r.pool, r.state, r.value))
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// A pool as the planner sees it, before it becomes the planner's offer.
#[derive(Debug, Clone)]
pub struct PoolOfferRow {
    pub id: Uuid,
    /// The current price of one GPU-hour, in minor units of `currency`.
    pub price_per_gpu_hour_minor: i64,
    pub currency: String,
    pub gpu_model: GpuModel,
    /// GPUs free now on allocatable nodes.
    pub free_gpus: i64,
    /// The most GPUs of any node of the pool (0: no nodes).
    pub gpus_per_node: i32,
    /// The slowest node's inter-node network, Gbit/s.
    pub network_gbps: i32,
    /// Whether every node has RDMA.
    pub rdma: bool,
}

/// The platform's pools as the planner sees them: model facts, price, GPUs free now, typical node shape, by id.
pub async fn pool_offer_rows(conn: &mut PgConnection) -> StoreResult<Vec<PoolOfferRow>> {
    let rows = sqlx::query!(
        r#"SELECT p.id, COALESCE((SELECT cp.price_per_gpu_hour_minor FROM pool_current_prices cp WHERE cp.pool_id = p.id),
                    p.price_per_gpu_hour_minor) AS "price!",
                p.currency,
                json_build_object('key', m.key, 'name', m.name, 'memory_bytes', m.memory_bytes,
                    'memory_bandwidth_gbps', m.memory_bandwidth_gbps, 'bf16_tflops', m.bf16_tflops,
                    'fp8_tflops', m.fp8_tflops, 'gpu_link', m.gpu_link, 'gpu_link_gbps', m.gpu_link_gbps,
                    'host_link', m.host_link) AS "gpu_model!: sqlx::types::Json<GpuModel>",
                COALESCE(sum(n.free_gpus) FILTER (WHERE node_allocatable(n.admin_state, n.liveness)), 0)::bigint AS "free!",
                COALESCE(max(n.gpu_count), 0)::int AS "per_node!",
                COALESCE(min(n.network_gbps), 0)::int AS "network!", COALESCE(bool_and(n.rdma), false) AS "rdma!"
         FROM pools p JOIN gpu_models m ON m.key = p.gpu_model LEFT JOIN nodes n ON n.pool_id = p.id
         GROUP BY p.id, m.key ORDER BY p.id"#
    )
    .map(|r| PoolOfferRow {
        id: r.id,
        price_per_gpu_hour_minor: r.price,
        currency: r.currency,
        gpu_model: r.gpu_model.0,
        free_gpus: r.free,
        gpus_per_node: r.per_node,
        network_gbps: r.network,
        rdma: r.rdma,
    })
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// Every pool's id (as text) and name.
pub async fn pool_names(conn: &mut PgConnection) -> StoreResult<Vec<(String, String)>> {
    let names =
        sqlx::query!(r#"SELECT id::text AS "id!", name FROM pools"#).map(|r| (r.id, r.name)).fetch_all(conn).await?;
    Ok(names)
}

/// Take the transaction's advisory lock that serializes bootstraps of the first operator.
pub async fn lock_bootstrap(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('gpuplane.bootstrap')) AS locked").fetch_one(conn).await?;
    Ok(())
}

/// Is there an operator API key?
pub async fn operator_exists(conn: &mut PgConnection) -> StoreResult<bool> {
    let exists = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM api_keys WHERE role = 'operator') AS "exists!""#)
        .fetch_one(conn)
        .await?;
    Ok(exists)
}
