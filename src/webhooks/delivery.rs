//! The delivery worker: claims due deliveries (any replica; `FOR UPDATE SKIP LOCKED`), POSTs them signed, logs
//! every attempt, retries on the configured schedule, and disables endpoints that keep failing.
//!
//! A claim pushes `next_attempt_at` past the longest an attempt can take and stamps a claim id, so no row lock
//! is held across the HTTP call and no other worker picks the delivery meanwhile. A worker that dies mid-attempt
//! leaves the delivery due again once its claim lapses: delivery is at-least-once, receivers de-duplicate by
//! `webhook-id`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use gpuplane_store::webhooks::{self as store, ClaimedDelivery as Claimed, DeliveryState};
use sqlx::PgPool;
use uuid::Uuid;

use super::signing;
use super::ssrf;
use crate::config::WebhookSettings;
use crate::extract::new_id;
use crate::secrets::sealing::reveal;
use crate::secrets::{Context, Keyring};

/// Longest an attempt may take, end to end.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// A claim lapses after this; longer than any attempt.
const CLAIM_LAPSE_SECS: f64 = 60.0;
/// Most of a receiver's response body read (into the attempt's error text on failure).
pub const RESPONSE_BODY_CAP: usize = 1024;
/// Deliveries claimed at once, and attempted concurrently.
pub const BATCH: i64 = 32;

/// What one attempt came to.
#[derive(Debug)]
struct Outcome {
    succeeded: bool,
    response_code: Option<i32>,
    latency_ms: i32,
    error: Option<String>,
}

/// The HTTP client of the worker: short timeouts, no redirects (a redirect could lead past the SSRF guard).
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("gpuplane-webhooks/", env!("CARGO_PKG_VERSION")))
}

/// The worker: shared HTTP client and settings, and the keyring that opens the endpoints' secrets.
#[derive(Clone)]
pub struct Worker {
    db: PgPool,
    settings: WebhookSettings,
    keyring: Arc<Keyring>,
    client: reqwest::Client,
}

impl Worker {
    pub fn new(db: PgPool, settings: WebhookSettings, keyring: Arc<Keyring>) -> Self {
        let client = client_builder().build().expect("the HTTP client builds");
        Worker { db, settings, keyring, client }
    }

    /// The signing key of the claimed delivery's endpoint. The reason it is missing goes to the log; the
    /// tenant's delivery log only says that the service could not sign.
    fn signing_key(&self, c: &Claimed) -> Result<Vec<u8>, String> {
        let context = Context::WebhookSecret { endpoint_id: c.endpoint_id };
        let secret =
            reveal(&self.keyring, context, c.secret.as_deref(), c.secret_key_id.as_deref(), c.secret_sealed.as_deref())
                .map_err(|e| {
                    tracing::error!(endpoint.id = %c.endpoint_id, error = %e, "webhook secret does not open");
                    "the service cannot read this endpoint's signing secret; operators: see the service log".to_string()
                })?;
        signing::secret_key(&secret).ok_or_else(|| "the endpoint's secret is not a whsec_ secret".into())
    }

    /// Claim up to `batch` due deliveries and attempt them concurrently. Returns how many were attempted.
    pub async fn deliver_due(&self, batch: i64) -> Result<usize, sqlx::Error> {
        let claim = new_id();
        let claimed = {
            let mut conn = self.db.acquire().await?;
            store::claim_due(&mut conn, batch, claim, CLAIM_LAPSE_SECS).await?
        };
        let count = claimed.len();
        let results = futures_util::future::join_all(claimed.into_iter().map(|c| async move {
            let outcome = self.attempt(&c).await;
            self.record(&c, claim, &outcome).await
        }))
        .await;
        for result in results {
            result?;
        }
        Ok(count)
    }

