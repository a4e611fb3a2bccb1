//! `/v1/services`: the tenant's services (a job with `serve`), who may call them (keys, public, rate limit).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use gpuplane_store::services::{self as store, ServiceKey, ServiceRow};

use super::requests::{CreateServiceKeyRequest, UpdateServiceRequest};
use crate::auth::{TenantAdminAuth, TenantAuth};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, new_id};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

crate::page_schema!(ServicePage, Service);

/// A service: where callers reach it and who may.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Service {
    #[serde(flatten)]
    pub service: ServiceRow,
    /// The gateway's address of the service: a request to `{url}/PATH` reaches `/PATH` on a ready replica.
    pub url: String,
    /// Its requests over the last hour, as every gateway counted them (one service's: absent in lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_hour: Option<super::stats::RequestStats>,
}

fn view(state: &AppState, service: ServiceRow) -> Service {
    let url = format!("{}/s/{}", state.settings.gateway_url.trim_end_matches('/'), service.id);
    Service { url, service, last_hour: None }
}

/// The service's requests in its last 60 minutes (this one included).
async fn last_hour(state: &AppState, id: Uuid) -> ApiResult<super::stats::RequestStats> {
    const MINUTES: i64 = 60;
    let now = chrono::Utc::now();
    let since = chrono::DurationRound::duration_trunc(now, chrono::TimeDelta::minutes(1)).unwrap_or(now)
        - chrono::TimeDelta::minutes(MINUTES - 1);
    let mut conn = state.db.acquire().await?;
    let mut total = super::stats::Counts::default();
    for minute in store::request_minutes(&mut conn, id, since).await? {
        total.merge(&minute.into());
    }
    Ok(super::stats::summarize(&total, MINUTES))
}

async fn tenant_service(state: &AppState, tenant_id: Uuid, id: Uuid) -> ApiResult<ServiceRow> {
    let mut conn = state.db.acquire().await?;
    let mut rows = store::list_services(&mut conn, tenant_id, Some(id), 1, Uuid::nil()).await?;
    rows.pop().ok_or(ApiError::NotFound("service"))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ServiceListParams {
    /// Items per page, 1-500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// Return services after this id (the `next_after` of the previous page).
    pub after: Option<Uuid>,
}

/// The tenant's services, in id order.
#[utoipa::path(
    get, path = "/v1/services", tag = "services", operation_id = "list_services",
    params(ServiceListParams),
    responses((status = 200, description = "A page of the tenant's services", body = ServicePage))
)]
pub async fn list_services(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiQuery(params): ApiQuery<ServiceListParams>,
) -> ApiResult<Json<Page<Service>>> {
    let page = PageParams { limit: params.limit, after: params.after };
    let limit = page.fetch_limit()?;
    let mut conn = state.db.acquire().await?;
    let rows = store::list_services(&mut conn, auth.tenant_id, None, limit, page.after()).await?;
    let services = rows.into_iter().map(|s| view(&state, s)).collect();
    Ok(Json(Page::from_rows(services, limit, |s: &Service| s.service.id)))
}

