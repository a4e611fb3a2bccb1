//! Usage export benchmark: `cargo bench --bench export`.
//!
//! Seeds `BENCH_ROWS` (default 1,000,000) usage records into a fresh database, starts the real service
//! in-process on 127.0.0.1:0, and downloads the operator CSV export over HTTP, counting rows as they stream.
//! Reports rows per second and the process's peak memory growth during the download (the peak resident set
//! is reset just before it via /proc/self/clear_refs, so the figure is the export's own). The client reads
//! chunk by chunk and keeps nothing, so the growth is the service's streaming footprint plus the client's
//! buffers. Writes `docs/benchmarks/export.md` unless `BENCH_DOC` is empty.

#[path = "common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Context;
use gpuplane::AppState;
use gpuplane::config::{Secret, Settings};
use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tokio_util::sync::CancellationToken;

const DB: &str = "gpuplane_bench_export";

fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn server_url() -> String {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    match url.rfind('/') {
        Some(i) => url[..i].to_string(),
        None => url,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rows: i64 = std::env::var("BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let base = server_url();
    let mut admin = PgConnection::connect(&format!("{base}/postgres")).await.context("connect to PostgreSQL")?;
    sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))).execute(&mut admin).await?;
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {DB}"))).execute(&mut admin).await?;
    let db = PgPoolOptions::new().max_connections(8).connect(&format!("{base}/{DB}")).await?;
    gpuplane::db::MIGRATOR.run(&db).await?;

    let seeding = Instant::now();
    sqlx::query(
        "WITH t AS (INSERT INTO tenants (id, name) VALUES ('00000000-0000-7000-8000-0000000000e1', 'bench') RETURNING id), \
         p AS (INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency) \
               VALUES ('00000000-0000-7000-8000-0000000000e2', 'h100-bench', 'h100', 'bench', 249, 'USD') RETURNING id) \
         INSERT INTO leases (id, tenant_id, pool_id, gpu_count, placement, term, duration_hours, state, starts_at, ends_at, \
             ended_at, end_reason, currency) \
         SELECT '00000000-0000-7000-8000-0000000000e3', t.id, p.id, 8, 'pack', 'hourly', 8000, 'released', \
             now() - interval '300 days', now(), now(), 'bench', 'USD' FROM t, p",
    )
    .execute(&db)
    .await?;
    sqlx::query(
        "INSERT INTO usage_records (id, tenant_id, lease_id, pool_id, period_start, period_end, gpu_count, gpu_seconds, term, \
             unit_price_minor, currency, cost_units, amount_minor) \
         SELECT gen_random_uuid(), '00000000-0000-7000-8000-0000000000e1', '00000000-0000-7000-8000-0000000000e3', \
             '00000000-0000-7000-8000-0000000000e2', now() - interval '300 days' + i * interval '15 seconds', \
             now() - interval '300 days' + (i + 1) * interval '15 seconds', 8, 120, 'hourly', 249, 'USD', 59760, 8 \
         FROM generate_series(0, $1 - 1) AS i",
    )
    .bind(rows)
    .execute(&db)
    .await?;
    sqlx::query("ANALYZE").execute(&db).await?;
    eprintln!("seeded {rows} usage records in {:.1} s", seeding.elapsed().as_secs_f64());

    let operator_key = gpuplane::cli::bootstrap_operator(&db, "bench").await?;
    let state = AppState::new(db.clone(), Settings::new(Secret::new("export-bench-secret-0123456789abcdefghijkl")))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(gpuplane::app::run(listener, state, shutdown.clone()));
    let client = reqwest::Client::new();
    let token: serde_json::Value = client
        .post(format!("{url}/v1/auth/token"))
        .json(&serde_json::json!({ "api_key": operator_key }))
        .send()
        .await?
        .json()
        .await?;
    let token = token["access_token"].as_str().context("token")?.to_string();

    let rss_before = proc_status_kib("VmRSS:");
    // Reset the peak resident set size so VmHWM measures the export alone.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let started = Instant::now();
    let mut response = client
        .get(format!(
            "{url}/v1/admin/billing/usage/export?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z&format=csv"
        ))
        .bearer_auth(&token)
        .send()
        .await?
        .error_for_status()?;
    let (mut bytes, mut lines, mut first_byte) = (0u64, 0u64, None::<Duration>);
    while let Some(chunk) = response.chunk().await? {
        first_byte.get_or_insert_with(|| started.elapsed());
        bytes += chunk.len() as u64;
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
    }
    let elapsed = started.elapsed();
    let peak = proc_status_kib("VmHWM:");
    let exported = lines.saturating_sub(1); // the header
    anyhow::ensure!(exported == rows as u64, "exported {exported} rows, expected {rows}");
    let rows_per_s = exported as f64 / elapsed.as_secs_f64();
    let growth_mb = peak.saturating_sub(rss_before) as f64 / 1024.0;

    let mut report = String::new();
    writeln!(report, "| rows | bytes | time s | first byte ms | rows/s | peak memory growth MB |")?;
    writeln!(report, "|---:|---:|---:|---:|---:|---:|")?;
    writeln!(
        report,
        "| {exported} | {bytes} | {:.2} | {:.0} | {:.0} | {:.1} |",
        elapsed.as_secs_f64(),
        first_byte.unwrap_or_default().as_secs_f64() * 1000.0,
        rows_per_s,
        growth_mb
    )?;
    println!("{report}");
    let targets = format!(
        "- Throughput target (>= 200,000 rows/s): {:.0} rows/s -- {}\n- Memory target (< 100 MB growth): {:.1} MB -- {}\n",
        rows_per_s,
        if rows_per_s >= 200_000.0 { "met" } else { "NOT met" },
        growth_mb,
        if growth_mb < 100.0 { "met" } else { "NOT met" }
    );
    println!("{targets}");
    if let Some(doc) = common::doc_path("docs/benchmarks/export.md") {
        let page = format!(
            "# Usage export benchmark\n\nGenerated by `cargo bench --bench export` (source: `benches/export.rs`).\n\n\
             {report}\n{targets}\n\
             Machine: 2 CPU cores shared by PostgreSQL, the service and the client (all on one machine, loopback).\n\n\
             The bench seeds {rows} usage records, starts the real service in-process and downloads \
             `GET /v1/admin/billing/usage/export?format=csv` over HTTP, counting rows as they arrive. Rows/s is rows \
             divided by the time from the request to the last byte. Peak memory growth is the process's peak resident \
             set (reset just before the download) minus its resident set before it: the service's streaming buffers \
             plus the client's. The export streams from the database through a bounded channel of 64 KiB chunks, so \
             memory does not grow with the row count.\n\nRun: `cargo bench --bench export` (`BENCH_ROWS` sets the \
             row count; `BENCH_DOC=` skips writing this page).\n"
        );
        std::fs::write(&doc, page)?;
    }
    shutdown.cancel();
    let _ = server.await;
    drop(db);
    sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))).execute(&mut admin).await?;
    Ok(())
}
