//! `Idempotency-Key` records: the first result for a key, replayed for a while.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;

/// A key of a tenant in a scope, with the hash of the request it came with.
#[derive(Debug, Clone, Copy)]
pub struct KeyRef<'a> {
    pub tenant_id: Uuid,
    pub scope: &'a str,
    pub key: &'a str,
    pub request_hash: &'a [u8],
}

/// A stored result of a key.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    pub request_hash: Vec<u8>,
    pub status_code: i32,
    pub response_body: serde_json::Value,
}

/// Forget the record of this key if it is older than `retention_hours`.
pub async fn delete_expired_key(conn: &mut PgConnection, key: &KeyRef<'_>, retention_hours: i32) -> StoreResult<()> {
    sqlx::query!(
        "DELETE FROM idempotency_keys WHERE tenant_id = $1 AND scope = $2 AND key = $3 \
         AND created_at < now() - make_interval(hours => $4)",
        key.tenant_id,
        key.scope,
        key.key,
        retention_hours
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Claim this key with an empty result: true when it was new (blocks while another transaction holds it).
pub async fn insert_claim(conn: &mut PgConnection, key: &KeyRef<'_>) -> StoreResult<bool> {
    let inserted = sqlx::query!(
        "INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, status_code, response_body) \
         VALUES ($1, $2, $3, $4, 0, 'null') ON CONFLICT DO NOTHING",
        key.tenant_id,
        key.scope,
        key.key,
        key.request_hash
    )
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// The stored result of this key.
pub async fn load_stored(conn: &mut PgConnection, key: &KeyRef<'_>) -> StoreResult<StoredResponse> {
    let stored = sqlx::query_as!(
        StoredResponse,
        "SELECT request_hash, status_code, response_body FROM idempotency_keys WHERE tenant_id = $1 AND scope = $2 AND key = $3",
        key.tenant_id,
        key.scope,
        key.key
    )
    .fetch_one(conn)
    .await?;
    Ok(stored)
}

/// Record the result of a claimed key.
pub async fn complete(
    conn: &mut PgConnection,
    key: &KeyRef<'_>,
    status_code: i32,
    body: serde_json::Value,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE idempotency_keys SET status_code = $4, response_body = $5 WHERE tenant_id = $1 AND scope = $2 AND key = $3",
        key.tenant_id,
        key.scope,
        key.key,
        status_code,
        body
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Record a result for a key not claimed (a client error after the work rolled back), unless one is recorded.
pub async fn insert_result(
    conn: &mut PgConnection,
    key: &KeyRef<'_>,
    status_code: i32,
    body: serde_json::Value,
) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, status_code, response_body) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        key.tenant_id,
        key.scope,
        key.key,
        key.request_hash,
        status_code,
        body
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Forget records older than `retention_hours`: how many.
pub async fn purge_expired(conn: &mut PgConnection, retention_hours: i32) -> StoreResult<u64> {
    let done = sqlx::query!(
        "DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(hours => $1)",
        retention_hours
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
