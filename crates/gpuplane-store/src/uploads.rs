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
    pub last_used_at: DateTime<Utc>,
}

pub async fn find(conn: &mut PgConnection, tenant_id: Uuid, digest: &str) -> StoreResult<Option<UploadRow>> {
    let row = sqlx::query_as!(
        UploadRow,
        "SELECT digest, size_bytes, files, unpacked_bytes, created_at, last_used_at FROM uploads \
         WHERE tenant_id = $1 AND digest = $2",
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

/// Name the upload a job's parts unpack (it must be the job's tenant's: the foreign key says so), and mark it
/// used. Returns false, naming nothing, when the tenant has no such upload (it expired since it was checked).
/// The upload's row stays locked until the transaction ends, so [`expire_unused`] passes it by.
pub async fn set_job_workdir(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    job_id: Uuid,
    digest: &str,
) -> StoreResult<bool> {
    if touch(&mut *conn, tenant_id, digest).await?.is_none() {
        return Ok(false);
    }
    sqlx::query!("UPDATE jobs SET workdir = $2 WHERE id = $1", job_id, digest).execute(conn).await?;
    Ok(true)
}

/// Mark an upload used now; returns it, if the tenant has it.
pub async fn touch(conn: &mut PgConnection, tenant_id: Uuid, digest: &str) -> StoreResult<Option<UploadRow>> {
    let row = sqlx::query_as!(
        UploadRow,
        "UPDATE uploads SET last_used_at = now() WHERE tenant_id = $1 AND digest = $2 \
         RETURNING digest, size_bytes, files, unpacked_bytes, created_at, last_used_at",
        tenant_id,
        digest
    )
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// Delete up to `limit` uploads last used before `unused_since` that no job which has not ended names (the ended
/// jobs that named one stop naming it); returns how many. Uploads locked by a transaction (a job being created
/// with one) are passed by, and the lock's re-check of `last_used_at` drops one touched meanwhile.
pub async fn expire_unused(conn: &mut PgConnection, unused_since: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
    let done = sqlx::query!(
        "DELETE FROM uploads u USING ( \
             SELECT tenant_id, digest FROM uploads c \
             WHERE c.last_used_at < $1 AND NOT EXISTS ( \
                 SELECT 1 FROM jobs j \
                 WHERE j.tenant_id = c.tenant_id AND j.workdir = c.digest AND j.finished_at IS NULL) \
             ORDER BY c.last_used_at LIMIT $2 FOR UPDATE SKIP LOCKED) due \
         WHERE u.tenant_id = due.tenant_id AND u.digest = due.digest",
        unused_since,
        limit
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
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
