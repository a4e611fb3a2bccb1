//! The read-only model cache each host offers its leases: which models a node holds (its agent's report) and which a
//! pool's ready hosts hold. (Placing a lease on a host that holds its model is allocation's:
//! `leases::allocation::lock_best_fit_holding`.)

use serde::Serialize;
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

/// Set the models a node's cache holds (the agent sends the whole list when it changed). A report of an agent
/// generation that is no longer the node's changes nothing.
pub async fn record(conn: &mut PgConnection, node_id: Uuid, generation: i64, models: &[String]) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE nodes SET cached_models = $3, updated_at = now() \
         WHERE id = $1 AND agent_generation = $2 AND cached_models IS DISTINCT FROM $3",
        node_id,
        generation,
        models
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A model in a pool's caches.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CachedModel {
    /// Its hub id (`org/name`): a job loads it by this id from `HF_HOME` (`/models` in the lease).
    pub model_id: String,
    /// Ready hosts of the pool whose cache holds it.
    pub hosts: i64,
    /// Free GPUs on those hosts now.
    pub free_gpus: i64,
    /// The most free GPUs on one of them: the largest one-host lease that gets the model from the cache now.
    pub largest_free_block: i64,
}

/// The models the pool's ready hosts hold, by id.
pub async fn pool_models(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<Vec<CachedModel>> {
    let rows = sqlx::query_as!(
        CachedModel,
        r#"SELECT m AS "model_id!", count(*) AS "hosts!", coalesce(sum(n.free_gpus), 0)::bigint AS "free_gpus!",
                  coalesce(max(n.free_gpus), 0)::bigint AS "largest_free_block!"
           FROM nodes n, unnest(n.cached_models) AS m
           WHERE n.pool_id = $1 AND node_allocatable(n.admin_state, n.liveness)
           GROUP BY m ORDER BY m"#,
        pool_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}
