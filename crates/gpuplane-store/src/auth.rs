//! API keys: roles and the audited actions on keys.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

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
/// not suspended, and the session, if named, still this key's and not expired): the server's `auth::verdict` answers
/// from it, and a statement that must not write for a token that may not act (lease release) conditions its
/// writes on it. Embedded by statements that verify the key together with their own work (lease creation and
/// release), and run alone by the server's `auth::check_key`. The session costs one primary-key probe in the same statement (a
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
/// It only turns into the server's `TenantAdminAuth` through its `TenantAdminToken::accept`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeyCheck {
    pub checked_key_id: Option<Uuid>,
    pub checked_tenant_id: Option<Uuid>,
    pub key_revoked: Option<bool>,
    pub session_live: Option<bool>,
    pub key_may_act: Option<bool>,
}
