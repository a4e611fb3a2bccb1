//! Tenants: the companies and labs that rent GPUs. Operators manage them and their quotas; tenants read themselves.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use gpuplane_store::StoreError;
use gpuplane_store::tenants as store;
use serde::Deserialize;
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::api_keys::CreatedApiKey;
use crate::auth::key_lifecycle::create_api_key;
use crate::auth::requests::CreateApiKeyRequest;
use crate::auth::{OperatorAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, new_id};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

crate::page_schema!(TenantPage, Tenant);

pub use gpuplane_store::tenants::{PoolQuota, Quotas, Tenant, TenantStatus};

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

fn name_conflict(err: StoreError) -> ApiError {
    match err.constraint() {
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
    store::load_tenant(&mut conn, auth.tenant_id).await?.map(Json).ok_or(ApiError::NotFound("tenant"))
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
    store::insert_tenant(&mut tx, id, req.name.trim(), quotas.max_concurrent_leases, quotas.max_gpus_per_pool)
        .await
        .map_err(name_conflict)?;
    write_pool_quotas(&mut tx, id, &quotas.pools).await?;
    let tenant = store::load_tenant(&mut tx, id).await?.ok_or(ApiError::NotFound("tenant"))?;
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
    store::delete_pool_quotas(conn, tenant_id).await?;
    for (i, q) in pools.iter().enumerate() {
        store::insert_pool_quota(conn, tenant_id, q).await.map_err(|err| match err.constraint() {
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
    let tenants = store::list_tenants(&mut conn, page.after(), limit).await?;
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
    store::load_tenant(&mut conn, tenant_id).await?.map(Json).ok_or(ApiError::NotFound("tenant"))
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
    let updated = store::update_tenant(&mut tx, tenant_id, req.name.as_deref().map(str::trim), req.status)
        .await
        .map_err(name_conflict)?;
    if !updated {
        return Err(ApiError::NotFound("tenant"));
    }
    if req.status == Some(TenantStatus::Suspended) {
        // Reactivation must not bring them back: they end now, with the suspension.
        crate::auth::sessions::end_tenant_sessions(&mut tx, tenant_id).await?;
    }
    let tenant = store::load_tenant(&mut tx, tenant_id).await?.ok_or(ApiError::NotFound("tenant"))?;
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
    let updated = store::set_limits(&mut tx, tenant_id, quotas.max_concurrent_leases, quotas.max_gpus_per_pool).await?;
    if !updated {
        return Err(ApiError::NotFound("tenant"));
    }
    write_pool_quotas(&mut tx, tenant_id, &quotas.pools).await?;
    let tenant = store::load_tenant(&mut tx, tenant_id).await?.ok_or(ApiError::NotFound("tenant"))?;
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
    if !store::tenant_exists(&mut tx, tenant_id).await? {
        return Err(ApiError::NotFound("tenant"));
    }
    let created = create_api_key(&mut tx, Some(op.key_id), Some(tenant_id), &req.name, req.role).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, NO_STORE, Json(created)))
}
