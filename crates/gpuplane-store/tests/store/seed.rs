//! What every store test starts from, in SQL: a tenant, its key, an H100 pool, agent nodes with GPUs.

use sqlx::PgPool;
use uuid::Uuid;

/// A tenant, one of its keys and a pool.
pub struct Base {
    pub tenant: Uuid,
    pub key: Uuid,
    pub pool: Uuid,
}

pub async fn base(db: &PgPool) -> Base {
    let (tenant, key, pool) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    sqlx::query(
        "WITH t AS (INSERT INTO tenants (id, name) VALUES ($1, 'store-test') RETURNING id), \
              k AS (INSERT INTO api_keys (id, tenant_id, role, name, prefix, secret_hash) \
                    SELECT $2, t.id, 'tenant_admin', 'store-test', 'gpk_test', sha256('store-test'::bytea) FROM t) \
         INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency) \
         VALUES ($3, 'store-pool', 'h100', 'test', 249, 'USD')",
    )
    .bind(tenant)
    .bind(key)
    .bind(pool)
    .execute(db)
    .await
    .unwrap();
    Base { tenant, key, pool }
}

/// An agent node of the pool, active and ready, with `gpus` healthy free GPUs (indices from 0); its id.
pub async fn node(db: &PgPool, pool: Uuid, hostname: &str, gpus: i32) -> Uuid {
    let id = Uuid::new_v4();
    sqlx::query(
        "WITH n AS (INSERT INTO nodes (id, pool_id, hostname, address, admin_state, liveness, intra_link, \
                 intra_link_gbps, network_gbps, gpu_count, free_gpus, agent_managed) \
             VALUES ($1, $2, $3, $3 || '.test', 'active', 'ready', 'nvlink', 900, 400, $4, $4, true) RETURNING id) \
         INSERT INTO gpus (id, node_id, idx, uuid) \
         SELECT gen_random_uuid(), n.id, i, 'GPU-' || $3 || '-' || i FROM n, generate_series(0, $4 - 1) i",
    )
    .bind(id)
    .bind(pool)
    .bind(hostname)
    .bind(gpus)
    .execute(db)
    .await
    .unwrap();
    id
}

/// The nodes whose free counter differs from their healthy GPUs no lease holds (must be none).
pub async fn counters_out_of_step(db: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT n.hostname FROM nodes n WHERE n.free_gpus <> (SELECT count(*) FROM gpus g \
             WHERE g.node_id = n.id AND g.healthy AND g.held_by IS NULL) ORDER BY n.hostname",
    )
    .fetch_all(db)
    .await
    .unwrap()
}
