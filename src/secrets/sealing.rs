//! The sealed columns in the database: the start-up check that every key in use is in the keyring, the sealing
//! of rows written before migration 0027, and rotation (`gpuplane rotate-secrets`).
//!
//! Re-sealing walks each table in primary-key order, a batch per transaction: a batch's rows are locked
//! (`FOR UPDATE`), opened, sealed under the current key and written back, so a crash loses nothing (a row is
//! either as it was or re-sealed) and a rerun carries on. Rows already under the current key are skipped, which
//! makes it idempotent. A row that does not open is reported and left as it is; the rest still get done.

use gpuplane_store::secrets as store;
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
    Ok(store::key_ids_in_use(conn).await?)
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

async fn reseal_webhook_secrets(
    pool: &PgPool,
    keyring: &Keyring,
    scope: Scope,
    done: &mut Resealed,
) -> Result<(), sqlx::Error> {
    let mut after = Uuid::nil();
    loop {
        let mut tx = pool.begin().await?;
        let rows = store::lock_webhook_secrets(&mut tx, after, scope == Scope::NotCurrent, keyring.current_id(), BATCH)
            .await?;
        let Some(last) = rows.last() else { break };
        after = last.id;
        let (mut ids, mut key_ids, mut sealed) = (Vec::new(), Vec::new(), Vec::new());
        for store::WebhookSecretRow { id, secret: clear, secret_key_id: key_id, secret_sealed: bytes } in rows {
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
        store::store_sealed_webhook_secrets(&mut tx, &ids, &key_ids, &sealed).await?;
        tx.commit().await?;
        done.webhook_secrets += ids.len() as u64;
    }
    Ok(())
}

async fn reseal_job_secrets(
    pool: &PgPool,
    keyring: &Keyring,
    scope: Scope,
    done: &mut Resealed,
) -> Result<(), sqlx::Error> {
    let mut after = (Uuid::nil(), String::new());
    loop {
        let mut tx = pool.begin().await?;
        let rows = store::lock_job_secrets(
            &mut tx,
            (after.0, &after.1),
            scope == Scope::NotCurrent,
            keyring.current_id(),
            BATCH,
        )
        .await?;
        let Some(last) = rows.last() else { break };
        after = (last.job_id, last.name.clone());
        let (mut job_ids, mut names, mut key_ids, mut sealed) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for store::JobSecretRow { job_id, name, value: clear, value_key_id: key_id, value_sealed: bytes } in rows {
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
        store::store_sealed_job_secrets(&mut tx, &job_ids, &names, &key_ids, &sealed).await?;
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
