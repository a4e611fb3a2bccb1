//! API keys as stored: the shape a key is listed in (never its secret), and the one insert that makes a key.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{AssertSqlSafe, PgConnection};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{Role, keys};
use crate::extract::new_id;

/// An API key as listed (never the secret).
#[derive(Debug, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
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

/// A newly created key. `api_key` is shown only in this response.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CreatedApiKey {
    #[serde(flatten)]
    pub key: ApiKey,
    /// The secret key. Store it now: it is never shown again.
    pub api_key: String,
}

pub const KEY_COLUMNS: &str = "id, tenant_id, name, role, prefix, created_at, last_used_at, revoked_at, expires_at";

/// Store a new key and return it with its secret. `tenant_id` is None exactly for operator keys.
pub async fn insert_api_key(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    name: &str,
    role: Role,
) -> Result<CreatedApiKey, sqlx::Error> {
    let new_key = keys::generate();
    let key: ApiKey = sqlx::query_as(AssertSqlSafe(format!(
        "INSERT INTO api_keys (id, tenant_id, role, name, prefix, secret_hash) VALUES ($1, $2, $3, $4, $5, $6) \
         RETURNING {KEY_COLUMNS}"
    )))
    .bind(new_id())
    .bind(tenant_id)
    .bind(role)
    .bind(name.trim())
    .bind(&new_key.display_prefix)
    .bind(&new_key.hash)
    .fetch_one(conn)
    .await?;
    Ok(CreatedApiKey { key, api_key: new_key.secret })
}
