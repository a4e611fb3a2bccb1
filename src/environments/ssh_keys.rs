//! Tenants' SSH public keys: parsed and checked at the edge, stored as `<type> <blob>` with OpenSSH's SHA-256
//! fingerprint. Agents put the tenant's current keys into every running environment's `authorized_keys`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use gpuplane_store::environments as store;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{TenantAdminAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, new_id};
use crate::state::AppState;
pub use gpuplane_protocol::ssh_keys::{KEY_TYPES, ParsedKey, parse_public_key};

/// Most keys a tenant may register.
pub const MAX_KEYS_PER_TENANT: i64 = 100;

pub use gpuplane_store::environments::SshKey;

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "laptop", "public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJmQqpe2LbdAuLcsJBHGH24YDvVpSXVP7y4cwZoJEEJg alice@laptop"}))]
pub struct AddSshKeyRequest {
    /// 1-100 characters, no control characters.
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
    /// One OpenSSH public key line: `<type> <base64> [comment]` (the comment is dropped).
    #[schema(min_length = 1, max_length = 16384)]
    pub public_key: String,
}

/// The tenant's SSH keys, oldest first.
#[utoipa::path(
    get, path = "/v1/tenant/ssh-keys", tag = "environments", operation_id = "list_ssh_keys",
    responses((status = 200, description = "The tenant's SSH keys", body = Vec<SshKey>))
)]
pub async fn list_ssh_keys(State(state): State<AppState>, auth: TenantAuth) -> ApiResult<Json<Vec<SshKey>>> {
    let mut conn = state.db.acquire().await?;
    let keys = store::list_ssh_keys(&mut conn, auth.tenant_id).await?;
    Ok(Json(keys))
}

/// Register an SSH public key (tenant admin). Running environments of the tenant accept it within a heartbeat.
#[utoipa::path(
    post, path = "/v1/tenant/ssh-keys", tag = "environments", operation_id = "add_ssh_key",
    request_body = AddSshKeyRequest,
    responses(
        (status = 201, description = "The key, with its fingerprint", body = SshKey),
        (status = 409, description = "The key is registered already (`ssh_key_exists`), or the tenant has 100 keys (`too_many_ssh_keys`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn add_ssh_key(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiJson(req): ApiJson<AddSshKeyRequest>,
) -> ApiResult<(StatusCode, Json<SshKey>)> {
    let mut errors = Vec::new();
    let name = req.name.trim();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        errors.push(FieldError::new("name", "1-100 characters, no control characters"));
    }
    let parsed = parse_public_key(&req.public_key).map_err(|e| errors.push(FieldError::new("public_key", e)));
    let Ok(parsed) = parsed else { return Err(ApiError::Validation(errors)) };
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    // Serialize adds per tenant, so the limit holds under concurrency.
    store::lock_tenant(&mut tx, auth.tenant_id).await?;
    let count = store::count_ssh_keys(&mut tx, auth.tenant_id).await?;
    if count >= MAX_KEYS_PER_TENANT {
        return Err(ApiError::conflict("too_many_ssh_keys", format!("at most {MAX_KEYS_PER_TENANT} keys per tenant")));
    }
    let new_key = store::NewSshKey {
        id: new_id(),
        tenant_id: auth.tenant_id,
        name,
        public_key: &parsed.line,
        fingerprint: &parsed.fingerprint,
        created_by: auth.key_id,
    };
    let inserted = store::insert_ssh_key(&mut tx, &new_key).await?;
    let key = inserted.ok_or_else(|| ApiError::conflict("ssh_key_exists", "this key is registered already"))?;
    tx.commit().await?;
    tracing::info!(tenant.id = %auth.tenant_id, fingerprint = %key.fingerprint, "ssh key added");
    Ok((StatusCode::CREATED, Json(key)))
}

/// Remove an SSH key (tenant admin): running environments refuse it within a heartbeat.
#[utoipa::path(
    delete, path = "/v1/tenant/ssh-keys/{key_id}", tag = "environments", operation_id = "delete_ssh_key",
    params(("key_id" = Uuid, Path, description = "SSH key id")),
    responses((status = 204, description = "Removed"))
)]
pub async fn delete_ssh_key(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(key_id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    let mut conn = state.db.acquire().await?;
    if !store::delete_ssh_key(&mut conn, key_id, auth.tenant_id).await? {
        return Err(ApiError::NotFound("ssh key"));
    }
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made with `ssh-keygen -t ed25519`; its fingerprint as `ssh-keygen -l -E sha256` prints it.
    const ED25519: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJmQqpe2LbdAuLcsJBHGH24YDvVpSXVP7y4cwZoJEEJg alice@laptop";

    #[test]
    fn a_key_parses_to_its_line_and_openssh_fingerprint() {
        let key = parse_public_key(ED25519).unwrap();
        assert_eq!(key.key_type, "ssh-ed25519");
        assert_eq!(key.line, ED25519.rsplit_once(' ').unwrap().0, "the comment is dropped");
        assert_eq!(key.fingerprint, "SHA256:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g50");
    }

    #[test]
    fn hostile_keys_are_refused() {
        for (bad, why) in [
            ("", "expected"),
            ("ssh-ed25519", "expected"),
            ("ssh-dss AAAAB3NzaC1kc3M=", "not accepted"),
            ("ssh-ed25519 !!!notbase64", "base64"),
            ("ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQAB", "does not match"),
            ("ssh-ed25519 AAAA", "truncated"),
            ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\ncommand=\"rm -rf /\" ssh-ed25519 AAAA", "one key on one line"),
            ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJmQqpe2LbdAuLcsJBHGH24YDvVpSXVP7y4cwZoJEEJg a\0b", "control"),
        ] {
            let err = parse_public_key(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        assert!(parse_public_key(&"A".repeat(20_000)).unwrap_err().contains("16384"));
    }
}
