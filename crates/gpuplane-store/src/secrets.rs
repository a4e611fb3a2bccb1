//! Sealed secrets at rest: the key ids in use, and the batches that re-sealing walks (webhook endpoint secrets,
//! job secret values).

use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;

/// The key ids the stored secrets are sealed under.
pub async fn key_ids_in_use(conn: &mut PgConnection) -> StoreResult<Vec<String>> {
    // job_secrets grows with the jobs: a loose index scan reads one index entry per distinct key id.
    let ids = sqlx::query_scalar!(
        r#"WITH RECURSIVE job_keys(id) AS (
             (SELECT value_key_id FROM job_secrets WHERE value_key_id IS NOT NULL ORDER BY value_key_id LIMIT 1)
             UNION ALL
             SELECT (SELECT value_key_id FROM job_secrets WHERE value_key_id > job_keys.id
                     ORDER BY value_key_id LIMIT 1) FROM job_keys WHERE job_keys.id IS NOT NULL)
         SELECT id AS "id!" FROM job_keys WHERE id IS NOT NULL
         UNION SELECT DISTINCT secret_key_id FROM webhook_endpoints WHERE secret_key_id IS NOT NULL
         ORDER BY 1"#
    )
    .fetch_all(conn)
    .await?;
    Ok(ids)
}

/// A webhook endpoint's secret, in clear or sealed.
#[derive(Debug, Clone)]
pub struct WebhookSecretRow {
    pub id: Uuid,
    pub secret: Option<String>,
    pub secret_key_id: Option<String>,
    pub secret_sealed: Option<Vec<u8>>,
}

/// Lock the next batch of webhook endpoints after `after` (id order, at most `limit`) whose secret is in clear,
/// or, when `not_current`, sealed under another key than `current_key_id`.
pub async fn lock_webhook_secrets(
    conn: &mut PgConnection,
    after: Uuid,
    not_current: bool,
    current_key_id: &str,
    limit: i64,
) -> StoreResult<Vec<WebhookSecretRow>> {
    let rows = sqlx::query_as!(
        WebhookSecretRow,
        "SELECT id, secret, secret_key_id, secret_sealed FROM webhook_endpoints \
         WHERE id > $1 AND (secret IS NOT NULL OR ($2 AND secret_key_id <> $3)) \
         ORDER BY id LIMIT $4 FOR UPDATE",
        after,
        not_current,
        current_key_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// Store these webhook endpoints' secrets sealed (`ids[i]` sealed under `key_ids[i]` as `sealed[i]`), none in
/// clear.
pub async fn store_sealed_webhook_secrets(
    conn: &mut PgConnection,
    ids: &[Uuid],
    key_ids: &[String],
    sealed: &[Vec<u8>],
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE webhook_endpoints e SET secret = NULL, secret_key_id = u.key_id, secret_sealed = u.sealed \
         FROM UNNEST($1::uuid[], $2::text[], $3::bytea[]) AS u(id, key_id, sealed) WHERE e.id = u.id",
        ids,
        key_ids,
        sealed
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A job secret's value, in clear or sealed.
#[derive(Debug, Clone)]
pub struct JobSecretRow {
    pub job_id: Uuid,
    pub name: String,
    pub value: Option<String>,
    pub value_key_id: Option<String>,
    pub value_sealed: Option<Vec<u8>>,
}

/// Lock the next batch of job secrets after `after` (`(job_id, name)` order, at most `limit`) whose value is in
/// clear, or, when `not_current`, sealed under another key than `current_key_id`.
pub async fn lock_job_secrets(
    conn: &mut PgConnection,
    after: (Uuid, &str),
    not_current: bool,
    current_key_id: &str,
    limit: i64,
) -> StoreResult<Vec<JobSecretRow>> {
    let rows = sqlx::query_as!(
        JobSecretRow,
        "SELECT job_id, name, value, value_key_id, value_sealed FROM job_secrets \
         WHERE (job_id, name) > ($1, $2) AND (value IS NOT NULL OR ($3 AND value_key_id <> $4)) \
         ORDER BY job_id, name LIMIT $5 FOR UPDATE",
        after.0,
        after.1,
        not_current,
        current_key_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// Store these job secrets' values sealed (`(job_ids[i], names[i])` under `key_ids[i]` as `sealed[i]`), none in
/// clear.
pub async fn store_sealed_job_secrets(
    conn: &mut PgConnection,
    job_ids: &[Uuid],
    names: &[String],
    key_ids: &[String],
    sealed: &[Vec<u8>],
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_secrets s SET value = NULL, value_key_id = u.key_id, value_sealed = u.sealed \
         FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::bytea[]) AS u(job_id, name, key_id, sealed) \
         WHERE s.job_id = u.job_id AND s.name = u.name",
        job_ids,
        names,
        key_ids,
        sealed
    )
    .execute(conn)
    .await?;
    Ok(())
}
