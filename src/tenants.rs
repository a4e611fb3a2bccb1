//! Tenants: the companies and labs that rent GPUs. Operators manage them and their quotas; tenants read themselves.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::api_keys::CreatedApiKey;
use crate::auth::key_lifecycle::create_api_key;
use crate::auth::routes::CreateApiKeyRequest;
use crate::auth::{OperatorAuth, TenantAuth};
use crate::billing::ledger::Balance;
use crate::error::{ApiError, ApiResult, FieldError, constraint_name};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, new_id};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

crate::page_schema!(TenantPage, Tenant);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum TenantStatus {
    Active,
    Suspended,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PoolQuota {
    pub pool_id: Uuid,
    /// GPUs the tenant may hold at once in this pool.
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_gpus: i32,
}

/// Limits on what a tenant may hold at once. Absent (null) means unlimited.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
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
pub async fn load_tenant(conn: &mut PgConnection, id: Uuid) -> Result<Option<Tenant>, sqlx::Error> {
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

/// The balances of these tenants, per tenant in currency order.
async fn load_balances(conn: &mut PgConnection, tenant_ids: &[Uuid]) -> Result<Vec<(Uuid, Balance)>, sqlx::Error> {
    let rows: Vec<(Uuid, String, i64)> = sqlx::query_as(
        "SELECT tenant_id, currency, balance_minor FROM tenant_balances WHERE tenant_id = ANY($1) \
         ORDER BY tenant_id, currency",
    )
    .bind(tenant_ids)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|(t, currency, balance_minor)| (t, Balance { currency, balance_minor })).collect())
}

async fn load_pool_quotas(conn: &mut PgConnection, tenant_ids: &[Uuid]) -> Result<Vec<(Uuid, PoolQuota)>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT tenant_id, pool_id, max_gpus FROM tenant_pool_quotas WHERE tenant_id = ANY($1) ORDER BY pool_id",
        tenant_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.tenant_id, PoolQuota { pool_id: r.pool_id, max_gpus: r.max_gpus })).collect())
}

fn validate_name(name: &str, errors: &mut Vec<FieldError>) {
    errors.extend(crate::extract::check_name("name", name, 100).err());
}

fn validate_limit(field: &str, value: Option<i32>, errors: &mut Vec<FieldError>) {
    if let Some(v) = value
        && !(0..=1_000_000).contains(&v)
    {
        errors.push(FieldError::new(field, "must be between 0 and 1000000 (or null for unlimited)"));
    }
}

fn name_conflict(err: sqlx::Error) -> ApiError {
    match constraint_name(&err) {
        Some("tenants_name_unique") => ApiError::conflict("tenant_name_taken", "a tenant with this name exists"),
        _ => err.into(),
    }
}

/// The caller's own tenant.
#[utoipa::path(
    get, path = "/v1/tenant", tag = "tenants", operation_id = "get_own_tenant",
    responses((status = 200, description = "The caller's tenant", body = Tenant))
)]
pub async fn get_own_tenant(State(state): State<AppState>, auth: TenantAuth) -> ApiResult<Json<Tenant>> {
    let mut conn = state.db.acquire().await?;
    load_tenant(&mut conn, auth.tenant_id).await?.map(Json).ok_or(ApiError::NotFound("tenant"))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "acme-ml", "quotas": {"max_concurrent_leases": 10, "max_gpus_per_pool": 32}}))]
pub struct CreateTenantRequest {
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
    #[serde(default)]
    pub quotas: Option<Quotas>,
}

