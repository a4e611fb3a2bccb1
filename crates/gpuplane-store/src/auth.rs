//! API keys: roles, the keys as stored, their check, console sessions and the audit of changes to keys.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Role {
    /// Platform operator: every `/v1/admin/*` endpoint.
    Operator,
    /// Tenant administrator: reads the tenant and manages its API keys and leases.
    TenantAdmin,
    /// Tenant member: reads the tenant's data.
    TenantMember,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Operator => "operator",
            Role::TenantAdmin => "tenant_admin",
            Role::TenantMember => "tenant_member",
        }
    }
}

/// What an audit event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[sqlx(type_name = "text")]
pub enum AuditAction {
    #[serde(rename = "api_key.created")]
    #[sqlx(rename = "api_key.created")]
    ApiKeyCreated,
    #[serde(rename = "api_key.revoked")]
    #[sqlx(rename = "api_key.revoked")]
    ApiKeyRevoked,
    #[serde(rename = "api_key.rotated")]
    #[sqlx(rename = "api_key.rotated")]
    ApiKeyRotated,
}

/// The CTE `key_check`: the state of the API key whose id is the parameter `key_param` (e.g. `"$1"`) and of the
/// console session `session_param` (NULL: the token names none), as one row (none: no such key). Its
/// `key_may_act` is the one definition of "this token may act now" (key not revoked, not expired, its tenant
/// not suspended, and the session, if named, still this key's and not expired): [`KeyCheck::verdict`] answers
/// from it, and a statement that must not write for a token that may not act (lease release) conditions its
/// writes on it. Embedded by statements that verify the key together with their own work (lease creation and
/// release), and run alone by [`check_key`]. The session costs one primary-key probe in the same statement (a
/// join, not an `EXISTS` in the select list: the planner flattens `k` and would run that once per reference).
pub fn key_check_cte(key_param: &str, session_param: &str) -> String {
    format!(
        "key_check AS ( \
         SELECT k.id AS checked_key_id, k.tenant_id AS checked_tenant_id, k.revoked AS key_revoked, \
                k.session_live, \
                NOT k.revoked AND k.session_live AND t.status IS DISTINCT FROM 'suspended' AS key_may_act \
         FROM (SELECT a.id, a.tenant_id, \
                      a.revoked_at IS NOT NULL OR COALESCE(a.expires_at <= now(), false) AS revoked, \
                      {session_param}::uuid IS NULL OR s.id IS NOT NULL AS session_live \
               FROM api_keys a \
               LEFT JOIN console_sessions s \
                   ON s.id = {session_param}::uuid AND s.key_id = a.id AND s.expires_at > now() \
               WHERE a.id = {key_param}::uuid) k \
         LEFT JOIN tenants t ON t.id = k.tenant_id)"
    )
}

/// What [`key_check_cte`] found, read by a statement that embeds it (select `key_check.*` from a LEFT JOIN:
/// every column is NULL when there is no such key).
/// Its fields are private: it only turns into a `TenantAdminAuth` through `TenantAdminToken::accept` (the
/// server's `auth`), which asks it [`KeyCheck::verdict`] and [`KeyCheck::is_of_tenant`].
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeyCheck {
    checked_key_id: Option<Uuid>,
    checked_tenant_id: Option<Uuid>,
    key_revoked: Option<bool>,
    session_live: Option<bool>,
    key_may_act: Option<bool>,
}

/// What a [`KeyCheck`] says of a token's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyVerdict {
    /// The key may act now.
    MayAct,
    /// No such key, or it is revoked or expired.
    Revoked,
    /// The console session the token names is gone (signed out, its tenant suspended, expired) or was never
    /// this key's.
    SessionEnded,
    /// A live key of a suspended tenant.
    TenantSuspended,
}

impl KeyCheck {
    /// Whether the key `key_id` may act, from `key_may_act`; otherwise why.
    pub fn verdict(&self, key_id: Uuid) -> KeyVerdict {
        if self.checked_key_id != Some(key_id) || self.key_revoked != Some(false) {
            return KeyVerdict::Revoked;
        }
        match (self.session_live, self.key_may_act) {
            (_, Some(true)) => KeyVerdict::MayAct,
            (Some(false), _) => KeyVerdict::SessionEnded,
            _ => KeyVerdict::TenantSuspended,
        }
    }

    /// Whether the checked key is one of tenant `tenant_id`.
    pub fn is_of_tenant(&self, tenant_id: Uuid) -> bool {
        self.checked_tenant_id == Some(tenant_id)
    }
}

