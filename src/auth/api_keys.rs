//! API keys as stored: the shape a key is listed in (never its secret), and the one insert that makes a key.

use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{Role, keys};

pub use gpuplane_store::auth::ApiKey;

/// A newly created key. `api_key` is shown only in this response.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreatedApiKey {
    #[serde(flatten)]
    pub key: ApiKey,
    /// The secret key. Store it now: it is never shown again.
    pub api_key: String,
}

/// Store a new key and return it with its secret. `tenant_id` is None exactly for operator keys.
pub async fn insert_api_key(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    name: &str,
    role: Role,
) -> Result<CreatedApiKey, sqlx::Error> {
    let new_key = keys::generate();
    let key = gpuplane_store::auth::insert_api_key(
        conn,
        tenant_id,
        name.trim(),
        role,
        &new_key.display_prefix,
        &new_key.hash,
    )
    .await?;
    Ok(CreatedApiKey { key, api_key: new_key.secret })
}
