//! Services: jobs that serve on a port, reached by their callers through the gateway ([`crate::gateway`]),
//! never directly (docs/serving.md). A job asks for it with `serve` on create ([`requests::ServeRequest`]); each
//! of its parts is a replica. The tenant manages who may call it: keys (`keys.rs`), public or not, a rate limit.

pub mod keys;
pub mod requests;
pub mod routes;
pub mod stats;

/// Minutes one round of [`expire_request_minutes`] deletes at most.
const EXPIRE_BATCH: i64 = 10_000;

/// Delete services' request counts of minutes older than `retention`; returns whether a full batch went (more may
/// be due).
pub async fn expire_request_minutes(db: &sqlx::PgPool, retention: std::time::Duration) -> anyhow::Result<bool> {
    let before = chrono::Utc::now() - chrono::Duration::from_std(retention)?;
    let mut conn = db.acquire().await?;
    let gone = gpuplane_store::services::expire_request_minutes(&mut conn, before, EXPIRE_BATCH).await?;
    if gone > 0 {
        tracing::info!(minutes = gone, "services' old request counts deleted (--telemetry-minute-retention-days)");
    }
    Ok(gone == EXPIRE_BATCH as u64)
}
