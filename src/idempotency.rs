//! `Idempotency-Key` for POSTs that cost money (Stripe semantics): the first result for a key, success or
//! client error, is stored and replayed for 24 hours; the same key with a different body is 422
//! `idempotency_key_reused`. A success is recorded in the same transaction as the work it describes, so a
//! retry can never repeat the work; a concurrent duplicate waits on the key's row and then replays.

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::ApiError;

pub const HEADER: &str = "idempotency-key";
/// How long a key's result is replayed.
pub const RETENTION_HOURS: i64 = 24;

/// A validated key with the hash of the request it came with.
pub struct IdempotencyKey {
    pub tenant_id: Uuid,
    pub scope: &'static str,
    pub key: String,
    pub request_hash: Vec<u8>,
}

impl IdempotencyKey {
    /// Read the header, if any. Keys are 1-255 visible ASCII characters.
    pub fn from_headers(
        headers: &HeaderMap,
        tenant_id: Uuid,
        scope: &'static str,
        body: &impl Serialize,
    ) -> Result<Option<Self>, ApiError> {
        let Some(value) = headers.get(HEADER) else { return Ok(None) };
        let key =
            value.to_str().ok().filter(|k| !k.is_empty() && k.len() <= 255 && k.bytes().all(|b| b.is_ascii_graphic()));
        let Some(key) = key else {
            return Err(ApiError::field("Idempotency-Key", "1-255 visible ASCII characters"));
        };
        let canonical = serde_json::to_vec(body).map_err(|e| ApiError::Internal(e.into()))?;
        Ok(Some(IdempotencyKey {
            tenant_id,
            scope,
            key: key.to_string(),
            request_hash: Sha256::digest(&canonical).to_vec(),
        }))
    }
}

/// What claiming a key found.
pub enum Claim {
    /// The key is new: do the work and `complete` it in the same transaction.
    Fresh,
    /// The key was used before with the same request: replay this response.
    Replay(Response),
}

/// Claim the key inside the caller's transaction. Blocks while another transaction holds the same key.
pub async fn claim(conn: &mut PgConnection, key: &IdempotencyKey) -> Result<Claim, ApiError> {
    // An expired record no longer counts.
    sqlx::query!(
        "DELETE FROM idempotency_keys WHERE tenant_id = $1 AND scope = $2 AND key = $3 \
         AND created_at < now() - make_interval(hours => $4)",
        key.tenant_id,
        key.scope,
        &key.key,
        RETENTION_HOURS as i32
    )
    .execute(&mut *conn)
    .await?;
    let inserted = sqlx::query!(
        "INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, status_code, response_body) \
         VALUES ($1, $2, $3, $4, 0, 'null') ON CONFLICT DO NOTHING",
        key.tenant_id,
        key.scope,
        &key.key,
        &key.request_hash
    )
    .execute(&mut *conn)
    .await?;
    if inserted.rows_affected() == 1 {
        return Ok(Claim::Fresh);
    }
    let stored = sqlx::query!(
        "SELECT request_hash, status_code, response_body FROM idempotency_keys WHERE tenant_id = $1 AND scope = $2 AND key = $3",
        key.tenant_id,
        key.scope,
        &key.key
    )
    .fetch_one(&mut *conn)
    .await?;
    if stored.request_hash != key.request_hash {
        return Err(ApiError::Unprocessable {
            code: "idempotency_key_reused",
            message: "this Idempotency-Key was used with a different request body".into(),
            context: None,
        });
    }
    Ok(Claim::Replay(replay(stored.status_code, stored.response_body)))
}

fn replay(status: i32, body: serde_json::Value) -> Response {
    let status = u16::try_from(status).ok().and_then(|s| StatusCode::from_u16(s).ok()).unwrap_or(StatusCode::OK);
    let is_problem = body.get("code").is_some() && body.get("status").is_some();
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert("idempotent-replayed", axum::http::HeaderValue::from_static("true"));
    if is_problem {
        response
            .headers_mut()
            .insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/problem+json"));
    }
    response
}

/// Record the result for a claimed key (in the transaction that did the work).
pub async fn complete(
    conn: &mut PgConnection,
    key: &IdempotencyKey,
    status: StatusCode,
    body: &impl Serialize,
) -> Result<(), ApiError> {
    sqlx::query!(
        "UPDATE idempotency_keys SET status_code = $4, response_body = $5 WHERE tenant_id = $1 AND scope = $2 AND key = $3",
        key.tenant_id,
        key.scope,
        &key.key,
        status.as_u16() as i32,
        serde_json::to_value(body).map_err(|e| ApiError::Internal(e.into()))?
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Record a client error for a key after the work's transaction rolled back (server errors are not recorded,
/// so a retry after an outage can still succeed).
pub async fn record_error(db: &sqlx::PgPool, key: &IdempotencyKey, error: &ApiError) -> Result<(), sqlx::Error> {
    if !error.status().is_client_error() || error.code() == "idempotency_key_reused" {
        return Ok(());
    }
    let body = serde_json::to_value(error.problem()).unwrap_or(serde_json::Value::Null);
    sqlx::query!(
        "INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, status_code, response_body) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        key.tenant_id,
        key.scope,
        &key.key,
        &key.request_hash,
        error.status().as_u16() as i32,
        body
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Forget records older than the retention (run by the background sweeper).
pub async fn purge_expired(db: &sqlx::PgPool) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(hours => $1)",
        RETENTION_HOURS as i32
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
