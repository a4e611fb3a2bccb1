//! Join tokens: operators mint them per pool (expiring, limited uses); agents present one to register.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

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

/// A join token to insert: its secret's display prefix and hash, how many uses, how long it lives.
pub struct NewJoinToken<'a> {
    pub id: Uuid,
    pub pool_id: Uuid,
    pub prefix: &'a str,
    pub secret_hash: &'a [u8],
    pub max_uses: i32,
    pub ttl_hours: i32,
    /// The operator's key.
    pub created_by: Uuid,
}

/// Insert a join token for its pool; None when the pool does not exist.
pub async fn create_join_token(conn: &mut PgConnection, new: NewJoinToken<'_>) -> StoreResult<Option<JoinToken>> {
    Ok(sqlx::query_as!(
        JoinToken,
        "INSERT INTO join_tokens (id, pool_id, prefix, secret_hash, max_uses, expires_at, created_by) \
         SELECT $1, p.id, $3, $4, $5, now() + make_interval(hours => $6), $7 FROM pools p WHERE p.id = $2 \
         RETURNING id, pool_id, prefix, max_uses, uses, expires_at, created_at, revoked_at",
        new.id,
        new.pool_id,
        new.prefix,
        new.secret_hash,
        new.max_uses,
        new.ttl_hours,
        new.created_by
    )
    .fetch_optional(conn)
    .await?)
}

/// A pool's join tokens, by id.
pub async fn list_join_tokens(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<Vec<JoinToken>> {
    Ok(sqlx::query_as!(
        JoinToken,
        "SELECT id, pool_id, prefix, max_uses, uses, expires_at, created_at, revoked_at \
         FROM join_tokens WHERE pool_id = $1 ORDER BY id",
        pool_id
    )
    .fetch_all(conn)
    .await?)
}

/// Revoke a join token (a revoked one keeps its first revocation time); false when there is no such token.
pub async fn revoke_join_token(conn: &mut PgConnection, token_id: Uuid) -> StoreResult<bool> {
    let done = sqlx::query!("UPDATE join_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1", token_id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}