/// The [`KeyCheck`] of key `key_id` and console session `session_id` (None: the token names none), run alone:
/// one statement, one round trip. None: no such key.
pub async fn check_key(
    conn: &mut PgConnection,
    key_id: Uuid,
    session_id: Option<Uuid>,
) -> StoreResult<Option<KeyCheck>> {
    // Runtime SQL: it embeds the shared fragment `key_check_cte`, which lease creation and release embed too.
    let check =
        sqlx::query_as(sqlx::AssertSqlSafe(format!("WITH {} SELECT * FROM key_check", key_check_cte("$1", "$2"))))
            .bind(key_id)
            .bind(session_id)
            .fetch_optional(conn)
            .await?;
    Ok(check)
}

/// An API key as listed (never the secret).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ApiKey {
    pub id: Uuid,
    pub tenant_id: Option<Uuid>,
    pub name: String,
    pub role: Role,
    /// The first characters of the key, to recognise it.
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// A rotated key stops working at this time (its grace period's end); absent: no expiry.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Store a new key (its display prefix and secret hash made by the caller). `tenant_id` is None exactly for
/// operator keys.
pub async fn insert_api_key(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    name: &str,
    role: Role,
    prefix: &str,
    secret_hash: &[u8],
) -> StoreResult<ApiKey> {
    let key = sqlx::query_as!(
        ApiKey,
        r#"INSERT INTO api_keys (id, tenant_id, role, name, prefix, secret_hash) VALUES ($1, $2, $3, $4, $5, $6)
         RETURNING id, tenant_id, name, role AS "role: Role", prefix, created_at, last_used_at, revoked_at,
             expires_at"#,
        crate::new_id(),
        tenant_id,
        role as _,
        name,
        prefix,
        secret_hash
    )
    .fetch_one(conn)
    .await?;
    Ok(key)
}

/// The operator keys, oldest first.
pub async fn list_operator_keys(conn: &mut PgConnection) -> StoreResult<Vec<ApiKey>> {
    let keys = sqlx::query_as!(
        ApiKey,
        r#"SELECT id, tenant_id, name, role AS "role: Role", prefix, created_at, last_used_at, revoked_at, expires_at
         FROM api_keys WHERE role = 'operator' ORDER BY id"#
    )
    .fetch_all(conn)
    .await?;
    Ok(keys)
}

