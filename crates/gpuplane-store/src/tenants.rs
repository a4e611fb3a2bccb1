//! Tenants: the companies and labs that rent GPUs, their quotas and their balances.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;
use crate::billing::ledger::Balance;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum TenantStatus {
    Active,
    Suspended,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolQuota {
    pub pool_id: Uuid,
    /// GPUs the tenant may hold at once in this pool.
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_gpus: i32,
}

/// Limits on what a tenant may hold at once. Absent (null) means unlimited.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Quotas {
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_concurrent_leases: Option<i32>,
    /// Default GPU limit for every pool.
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_gpus_per_pool: Option<i32>,
    /// Per-pool limits overriding `max_gpus_per_pool`.
    #[serde(default)]
    pub pools: Vec<PoolQuota>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Tenant {
    pub id: Uuid,
    pub name: String,
    pub status: TenantStatus,
    pub quotas: Quotas,
    /// The prepaid balance per currency (the sum of the tenant's ledger entries, as `GET /v1/billing/balance`
    /// gives it), in currency order; empty before the first ledger entry.
    #[serde(default)]
    pub balances: Vec<Balance>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

struct TenantRow {
    id: Uuid,
    name: String,
    status: TenantStatus,
    max_concurrent_leases: Option<i32>,
    max_gpus_per_pool: Option<i32>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TenantRow {
    fn into_tenant(self, pools: Vec<PoolQuota>, balances: Vec<Balance>) -> Tenant {
        Tenant {
            id: self.id,
            name: self.name,
            status: self.status,
            quotas: Quotas {
                max_concurrent_leases: self.max_concurrent_leases,
                max_gpus_per_pool: self.max_gpus_per_pool,
                pools,
            },
            balances,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// Load one tenant with its per-pool quotas.
pub async fn load_tenant(conn: &mut PgConnection, id: Uuid) -> StoreResult<Option<Tenant>> {
    let row = sqlx::query_as!(
        TenantRow,
        r#"SELECT id, name, status AS "status: TenantStatus", max_concurrent_leases, max_gpus_per_pool, created_at,
               updated_at
           FROM tenants WHERE id = $1"#,
        id
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let pools = load_pool_quotas(conn, &[id]).await?.into_iter().map(|(_, q)| q).collect();
    let balances = load_balances(conn, &[id]).await?.into_iter().map(|(_, b)| b).collect();
    Ok(Some(row.into_tenant(pools, balances)))
}

/// The tenants after `after`, in creation order, at most `limit`, with their quotas and balances.
pub async fn list_tenants(conn: &mut PgConnection, after: Uuid, limit: i64) -> StoreResult<Vec<Tenant>> {
    let rows = sqlx::query_as!(
        TenantRow,
        r#"SELECT id, name, status AS "status: TenantStatus", max_concurrent_leases, max_gpus_per_pool, created_at,
               updated_at
           FROM tenants WHERE id > $1 ORDER BY id LIMIT $2"#,
        after,
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let quotas = load_pool_quotas(conn, &ids).await?;
    let balances = load_balances(conn, &ids).await?;
    let tenants = rows
        .into_iter()
        .map(|row| {
            let pools = quotas.iter().filter(|(t, _)| *t == row.id).map(|(_, q)| q.clone()).collect();
            let balances = balances.iter().filter(|(t, _)| *t == row.id).map(|(_, b)| b.clone()).collect();
            row.into_tenant(pools, balances)
        })
        .collect();
    Ok(tenants)
}

/// The balances of these tenants, per tenant in currency order.
async fn load_balances(conn: &mut PgConnection, tenant_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, Balance)>> {
    let rows = sqlx::query!(
        r#"SELECT tenant_id AS "tenant_id!", currency AS "currency!", balance_minor AS "balance_minor!"
         FROM tenant_balances WHERE tenant_id = ANY($1)
         ORDER BY tenant_id, currency"#,
        tenant_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.tenant_id, Balance { currency: r.currency, balance_minor: r.balance_minor }))
        .collect())
}

async fn load_pool_quotas(conn: &mut PgConnection, tenant_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, PoolQuota)>> {
    let rows = sqlx::query!(
        "SELECT tenant_id, pool_id, max_gpus FROM tenant_pool_quotas WHERE tenant_id = ANY($1) ORDER BY pool_id",
        tenant_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.tenant_id, PoolQuota { pool_id: r.pool_id, max_gpus: r.max_gpus })).collect())
}

/// Store a new tenant (its name taken: the constraint `tenants_name_unique`).
pub async fn insert_tenant(
    conn: &mut PgConnection,
    id: Uuid,
    name: &str,
    max_concurrent_leases: Option<i32>,
    max_gpus_per_pool: Option<i32>,
) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO tenants (id, name, max_concurrent_leases, max_gpus_per_pool) VALUES ($1, $2, $3, $4)",
        id,
        name,
        max_concurrent_leases,
        max_gpus_per_pool
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Remove every per-pool quota of the tenant.
pub async fn delete_pool_quotas(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<()> {
    sqlx::query!("DELETE FROM tenant_pool_quotas WHERE tenant_id = $1", tenant_id).execute(conn).await?;
    Ok(())
}

/// Store one per-pool quota of the tenant (no such pool: the constraint `tenant_pool_quotas_pool_id_fkey`).
pub async fn insert_pool_quota(conn: &mut PgConnection, tenant_id: Uuid, quota: &PoolQuota) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO tenant_pool_quotas (tenant_id, pool_id, max_gpus) VALUES ($1, $2, $3)",
        tenant_id,
        quota.pool_id,
        quota.max_gpus
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Rename the tenant and/or change its status (None: as it is): whether there is such a tenant (its name
/// taken: the constraint `tenants_name_unique`).
pub async fn update_tenant(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    name: Option<&str>,
    status: Option<TenantStatus>,
) -> StoreResult<bool> {
    let updated = sqlx::query!(
        "UPDATE tenants SET name = COALESCE($2, name), status = COALESCE($3, status), updated_at = now() WHERE id = $1",
        tenant_id,
        name,
        status as Option<TenantStatus>
    )
    .execute(conn)
    .await?;
    Ok(updated.rows_affected() > 0)
}

/// Set the tenant's overall limits: whether there is such a tenant.
pub async fn set_limits(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    max_concurrent_leases: Option<i32>,
    max_gpus_per_pool: Option<i32>,
) -> StoreResult<bool> {
    let updated = sqlx::query!(
        "UPDATE tenants SET max_concurrent_leases = $2, max_gpus_per_pool = $3, updated_at = now() WHERE id = $1",
        tenant_id,
        max_concurrent_leases,
        max_gpus_per_pool
    )
    .execute(conn)
    .await?;
    Ok(updated.rows_affected() > 0)
}

/// Whether tenant `tenant_id` exists.
pub async fn tenant_exists(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<bool> {
    let found = sqlx::query_scalar!("SELECT id FROM tenants WHERE id = $1", tenant_id).fetch_optional(conn).await?;
    Ok(found.is_some())
}