/// One of the tenant's services, with its replicas' readiness and its requests over the last hour.
#[utoipa::path(
    get, path = "/v1/services/{service_id}", tag = "services", operation_id = "get_service",
    params(("service_id" = Uuid, Path, description = "Service id")),
    responses(
        (status = 200, description = "The service", body = Service),
        (status = 404, description = "No such service of the tenant's", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_service(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Service>> {
    let service = tenant_service(&state, auth.tenant_id, id).await?;
    let mut service = view(&state, service);
    service.last_hour = Some(last_hour(&state, id).await?);
    Ok(Json(service))
}

/// Make a service public or private, or change its rate limit (tenant admin). Takes effect on the next request.
#[utoipa::path(
    patch, path = "/v1/services/{service_id}", tag = "services", operation_id = "update_service",
    params(("service_id" = Uuid, Path, description = "Service id")),
    request_body = UpdateServiceRequest,
    responses(
        (status = 200, description = "The service as changed", body = Service),
        (status = 404, description = "No such service of the tenant's", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid values (`validation_failed`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn update_service(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<UpdateServiceRequest>,
) -> ApiResult<Json<Service>> {
    let errors = req.validate();
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut conn = state.db.acquire().await?;
    if !store::update_service(&mut conn, auth.tenant_id, id, req.public, req.rate_limit_per_minute).await? {
        return Err(ApiError::NotFound("service"));
    }
    drop(conn);
    let service = tenant_service(&state, auth.tenant_id, id).await?;
    tracing::info!(service.id = %id, public = service.public, rate_limit = ?service.rate_limit_per_minute, "service changed");
    Ok(Json(view(&state, service)))
}

/// A new key, with its secret (shown only here).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreatedServiceKey {
    #[serde(flatten)]
    pub key: ServiceKey,
    /// The key: callers send `Authorization: Bearer <secret>` to the service's URL. Not shown again.
    pub secret: String,
}

/// The service's keys (revoked ones too, with when), never their secrets.
#[utoipa::path(
    get, path = "/v1/services/{service_id}/keys", tag = "services", operation_id = "list_service_keys",
    params(("service_id" = Uuid, Path, description = "Service id")),
    responses(
        (status = 200, description = "The keys, oldest first", body = Vec<ServiceKey>),
        (status = 404, description = "No such service of the tenant's", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_service_keys(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Vec<ServiceKey>>> {
    tenant_service(&state, auth.tenant_id, id).await?;
    let mut conn = state.db.acquire().await?;
    Ok(Json(store::list_keys(&mut conn, id).await?))
}

/// A key for the service's callers (tenant admin): its secret is in this answer only.
#[utoipa::path(
    post, path = "/v1/services/{service_id}/keys", tag = "services", operation_id = "create_service_key",
    params(("service_id" = Uuid, Path, description = "Service id")),
    request_body = CreateServiceKeyRequest,
    responses(
        (status = 201, description = "The key and its secret", body = CreatedServiceKey),
        (status = 404, description = "No such service of the tenant's", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid values (`validation_failed`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_service_key(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<CreateServiceKeyRequest>,
) -> ApiResult<(StatusCode, NoStore, Json<CreatedServiceKey>)> {
    let errors = req.validate();
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    tenant_service(&state, auth.tenant_id, id).await?;
    let new = super::keys::generate();
    let mut conn = state.db.acquire().await?;
    let key = store::insert_key(&mut conn, new_id(), id, &req.name, &new.display_prefix, &new.hash).await?;
    tracing::info!(service.id = %id, key.id = %key.id, "service key created");
    Ok((StatusCode::CREATED, NO_STORE, Json(CreatedServiceKey { key, secret: new.secret })))
}

/// Revoke a key (tenant admin): the gateway refuses it from the next request on. Idempotent.
#[utoipa::path(
    delete, path = "/v1/services/{service_id}/keys/{key_id}", tag = "services", operation_id = "revoke_service_key",
    params(
        ("service_id" = Uuid, Path, description = "Service id"),
        ("key_id" = Uuid, Path, description = "Key id"),
    ),
    responses(
        (status = 200, description = "The key, revoked", body = ServiceKey),
        (status = 404, description = "No such service of the tenant's, or no such key of it", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn revoke_service_key(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath((id, key_id)): ApiPath<(Uuid, Uuid)>,
) -> ApiResult<Json<ServiceKey>> {
    tenant_service(&state, auth.tenant_id, id).await?;
    let mut conn = state.db.acquire().await?;
    let key = store::revoke_key(&mut conn, id, key_id).await?.ok_or(ApiError::NotFound("key"))?;
    tracing::info!(service.id = %id, key.id = %key_id, "service key revoked");
    Ok(Json(key))
}
