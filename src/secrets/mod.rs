//! Secrets at rest: the service's keyring and the AES-256-GCM sealing of the secrets it must be able to read
//! back (webhook signing secrets, job secret values). Pure: no SQL, no HTTP; [`store`] applies it to the tables.
//!
//! A sealed secret is stored as two values: the id of the key that sealed it (a column of its own, so rotation
//! finds what is not under the current key), and `0x01 || nonce (12) || ciphertext || tag (16)`. Nonces are
//! random 96-bit values drawn by AWS-LC (its randomized-nonce AES-GCM): safe up to 2^32 seals per key (NIST SP
//! 800-38D, 8.3), far more than a control plane writes between two rotations. The associated data names the
//! secret's table, column and row, so a sealed value copied onto another row (another tenant's endpoint) does
//! not open there.
//!
//! The keyring is a list of `ID:BASE64KEY` entries (one a line, or comma-separated); the first is the current
//! key, which seals; every key opens what it sealed. See docs/security.md for rotation.

pub mod sealing;

/// Headers of a response that carries a secret: no cache (browser, proxy) may keep it (RFC 6749 section 5.1).
pub type NoStore = [(axum::http::HeaderName, &'static str); 1];
pub const NO_STORE: NoStore = [(axum::http::header::CACHE_CONTROL, "no-store")];

use std::fmt;

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};
use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use uuid::Uuid;

/// `n` bytes from the operating system's generator: keys, tokens, webhook secrets and the development JWT secret.
pub fn random_bytes(n: usize) -> Vec<u8> {
    use rand::RngCore;
    let mut bytes = vec![0u8; n];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// Bytes of a key (AES-256).
pub const KEY_BYTES: usize = 32;
/// The key id of the development key (`--dev`, `gpuplane demo`, the in-process tests).
pub const DEV_KEY_ID: &str = "dev";
/// Most characters of a key id.
pub const MAX_KEY_ID_CHARS: usize = 32;
/// First byte of every sealed value: the format (AES-256-GCM, random 96-bit nonce, 128-bit tag).
const FORMAT_V1: u8 = 1;
const TAG_LEN: usize = 16;
/// Shortest sealed value: format, nonce and tag around an empty secret.
pub const MIN_SEALED_BYTES: usize = 1 + NONCE_LEN + TAG_LEN;

/// Standard base64, with or without padding (`openssl rand -base64 32` pads).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Where a secret lives: bound into its associated data, so it opens only on its own row.
#[derive(Debug, Clone, Copy)]
pub enum Context<'a> {
    /// `webhook_endpoints.secret_sealed` of this endpoint.
    WebhookSecret { endpoint_id: Uuid },
    /// `job_secrets.value_sealed` of this job and name.
    JobSecret { job_id: Uuid, name: &'a str },
}

impl Context<'_> {
    fn aad(&self) -> Vec<u8> {
        match self {
            Context::WebhookSecret { endpoint_id } => format!("gpuplane/webhook_endpoints.secret/{endpoint_id}"),
            Context::JobSecret { job_id, name } => format!("gpuplane/job_secrets.value/{job_id}/{name}"),
        }
        .into_bytes()
    }
}

/// A secret as it is stored: the id of the key that sealed it and the sealed bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Sealed {
    pub key_id: String,
    pub bytes: Vec<u8>,
}

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sealed({}, {} bytes)", self.key_id, self.bytes.len())
    }
}

/// Why a keyring was refused. Never quotes key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    #[error("the keyring holds no key: give at least one `ID:BASE64KEY` entry")]
    Empty,
    #[error("entry {entry}: expected `ID:BASE64KEY`")]
    Shape { entry: usize },
    #[error(
        "entry {entry}: the key id must be 1-{MAX_KEY_ID_CHARS} letters, digits, `_`, `.` or `-`, starting with a \
         letter or digit"
    )]
    BadId { entry: usize },
    #[error(
        "entry {entry}: the key of `{id}` is not the base64 of {KEY_BYTES} bytes (make one with `openssl rand -base64 \
         32`)"
    )]
    BadKey { entry: usize, id: String },
    #[error("entry {entry}: key id `{id}` appears twice")]
    Duplicate { entry: usize, id: String },
}

