//! API keys: roles and the audited actions on keys.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
