//! API key lifecycle: operators create, list, revoke and rotate operator keys; tenant admins rotate their
//! tenant's keys. Every change is written to `audit_events` in the same transaction (who, what, when).
//!
//! Rotation issues a successor with the same name, role and tenant, and lets the old key work for a stated
//! grace period (`expires_at`), so its users can switch without an outage. The platform never loses its last
//! operator: revoking the last operator key that does not expire is refused (409 `last_operator_key`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use gpuplane_store::auth as store;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::api_keys::{ApiKey, CreatedApiKey, insert_api_key};
use super::{OperatorAuth, Role, TenantAdminAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, check_name};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

/// Longest name of a key, in characters.
pub const MAX_KEY_NAME_CHARS: usize = 100;
/// Grace period of a rotated key when the request names none: a day.
pub const DEFAULT_GRACE_SECONDS: i64 = 24 * 3600;
/// Longest grace period: a week.
pub const MAX_GRACE_SECONDS: i64 = 7 * 24 * 3600;

/// A key's name: 1-100 characters, not blank, no control characters.
pub fn check_key_name(name: &str) -> Result<(), FieldError> {
    check_name("name", name, MAX_KEY_NAME_CHARS)
}

pub use gpuplane_store::auth::{AuditAction, AuditEvent};

crate::page_schema!(AuditEventPage, AuditEvent);

/// Create a key and audit it. `actor_key_id` None: the command line.
pub async fn create_api_key(
    conn: &mut PgConnection,
    actor_key_id: Option<Uuid>,
    tenant_id: Option<Uuid>,
    name: &str,
    role: Role,
) -> Result<CreatedApiKey, sqlx::Error> {
    let created = insert_api_key(conn, tenant_id, name, role).await?;
    let detail = serde_json::json!({ "name": created.key.name, "role": role.as_str() });
    store::insert_audit_event(conn, actor_key_id, tenant_id, AuditAction::ApiKeyCreated, created.key.id, detail)
        .await?;
    Ok(created)
}

/// Revoke a key of `tenant_id` (None: an operator key), audited. Revoking twice is harmless (no new event).
pub async fn revoke_api_key(
    conn: &mut PgConnection,
    actor_key_id: Uuid,
    tenant_id: Option<Uuid>,
    key_id: Uuid,
) -> ApiResult<()> {
    if tenant_id.is_none() {
        store::lock_operator_keys(conn).await?;
    }
    let key = store::lock_key_active(conn, key_id, tenant_id).await?;
    let Some(active) = key else { return Err(ApiError::NotFound("api key")) };
    if !active {
        return Ok(());
    }
    if tenant_id.is_none() {
        let others = store::count_other_lasting_operator_keys(conn, key_id).await?;
        if others == 0 {
            return Err(ApiError::conflict(
                "last_operator_key",
                "this is the last operator key that does not expire: create another one before revoking it",
            ));
        }
    }
    store::revoke_key(conn, key_id).await?;
    store::insert_audit_event(
        conn,
        Some(actor_key_id),
        tenant_id,
        AuditAction::ApiKeyRevoked,
        key_id,
        serde_json::json!({}),
    )
    .await?;
    Ok(())
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"grace_seconds": 3600}))]
pub struct RotateApiKeyRequest {
    /// How long the old key keeps working, in seconds (0-604800, default 86400). 0 revokes it at once.
    #[schema(minimum = 0, maximum = 604800)]
    pub grace_seconds: Option<i64>,
}

/// The successor of a rotated key, with its secret, and when the old key stops working.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RotatedApiKey {
    #[serde(flatten)]
    pub created: CreatedApiKey,
    /// The key that was rotated.
    pub replaces: Uuid,
    /// When the old key stops working.
    pub old_key_expires_at: DateTime<Utc>,
}

/// Rotate a key of `tenant_id` (None: an operator key), audited.
async fn rotate_api_key(
    conn: &mut PgConnection,
    actor_key_id: Uuid,
    tenant_id: Option<Uuid>,
    key_id: Uuid,
    req: &RotateApiKeyRequest,
) -> ApiResult<RotatedApiKey> {
    let grace = req.grace_seconds.unwrap_or(DEFAULT_GRACE_SECONDS);
    if !(0..=MAX_GRACE_SECONDS).contains(&grace) {
        return Err(ApiError::field("grace_seconds", format!("seconds, 0-{MAX_GRACE_SECONDS}")));
    }
    if tenant_id.is_none() {
        store::lock_operator_keys(conn).await?;
    }
    let key = store::lock_key_for_rotation(conn, key_id, tenant_id).await?;
    let Some(store::RotatableKey { name, role, rotatable }) = key else { return Err(ApiError::NotFound("api key")) };
    if !rotatable {
        return Err(ApiError::conflict("key_not_rotatable", "the key is revoked or already being rotated"));
    }
    let created = create_api_key(conn, Some(actor_key_id), tenant_id, &name, role).await?;
    let expires_at = store::expire_rotated_key(conn, key_id, grace as f64, created.key.id).await?;
    let detail = serde_json::json!({ "successor_key_id": created.key.id, "grace_seconds": grace });
    store::insert_audit_event(conn, Some(actor_key_id), tenant_id, AuditAction::ApiKeyRotated, key_id, detail).await?;
    Ok(RotatedApiKey { created, replaces: key_id, old_key_expires_at: expires_at })
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "second-operator"}))]
pub struct CreateOperatorKeyRequest {
    /// A label for people, 1-100 characters.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
}