/// Why a sealed secret did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("it is sealed under key `{0}`, which is not in the keyring")]
    UnknownKey(String),
    #[error("it does not open: tampered with, moved to another row, or a different key under the same id")]
    Unreadable,
}

struct Key {
    id: String,
    aead: RandomizedNonceKey,
}

/// The service's keys: the first one seals, each opens what it sealed. `Debug` shows the ids only.
pub struct Keyring {
    keys: Vec<Key>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring").field("key_ids", &self.ids().collect::<Vec<_>>()).finish()
    }
}

/// Whether `id` is a valid key id.
pub fn valid_key_id(id: &str) -> bool {
    (1..=MAX_KEY_ID_CHARS).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

impl Keyring {
    /// A keyring from its text: `ID:BASE64KEY` entries, one a line or comma-separated; blank lines and lines
    /// starting with `#` are skipped. The first entry is the current key.
    pub fn parse(text: &str) -> Result<Keyring, KeyringError> {
        let mut keyring = Keyring { keys: Vec::new() };
        let entries = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.starts_with('#'))
            .flat_map(|line| line.split(','))
            .map(str::trim)
            .filter(|entry| !entry.is_empty());
        for (i, entry) in entries.enumerate() {
            let entry_no = i + 1;
            let (id, key) = entry.split_once(':').ok_or(KeyringError::Shape { entry: entry_no })?;
            let (id, key) = (id.trim(), key.trim());
            if !valid_key_id(id) {
                return Err(KeyringError::BadId { entry: entry_no });
            }
            if keyring.contains(id) {
                return Err(KeyringError::Duplicate { entry: entry_no, id: id.to_owned() });
            }
            let bad_key = || KeyringError::BadKey { entry: entry_no, id: id.to_owned() };
            let bytes = BASE64.decode(key).map_err(|_| bad_key())?;
            if bytes.len() != KEY_BYTES {
                return Err(bad_key());
            }
            keyring.push(id, &bytes);
        }
        if keyring.keys.is_empty() {
            return Err(KeyringError::Empty);
        }
        Ok(keyring)
    }

    /// The development keyring: one key, `dev`, derived from a public string. It protects nothing; it lets
    /// `--dev`, the demo and the in-process tests run without configuration and read their own secrets after a
    /// restart. The service outside `--dev` never has it, so a secret sealed under it cannot be read there
    /// until `rotate-secrets --dev` re-seals it under a real key.
    pub fn dev() -> Keyring {
        let mut keyring = Keyring { keys: Vec::new() };
        keyring.add_dev_key();
        keyring
    }

    /// Add the development key after the others (no-op when a key `dev` is there already).
    pub fn add_dev_key(&mut self) {
        if !self.contains(DEV_KEY_ID) {
            use sha2::Digest;
            let key = sha2::Sha256::digest(b"gpuplane development secrets key: public, protects nothing");
            self.push(DEV_KEY_ID, &key);
        }
    }

    fn push(&mut self, id: &str, key: &[u8]) {
        let aead = RandomizedNonceKey::new(&AES_256_GCM, key).expect("a 32-byte key makes an AES-256-GCM key");
        self.keys.push(Key { id: id.to_owned(), aead });
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Every key id, the current one first.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.id.as_str())
    }

    pub fn contains(&self, id: &str) -> bool {
        self.keys.iter().any(|k| k.id == id)
    }

    /// Seal `secret` for `context` under the current key.
    pub fn seal(&self, context: Context<'_>, secret: &[u8]) -> Sealed {
        let key = &self.keys[0];
        let mut in_out = secret.to_vec();
        let nonce = key
            .aead
            .seal_in_place_append_tag(Aad::from(context.aad()), &mut in_out)
            .expect("AES-GCM seals any secret shorter than 64 GiB");
        let mut bytes = Vec::with_capacity(1 + NONCE_LEN + in_out.len());
        bytes.push(FORMAT_V1);
        bytes.extend_from_slice(nonce.as_ref());
        bytes.extend_from_slice(&in_out);
        Sealed { key_id: key.id.clone(), bytes }
    }

    /// Open a secret sealed for `context` under `key_id`.
    pub fn open(&self, context: Context<'_>, key_id: &str, sealed: &[u8]) -> Result<Vec<u8>, OpenError> {
        let key = self.keys.iter().find(|k| k.id == key_id).ok_or_else(|| OpenError::UnknownKey(key_id.to_owned()))?;
        if sealed.len() < MIN_SEALED_BYTES || sealed[0] != FORMAT_V1 {
            return Err(OpenError::Unreadable);
        }
        let nonce = Nonce::try_assume_unique_for_key(&sealed[1..1 + NONCE_LEN]).map_err(|_| OpenError::Unreadable)?;
        let mut in_out = sealed[1 + NONCE_LEN..].to_vec();
        let plain =
            key.aead.open_in_place(nonce, Aad::from(context.aad()), &mut in_out).map_err(|_| OpenError::Unreadable)?;
        let len = plain.len();
        in_out.truncate(len);
        Ok(in_out)
    }

    /// [`open`](Self::open) a secret that is text.
    pub fn open_string(&self, context: Context<'_>, key_id: &str, sealed: &[u8]) -> Result<String, OpenError> {
        String::from_utf8(self.open(context, key_id, sealed)?).map_err(|_| OpenError::Unreadable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const K2: &str = "k2:Hx4dHBsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA";

    fn endpoint() -> Context<'static> {
        Context::WebhookSecret { endpoint_id: Uuid::from_u128(7) }
    }

    #[test]
    fn a_sealed_secret_opens_with_its_context_and_hides_its_text() {
        let keyring = Keyring::parse(K1).unwrap();
        let secret = b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let sealed = keyring.seal(endpoint(), secret);
        assert_eq!(sealed.key_id, "k1");
        assert_eq!(sealed.bytes.len(), MIN_SEALED_BYTES + secret.len());
        assert!(!sealed.bytes.windows(8).any(|w| secret.windows(8).any(|s| s == w)), "no run of the secret");
        assert_eq!(keyring.open(endpoint(), "k1", &sealed.bytes).unwrap(), secret);
        assert_eq!(keyring.open_string(endpoint(), "k1", &sealed.bytes).unwrap().as_bytes(), secret);
        // A fresh nonce each time: the same secret never seals to the same bytes.
        assert_ne!(keyring.seal(endpoint(), secret).bytes, sealed.bytes);
        // Empty secrets too.
        let empty = keyring.seal(endpoint(), b"");
        assert_eq!(keyring.open(endpoint(), "k1", &empty.bytes).unwrap(), b"");
    }

    #[test]
    fn the_wrong_key_another_row_or_a_tampered_byte_does_not_open() {
        let k1 = Keyring::parse(K1).unwrap();
        let sealed = k1.seal(endpoint(), b"whsec_secret");
        // The same id naming another key.
        let other = Keyring::parse("k1:Hx4dHBsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA=").unwrap();
        assert_eq!(other.open(endpoint(), "k1", &sealed.bytes), Err(OpenError::Unreadable));
        // Copied onto another endpoint, or onto a job secret.
        let elsewhere = Context::WebhookSecret { endpoint_id: Uuid::from_u128(8) };
        assert_eq!(k1.open(elsewhere, "k1", &sealed.bytes), Err(OpenError::Unreadable));
        let job = Context::JobSecret { job_id: Uuid::from_u128(7), name: "TOKEN" };
        assert_eq!(k1.open(job, "k1", &sealed.bytes), Err(OpenError::Unreadable));
        // Every single flipped bit, in the format byte, nonce, ciphertext or tag.
        for i in 0..sealed.bytes.len() {
            let mut tampered = sealed.bytes.clone();
            tampered[i] ^= 0x01;
            assert_eq!(k1.open(endpoint(), "k1", &tampered), Err(OpenError::Unreadable), "byte {i}");
        }
        // Truncated, extended, empty.
        assert_eq!(k1.open(endpoint(), "k1", &sealed.bytes[..sealed.bytes.len() - 1]), Err(OpenError::Unreadable));
        let mut longer = sealed.bytes.clone();
        longer.push(0);
        assert_eq!(k1.open(endpoint(), "k1", &longer), Err(OpenError::Unreadable));
        assert_eq!(k1.open(endpoint(), "k1", &[]), Err(OpenError::Unreadable));
    }

    #[test]
    fn an_unknown_key_id_is_named() {
        let k1 = Keyring::parse(K1).unwrap();
        let k2 = Keyring::parse(K2).unwrap();
        let sealed = k2.seal(endpoint(), b"x");
        assert_eq!(k1.open(endpoint(), "k2", &sealed.bytes), Err(OpenError::UnknownKey("k2".into())));
        assert!(OpenError::UnknownKey("k2".into()).to_string().contains("`k2`"));
    }

    #[test]
    fn the_first_key_seals_and_every_key_opens_what_it_sealed() {
        let old = Keyring::parse(K1).unwrap();
        let sealed_old = old.seal(endpoint(), b"before");
        let both = Keyring::parse(&format!("# rotated in December\n{K2}\n\n{K1}\n")).unwrap();
        assert_eq!(both.current_id(), "k2");
        assert_eq!(both.ids().collect::<Vec<_>>(), ["k2", "k1"]);
        assert_eq!(both.open(endpoint(), "k1", &sealed_old.bytes).unwrap(), b"before");
        let sealed_new = both.seal(endpoint(), b"after");
        assert_eq!(sealed_new.key_id, "k2");
        // Comma-separated, as one environment variable.
        let env = Keyring::parse(&format!("{K2}, {K1}")).unwrap();
        assert_eq!(env.open(endpoint(), "k2", &sealed_new.bytes).unwrap(), b"after");
    }

    #[test]
    fn malformed_keyrings_are_refused_without_quoting_the_key() {
        let refused = |text: &str| Keyring::parse(text).unwrap_err();
        assert_eq!(refused(""), KeyringError::Empty);
        assert_eq!(refused("# only a comment\n\n"), KeyringError::Empty);
        assert_eq!(refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="), KeyringError::Shape { entry: 1 });
        assert_eq!(refused(":AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="), KeyringError::BadId { entry: 1 });
        assert_eq!(refused(&format!("{K1}\nk 2:AAAA")), KeyringError::BadId { entry: 2 });
        assert_eq!(refused(&format!("-x:{}", &K1[3..])), KeyringError::BadId { entry: 1 });
        assert_eq!(refused(&format!("{}:{}", "a".repeat(33), &K1[3..])), KeyringError::BadId { entry: 1 });
        // 16 bytes (AES-128) and not base64 at all.
        let short = refused("k1:AAECAwQFBgcICQoLDA0ODw==");
        assert_eq!(short, KeyringError::BadKey { entry: 1, id: "k1".into() });
        assert!(!short.to_string().contains("AAECAwQFBgcICQoLDA0ODw"), "{short}");
        assert_eq!(refused("k1:not base64!"), KeyringError::BadKey { entry: 1, id: "k1".into() });
        assert_eq!(refused(&format!("{K1},{K1}")), KeyringError::Duplicate { entry: 2, id: "k1".into() });
        assert!(valid_key_id("2026-12.a_b") && !valid_key_id("k:1") && !valid_key_id("é"));
    }

    #[test]
    fn debug_shows_key_ids_only() {
        let keyring = Keyring::parse(K1).unwrap();
        let shown = format!("{keyring:?} {:?}", keyring.seal(endpoint(), b"whsec_x"));
        assert!(shown.contains("k1") && !shown.contains("AAECAw") && !shown.contains("whsec"), "{shown}");
    }

    #[test]
    fn the_dev_key_is_the_same_in_every_process_and_added_once() {
        let sealed = Keyring::dev().seal(endpoint(), b"s");
        assert_eq!(sealed.key_id, DEV_KEY_ID);
        assert_eq!(Keyring::dev().open(endpoint(), DEV_KEY_ID, &sealed.bytes).unwrap(), b"s");
        let mut keyring = Keyring::parse(K1).unwrap();
        keyring.add_dev_key();
        keyring.add_dev_key();
        assert_eq!(keyring.ids().collect::<Vec<_>>(), ["k1", "dev"]);
        assert_eq!(keyring.open(endpoint(), DEV_KEY_ID, &sealed.bytes).unwrap(), b"s");
    }
}
