//! Standard Webhooks signatures: `v1,<base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))>`, where the key is
//! the base64-decoded part of the endpoint secret after `whsec_`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2_for_hmac::Sha256;

/// Prefix of every endpoint secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a new secret (the specification allows 24 to 64).
pub const SECRET_BYTES: usize = 32;

/// A new endpoint secret: `whsec_` and the base64 of 32 random bytes.
pub fn new_secret() -> String {
    format!("{SECRET_PREFIX}{}", STANDARD.encode(crate::secrets::random_bytes(SECRET_BYTES)))
}

/// The HMAC key of a `whsec_` secret; None when it is not one.
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()
}

/// The `webhook-signature` header value for one message.
pub fn sign(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of the Standard Webhooks reference libraries (standard-webhooks/standard-webhooks,
    /// libraries/*/ tests): this secret, id, timestamp and payload sign to this value.
    #[test]
    fn the_specification_test_vector_signs_as_published() {
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn new_secrets_decode_to_their_random_bytes() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert_eq!(secret_key(&a).unwrap().len(), SECRET_BYTES);
        assert!(secret_key("sk_notawebhooksecret").is_none());
        assert!(secret_key("whsec_!!!").is_none());
    }
}
