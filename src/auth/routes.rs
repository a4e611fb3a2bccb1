//! `POST /v1/auth/token` and API key management.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::TenantAdminAuth;
pub use super::api_keys::{ApiKey, CreatedApiKey, insert_api_key};
use super::requests::{CreateApiKeyRequest, TokenRequest};
use super::sessions::exchange_api_key;
use crate::error::ApiResult;
use crate::extract::{ApiJson, ApiPath};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

/// An OAuth-style bearer token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    pub access_token: String,
    /// Always `Bearer`.
    pub token_type: String,
    /// Seconds until the token expires.
    pub expires_in: u64,
}

/// Exchange an API key for a short-lived access token.
#[utoipa::path(
    post, path = "/v1/auth/token", tag = "auth", operation_id = "create_token",
    request_body = TokenRequest,
    responses(
        (status = 200, description = "A bearer token for the key's principal", body = TokenResponse),
        (status = 401, description = "Unknown, malformed or revoked key", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "The key's tenant is suspended (`tenant_suspended`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_token(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<TokenRequest>,
) -> ApiResult<(NoStore, Json<TokenResponse>)> {
    let p = exchange_api_key(&state, &req.api_key).await?;
    let access_token = state.tokens.issue(p.key_id, p.tenant_id, p.role)?;
    Ok((NO_STORE, Json(TokenResponse { access_token, token_type: "Bearer".into(), expires_in: state.tokens.ttl_secs })))
}

/// List the tenant's API keys.
#[utoipa::path(
    get, path = "/v1/tenant/api-keys", tag = "tenants", operation_id = "list_tenant_api_keys",
    responses((status = 200, description = "The tenant's keys, newest last", body = Vec<ApiKey>))
)]
pub async fn list_tenant_api_keys(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
) -> ApiResult<Json<Vec<ApiKey>>> {
    let mut conn = state.db.acquire().await?;
    let keys = gpuplane_store::auth::list_tenant_keys(&mut conn, auth.tenant_id).await?;
    Ok(Json(keys))
}

/// Create an API key for the caller's tenant.
#[utoipa::path(
    post, path = "/v1/tenant/api-keys", tag = "tenants", operation_id = "create_tenant_api_key",
    request_body = CreateApiKeyRequest,
    responses((status = 201, description = "The key; its secret is shown only now", body = CreatedApiKey))
)]
pub async fn create_tenant_api_key(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiJson(req): ApiJson<CreateApiKeyRequest>,
) -> ApiResult<(StatusCode, NoStore, Json<CreatedApiKey>)> {
    req.validate_for_tenant()?;
    let mut tx = state.db.begin().await?;
    let created =
        super::key_lifecycle::create_api_key(&mut tx, Some(auth.key_id), Some(auth.tenant_id), &req.name, req.role)
            .await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, NO_STORE, Json(created)))
}

/// Revoke one of the tenant's API keys. Tokens issued for it stop working at once. Revoking twice is harmless.
#[utoipa::path(
    delete, path = "/v1/tenant/api-keys/{key_id}", tag = "tenants", operation_id = "revoke_tenant_api_key",
    params(("key_id" = Uuid, Path, description = "API key id")),
    responses((status = 204, description = "Revoked"))
)]
pub async fn revoke_tenant_api_key(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(key_id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    let mut tx = state.db.begin().await?;
    super::key_lifecycle::revoke_api_key(&mut tx, auth.key_id, Some(auth.tenant_id), key_id).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
