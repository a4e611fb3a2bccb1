//! Console sessions: the server-side state that makes a console sign-in revocable.
//!
//! A sign-in (`POST /v1/console/session`) writes a `console_sessions` row for the key and puts its id in the
//! access token's `sid` claim, with the row's expiry as the token's `exp`. Every request with such a token, as
//! the cookie or as a bearer token, finds the row in the statement that checks the key ([`super::key_check_cte`]),
//! so what ends the row ends the token at once:
//! - sign-out (`DELETE /v1/console/session`) deletes it ([`end`]);
//! - suspending the tenant deletes the rows of its keys ([`end_tenant_sessions`], in the suspension's
//!   transaction), so the sessions stay ended when the tenant is reactivated;
//! - revoking or expiring the key needs nothing here: the same statement refuses the key, and the row goes with
//!   the sweep.
//!
//! Expired rows are deleted by the credential sweep ([`delete_expired`], `auth::key_lifecycle`).

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::keys;
use super::{Claims, Principal, TokenKeys, bearer_token, cookie};
use crate::error::{ApiError, ApiResult};
use crate::extract::new_id;
use crate::state::AppState;

/// Start a console session for the key of `principal` (checked by the caller's key exchange just before) and
/// return its signed access token: the session's row and the token expire together.
pub async fn start(db: &sqlx::PgPool, tokens: &TokenKeys, principal: &Principal) -> Result<String, ApiError> {
    let mut claims = tokens.claims(principal.key_id, principal.tenant_id, principal.role);
    let session_id = new_id();
    claims.sid = Some(session_id);
    let expires_at = expiry(&claims)?;
    let mut conn = db.acquire().await?;
    gpuplane_store::auth::insert_session(&mut conn, session_id, principal.key_id, expires_at).await?;
    Ok(tokens.sign(&claims)?)
}

fn expiry(claims: &Claims) -> anyhow::Result<DateTime<Utc>> {
    let secs = i64::try_from(claims.exp)?;
    DateTime::from_timestamp(secs, 0).ok_or_else(|| anyhow::anyhow!("token expiry {secs} out of range"))
}

/// End console session `session_id` of key `key_id` (both from a verified token). A session of another key is
/// left alone. Returns whether a session ended.
pub async fn end(db: &sqlx::PgPool, session_id: Uuid, key_id: Uuid) -> Result<bool, sqlx::Error> {
    let mut conn = db.acquire().await?;
    Ok(gpuplane_store::auth::delete_session(&mut conn, session_id, key_id).await?)
}

/// End every console session of the tenant's keys, in the caller's transaction (the tenant's suspension).
pub async fn end_tenant_sessions(conn: &mut PgConnection, tenant_id: Uuid) -> Result<u64, sqlx::Error> {
    Ok(gpuplane_store::auth::delete_tenant_sessions(conn, tenant_id).await?)
}

/// Delete the rows of expired sessions (their tokens have expired too): how many.
pub async fn delete_expired(db: &sqlx::PgPool) -> Result<u64, sqlx::Error> {
    let mut conn = db.acquire().await?;
    Ok(gpuplane_store::auth::delete_expired_sessions(&mut conn).await?)
}

/// The session a sign-out ends: the one named by the request's token (`Authorization: Bearer`, else the cookie),
/// when the token verifies and names one. No token or an invalid one is `None`: sign-out is harmless without a
/// session. A cookie without the session's `X-CSRF-Token` is refused (403 `csrf_failed`), as for any state
/// change by cookie, so another site cannot sign a browser out.
pub struct SessionToEnd(pub Option<(Uuid, Uuid)>);

impl FromRequestParts<AppState> for SessionToEnd {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let token = if parts.headers.contains_key(AUTHORIZATION) {
            bearer_token(parts).ok()
        } else {
            cookie::session_token(parts)?
        };
        let session = token
            .and_then(|token| state.tokens.verify(token).ok())
            .and_then(|claims| claims.sid.map(|sid| (sid, claims.sub)));
        Ok(SessionToEnd(session))
    }
}

/// The one key check of an exchange, shared by `POST /v1/auth/token` and the console's sign-in: a known,
/// unrevoked, unexpired key of an active tenant (or an operator key) is its principal, for which the caller
/// issues a short-lived access token (the console's with a session).
pub async fn exchange_api_key(state: &AppState, api_key: &str) -> ApiResult<super::Principal> {
    if !keys::looks_like_key(api_key) {
        return Err(ApiError::unauthorized("invalid API key"));
    }
    let mut conn = state.db.acquire().await?;
    let row = gpuplane_store::auth::exchange_key(&mut conn, &keys::hash(api_key)).await?;
    let Some(gpuplane_store::auth::ExchangedKey { key_id, tenant_id, role, tenant_status }) = row else {
        return Err(ApiError::unauthorized("invalid API key"));
    };
    if tenant_status.as_deref() == Some("suspended") {
        return Err(ApiError::Forbidden { code: "tenant_suspended", message: "the tenant is suspended".into() });
    }
    Ok(super::Principal { key_id, tenant_id, role, session_id: None })
}
