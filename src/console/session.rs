//! `POST /v1/console/session` (sign in with an API key), `GET` (who is signed in) and `DELETE` (sign out).
//!
//! The cookie carries an access token like the one `POST /v1/auth/token` gives, which also names a server-side
//! session (`auth::sessions`) that sign-out ends; see `auth::cookie` for how the extractors accept it and how
//! state changes are protected against cross-site requests.

use axum::Json;
use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{AppendHeaders, IntoResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::cookie::{CSRF_COOKIE, SESSION_COOKIE, csrf_token};
use crate::auth::requests::TokenRequest;
use crate::auth::sessions::exchange_api_key;
use crate::auth::sessions::{self, SessionToEnd};
use crate::auth::{AnyAuth, Role};
use crate::error::ApiResult;
use crate::extract::ApiJson;
use crate::secrets::NO_STORE;
use crate::state::AppState;

/// A console session: who is signed in and the CSRF token to echo in `X-CSRF-Token` on state changes.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConsoleSession {
    pub role: Role,
    /// The caller's tenant; absent for operators.
    pub tenant_id: Option<Uuid>,
    /// Echo it in the `X-CSRF-Token` header of every POST, PUT, PATCH and DELETE authenticated by the cookie.
    /// Absent when the caller authenticated with a bearer token (which needs none).
    pub csrf_token: Option<String>,
    /// Seconds the session lasts from sign-in.
    pub expires_in: u64,
}

/// `Secure` when configured, or when a trusted proxy says the browser came over HTTPS.
fn secure(state: &AppState, headers: &HeaderMap) -> bool {
    state.settings.secure_cookies
        || (state.settings.rate_limit.trust_forwarded_for
            && headers
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|p| p.trim().eq_ignore_ascii_case("https")))
}

fn set_cookie(
    name: &str,
    value: &str,
    max_age: u64,
    http_only: bool,
    secure: bool,
) -> (axum::http::HeaderName, HeaderValue) {
    let mut cookie = format!("{name}={value}; Path=/; Max-Age={max_age}; SameSite=Strict");
    if http_only {
        cookie.push_str("; HttpOnly");
    }
    if secure {
        cookie.push_str("; Secure");
    }
    // Only base64url characters and digits go in: always a valid header value.
    (SET_COOKIE, HeaderValue::from_str(&cookie).expect("cookie is ASCII"))
}

/// Sign in to the console: exchange an API key for a session cookie.
///
/// Sets `gp_session` (HttpOnly, SameSite=Strict, Path=/, Secure over TLS), holding a short-lived access token,
/// and `gp_csrf` (readable by the page), whose value must be echoed in `X-CSRF-Token` on state changes.
#[utoipa::path(
    post, path = "/v1/console/session", tag = "auth", operation_id = "create_console_session",
    request_body = TokenRequest,
    responses(
        (status = 200, description = "Signed in; the cookies are set", body = ConsoleSession,
            headers(("Set-Cookie" = String, description = "`gp_session` (HttpOnly) and `gp_csrf`"))),
        (status = 401, description = "Unknown, malformed or revoked key", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "The key's tenant is suspended (`tenant_suspended`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_console_session(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<TokenRequest>,
) -> ApiResult<impl IntoResponse> {
    let principal = exchange_api_key(&state, &req.api_key).await?;
    let token = sessions::start(&state.db, &state.tokens, &principal).await?;
    let csrf = csrf_token(&token);
    let ttl = state.tokens.ttl_secs;
    let secure = secure(&state, &headers);
    let cookies = AppendHeaders([
        set_cookie(SESSION_COOKIE, &token, ttl, true, secure),
        set_cookie(CSRF_COOKIE, &csrf, ttl, false, secure),
    ]);
    let body = ConsoleSession {
        role: principal.role,
        tenant_id: principal.tenant_id,
        csrf_token: Some(csrf),
        expires_in: ttl,
    };
    Ok((NO_STORE, cookies, Json(body)))
}

/// The signed-in principal (cookie or bearer): role and tenant, for the console to choose its views.
#[utoipa::path(
    get, path = "/v1/console/session", tag = "auth", operation_id = "get_console_session",
    responses((status = 200, description = "Who is signed in", body = ConsoleSession))
)]
pub async fn get_console_session(
    State(state): State<AppState>,
    AnyAuth(p): AnyAuth,
    headers: HeaderMap,
) -> ApiResult<(crate::secrets::NoStore, Json<ConsoleSession>)> {
    let csrf = if headers.contains_key(axum::http::header::AUTHORIZATION) {
        None
    } else {
        crate::auth::cookie::cookie(&headers, SESSION_COOKIE).map(csrf_token)
    };
    let body =
        ConsoleSession { role: p.role, tenant_id: p.tenant_id, csrf_token: csrf, expires_in: state.tokens.ttl_secs };
    Ok((NO_STORE, Json(body)))
}

/// Sign out of the console: the session is ended on the server, so its token is refused from now on wherever
/// it is replayed (cookie or bearer), and both cookies are cleared. Harmless without a session.
///
/// The session is the one named by the request's token (the cookie, with its `X-CSRF-Token`, or a bearer token
/// from a sign-in); a token that does not verify ends nothing.
#[utoipa::path(
    delete, path = "/v1/console/session", tag = "auth", operation_id = "delete_console_session",
    responses(
        (status = 204, description = "Signed out: the session is ended and the cookies are cleared",
            headers(("Set-Cookie" = String, description = "`gp_session` and `gp_csrf`, expired"))),
        (status = 403, description = "The cookie without its `X-CSRF-Token` (`csrf_failed`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_console_session(
    State(state): State<AppState>,
    headers: HeaderMap,
    SessionToEnd(session): SessionToEnd,
) -> ApiResult<impl IntoResponse> {
    if let Some((session_id, key_id)) = session {
        sessions::end(&state.db, session_id, key_id).await?;
    }
    let secure = secure(&state, &headers);
    Ok((
        StatusCode::NO_CONTENT,
        AppendHeaders([set_cookie(SESSION_COOKIE, "", 0, true, secure), set_cookie(CSRF_COOKIE, "", 0, false, secure)]),
    ))
}
