//! The console's session cookie: a bearer-equivalent for browsers, with CSRF protection.
//!
//! `POST /v1/console/session` exchanges an API key (the same key check as `POST /v1/auth/token`) for a
//! short-lived access token that also names a server-side session (`sid`, see `auth::sessions`), set as the
//! HttpOnly cookie [`SESSION_COOKIE`]. The extractors read it when a request has no `Authorization` header and
//! verify it exactly as a bearer token: same signature, expiry, key, session and role checks; the cookie must
//! hold a session token. A browser sends cookies on cross-site requests too, so every request authenticated by the cookie that
//! may change state (any method but GET, HEAD and OPTIONS) must also carry `X-CSRF-Token`, which only a page of
//! this origin can know: it is derived from the session token (so it cannot be set by another site or replayed
//! with another session) and given to the page in the sign-in response and in the readable cookie [`CSRF_COOKIE`].

use axum::http::header::COOKIE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// The HttpOnly cookie holding the access token.
pub const SESSION_COOKIE: &str = "gp_session";
/// The cookie scripts of the console read to echo the CSRF token (not HttpOnly by design).
pub const CSRF_COOKIE: &str = "gp_csrf";
/// The header that must echo the CSRF token on state-changing requests authenticated by the cookie.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The CSRF token of a session: bound to its access token, so it changes with every sign-in.
pub fn csrf_token(session_token: &str) -> String {
    let digest = Sha256::new().chain_update(b"gpuplane-console-csrf\0").chain_update(session_token).finalize();
    URL_SAFE_NO_PAD.encode(digest)
}

/// The value of cookie `name` in the request's `Cookie` headers, if any.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, v)| *k == name && !v.is_empty())
        .map(|(_, v)| v)
}

/// The session token of a cookie-authenticated request, after its CSRF check: `None` when there is no session
/// cookie; 403 `csrf_failed` when the request may change state and does not echo the session's CSRF token.
pub fn session_token(parts: &Parts) -> Result<Option<&str>, ApiError> {
    let Some(token) = cookie(&parts.headers, SESSION_COOKIE) else { return Ok(None) };
    if !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS) {
        let echoed = parts.headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        let expected = csrf_token(token);
        // Both are fixed-length digests of a secret the attacker cannot read; compare without early exit anyway.
        let same = echoed.is_some_and(|e| {
            e.len() == expected.len() && e.bytes().zip(expected.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
        });
        if !same {
            return Err(ApiError::Forbidden {
                code: "csrf_failed",
                message: "a request authenticated by the console's session cookie that changes state must echo \
                          the session's CSRF token in the X-CSRF-Token header"
                    .into(),
            });
        }
    }
    Ok(Some(token))
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    fn parts(method: Method, headers: &[(&str, &str)]) -> Parts {
        let mut req = Request::builder().method(method).uri("/v1/leases");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.body(()).unwrap().into_parts().0
    }

    #[test]
    fn cookie_is_found_among_others_and_across_headers() {
        let p = parts(Method::GET, &[("cookie", "a=1; gp_session=tok"), ("cookie", "gp_csrf=c")]);
        assert_eq!(cookie(&p.headers, SESSION_COOKIE), Some("tok"));
        assert_eq!(cookie(&p.headers, CSRF_COOKIE), Some("c"));
        assert_eq!(cookie(&p.headers, "gp_sessionx"), None);
    }

    #[test]
    fn reads_need_no_csrf_and_writes_need_the_sessions_own() {
        assert_eq!(session_token(&parts(Method::GET, &[("cookie", "gp_session=tok")])).unwrap(), Some("tok"));
        assert_eq!(session_token(&parts(Method::POST, &[])).unwrap(), None);
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            let missing = parts(method.clone(), &[("cookie", "gp_session=tok")]);
            assert!(matches!(session_token(&missing), Err(ApiError::Forbidden { code: "csrf_failed", .. })));
            let other = csrf_token("another-session");
            let wrong = parts(method.clone(), &[("cookie", "gp_session=tok"), ("x-csrf-token", &other)]);
            assert!(matches!(session_token(&wrong), Err(ApiError::Forbidden { code: "csrf_failed", .. })));
            let good = csrf_token("tok");
            let ok = parts(method, &[("cookie", "gp_session=tok"), ("x-csrf-token", &good)]);
            assert_eq!(session_token(&ok).unwrap(), Some("tok"));
        }
    }
}
