//! Join tokens: operators mint them per pool (expiring, limited uses); agents present one to register.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use gpuplane_store::agents::tokens;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{OperatorAuth, keys};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, new_id};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

pub use gpuplane_store::agents::tokens::JoinToken;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreatedJoinToken {
    #[serde(flatten)]
    pub token: JoinToken,
    /// The secret token for `gpuplane agent --join-token`. Shown only now.
    pub join_token: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"max_uses": 16, "ttl_hours": 24}))]
pub struct CreateJoinTokenRequest {
    /// How many registrations it allows (1-100000, default 1).
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 100000)]
    pub max_uses: i32,
    /// Hours until it expires (1-8760, default 24).
    #[serde(default = "day")]
    #[schema(minimum = 1, maximum = 8760)]
    pub ttl_hours: i32,
}

fn one() -> i32 {
    1
}
fn day() -> i32 {
    24
}

/// Mint a join token for a pool.
#[utoipa::path(
    post, path = "/v1/admin/pools/{pool_id}/join-tokens", tag = "admin", operation_id = "create_join_token",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    request_body = CreateJoinTokenRequest,
    responses((status = 201, description = "The token; its secret is shown only now", body = CreatedJoinToken))
)]
pub async fn create_join_token(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<CreateJoinTokenRequest>,
) -> ApiResult<(StatusCode, NoStore, Json<CreatedJoinToken>)> {
    let mut errors = Vec::new();
    if !(1..=100_000).contains(&req.max_uses) {
        errors.push(FieldError::new("max_uses", "must be between 1 and 100000"));
    }
    if !(1..=8760).contains(&req.ttl_hours) {
        errors.push(FieldError::new("ttl_hours", "must be between 1 and 8760"));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let secret = keys::generate_with_prefix(keys::JOIN_TOKEN_PREFIX);
    let mut conn = state.db.acquire().await?;
    let new = tokens::NewJoinToken {
        id: new_id(),
        pool_id,
        prefix: &secret.display_prefix,
        secret_hash: &secret.hash,
        max_uses: req.max_uses,
        ttl_hours: req.ttl_hours,
        created_by: op.key_id,
    };
    let token = tokens::create_join_token(&mut conn, new).await?;
    let token = token.ok_or(ApiError::NotFound("pool"))?;
    Ok((StatusCode::CREATED, NO_STORE, Json(CreatedJoinToken { token, join_token: secret.secret })))
}

/// List a pool's join tokens.
#[utoipa::path(
    get, path = "/v1/admin/pools/{pool_id}/join-tokens", tag = "admin", operation_id = "list_join_tokens",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    responses((status = 200, description = "The pool's join tokens", body = Vec<JoinToken>))
)]
pub async fn list_join_tokens(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
) -> ApiResult<Json<Vec<JoinToken>>> {
    let mut conn = state.db.acquire().await?;
    Ok(Json(tokens::list_join_tokens(&mut conn, pool_id).await?))
}

/// Revoke a join token. Nodes that registered with it keep their credentials.
#[utoipa::path(
    delete, path = "/v1/admin/join-tokens/{token_id}", tag = "admin", operation_id = "revoke_join_token",
    params(("token_id" = Uuid, Path, description = "Join token id")),
    responses((status = 204, description = "Revoked"))
)]
pub async fn revoke_join_token(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(token_id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    let mut conn = state.db.acquire().await?;
    if !tokens::revoke_join_token(&mut conn, token_id).await? {
        return Err(ApiError::NotFound("join token"));
    }
    Ok(StatusCode::NO_CONTENT)
}
