//! API key material: generation, display prefix and hashing. Pure functions, no I/O.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// Every API key starts with this, so a leaked key is recognisable by secret scanners.
pub const KEY_PREFIX: &str = "gpk_";
/// Node join tokens start with this.
pub const JOIN_TOKEN_PREFIX: &str = "gpj_";
/// Random bytes in a key (256 bits).
pub const KEY_RANDOM_BYTES: usize = 32;
/// How many random characters of a key are kept in clear (after its prefix) to identify it in listings.
const DISPLAY_CHARS: usize = 8;

use crate::secrets::random_bytes;

/// A freshly generated key: the full secret (shown once) and what is stored.
pub struct NewKey {
    pub secret: String,
    pub display_prefix: String,
    pub hash: Vec<u8>,
}

/// A new API key.
pub fn generate() -> NewKey {
    generate_with_prefix(KEY_PREFIX)
}

/// A new secret of 256 random bits behind `prefix` (`gpk_` API keys, `gpj_` join tokens).
pub fn generate_with_prefix(prefix: &str) -> NewKey {
    let secret = format!("{prefix}{}", URL_SAFE_NO_PAD.encode(random_bytes(KEY_RANDOM_BYTES)));
    NewKey { display_prefix: secret[..prefix.len() + DISPLAY_CHARS].to_string(), hash: hash(&secret), secret }
}

/// SHA-256 of the whole key. Keys have 256 bits of entropy, so a slow password hash would add nothing.
pub fn hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Cheap shape check of an API key before touching the database.
pub fn looks_like_key(secret: &str) -> bool {
    looks_like_secret(secret, KEY_PREFIX)
}

/// Shape check of a secret made by `generate_with_prefix(prefix)`.
pub fn looks_like_secret(secret: &str, prefix: &str) -> bool {
    secret.len() == prefix.len() + 43
        && secret.starts_with(prefix)
        && secret[prefix.len()..].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_unique_prefixed_and_well_formed() {
        let a = generate();
        let b = generate();
        assert_ne!(a.secret, b.secret);
        assert!(a.secret.starts_with(KEY_PREFIX));
        assert!(looks_like_key(&a.secret));
        assert!(a.secret.starts_with(&a.display_prefix));
        assert_eq!(a.hash, hash(&a.secret));
        assert_eq!(a.hash.len(), 32);
    }

    #[test]
    fn malformed_keys_are_rejected_before_lookup() {
        assert!(!looks_like_key(""));
        assert!(!looks_like_key("gpk_short"));
        let k = generate().secret;
        assert!(!looks_like_key(&k.replacen("gpk_", "xxx_", 1)));
        assert!(!looks_like_key(&format!("{}!", &k[..k.len() - 1])));
    }
}
