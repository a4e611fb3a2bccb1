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

/// The digest rules are the archive's, shared with the agents that check what they fetch.
pub use gpuplane_agent::archive::{digest_of, is_digest};

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
