//! The sealed columns in the database: the start-up check that every key in use is in the keyring, the sealing
//! of rows written before migration 0027, and rotation (`gpuplane rotate-secrets`).
//!
//! Re-sealing walks each table in primary-key order, a batch per transaction: a batch's rows are locked
//! (`FOR UPDATE`), opened, sealed under the current key and written back, so a crash loses nothing (a row is
//! either as it was or re-sealed) and a rerun carries on. Rows already under the current key are skipped, which
//! makes it idempotent. A row that does not open is reported and left as it is; the rest still get done.

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::{Context, Keyring, OpenError};

/// Rows re-sealed per transaction.
pub const BATCH: i64 = 500;

/// What a re-sealing pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Resealed {
    /// Webhook endpoint secrets re-sealed under the current key.
    pub webhook_secrets: u64,
    /// Job secret values re-sealed under the current key.
    pub job_secrets: u64,
    /// Rows that did not open, each with why (left as they were).
    pub failures: Vec<String>,
}

/// Which rows a pass re-seals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only rows still in clear (written before migration 0027, or by the previous release): what every start
    /// does.
    Clear,
    /// Every row not sealed under the current key: rotation.
    NotCurrent,
}

/// The key ids the stored secrets are sealed under.
pub async fn key_ids_in_use(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    // job_secrets grows with the jobs: a loose index scan reads one index entry per distinct key id.
    let ids: Vec<(String,)> = sqlx::query_as(
        "WITH RECURSIVE job_keys(id) AS ( \
             (SELECT value_key_id FROM job_secrets WHERE value_key_id IS NOT NULL ORDER BY value_key_id LIMIT 1) \
             UNION ALL \
             SELECT (SELECT value_key_id FROM job_secrets WHERE value_key_id > job_keys.id \
                     ORDER BY value_key_id LIMIT 1) FROM job_keys WHERE job_keys.id IS NOT NULL) \
         SELECT id FROM job_keys WHERE id IS NOT NULL \
         UNION SELECT DISTINCT secret_key_id FROM webhook_endpoints WHERE secret_key_id IS NOT NULL \
         ORDER BY 1",
    )
    .fetch_all(conn)
    .await?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}

/// Refuse a keyring that lacks a key some stored secret is sealed under: the service could not sign that
/// endpoint's webhooks or start that job.
pub async fn check_keyring(pool: &PgPool, keyring: &Keyring) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await?;
    let missing: Vec<String> =
        key_ids_in_use(&mut conn).await?.into_iter().filter(|id| !keyring.contains(id)).collect();
    if !missing.is_empty() {
        let dev = if missing.iter().any(|id| id == super::DEV_KEY_ID) {
            " Secrets under `dev` were made in --dev mode: re-seal them with `gpuplane rotate-secrets --dev` and \
             this keyring."
        } else {
            ""
        };
        anyhow::bail!(
            "stored secrets are sealed under key id(s) {} that the secrets keyring (GPUPLANE_SECRETS_KEY_FILE or \
             GPUPLANE_SECRETS_KEY) does not hold (it holds: {}). Add those keys to the keyring, after the current \
             one; without them these secrets cannot be read.{dev}",
            missing.join(", "),
            keyring.ids().collect::<Vec<_>>().join(", "),
        );
    }
    Ok(())
}

/// What every start does once migrated: check the keyring against the stored secrets, then seal the rows still
/// in clear (written before migration 0027).
pub async fn prepare(pool: &PgPool, keyring: &Keyring) -> anyhow::Result<Resealed> {
    check_keyring(pool, keyring).await?;
    let done = reseal(pool, keyring, Scope::Clear).await?;
    if done.webhook_secrets + done.job_secrets > 0 {
        tracing::info!(
            webhook_secrets = done.webhook_secrets,
            job_secrets = done.job_secrets,
            key_id = keyring.current_id(),
            "sealed the secrets stored in clear before this version"
        );
    }
    Ok(done)
}

/// Re-seal the rows of `scope` under the current key.
pub async fn reseal(pool: &PgPool, keyring: &Keyring, scope: Scope) -> Result<Resealed, sqlx::Error> {
    let mut done = Resealed::default();
    reseal_webhook_secrets(pool, keyring, scope, &mut done).await?;
    reseal_job_secrets(pool, keyring, scope, &mut done).await?;
    Ok(done)
}

/// A stored secret in either form: in clear (a row from before migration 0027, or written by a replica of the
/// previous release during a rolling upgrade, that no start has sealed yet) or sealed.
pub fn reveal(
    keyring: &Keyring,
    context: Context<'_>,
    clear: Option<&str>,
    key_id: Option<&str>,
    sealed: Option<&[u8]>,
) -> Result<String, OpenError> {
    match (clear, key_id, sealed) {
        (Some(clear), _, _) => Ok(clear.to_owned()),
        (None, Some(key_id), Some(sealed)) => keyring.open_string(context, key_id, sealed),
        // The schema's CHECK makes this impossible.
        _ => Err(OpenError::Unreadable),
    }
}