    /// One signed POST, vetted against SSRF at send time and connected to the address that was vetted.
    async fn attempt(&self, c: &Claimed) -> Outcome {
        let started = Instant::now();
        let failed = |error: String, code: Option<i32>, started: Instant| Outcome {
            succeeded: false,
            response_code: code,
            latency_ms: started.elapsed().as_millis().min(i32::MAX as u128) as i32,
            error: Some(error),
        };
        let vetted = match ssrf::vet(&c.url, self.settings.allow_private).await {
            Ok(v) => v,
            Err(e) => return failed(format!("refused: the URL {e}"), None, started),
        };
        let client = match vetted.pin {
            None => self.client.clone(),
            Some(addr) => match client_builder().resolve(vetted.url.host_str().unwrap_or_default(), addr).build() {
                Ok(c) => c,
                Err(e) => return failed(format!("client: {e}"), None, started),
            },
        };
        let key = match self.signing_key(c) {
            Ok(key) => key,
            Err(e) => return failed(e, None, started),
        };
        let body = serde_json::to_vec(&serde_json::json!({
            "type": c.event_type,
            "timestamp": c.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": c.data,
        }))
        .expect("JSON values serialize");
        let timestamp = Utc::now().timestamp();
        let msg_id = c.event_id.to_string();
        let response = client
            .post(vetted.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &msg_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signing::sign(&key, &msg_id, timestamp, &body))
            .body(body)
            .send()
            .await;
        let mut response = match response {
            Ok(r) => r,
            Err(e) => return failed(describe(&e), None, started),
        };
        let code = i32::from(response.status().as_u16());
        if response.status().is_success() {
            return Outcome {
                succeeded: true,
                response_code: Some(code),
                latency_ms: started.elapsed().as_millis().min(i32::MAX as u128) as i32,
                error: None,
            };
        }
        // Read a little of the body for the log, never all of it.
        let mut text = Vec::new();
        while text.len() < RESPONSE_BODY_CAP {
            match tokio::time::timeout(Duration::from_secs(2), response.chunk()).await {
                Ok(Ok(Some(chunk))) => {
                    text.extend_from_slice(&chunk[..chunk.len().min(RESPONSE_BODY_CAP - text.len())])
                }
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        failed(format!("HTTP {code}: {}", text.trim()), Some(code), started)
    }

    /// Log the attempt and schedule what comes next, under this worker's claim.
    async fn record(&self, c: &Claimed, claim: Uuid, outcome: &Outcome) -> Result<(), sqlx::Error> {
        let mut tx = self.db.begin().await?;
        store::insert_attempt(
            &mut tx,
            c.delivery_id,
            outcome.succeeded,
            outcome.response_code,
            outcome.latency_ms,
            outcome.error.as_deref(),
        )
        .await?;
        let attempts = c.attempts + 1;
        let retry_in = self.settings.retry_schedule.get(c.attempts as usize).copied();
        let state = match (outcome.succeeded, retry_in) {
            (true, _) => DeliveryState::Succeeded,
            (false, Some(_)) => DeliveryState::Pending,
            (false, None) => DeliveryState::Failed,
        };
        let retry_in_secs = retry_in.unwrap_or_default().as_secs_f64();
        store::record_outcome(&mut tx, c.delivery_id, claim, state, attempts, outcome.response_code, retry_in_secs)
            .await?;
        if outcome.succeeded {
            store::clear_failing(&mut tx, c.endpoint_id).await?;
        } else {
            // Two statements: one statement cannot update the same row twice.
            store::mark_failing(&mut tx, c.endpoint_id).await?;
            let disabled =
                store::disable_if_failing(&mut tx, c.endpoint_id, self.settings.disable_after.as_secs_f64()).await?;
            if let Some(since) = disabled {
                tracing::warn!(endpoint.id = %c.endpoint_id, "webhook endpoint disabled: failing since {since}");
                let data = serde_json::json!({
                    "endpoint_id": c.endpoint_id, "tenant_id": c.tenant_id, "url": c.url, "failing_since": since,
                });
                super::emit(&mut tx, super::Audience::Operators, "webhook.disabled", data).await?;
            }
        }
        tx.commit().await?;
        metrics::counter!("gpuplane_webhook_attempts_total", "outcome" => if outcome.succeeded { "succeeded" } else { "failed" })
            .increment(1);
        Ok(())
    }
}

/// A transport error for the log, with its cause (reqwest's own message names only the outer layer).
fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() { "timed out".to_string() } else { e.to_string() };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
