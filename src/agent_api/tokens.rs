//! Join tokens: operators mint them per pool (expiring, limited uses); agents present one to register.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{OperatorAuth, keys};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, new_id};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct JoinToken {
    pub id: Uuid,
    pub pool_id: Uuid,
    /// The first characters of the token, to recognise it.
    pub prefix: String,
    pub max_uses: i32,
    pub uses: i32,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

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
    let token = sqlx::query_as!(
        JoinToken,
        "INSERT INTO join_tokens (id, pool_id, prefix, secret_hash, max_uses, expires_at, created_by) \
         SELECT $1, p.id, $3, $4, $5, now() + make_interval(hours => $6), $7 FROM pools p WHERE p.id = $2 \
         RETURNING id, pool_id, prefix, max_uses, uses, expires_at, created_at, revoked_at",
        new_id(),
        pool_id,
        &secret.display_prefix,
        &secret.hash,
        req.max_uses,
        req.ttl_hours,
        op.key_id
    )
    .fetch_optional(&state.db)
    .await?;
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
    let tokens = sqlx::query_as!(
        JoinToken,
        "SELECT id, pool_id, prefix, max_uses, uses, expires_at, created_at, revoked_at \
         FROM join_tokens WHERE pool_id = $1 ORDER BY id",
        pool_id
    )
    .fetch_all(&state.db)
    .await?;
    Ok(Json(tokens))
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
    let done = sqlx::query!("UPDATE join_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1", token_id)
        .execute(&state.db)
        .await?;
    if done.rows_affected() == 0 {
        return Err(ApiError::NotFound("join token"));
    }
    Ok(StatusCode::NO_CONTENT)
}