type WebhookRow = (Uuid, Option<String>, Option<String>, Option<Vec<u8>>);

async fn reseal_webhook_secrets(
    pool: &PgPool,
    keyring: &Keyring,
    scope: Scope,
    done: &mut Resealed,
) -> Result<(), sqlx::Error> {
    let mut after = Uuid::nil();
    loop {
        let mut tx = pool.begin().await?;
        let rows: Vec<WebhookRow> = sqlx::query_as(
            "SELECT id, secret, secret_key_id, secret_sealed FROM webhook_endpoints \
             WHERE id > $1 AND (secret IS NOT NULL OR ($2 AND secret_key_id <> $3)) \
             ORDER BY id LIMIT $4 FOR UPDATE",
        )
        .bind(after)
        .bind(scope == Scope::NotCurrent)
        .bind(keyring.current_id())
        .bind(BATCH)
        .fetch_all(&mut *tx)
        .await?;
        let Some(last) = rows.last() else { break };
        after = last.0;
        let (mut ids, mut key_ids, mut sealed) = (Vec::new(), Vec::new(), Vec::new());
        for (id, clear, key_id, bytes) in rows {
            let context = Context::WebhookSecret { endpoint_id: id };
            match reveal(keyring, context, clear.as_deref(), key_id.as_deref(), bytes.as_deref()) {
                Ok(secret) => {
                    let new = keyring.seal(context, secret.as_bytes());
                    ids.push(id);
                    key_ids.push(new.key_id);
                    sealed.push(new.bytes);
                }
                Err(e) => done.failures.push(format!("webhook endpoint {id}: {e}")),
            }
        }
        sqlx::query(
            "UPDATE webhook_endpoints e SET secret = NULL, secret_key_id = u.key_id, secret_sealed = u.sealed \
             FROM UNNEST($1::uuid[], $2::text[], $3::bytea[]) AS u(id, key_id, sealed) WHERE e.id = u.id",
        )
        .bind(&ids)
        .bind(&key_ids)
        .bind(&sealed)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        done.webhook_secrets += ids.len() as u64;
    }
    Ok(())
}

type JobSecretRow = (Uuid, String, Option<String>, Option<String>, Option<Vec<u8>>);

async fn reseal_job_secrets(
    pool: &PgPool,
    keyring: &Keyring,
    scope: Scope,
    done: &mut Resealed,
) -> Result<(), sqlx::Error> {
    let mut after = (Uuid::nil(), String::new());
    loop {
        let mut tx = pool.begin().await?;
        let rows: Vec<JobSecretRow> = sqlx::query_as(
            "SELECT job_id, name, value, value_key_id, value_sealed FROM job_secrets \
             WHERE (job_id, name) > ($1, $2) AND (value IS NOT NULL OR ($3 AND value_key_id <> $4)) \
             ORDER BY job_id, name LIMIT $5 FOR UPDATE",
        )
        .bind(after.0)
        .bind(&after.1)
        .bind(scope == Scope::NotCurrent)
        .bind(keyring.current_id())
        .bind(BATCH)
        .fetch_all(&mut *tx)
        .await?;
        let Some(last) = rows.last() else { break };
        after = (last.0, last.1.clone());
        let (mut job_ids, mut names, mut key_ids, mut sealed) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (job_id, name, clear, key_id, bytes) in rows {
            let context = Context::JobSecret { job_id, name: &name };
            match reveal(keyring, context, clear.as_deref(), key_id.as_deref(), bytes.as_deref()) {
                Ok(value) => {
                    let new = keyring.seal(context, value.as_bytes());
                    key_ids.push(new.key_id);
                    sealed.push(new.bytes);
                    job_ids.push(job_id);
                    names.push(name);
                }
                Err(e) => done.failures.push(format!("job {job_id} secret {name}: {e}")),
            }
        }
        sqlx::query(
            "UPDATE job_secrets s SET value = NULL, value_key_id = u.key_id, value_sealed = u.sealed \
             FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::bytea[]) AS u(job_id, name, key_id, sealed) \
             WHERE s.job_id = u.job_id AND s.name = u.name",
        )
        .bind(&job_ids)
        .bind(&names)
        .bind(&key_ids)
        .bind(&sealed)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        done.job_secrets += job_ids.len() as u64;
    }
    Ok(())
}

/// A sealed value that did not open, as a database read error: the caller's `?` turns it into a 500 whose detail
/// goes to the log (the keyring lacks a key another replica sealed with, or a row was tampered with).
pub fn read_error(what: &str, err: OpenError) -> sqlx::Error {
    sqlx::Error::Decode(format!("{what}: {err}").into())
}
