//! Webhook delivery throughput: `cargo bench --bench webhooks`.
//!
//! It creates a fresh database, migrates it, registers one tenant with `BENCH_ENDPOINTS` endpoints pointing at a
//! local HTTP receiver (127.0.0.1:0, answering 204 at once), emits `BENCH_EVENTS` events through
//! `webhooks::emit` (one delivery per endpoint each), and then runs `BENCH_WORKERS` delivery workers (as that many
//! replicas would: each claims with SKIP LOCKED) until every delivery succeeded. It reports deliveries per
//! second end to end (claim, sign, POST, attempt log, state update) and checks the receiver got each exactly once.
//!
//! Environment:
//! * `DATABASE_URL`: the PostgreSQL server (default `postgres://postgres@127.0.0.1:5432/postgres`); the bench
//!   creates its own database `gpuplane_bench_webhooks` beside it.
//! * `BENCH_EVENTS` (default 5000), `BENCH_ENDPOINTS` (default 2), `BENCH_WORKERS` (default 4).
//! * `BENCH_DOC`: where to write the markdown report (default `docs/benchmarks/webhooks.md`); empty: nowhere.

#[path = "common/mod.rs"]
mod common;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Context;
use common::{DEFAULT_DATABASE_URL, drop_database, env_or, recreate_database, with_thousands};
use gpuplane::config::{WebhookArgs, WebhookSettings};
use gpuplane::webhooks::delivery::{BATCH, Worker};
use gpuplane::webhooks::{Audience, emit, signing};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

const BENCH_DB: &str = "gpuplane_bench_webhooks";

async fn bench() -> anyhow::Result<()> {
    let server_url: String = env_or("DATABASE_URL", DEFAULT_DATABASE_URL.to_string())?;
    let events: usize = env_or("BENCH_EVENTS", 5000)?;
    let endpoints: usize = env_or("BENCH_ENDPOINTS", 2)?;
    let workers: usize = env_or("BENCH_WORKERS", 4)?;
    let doc = common::doc_path("docs/benchmarks/webhooks.md");
    let options = PgConnectOptions::from_str(&server_url).context("DATABASE_URL")?;
    let mut admin = PgConnection::connect_with(&options).await?;
    recreate_database(&mut admin, BENCH_DB).await?;
    let db = PgPoolOptions::new().max_connections(16).connect_with(options.clone().database(BENCH_DB)).await?;
    gpuplane::db::MIGRATOR.run(&db).await?;

    // The receiver: counts requests and answers 204.
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    let receiver = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::Relaxed);
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let tenant = Uuid::now_v7();
    sqlx::query("INSERT INTO tenants (id, name) VALUES ($1, 'bench')").bind(tenant).execute(&db).await?;
    // The secrets sealed as the API seals them, so each attempt pays for opening one.
    let keyring = Arc::new(gpuplane::secrets::Keyring::dev());
    for _ in 0..endpoints {
        let id = Uuid::now_v7();
        let sealed = keyring
            .seal(gpuplane::secrets::Context::WebhookSecret { endpoint_id: id }, signing::new_secret().as_bytes());
        sqlx::query(
            "INSERT INTO webhook_endpoints (id, tenant_id, url, event_types, secret_key_id, secret_sealed) \
             VALUES ($1, $2, $3, '{*}', $4, $5)",
        )
        .bind(id)
        .bind(tenant)
        .bind(&url)
        .bind(&sealed.key_id)
        .bind(&sealed.bytes)
        .execute(&db)
        .await?;
    }
    let emit_started = Instant::now();
    let mut tx = db.begin().await?;
    for i in 0..events {
        let data = serde_json::json!({ "lease_id": Uuid::now_v7(), "n": i, "reason": "released" });
        emit(&mut tx, Audience::Tenant(tenant), "lease.ended", data).await?;
    }
    tx.commit().await?;
    let emit_s = emit_started.elapsed().as_secs_f64();

    let mut settings = WebhookSettings::from(&WebhookArgs::default());
    settings.allow_private = true;
    let started = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let worker = Worker::new(db.clone(), settings.clone(), keyring.clone());
            tokio::spawn(async move {
                while worker.deliver_due(BATCH).await? > 0 {}
                anyhow::Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let deliveries = (events * endpoints) as i64;
    let (succeeded,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'").fetch_one(&db).await?;
    let got = received.load(Ordering::Relaxed) as i64;
    anyhow::ensure!(
        succeeded == deliveries && got == deliveries,
        "{succeeded} succeeded, {got} received, of {deliveries}"
    );
    let rate = deliveries as f64 / seconds;
    println!(
        "{deliveries} deliveries in {seconds:.2} s: {rate:.0} deliveries/s ({workers} workers); emit {:.0} events/s",
        events as f64 / emit_s
    );
    db.close().await;
    drop_database(&mut admin, BENCH_DB).await?;

    if let Some(doc) = doc {
        let text = format!(
            "# Webhook delivery benchmark\n\n\
             Generated by `cargo bench --bench webhooks` (source: `benches/webhooks.rs`); rerun it to refresh this page.\n\n\
             {events} events emitted with `webhooks::emit` in one transaction, each to {endpoints} endpoints on a local \
             receiver (127.0.0.1, answering 204); {workers} delivery workers (as replicas: SKIP LOCKED claims of {BATCH}, \
             attempted concurrently) until every delivery succeeded. Each delivery is claimed, signed (HMAC-SHA256), \
             POSTed, logged in `webhook_attempts` and marked succeeded.\n\n\
             | figure | value |\n|---|---:|\n\
             | deliveries | {} |\n| wall time | {seconds:.2} s |\n| **deliveries/s** | **{}** |\n\
             | events emitted/s (outbox write, one transaction) | {} |\n| received exactly once | yes |\n",
            with_thousands(deliveries),
            with_thousands(rate as i64),
            with_thousands((events as f64 / emit_s) as i64),
        );
        std::fs::write(&doc, text).with_context(|| format!("writing {}", doc.display()))?;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    common::run(bench())
}
