//! OpenSSH public keys as tenants give them and agents install them: parsed and checked in one place, for the
//! service (at the edge) and the agent (its own host key's fingerprint).

use base64::Engine;
use sha2::{Digest, Sha256};

/// Key types accepted (what current OpenSSH servers accept by default).
pub const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// A public key as stored: its type, the normalized `<type> <blob>` line and its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedKey {
    pub key_type: String,
    pub line: String,
    pub fingerprint: String,
}

/// Parse one OpenSSH public key line. The blob must be valid base64 whose embedded type equals the declared one.
pub fn parse_public_key(text: &str) -> Result<ParsedKey, String> {
    if text.len() > 16384 {
        return Err("at most 16384 characters".into());
    }
    if text.chars().any(|c| c.is_control() && c != '\n' && c != '\r') || text.trim().contains(['\n', '\r']) {
        return Err("one key on one line, without control characters".into());
    }
    let mut parts = text.split_whitespace();
    let (Some(key_type), Some(blob)) = (parts.next(), parts.next()) else {
        return Err("expected `<type> <base64 key> [comment]`, as in ~/.ssh/id_ed25519.pub".into());
    };
    if !KEY_TYPES.contains(&key_type) {
        return Err(format!("key type `{key_type}` is not accepted; use one of {}", KEY_TYPES.join(", ")));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map_err(|_| "the key is not valid base64".to_string())?;
    let embedded = bytes
        .get(..4)
        .map(|n| u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize)
        .and_then(|len| bytes.get(4..4 + len))
        .ok_or_else(|| "the key data is truncated".to_string())?;
    if embedded != key_type.as_bytes() {
        return Err("the key data does not match its declared type".into());
    }
    if key_type == "ssh-rsa" && bytes.len() < 256 {
        return Err("RSA keys must have at least 2048 bits".into());
    }
    let digest = Sha256::digest(&bytes);
    let fingerprint = format!("SHA256:{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest));
    Ok(ParsedKey { key_type: key_type.to_owned(), line: format!("{key_type} {blob}"), fingerprint })
}
