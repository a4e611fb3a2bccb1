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

/// Uploads one round of [`expire`] deletes at most.
const EXPIRE_BATCH: i64 = 100;

/// Delete uploads unused for `retention` that no job which has not ended names (nothing without a retention);
/// returns whether a full batch went (more may be due).
pub async fn expire(db: &sqlx::PgPool, retention: Option<std::time::Duration>) -> anyhow::Result<bool> {
    let Some(retention) = retention else { return Ok(false) };
    let unused_since = chrono::Utc::now() - chrono::Duration::from_std(retention)?;
    let gone = gpuplane_store::uploads::expire_unused(&mut *db.acquire().await?, unused_since, EXPIRE_BATCH).await?;
    if gone > 0 {
        tracing::info!(uploads = gone, "unused uploads deleted (--upload-retention-days)");
    }
    Ok(gone == EXPIRE_BATCH as u64)
}

/// A job's `workdir` that names no upload of its tenant's (never sent, or expired).
pub fn not_uploaded() -> crate::error::ApiError {
    crate::error::ApiError::field(
        "workdir",
        "no upload of this tenant has this digest (never sent, or expired unused): upload it (POST /v1/uploads)",
    )
}

/// An uploaded archive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"digest": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "size_bytes": 18233, "files": 12, "unpacked_bytes": 64310, "created_at": "2026-12-05T10:00:00Z",
    "last_used_at": "2026-12-05T10:02:00Z"}))]
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
    /// When it was last sent or named by a new job: an upload no running job names is deleted the service's
    /// upload retention after this (docs/uploads.md).
    pub last_used_at: chrono::DateTime<chrono::Utc>,
}

impl From<gpuplane_store::uploads::UploadRow> for Upload {
    fn from(row: gpuplane_store::uploads::UploadRow) -> Self {
        Upload {
            digest: row.digest,
            size_bytes: row.size_bytes,
            files: row.files,
            unpacked_bytes: row.unpacked_bytes,
            created_at: row.created_at,
            last_used_at: row.last_used_at,
        }
    }
}
