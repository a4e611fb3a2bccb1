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
use serde::{Deserialize, Serialize};
use sqlx::{AssertSqlSafe, PgConnection};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::api_keys::{ApiKey, CreatedApiKey, KEY_COLUMNS, insert_api_key};
use super::{OperatorAuth, Role, TenantAdminAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, check_name, new_id};
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

pub use gpuplane_store::auth::AuditAction;

/// One audited change.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct AuditEvent {
    pub id: Uuid,
    pub at: DateTime<Utc>,
    /// The API key whose token made the change; absent for the command line (`gpuplane bootstrap`).
    pub actor_key_id: Option<Uuid>,
    /// The tenant of the subject; absent for operator keys.
    pub tenant_id: Option<Uuid>,
    pub action: AuditAction,
    /// The API key the change is about.
    pub subject_key_id: Uuid,
    /// Facts of the change, e.g. `{"successor_key_id": ..., "grace_seconds": 86400}` for a rotation.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

crate::page_schema!(AuditEventPage, AuditEvent);

/// Record an audit event in the caller's transaction.
pub async fn audit(
    conn: &mut PgConnection,
    actor_key_id: Option<Uuid>,
    tenant_id: Option<Uuid>,
    action: AuditAction,
    subject_key_id: Uuid,
    detail: serde_json::Value,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO audit_events (id, actor_key_id, tenant_id, action, subject_key_id, detail) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(new_id())
    .bind(actor_key_id)
    .bind(tenant_id)
    .bind(action)
    .bind(subject_key_id)
    .bind(detail)
    .execute(conn)
    .await?;
    Ok(())
}

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
    audit(conn, actor_key_id, tenant_id, AuditAction::ApiKeyCreated, created.key.id, detail).await?;
    Ok(created)
}

/// Serializes changes to operator keys, so two concurrent revocations cannot both pass the last-key check.
async fn lock_operator_keys(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('gpuplane.operator_keys'))").execute(conn).await?;
    Ok(())
}

/// Revoke a key of `tenant_id` (None: an operator key), audited. Revoking twice is harmless (no new event).
pub async fn revoke_api_key(
    conn: &mut PgConnection,
    actor_key_id: Uuid,
    tenant_id: Option<Uuid>,
    key_id: Uuid,
) -> ApiResult<()> {
    if tenant_id.is_none() {
        lock_operator_keys(conn).await?;
    }
    let key: Option<(bool,)> = sqlx::query_as(
        "SELECT revoked_at IS NULL FROM api_keys WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 FOR UPDATE",
    )
    .bind(key_id)
    .bind(tenant_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((active,)) = key else { return Err(ApiError::NotFound("api key")) };
    if !active {
        return Ok(());
    }
    if tenant_id.is_none() {
        let (others,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM api_keys WHERE role = 'operator' AND id <> $1 \
             AND revoked_at IS NULL AND expires_at IS NULL",
        )
        .bind(key_id)
        .fetch_one(&mut *conn)
        .await?;
        if others == 0 {
            return Err(ApiError::conflict(
                "last_operator_key",
                "this is the last operator key that does not expire: create another one before revoking it",
            ));
        }
    }
    sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE id = $1").bind(key_id).execute(&mut *conn).await?;
    audit(conn, Some(actor_key_id), tenant_id, AuditAction::ApiKeyRevoked, key_id, serde_json::json!({})).await?;
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
        lock_operator_keys(conn).await?;
    }
    let key: Option<(String, Role, bool)> = sqlx::query_as(
        "SELECT name, role, revoked_at IS NULL AND expires_at IS NULL FROM api_keys \
         WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 FOR UPDATE",
    )
    .bind(key_id)
    .bind(tenant_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((name, role, rotatable)) = key else { return Err(ApiError::NotFound("api key")) };
    if !rotatable {
        return Err(ApiError::conflict("key_not_rotatable", "the key is revoked or already being rotated"));
    }
    let created = create_api_key(conn, Some(actor_key_id), tenant_id, &name, role).await?;
    let (expires_at,): (DateTime<Utc>,) = sqlx::query_as(
        "UPDATE api_keys SET expires_at = now() + make_interval(secs => $2), replaced_by = $3, \
             revoked_at = CASE WHEN $2 = 0 THEN now() END \
         WHERE id = $1 RETURNING expires_at",
    )
    .bind(key_id)
    .bind(grace as f64)
    .bind(created.key.id)
    .fetch_one(&mut *conn)
    .await?;
    let detail = serde_json::json!({ "successor_key_id": created.key.id, "grace_seconds": grace });
    audit(conn, Some(actor_key_id), tenant_id, AuditAction::ApiKeyRotated, key_id, detail).await?;
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
    let keys: Vec<ApiKey> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE role = 'operator' ORDER BY id"
    )))
    .fetch_all(&state.db)
    .await?;
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
    let rows: Vec<AuditEvent> = sqlx::query_as(
        "SELECT id, at, actor_key_id, tenant_id, action, subject_key_id, detail FROM audit_events \
         WHERE id > $1 AND ($2::uuid IS NULL OR tenant_id = $2) ORDER BY id LIMIT $3",
    )
    .bind(page.after())
    .bind(filter.tenant_id)
    .bind(limit)
    .fetch_all(&state.db)
    .await?;
    Ok(Json(Page::from_rows(rows, limit, |e| e.id)))
}

/// Mark keys whose grace period has ended as revoked, so every check (including the SQL-side ones of the fast
/// lease endpoints, which look at `revoked_at` only) sees them as such (the `credentials` worker,
/// [`crate::workers::credentials`]): how many keys it revoked.
pub async fn revoke_expired_keys(db: &sqlx::PgPool) -> Result<u64, sqlx::Error> {
    let done =
        sqlx::query("UPDATE api_keys SET revoked_at = expires_at WHERE revoked_at IS NULL AND expires_at <= now()")
            .execute(db)
            .await?;
    Ok(done.rows_affected())
}
