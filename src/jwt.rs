//! Signed tokens: the roles, the claims of user tokens and agent credentials, and the keys that sign and verify
//! them (HS256, the algorithm pinned). A leaf: it knows nothing of requests or the database.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::Settings;
use crate::error::ApiError;

pub const ISSUER: &str = "gpuplane";

fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = Hmac::<sha2_for_hmac::Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}
/// Audience of user (operator and tenant) tokens.
pub const USER_AUDIENCE: &str = "gpuplane-api";
/// Audience of node agent credentials: they open `/v1/agent/*` and nothing else.
pub const AGENT_AUDIENCE: &str = "gpuplane-agent";
/// Lifetime of an agent credential. Re-registration revokes it earlier (generation bump).
pub const AGENT_TOKEN_TTL_SECS: u64 = 365 * 24 * 3600;

pub use gpuplane_store::auth::Role;

#[derive(Debug, Serialize, Deserialize)]
pub struct Claims {
    /// The API key's id.
    pub sub: Uuid,
    pub tenant_id: Option<Uuid>,
    pub role: Role,
    pub iss: String,
    pub aud: String,
    pub iat: u64,
    pub exp: u64,
    /// The console session the token belongs to (`console_sessions.id`): it works only while that row exists
    /// for this key. Absent on the tokens of `POST /v1/auth/token`, which live by their key alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<Uuid>,
}

/// Claims of a node agent credential.
#[derive(Debug, Serialize, Deserialize)]
pub struct AgentClaims {
    /// The node's id.
    pub sub: Uuid,
    /// The node's `agent_generation` when the credential was issued.
    pub generation: i64,
    pub iss: String,
    pub aud: String,
    pub iat: u64,
    pub exp: u64,
}

/// Signing and verification keys for user tokens and agent credentials.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    agent_validation: Validation,
    pub ttl_secs: u64,
    /// Derived from the signing secret: the key of the replicas' tokens ([`TokenKeys::replica_token`]).
    replica_key: Vec<u8>,
}

impl TokenKeys {
    pub fn new(settings: &Settings) -> anyhow::Result<Self> {
        let secret = settings.jwt_secret.expose();
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[USER_AUDIENCE]);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
        validation.leeway = 5;
        let mut agent_validation = validation.clone();
        agent_validation.set_audience(&[AGENT_AUDIENCE]);
        Ok(TokenKeys {
            encoding: EncodingKey::from_secret(secret)?,
            decoding: DecodingKey::from_secret(secret)?,
            validation,
            agent_validation,
            ttl_secs: settings.token_ttl.as_secs(),
            replica_key: hmac_sha256(secret, b"gpuplane replica tokens"),
        })
    }

    /// The token the gateway presents to a serving part's forwarder on its node: derived from the signing
    /// secret and the part, so it is stored nowhere and every service replica computes the same one. The agent
    /// learns it with the part's assignment; the job's processes never see it.
    pub fn replica_token(&self, job_node_id: Uuid) -> String {
        hmac_sha256(&self.replica_key, job_node_id.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn issue_agent(&self, node_id: Uuid, generation: i64) -> anyhow::Result<String> {
        let now = now_secs();
        let claims = AgentClaims {
            sub: node_id,
            generation,
            iss: ISSUER.into(),
            aud: AGENT_AUDIENCE.into(),
            iat: now,
            exp: now + AGENT_TOKEN_TTL_SECS,
        };
        Ok(jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)?)
    }

    pub fn verify_agent(&self, token: &str) -> Result<AgentClaims, ApiError> {
        jsonwebtoken::decode::<AgentClaims>(token, &self.decoding, &self.agent_validation)
            .map(|data| data.claims)
            .map_err(|err| token_rejection("agent credential", &err))
    }

    /// The claims of a user token issued now, without a session.
    pub fn claims(&self, key_id: Uuid, tenant_id: Option<Uuid>, role: Role) -> Claims {
        let now = now_secs();
        Claims {
            sub: key_id,
            tenant_id,
            role,
            iss: ISSUER.into(),
            aud: USER_AUDIENCE.into(),
            iat: now,
            exp: now + self.ttl_secs,
            sid: None,
        }
    }

    /// A signed user token with these claims.
    pub fn sign(&self, claims: &Claims) -> anyhow::Result<String> {
        Ok(jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)?)
    }

    /// A user token without a session (`POST /v1/auth/token`).
    pub fn issue(&self, key_id: Uuid, tenant_id: Option<Uuid>, role: Role) -> anyhow::Result<String> {
        self.sign(&self.claims(key_id, tenant_id, role))
    }

    pub fn verify(&self, token: &str) -> Result<Claims, ApiError> {
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|err| token_rejection("access token", &err))
    }
}

/// A 401 that says what is wrong in our words: the JWT library's messages describe its internals (claim
/// names it requires, algorithms it tried) and are not part of this API's contract.
fn token_rejection(what: &str, err: &jsonwebtoken::errors::Error) -> ApiError {
    use jsonwebtoken::errors::ErrorKind;
    match err.kind() {
        ErrorKind::ExpiredSignature => ApiError::unauthorized(format!("the {what} has expired")),
        _ => ApiError::unauthorized(format!("invalid {what}")),
    }
}

pub fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