/// The keys of a tenant, oldest first.
pub async fn list_tenant_keys(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<Vec<ApiKey>> {
    let keys = sqlx::query_as!(
        ApiKey,
        r#"SELECT id, tenant_id, name, role AS "role: Role", prefix, created_at, last_used_at, revoked_at, expires_at
         FROM api_keys WHERE tenant_id = $1 ORDER BY id"#,
        tenant_id
    )
    .fetch_all(conn)
    .await?;
    Ok(keys)
}

/// The key of an exchange, as [`exchange_key`] found it.
#[derive(Debug, Clone)]
pub struct ExchangedKey {
    pub key_id: Uuid,
    pub tenant_id: Option<Uuid>,
    pub role: Role,
    /// The status of the key's tenant (None: an operator key).
    pub tenant_status: Option<String>,
}

/// Find the unrevoked, unexpired key whose secret hashes to `secret_hash`, and stamp its use.
pub async fn exchange_key(conn: &mut PgConnection, secret_hash: &[u8]) -> StoreResult<Option<ExchangedKey>> {
    let row = sqlx::query_as!(
        ExchangedKey,
        r#"UPDATE api_keys k SET last_used_at = now()
         FROM (SELECT k2.id, t.status FROM api_keys k2 LEFT JOIN tenants t ON t.id = k2.tenant_id
               WHERE k2.secret_hash = $1 AND k2.revoked_at IS NULL
                   AND (k2.expires_at IS NULL OR k2.expires_at > now())) found
         WHERE k.id = found.id
         RETURNING k.id AS key_id, k.tenant_id, k.role AS "role: Role", found.status AS "tenant_status?""#,
        secret_hash
    )
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

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

/// Record an audit event in the caller's transaction.
pub async fn insert_audit_event(
    conn: &mut PgConnection,
    actor_key_id: Option<Uuid>,
    tenant_id: Option<Uuid>,
    action: AuditAction,
    subject_key_id: Uuid,
    detail: serde_json::Value,
) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO audit_events (id, actor_key_id, tenant_id, action, subject_key_id, detail) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        crate::new_id(),
        actor_key_id,
        tenant_id,
        action as AuditAction,
        subject_key_id,
        detail
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The audit events after `after` (and of `tenant_id`'s keys, if given), oldest first, at most `limit`.
pub async fn list_audit_events(
    conn: &mut PgConnection,
    after: Uuid,
    tenant_id: Option<Uuid>,
    limit: i64,
) -> StoreResult<Vec<AuditEvent>> {
    let rows = sqlx::query_as!(
        AuditEvent,
        r#"SELECT id, at, actor_key_id, tenant_id, action AS "action: AuditAction", subject_key_id, detail
         FROM audit_events
         WHERE id > $1 AND ($2::uuid IS NULL OR tenant_id = $2) ORDER BY id LIMIT $3"#,
        after,
        tenant_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// Serializes changes to operator keys, so two concurrent revocations cannot both pass the last-key check.
pub async fn lock_operator_keys(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('gpuplane.operator_keys'))").execute(conn).await?;
    Ok(())
}

/// Lock key `key_id` of `tenant_id` (None: an operator key) and say whether it is unrevoked; None: no such key.
pub async fn lock_key_active(
    conn: &mut PgConnection,
    key_id: Uuid,
    tenant_id: Option<Uuid>,
) -> StoreResult<Option<bool>> {
    let row = sqlx::query_scalar!(
        r#"SELECT revoked_at IS NULL AS "active!" FROM api_keys WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 FOR UPDATE"#,
        key_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// How many operator keys other than `key_id` are unrevoked and do not expire.
pub async fn count_other_lasting_operator_keys(conn: &mut PgConnection, key_id: Uuid) -> StoreResult<i64> {
    let others = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM api_keys WHERE role = 'operator' AND id <> $1
         AND revoked_at IS NULL AND expires_at IS NULL"#,
        key_id
    )
    .fetch_one(conn)
    .await?;
    Ok(others)
}

/// Revoke key `key_id` now.
pub async fn revoke_key(conn: &mut PgConnection, key_id: Uuid) -> StoreResult<()> {
    sqlx::query!("UPDATE api_keys SET revoked_at = now() WHERE id = $1", key_id).execute(conn).await?;
    Ok(())
}

/// A key about to be rotated, as [`lock_key_for_rotation`] found it.
#[derive(Debug, Clone)]
pub struct RotatableKey {
    pub name: String,
    pub role: Role,
    /// Unrevoked and not already expiring (not rotated before).
    pub rotatable: bool,
}

/// Lock key `key_id` of `tenant_id` (None: an operator key) for its rotation; None: no such key.
pub async fn lock_key_for_rotation(
    conn: &mut PgConnection,
    key_id: Uuid,
    tenant_id: Option<Uuid>,
) -> StoreResult<Option<RotatableKey>> {
    let key = sqlx::query_as!(
        RotatableKey,
        r#"SELECT name, role AS "role: Role", revoked_at IS NULL AND expires_at IS NULL AS "rotatable!" FROM api_keys
         WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2 FOR UPDATE"#,
        key_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(key)
}

/// Let rotated key `key_id` expire `grace_secs` from now (0: revoke it now), replaced by `successor`: when it
/// expires.
pub async fn expire_rotated_key(
    conn: &mut PgConnection,
    key_id: Uuid,
    grace_secs: f64,
    successor: Uuid,
) -> StoreResult<DateTime<Utc>> {
    let expires_at = sqlx::query_scalar!(
        r#"UPDATE api_keys SET expires_at = now() + make_interval(secs => $2), replaced_by = $3,
             revoked_at = CASE WHEN $2 = 0 THEN now() END
         WHERE id = $1 RETURNING expires_at AS "expires_at!""#,
        key_id,
        grace_secs,
        successor
    )
    .fetch_one(conn)
    .await?;
    Ok(expires_at)
}

/// Mark keys whose grace period has ended as revoked: how many.
pub async fn revoke_expired_keys(conn: &mut PgConnection) -> StoreResult<u64> {
    let done =
        sqlx::query!("UPDATE api_keys SET revoked_at = expires_at WHERE revoked_at IS NULL AND expires_at <= now()")
            .execute(conn)
            .await?;
    Ok(done.rows_affected())
}

/// Start console session `session_id` of key `key_id`, until `expires_at`.
pub async fn insert_session(
    conn: &mut PgConnection,
    session_id: Uuid,
    key_id: Uuid,
    expires_at: DateTime<Utc>,
) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO console_sessions (id, key_id, expires_at) VALUES ($1, $2, $3)",
        session_id,
        key_id,
        expires_at
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// End console session `session_id` if it is key `key_id`'s: whether a session ended.
pub async fn delete_session(conn: &mut PgConnection, session_id: Uuid, key_id: Uuid) -> StoreResult<bool> {
    let done = sqlx::query!("DELETE FROM console_sessions WHERE id = $1 AND key_id = $2", session_id, key_id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// End every console session of the tenant's keys: how many.
pub async fn delete_tenant_sessions(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<u64> {
    let done = sqlx::query!(
        "DELETE FROM console_sessions s USING api_keys k WHERE s.key_id = k.id AND k.tenant_id = $1",
        tenant_id
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Delete the rows of expired console sessions: how many.
pub async fn delete_expired_sessions(conn: &mut PgConnection) -> StoreResult<u64> {
    let done = sqlx::query!("DELETE FROM console_sessions WHERE expires_at <= now()").execute(conn).await?;
    Ok(done.rows_affected())
}
