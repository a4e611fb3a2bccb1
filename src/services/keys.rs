//! Callers' keys of a service: `gps_` and 256 random bits, shown once; only their SHA-256 is kept. Pure.

use crate::auth::keys::{NewKey, generate_with_prefix, hash, looks_like_secret};

/// Every service key starts with this (secret scanners recognise a leaked one).
pub const SERVICE_KEY_PREFIX: &str = "gps_";

pub fn generate() -> NewKey {
    generate_with_prefix(SERVICE_KEY_PREFIX)
}

/// The stored hash of a presented key, or None when it cannot be one (no database lookup then).
pub fn presented_hash(secret: &str) -> Option<Vec<u8>> {
    looks_like_secret(secret, SERVICE_KEY_PREFIX).then(|| hash(secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_recognised_by_shape_and_hashed() {
        let key = generate();
        assert!(key.secret.starts_with(SERVICE_KEY_PREFIX));
        assert_eq!(presented_hash(&key.secret), Some(key.hash.clone()));
        assert_eq!(presented_hash("gpk_something"), None);
        assert_eq!(presented_hash(&key.secret[..key.secret.len() - 1]), None);
        assert_ne!(generate().secret, key.secret);
    }
}
