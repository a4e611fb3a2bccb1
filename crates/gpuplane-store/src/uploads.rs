//! Tenants' uploaded working directories: archives kept once per tenant under their digest, and the one an
//! agent may fetch (an upload a job of its node names).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;

/// An upload, without its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct UploadRow {
    pub digest: String,
    pub size_bytes: i64,
    pub files: i64,
    pub unpacked_bytes: i64,
    pub created_at: DateTime<Utc>,
}

pub async fn find(conn: &mut PgConnection, tenant_id: Uuid, digest: &str) -> StoreResult<Option<UploadRow>> {
    let row = sqlx::query_as!(
        UploadRow,
        "SELECT digest, size_bytes, files, unpacked_bytes, created_at FROM uploads WHERE tenant_id = $1 AND digest = $2",
        tenant_id,
        digest
    )
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// Keep an archive; one the tenant already has is left as it is. Returns whether it was new.
pub async fn insert(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    digest: &str,
    files: i64,
    unpacked_bytes: i64,
    content: &[u8],
) -> StoreResult<bool> {
    let done = sqlx::query!(
        "INSERT INTO uploads (tenant_id, digest, size_bytes, files, unpacked_bytes, content) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        tenant_id,
        digest,
        content.len() as i64,
        files,
        unpacked_bytes,
        content
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Name the upload a job's parts unpack (it must be the job's tenant's: the foreign key says so).
pub async fn set_job_workdir(conn: &mut PgConnection, job_id: Uuid, digest: &str) -> StoreResult<()> {
    sqlx::query!("UPDATE jobs SET workdir = $2 WHERE id = $1", job_id, digest).execute(conn).await?;
    Ok(())
}

/// The archive `digest`, if a part on this node that has not ended belongs to a job that names it.
pub async fn for_node(conn: &mut PgConnection, node_id: Uuid, digest: &str) -> StoreResult<Option<Vec<u8>>> {
    let content = sqlx::query_scalar!(
        "SELECT u.content FROM uploads u \
         WHERE u.digest = $2 AND EXISTS ( \
             SELECT 1 FROM jobs j JOIN job_nodes jn ON jn.job_id = j.id \
             WHERE j.tenant_id = u.tenant_id AND j.workdir = u.digest AND jn.node_id = $1 \
                 AND jn.state NOT IN ('succeeded', 'failed', 'cancelled')) \
         LIMIT 1",
        node_id,
        digest
    )
    .fetch_optional(conn)
    .await?;
    Ok(content)
}
