//! `Idempotency-Key` for POSTs that cost money (Stripe semantics): the first result for a key, success or
//! client error, is stored and replayed for 24 hours; the same key with a different body is 422
//! `idempotency_key_reused`. A success is recorded in the same transaction as the work it describes, so a
//! retry can never repeat the work; a concurrent duplicate waits on the key's row and then replays.

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use gpuplane_store::idempotency as store;
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

    /// This key as the store names it.
    fn as_ref(&self) -> store::KeyRef<'_> {
        store::KeyRef { tenant_id: self.tenant_id, scope: self.scope, key: &self.key, request_hash: &self.request_hash }
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
    let key_ref = key.as_ref();
    store::delete_expired_key(conn, &key_ref, RETENTION_HOURS as i32).await?;
    if store::insert_claim(conn, &key_ref).await? {
        return Ok(Claim::Fresh);
    }
    let stored = store::load_stored(conn, &key_ref).await?;
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
    let body = serde_json::to_value(body).map_err(|e| ApiError::Internal(e.into()))?;
    store::complete(conn, &key.as_ref(), status.as_u16() as i32, body).await?;
    Ok(())
}

/// Record a client error for a key after the work's transaction rolled back (server errors are not recorded,
/// so a retry after an outage can still succeed).
pub async fn record_error(db: &sqlx::PgPool, key: &IdempotencyKey, error: &ApiError) -> Result<(), sqlx::Error> {
    if !error.status().is_client_error() || error.code() == "idempotency_key_reused" {
        return Ok(());
    }
    let body = serde_json::to_value(error.problem()).unwrap_or(serde_json::Value::Null);
    let mut conn = db.acquire().await?;
    store::insert_result(&mut conn, &key.as_ref(), error.status().as_u16() as i32, body).await?;
    Ok(())
}

/// Forget records older than the retention (run by the background sweeper).
pub async fn purge_expired(db: &sqlx::PgPool) -> Result<u64, sqlx::Error> {
    let mut conn = db.acquire().await?;
    Ok(store::purge_expired(&mut conn, RETENTION_HOURS as i32).await?)
}