/// Create a tenant.
#[utoipa::path(
    post, path = "/v1/admin/tenants", tag = "admin", operation_id = "create_tenant",
    request_body = CreateTenantRequest,
    responses(
        (status = 201, description = "The tenant", body = Tenant),
        (status = 409, description = "Name taken (`tenant_name_taken`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_tenant(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiJson(req): ApiJson<CreateTenantRequest>,
) -> ApiResult<(StatusCode, Json<Tenant>)> {
    let mut errors = Vec::new();
    validate_name(&req.name, &mut errors);
    let quotas = req.quotas.unwrap_or_default();
    validate_quotas(&quotas, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    let id = new_id();
    sqlx::query!(
        "INSERT INTO tenants (id, name, max_concurrent_leases, max_gpus_per_pool) VALUES ($1, $2, $3, $4)",
        id,
        req.name.trim(),
        quotas.max_concurrent_leases,
        quotas.max_gpus_per_pool
    )
    .execute(&mut *tx)
    .await
    .map_err(name_conflict)?;
    write_pool_quotas(&mut tx, id, &quotas.pools).await?;
    let tenant = load_tenant(&mut tx, id).await?.ok_or(ApiError::NotFound("tenant"))?;
    tx.commit().await?;
    tracing::info!(tenant.id = %id, "tenant created");
    Ok((StatusCode::CREATED, Json(tenant)))
}

fn validate_quotas(quotas: &Quotas, errors: &mut Vec<FieldError>) {
    validate_limit("quotas.max_concurrent_leases", quotas.max_concurrent_leases, errors);
    validate_limit("quotas.max_gpus_per_pool", quotas.max_gpus_per_pool, errors);
    for (i, q) in quotas.pools.iter().enumerate() {
        validate_limit(&format!("quotas.pools[{i}].max_gpus"), Some(q.max_gpus), errors);
        if quotas.pools[..i].iter().any(|other| other.pool_id == q.pool_id) {
            errors.push(FieldError::new(format!("quotas.pools[{i}].pool_id"), "listed twice"));
        }
    }
}

async fn write_pool_quotas(conn: &mut PgConnection, tenant_id: Uuid, pools: &[PoolQuota]) -> ApiResult<()> {
    sqlx::query!("DELETE FROM tenant_pool_quotas WHERE tenant_id = $1", tenant_id).execute(&mut *conn).await?;
    for (i, q) in pools.iter().enumerate() {
        sqlx::query!(
            "INSERT INTO tenant_pool_quotas (tenant_id, pool_id, max_gpus) VALUES ($1, $2, $3)",
            tenant_id,
            q.pool_id,
            q.max_gpus
        )
        .execute(&mut *conn)
        .await
        .map_err(|err| match constraint_name(&err) {
            Some("tenant_pool_quotas_pool_id_fkey") => {
                ApiError::field(format!("quotas.pools[{i}].pool_id"), "no such pool")
            }
            _ => err.into(),
        })?;
    }
    Ok(())
}

/// List tenants, in creation order, with their quotas and balances.
#[utoipa::path(
    get, path = "/v1/admin/tenants", tag = "admin", operation_id = "list_tenants",
    params(PageParams),
    responses((status = 200, description = "A page of tenants", body = TenantPage))
)]
pub async fn list_tenants(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<Page<Tenant>>> {
    let limit = page.fetch_limit()?;
    let mut conn = state.db.acquire().await?;
    let rows = sqlx::query_as!(
        TenantRow,
        r#"SELECT id, name, status AS "status: TenantStatus", max_concurrent_leases, max_gpus_per_pool, created_at,
               updated_at
           FROM tenants WHERE id > $1 ORDER BY id LIMIT $2"#,
        page.after(),
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let quotas = load_pool_quotas(&mut conn, &ids).await?;
    let balances = load_balances(&mut conn, &ids).await?;
    let tenants = rows
        .into_iter()
        .map(|row| {
            let pools = quotas.iter().filter(|(t, _)| *t == row.id).map(|(_, q)| q.clone()).collect();
            let balances = balances.iter().filter(|(t, _)| *t == row.id).map(|(_, b)| b.clone()).collect();
            row.into_tenant(pools, balances)
        })
        .collect();
    Ok(Json(Page::from_rows(tenants, limit, |t| t.id)))
}

/// Get a tenant.
#[utoipa::path(
    get, path = "/v1/admin/tenants/{tenant_id}", tag = "admin", operation_id = "get_tenant",
    params(("tenant_id" = Uuid, Path, description = "Tenant id")),
    responses((status = 200, description = "The tenant", body = Tenant))
)]
pub async fn get_tenant(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(tenant_id): ApiPath<Uuid>,
) -> ApiResult<Json<Tenant>> {
    let mut conn = state.db.acquire().await?;
    load_tenant(&mut conn, tenant_id).await?.map(Json).ok_or(ApiError::NotFound("tenant"))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"status": "suspended"}))]