/// List operator keys (never their secrets).
#[utoipa::path(
    get, path = "/v1/admin/api-keys", tag = "admin", operation_id = "list_operator_api_keys",
    responses((status = 200, description = "Operator keys, oldest first: prefix, name, created, last used, revoked, expiry", body = Vec<ApiKey>))
)]
pub async fn list_operator_api_keys(State(state): State<AppState>, _op: OperatorAuth) -> ApiResult<Json<Vec<ApiKey>>> {
    let mut conn = state.db.acquire().await?;
    let keys = store::list_operator_keys(&mut conn).await?;
    Ok(Json(keys))
}

/// Create a further operator key.
#[utoipa::path(
    post, path = "/v1/admin/api-keys", tag = "admin", operation_id = "create_operator_api_key",
    request_body = CreateOperatorKeyRequest,
    responses((status = 201, description = "The key; its secret is shown only now", body = CreatedApiKey))
)]
pub async fn create_operator_api_key(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiJson(req): ApiJson<CreateOperatorKeyRequest>,
) -> ApiResult<(StatusCode, NoStore, Json<CreatedApiKey>)> {
    check_key_name(&req.name).map_err(|e| ApiError::Validation(vec![e]))?;
    let mut tx = state.db.begin().await?;
    let created = create_api_key(&mut tx, Some(op.key_id), None, &req.name, Role::Operator).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, NO_STORE, Json(created)))
}

/// Revoke an operator key; tokens issued for it stop working at once. The last operator key that does not
/// expire cannot be revoked. Revoking twice is harmless.
#[utoipa::path(
    delete, path = "/v1/admin/api-keys/{key_id}", tag = "admin", operation_id = "revoke_operator_api_key",
    params(("key_id" = Uuid, Path, description = "API key id")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 409, description = "The last operator key that does not expire (`last_operator_key`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn revoke_operator_api_key(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiPath(key_id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    let mut tx = state.db.begin().await?;
    revoke_api_key(&mut tx, op.key_id, None, key_id).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Rotate an operator key: a new key now, the old one valid for the grace period.
#[utoipa::path(
    post, path = "/v1/admin/api-keys/{key_id}/rotate", tag = "admin", operation_id = "rotate_operator_api_key",
    params(("key_id" = Uuid, Path, description = "API key id")),
    request_body = RotateApiKeyRequest,
    responses(
        (status = 201, description = "The successor key (its secret is shown only now) and the old key's end", body = RotatedApiKey),
        (status = 409, description = "The key is revoked or already rotated (`key_not_rotatable`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn rotate_operator_api_key(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiPath(key_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<RotateApiKeyRequest>,
) -> ApiResult<(StatusCode, NoStore, Json<RotatedApiKey>)> {
    let mut tx = state.db.begin().await?;
    let rotated = rotate_api_key(&mut tx, op.key_id, None, key_id, &req).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, NO_STORE, Json(rotated)))
}

/// Rotate one of the tenant's keys: a new key now, the old one valid for the grace period.
#[utoipa::path(
    post, path = "/v1/tenant/api-keys/{key_id}/rotate", tag = "tenants", operation_id = "rotate_tenant_api_key",
    params(("key_id" = Uuid, Path, description = "API key id")),
    request_body = RotateApiKeyRequest,
    responses(
        (status = 201, description = "The successor key (its secret is shown only now) and the old key's end", body = RotatedApiKey),
        (status = 409, description = "The key is revoked or already rotated (`key_not_rotatable`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn rotate_tenant_api_key(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(key_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<RotateApiKeyRequest>,
) -> ApiResult<(StatusCode, NoStore, Json<RotatedApiKey>)> {
    let mut tx = state.db.begin().await?;
    let rotated = rotate_api_key(&mut tx, auth.key_id, Some(auth.tenant_id), key_id, &req).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, NO_STORE, Json(rotated)))
}

#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditFilter {
    /// Only events about this tenant's keys.
    pub tenant_id: Option<Uuid>,
}

/// The audit trail of credential changes, oldest first.
#[utoipa::path(
    get, path = "/v1/admin/audit-events", tag = "admin", operation_id = "list_audit_events",
    params(PageParams, AuditFilter),
    responses((status = 200, description = "Audit events, oldest first", body = AuditEventPage))
)]
pub async fn list_audit_events(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiQuery(page): ApiQuery<PageParams>,
    ApiQuery(filter): ApiQuery<AuditFilter>,
) -> ApiResult<Json<Page<AuditEvent>>> {
    let limit = page.fetch_limit()?;
    let mut conn = state.db.acquire().await?;
    let rows = store::list_audit_events(&mut conn, page.after(), filter.tenant_id, limit).await?;
    Ok(Json(Page::from_rows(rows, limit, |e: &AuditEvent| e.id)))
}

/// Mark keys whose grace period has ended as revoked, so every check (including the SQL-side ones of the fast
/// lease endpoints, which look at `revoked_at` only) sees them as such (the `credentials` worker,
/// [`crate::workers::credentials`]): how many keys it revoked.
pub async fn revoke_expired_keys(db: &sqlx::PgPool) -> Result<u64, sqlx::Error> {
    let mut conn = db.acquire().await?;
    Ok(store::revoke_expired_keys(&mut conn).await?)
}

/// Create the first operator key. Serialized with an advisory lock so two concurrent bootstraps cannot both win.
pub async fn bootstrap_operator(pool: &sqlx::PgPool, name: &str) -> anyhow::Result<String> {
    let mut tx = pool.begin().await?;
    gpuplane_store::ops::lock_bootstrap(&mut tx).await?;
    if gpuplane_store::ops::operator_exists(&mut tx).await? {
        anyhow::bail!("an operator already exists; create further keys with `POST /v1/admin/api-keys`");
    }
    let created = create_api_key(&mut tx, None, None, name, crate::auth::Role::Operator).await?;
    tx.commit().await?;
    Ok(created.api_key)
}
