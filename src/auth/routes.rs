//! `POST /v1/auth/token` and API key management.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

pub use super::api_keys::{ApiKey, CreatedApiKey, insert_api_key};
use super::{Role, TenantAdminAuth, keys};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"api_key": "gpk_4f9pQm2c7HkYbXrS1aTzLw0vNeUd8GjKoPiQ3sBcFhM"}))]
pub struct TokenRequest {
    /// An API key (`gpk_...`).
    #[schema(pattern = r"^gpk_[A-Za-z0-9_-]{43}$")]
    pub api_key: String,
}

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

/// The one key check of an exchange, shared by `POST /v1/auth/token` and the console's sign-in: a known,
/// unrevoked, unexpired key of an active tenant (or an operator key) is its principal, for which the caller
/// issues a short-lived access token (the console's with a session).
pub async fn exchange_api_key(state: &AppState, api_key: &str) -> ApiResult<super::Principal> {
    if !keys::looks_like_key(api_key) {
        return Err(ApiError::unauthorized("invalid API key"));
    }
    let mut conn = state.db.acquire().await?;
    let row = gpuplane_store::auth::exchange_key(&mut conn, &keys::hash(api_key)).await?;
    let Some(gpuplane_store::auth::ExchangedKey { key_id, tenant_id, role, tenant_status }) = row else {
        return Err(ApiError::unauthorized("invalid API key"));
    };
    if tenant_status.as_deref() == Some("suspended") {
        return Err(ApiError::Forbidden { code: "tenant_suspended", message: "the tenant is suspended".into() });
    }
    Ok(super::Principal { key_id, tenant_id, role, session_id: None })
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "ci-pipeline", "role": "tenant_member"}))]
pub struct CreateApiKeyRequest {
    /// A label for people, 1-100 characters.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
    /// `tenant_admin` or `tenant_member` (operator keys: `POST /v1/admin/api-keys`).
    #[schema(value_type = TenantRole)]
    pub role: Role,
}

impl CreateApiKeyRequest {
    pub fn validate_for_tenant(&self) -> Result<(), ApiError> {
        let mut errors = Vec::new();
        if let Err(e) = super::key_lifecycle::check_key_name(&self.name) {
            errors.push(e);
        }
        if self.role == Role::Operator {
            errors.push(FieldError::new("role", "tenant keys are tenant_admin or tenant_member"));
        }
        if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
    }
}

/// The roles a tenant key may have (documentation of [`CreateApiKeyRequest::role`]; `operator` is refused).
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum TenantRole {
    TenantAdmin,
    TenantMember,
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