pub struct UpdateTenantRequest {
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: Option<String>,
    /// `suspended` blocks every request of the tenant's users with 403 `tenant_suspended`, and ends their console
    /// sessions (401 `session_ended`, also after reactivation).
    pub status: Option<TenantStatus>,
}

/// Rename, suspend or reactivate a tenant.
#[utoipa::path(
    patch, path = "/v1/admin/tenants/{tenant_id}", tag = "admin", operation_id = "update_tenant",
    params(("tenant_id" = Uuid, Path, description = "Tenant id")),
    request_body = UpdateTenantRequest,
    responses(
        (status = 200, description = "The updated tenant", body = Tenant),
        (status = 409, description = "Name taken (`tenant_name_taken`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn update_tenant(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(tenant_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<UpdateTenantRequest>,
) -> ApiResult<Json<Tenant>> {
    let mut errors = Vec::new();
    if let Some(name) = &req.name {
        validate_name(name, &mut errors);
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    let updated = sqlx::query!(
        "UPDATE tenants SET name = COALESCE($2, name), status = COALESCE($3, status), updated_at = now() WHERE id = $1",
        tenant_id,
        req.name.as_deref().map(str::trim),
        req.status as Option<TenantStatus>
    )
    .execute(&mut *tx)
    .await
    .map_err(name_conflict)?;
    if updated.rows_affected() == 0 {
        return Err(ApiError::NotFound("tenant"));
    }
    if req.status == Some(TenantStatus::Suspended) {
        // Reactivation must not bring them back: they end now, with the suspension.
        crate::auth::sessions::end_tenant_sessions(&mut tx, tenant_id).await?;
    }
    let tenant = load_tenant(&mut tx, tenant_id).await?.ok_or(ApiError::NotFound("tenant"))?;
    tx.commit().await?;
    Ok(Json(tenant))
}

/// Replace a tenant's quotas.
#[utoipa::path(
    put, path = "/v1/admin/tenants/{tenant_id}/quotas", tag = "admin", operation_id = "set_tenant_quotas",
    params(("tenant_id" = Uuid, Path, description = "Tenant id")),
    request_body = Quotas,
    responses((status = 200, description = "The tenant with its new quotas", body = Tenant))
)]
pub async fn set_tenant_quotas(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(tenant_id): ApiPath<Uuid>,
    ApiJson(quotas): ApiJson<Quotas>,
) -> ApiResult<Json<Tenant>> {
    let mut errors = Vec::new();
    validate_quotas(&quotas, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    let updated = sqlx::query!(
        "UPDATE tenants SET max_concurrent_leases = $2, max_gpus_per_pool = $3, updated_at = now() WHERE id = $1",
        tenant_id,
        quotas.max_concurrent_leases,
        quotas.max_gpus_per_pool
    )
    .execute(&mut *tx)
    .await?;
    if updated.rows_affected() == 0 {
        return Err(ApiError::NotFound("tenant"));
    }
    write_pool_quotas(&mut tx, tenant_id, &quotas.pools).await?;
    let tenant = load_tenant(&mut tx, tenant_id).await?.ok_or(ApiError::NotFound("tenant"))?;
    tx.commit().await?;
    Ok(Json(tenant))
}

/// Create an API key for a tenant (how a new tenant gets its first admin key).
#[utoipa::path(
    post, path = "/v1/admin/tenants/{tenant_id}/api-keys", tag = "admin", operation_id = "create_api_key_for_tenant",
    params(("tenant_id" = Uuid, Path, description = "Tenant id")),
    request_body = CreateApiKeyRequest,
    responses((status = 201, description = "The key; its secret is shown only now", body = CreatedApiKey))
)]
pub async fn create_api_key_for_tenant(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiPath(tenant_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<CreateApiKeyRequest>,
) -> ApiResult<(StatusCode, NoStore, Json<CreatedApiKey>)> {
    req.validate_for_tenant()?;
    let mut tx = state.db.begin().await?;
    let exists =
        sqlx::query_scalar!("SELECT id FROM tenants WHERE id = $1", tenant_id).fetch_optional(&mut *tx).await?;
    if exists.is_none() {
        return Err(ApiError::NotFound("tenant"));
    }
    let created = create_api_key(&mut tx, Some(op.key_id), Some(tenant_id), &req.name, req.role).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, NO_STORE, Json(created)))
}
