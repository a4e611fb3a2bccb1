//! Authentication and authorization.
//!
//! API keys are exchanged for short-lived HS256 JWTs (`POST /v1/auth/token`). Each request's token is
//! verified (signature, `exp`, `iss`, `aud`, algorithm pinned so `alg: none` fails) and its key is checked
//! against the database, so a revoked key or a suspended tenant takes effect at once. A console sign-in's token
//! also names its server-side session (`sid`, see [`sessions`]), looked up by the same statement as the key:
//! signing out ends it at once, wherever the token is replayed (cookie or bearer).
//!
//! Who may call a handler is in its signature: [`OperatorAuth`], [`TenantAuth`], [`TenantAdminAuth`] or
//! [`AnyAuth`]. Agent credentials (a different audience) can never satisfy these.

pub mod api_keys;
pub mod cookie;
pub mod key_lifecycle;
pub mod keys;
pub mod requests;
pub mod routes;
pub mod sessions;

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use uuid::Uuid;

use crate::error::ApiError;
pub use crate::jwt::{
    AGENT_AUDIENCE, AGENT_TOKEN_TTL_SECS, AgentClaims, Claims, ISSUER, Role, TokenKeys, USER_AUDIENCE, now_secs,
};
use crate::state::AppState;

/// A verified caller whose key is not revoked, whose tenant (if any) is active and whose console session (if
/// its token names one) has not ended.
#[derive(Debug, Clone, Copy)]
pub struct Principal {
    pub key_id: Uuid,
    pub tenant_id: Option<Uuid>,
    pub role: Role,
    /// The console session of the token, if it is a console sign-in's.
    pub session_id: Option<Uuid>,
}

/// The user token of a request: the `Authorization: Bearer` header, or else the console's session cookie (with
/// its CSRF check, see [`cookie`]). Both are verified the same way by the caller. The flag: from the cookie.
pub fn user_token(parts: &Parts) -> Result<(&str, bool), ApiError> {
    if !parts.headers.contains_key(AUTHORIZATION)
        && let Some(token) = cookie::session_token(parts)?
    {
        return Ok((token, true));
    }
    Ok((bearer_token(parts)?, false))
}

/// The verified claims of the request's user token (signature, expiry, issuer, audience; not yet the database
/// checks). The cookie holds only console sessions: a token without `sid` there is refused, so every cookie can
/// be signed out.
pub fn verify_user_token(tokens: &TokenKeys, parts: &Parts) -> Result<Claims, ApiError> {
    let (token, from_cookie) = user_token(parts)?;
    let claims = tokens.verify(token)?;
    if from_cookie && claims.sid.is_none() {
        return Err(ApiError::unauthorized("the session cookie holds no console session: sign in again"));
    }
    Ok(claims)
}

/// Read the bearer token from the `Authorization` header.
pub fn bearer_token(parts: &Parts) -> Result<&str, ApiError> {
    let value = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer <token> header"))?;
    let value = value.to_str().map_err(|_| ApiError::unauthorized("malformed Authorization header"))?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => Ok(token.trim()),
        _ => Err(ApiError::unauthorized("expected Authorization: Bearer <token>")),
    }
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(principal) = parts.extensions.get::<Principal>() {
            return Ok(*principal);
        }
        let claims = verify_user_token(&state.tokens, parts)?;
        check_key(&state.db, claims.sub, claims.sid).await?;
        let principal =
            Principal { key_id: claims.sub, tenant_id: claims.tenant_id, role: claims.role, session_id: claims.sid };
        parts.extensions.insert(principal);
        tracing::Span::current().record("tenant.id", tracing::field::display(OptionalId(principal.tenant_id)));
        Ok(principal)
    }
}

pub use gpuplane_store::auth::{KeyCheck, KeyVerdict, key_check_cte};

/// Ok when the [`KeyCheck`] says the key `key_id` may act; otherwise why, for the answer: 401 for a missing,
/// revoked or expired key; 401 `session_ended` for a console session that is gone (signed out, its tenant
/// suspended, expired) or was never this key's; 403 for a live key of a suspended tenant.
fn verdict(check: &KeyCheck, key_id: Uuid) -> Result<(), ApiError> {
    match check.verdict(key_id) {
        KeyVerdict::MayAct => Ok(()),
        KeyVerdict::Revoked => Err(ApiError::unauthorized("the API key behind this token is revoked")),
        KeyVerdict::SessionEnded => Err(ApiError::session_ended()),
        KeyVerdict::TenantSuspended => {
            Err(ApiError::Forbidden { code: "tenant_suspended", message: "the tenant is suspended".into() })
        }
    }
}

/// The key behind a verified token must not be revoked, its tenant (if any) not suspended, and its console
/// session (`session_id`, the token's `sid`), if it names one, not ended: one statement, one round trip.
pub async fn check_key(db: &sqlx::PgPool, key_id: Uuid, session_id: Option<Uuid>) -> Result<(), ApiError> {
    let mut conn = db.acquire().await?;
    let check = gpuplane_store::auth::check_key(&mut conn, key_id, session_id).await?;
    match check {
        Some(check) => verdict(&check, key_id),
        None => Err(ApiError::unauthorized("the API key behind this token is revoked")),
    }
}

struct OptionalId(Option<Uuid>);
impl std::fmt::Display for OptionalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(id) => write!(f, "{id}"),
            None => f.write_str("-"),
        }
    }
}

/// Proof that this module made a caller type after checking its key: a private field of that type means no
/// other module can make one (there is no way around [`TenantAdminToken::check`] / `accept`).
#[derive(Debug, Clone, Copy)]
struct Checked;

/// Any authenticated operator or tenant user.
pub struct AnyAuth(pub Principal);

