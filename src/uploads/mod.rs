//! Tenants' uploaded working directories (docs/uploads.md): a job's code and small data, sent once as a
//! gzip-compressed tar archive and unpacked by the agents into the working directory of each of the job's parts.
//!
//! An upload is kept once per tenant under its SHA-256 (sending the same archive again stores nothing), checked
//! when it arrives against the rules the agent applies again when it unpacks (`gpuplane_agent::archive`: plain
//! relative paths, files and directories only, bounded in entries, size and compression ratio), and refused
//! whole, with nothing stored, when one entry breaks one. A job names it with `workdir`; only the job's tenant's
//! uploads can be named (a foreign key says so), and an agent gets an upload only while a part of its node names it.

pub mod routes;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What `digest` looks like: `sha256:` and 64 lowercase hex digits.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The digest of an archive.
pub fn digest_of(bytes: &[u8]) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(bytes);
    format!("sha256:{}", hash.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// An uploaded archive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"digest": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "size_bytes": 18233, "files": 12, "unpacked_bytes": 64310, "created_at": "2026-12-05T10:00:00Z"}))]
pub struct Upload {
    /// `sha256:` and the archive's SHA-256: what a job's `workdir` names.
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub digest: String,
    /// The archive's size.
    pub size_bytes: i64,
    /// Regular files in it.
    pub files: i64,
    /// What its files add up to unpacked.
    pub unpacked_bytes: i64,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl From<gpuplane_store::uploads::UploadRow> for Upload {
    fn from(row: gpuplane_store::uploads::UploadRow) -> Self {
        Upload {
            digest: row.digest,
            size_bytes: row.size_bytes,
            files: row.files,
            unpacked_bytes: row.unpacked_bytes,
            created_at: row.created_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_sha256_in_lowercase_hex() {
        let digest = digest_of(b"abc");
        assert_eq!(digest, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(is_digest(&digest));
        for bad in [
            "sha256:",
            "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "md5:00",
            &digest[..70],
        ] {
            assert!(!is_digest(bad), "{bad}");
        }
    }
}
