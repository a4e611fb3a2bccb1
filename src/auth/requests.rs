//! What the auth API accepts: a key to exchange for a token, a key to create.

use serde::Deserialize;
use utoipa::ToSchema;

use super::Role;
use crate::error::{ApiError, FieldError};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"api_key": "gpk_4f9pQm2c7HkYbXrS1aTzLw0vNeUd8GjKoPiQ3sBcFhM"}))]
pub struct TokenRequest {
    /// An API key (`gpk_...`).
    #[schema(pattern = r"^gpk_[A-Za-z0-9_-]{43}$")]
    pub api_key: String,
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