impl FromRequestParts<AppState> for AnyAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Principal::from_request_parts(parts, state).await.map(AnyAuth)
    }
}

/// A platform operator.
pub struct OperatorAuth {
    pub key_id: Uuid,
    _checked: Checked,
}

impl FromRequestParts<AppState> for OperatorAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let p = Principal::from_request_parts(parts, state).await?;
        match p.role {
            Role::Operator => Ok(OperatorAuth { key_id: p.key_id, _checked: Checked }),
            _ => Err(ApiError::forbidden("this endpoint is for platform operators")),
        }
    }
}

/// A member or admin of a tenant; every query they make is scoped to `tenant_id`.
pub struct TenantAuth {
    pub tenant_id: Uuid,
    pub key_id: Uuid,
    pub role: Role,
    _checked: Checked,
}

impl FromRequestParts<AppState> for TenantAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let p = Principal::from_request_parts(parts, state).await?;
        match (p.role, p.tenant_id) {
            (Role::TenantAdmin | Role::TenantMember, Some(tenant_id)) => {
                Ok(TenantAuth { tenant_id, key_id: p.key_id, role: p.role, _checked: Checked })
            }
            _ => Err(ApiError::forbidden("this endpoint is for tenant users")),
        }
    }
}

/// A tenant administrator whose key was checked against the database. Only this module makes one (the
/// private field): from the extractor, or from a [`TenantAdminToken`] through its check.
pub struct TenantAdminAuth {
    pub tenant_id: Uuid,
    pub key_id: Uuid,
    _checked: Checked,
}

impl FromRequestParts<AppState> for TenantAdminAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let t = TenantAuth::from_request_parts(parts, state).await?;
        match t.role {
            Role::TenantAdmin => Ok(TenantAdminAuth { tenant_id: t.tenant_id, key_id: t.key_id, _checked: Checked }),
            _ => Err(ApiError::forbidden("this endpoint needs the tenant_admin role")),
        }
    }
}

/// A tenant administrator whose token is verified (signature, expiry, audience, role) but whose key has NOT
/// yet been checked against the database. It holds no tenant id a handler could use: the only ways to a
/// [`TenantAdminAuth`] are [`TenantAdminToken::check`] (one query) and [`TenantAdminToken::accept`] with the
/// [`KeyCheck`] of a statement that embedded [`key_check_cte`] (lease creation and release verify the key in
/// their first statement). Revocation and suspension take effect at once either way.
pub struct TenantAdminToken {
    tenant_id: Uuid,
    key_id: Uuid,
    session_id: Option<Uuid>,
}

impl FromRequestParts<AppState> for TenantAdminToken {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let claims = verify_user_token(&state.tokens, parts)?;
        match (claims.role, claims.tenant_id) {
            (Role::TenantAdmin, Some(tenant_id)) => {
                tracing::Span::current().record("tenant.id", tracing::field::display(tenant_id));
                Ok(TenantAdminToken { tenant_id, key_id: claims.sub, session_id: claims.sid })
            }
            (Role::TenantMember, Some(_)) => Err(ApiError::forbidden("this endpoint needs the tenant_admin role")),
            _ => Err(ApiError::forbidden("this endpoint is for tenant users")),
        }
    }
}

impl TenantAdminToken {
    /// The key to bind as `$1` of a statement that embeds [`key_check_cte`]. Not tenant data: the statement
    /// must take the tenant from `key_check.checked_tenant_id`, which only a valid key yields.
    pub fn key_id(&self) -> Uuid {
        self.key_id
    }

    /// The console session to bind with [`Self::key_id`] as the session parameter of [`key_check_cte`].
    pub fn session_id(&self) -> Option<Uuid> {
        self.session_id
    }

    /// The tenant the token names, not verified yet: only to narrow a statement that also verifies the key
    /// ([`key_check_cte`]) and takes the tenant from it, so that it finds nothing when [`Self::accept`] would
    /// refuse. Never proof of anything.
    pub fn claimed_tenant_id(&self) -> Uuid {
        self.tenant_id
    }

    /// Check the key now, in a query of its own.
    pub async fn check(&self, db: &sqlx::PgPool) -> Result<TenantAdminAuth, ApiError> {
        check_key(db, self.key_id, self.session_id).await?;
        Ok(TenantAdminAuth { tenant_id: self.tenant_id, key_id: self.key_id, _checked: Checked })
    }

    /// The caller, given what [`key_check_cte`] found for this token's key in the caller's own statement.
    pub fn accept(&self, check: &KeyCheck) -> Result<TenantAdminAuth, ApiError> {
        verdict(check, self.key_id)?;
        if !check.is_of_tenant(self.tenant_id) {
            return Err(ApiError::unauthorized("the API key behind this token is revoked"));
        }
        Ok(TenantAdminAuth { tenant_id: self.tenant_id, key_id: self.key_id, _checked: Checked })
    }
}

/// A node agent. Verified from its credential alone (no query): every agent handler scopes its first
/// statement by `node_id` AND `generation`, so a rotated credential finds nothing and gets 401.
pub struct AgentAuth {
    pub node_id: Uuid,
    pub generation: i64,
}

impl FromRequestParts<AppState> for AgentAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let claims = state.tokens.verify_agent(bearer_token(parts)?)?;
        Ok(AgentAuth { node_id: claims.sub, generation: claims.generation })
    }
}

/// An agent's credential where it is optional proof (re-registration): no Authorization header is `None`; a
/// header with an invalid credential is 401, never silently ignored.
impl OptionalFromRequestParts<AppState> for AgentAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Option<Self>, Self::Rejection> {
        if !parts.headers.contains_key(AUTHORIZATION) {
            return Ok(None);
        }
        <Self as FromRequestParts<AppState>>::from_request_parts(parts, state).await.map(Some)
    }
}
