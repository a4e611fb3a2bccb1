//! Log ingest benchmark: `cargo bench --bench log_ingest`.
//!
//! It creates a fresh database, migrates it, starts the real service in-process on 127.0.0.1:0, and makes through
//! the API what a running job is: a pool of N agent nodes of 8 H100s (registered with join tokens), a funded
//! tenant's lease of all of them and one job on it, so that each node has one part. Then each node's simulated
//! agent ships its part's output as the real agent does (`POST /v1/agent/assignments/{id}/logs`, full reports of
//! `BENCH_LINES_PER_REPORT` lines, each line numbered, ranked and stamped), as fast as the service answers. All the
//! nodes ship to the same job, as a multi-node job's do: its lines are numbered under the job's log lock, so this
//! is the contended case. Two cases: under a cap far above what the run stores (no trimming), and under a cap the
//! run passes many times (the oldest lines deleted while the agents ship). It reports lines/s per agent and in
//! all, report latency, and the bytes PostgreSQL stores per line (table, index and TOAST, over the lines kept).
//!
//! Then the followers, side by side in one run: `BENCH_FOLLOWERS` clients follow one job over HTTP
//! (`GET /v1/jobs/{id}/logs?follow=true`, server-sent events) while its node ships one line every
//! `BENCH_FOLLOW_EVERY_MS`, each stamped with when it was shipped. Once with followers that look every 500 ms
//! whatever happens (as the service did before NOTIFY), once as the service runs now (woken by PostgreSQL's
//! NOTIFY, at most every 500 ms, a look every 5 s without one). It reports how long a line takes from its report
//! to each follower, and the database transactions per second the whole service committed meanwhile
//! (`pg_stat_database.xact_commit`: the reports, the followers' looks, everything).
//!
//! Environment:
//! * `DATABASE_URL`: the PostgreSQL server to use (the bench creates its own database beside it).
//! * `BENCH_SECONDS`: length of each measured case (default 20). `BENCH_NODES`: agents (default 8).
//! * `BENCH_LINES_PER_REPORT`: lines per report (default 2000, the most the protocol allows).
//! * `BENCH_CAP_MIB`: the small cap of the second case (default 16).
//! * `BENCH_FOLLOWERS`: followers of the follower cases (default 100); `BENCH_FOLLOW_EVERY_MS`: between lines (2000,
//!   and up to 500 ms more at random).
//! * `BENCH_DOC`: where to write the markdown report (default `docs/benchmarks/log-ingest.md`); empty: nowhere.

#[path = "common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::Utc;
use common::{
    DEFAULT_DATABASE_URL, drop_database, env_or, percentile_ms, post_timed, recreate_database, with_thousands,
};
use gpuplane::AppState;
use gpuplane::config::{Secret, Settings};
use gpuplane::state::log_wakeups::LogWakeups;
use gpuplane_protocol::logs::{LogLine, LogReport, LogReportResponse, LogStream};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};
use tokio_util::sync::CancellationToken;

const BENCH_DB: &str = "gpuplane_bench_log_ingest";
const GPUS_PER_NODE: usize = 8;

struct Config {
    server_url: String,
    seconds: u64,
    nodes: usize,
    lines_per_report: usize,
    cap_mib: u64,
    followers: usize,
    follow_every: Duration,
    doc: Option<std::path::PathBuf>,
}

/// One follower case's figures.
struct FollowCase {
    name: &'static str,
    shipped: u64,
    /// From each line's report to each follower's receipt.
    latencies: Vec<Duration>,
    xacts_per_s: f64,
}

/// One case's figures.
struct Case {
    name: &'static str,
    cap_mib: u64,
    seconds: f64,
    lines: u64,
    reports: u64,
    errors: u64,
    first_error: Option<String>,
    latencies: Vec<Duration>,
    text_bytes_per_line: f64,
    stored_bytes_per_line: f64,
    lines_kept: i64,
    first_line: i64,
}

/// What a job's rank prints each step: about 100 bytes.
fn step_line(rank: i32, step: i64) -> String {
    format!(
        "step {step:>7} | loss {:.4} | lr 3.00e-04 | grad_norm {:.3} | tokens/s {:>6} | mem 61.2 GiB",
        2.0 + 1.0 / (1.0 + step as f64),
        0.5 + (step % 7) as f64 * 0.1,
        41_000 + rank * 13 + (step % 97) as i32
    )
}

async fn api(
    http: &reqwest::Client,
    base: &str,
    token: Option<&str>,
    path: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let mut request = http.post(format!("{base}{path}")).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await?;
    let status = response.status();
    let value: Value = response.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("POST {path}: {status} {value}");
    }
    Ok(value)
}

/// A job on `nodes` agent nodes; returns (agent token, job_node_id) per node, and the job id.
async fn job_on_nodes(
    http: &reqwest::Client,
    base: &str,
    operator: &str,
    tenant: &str,
    nodes: usize,
) -> anyhow::Result<(Vec<(String, String)>, String)> {
    let pool = api(
        http,
        base,
        Some(operator),
        "/v1/admin/pools",
        json!({"name": "h100-logs", "gpu_model": "h100",
        "region": "bench", "price_per_gpu_hour_minor": 249, "currency": "USD"}),
    )
    .await?["id"]
        .as_str()
        .context("pool id")?
        .to_string();
    let mut agents = Vec::new();
    for i in 0..nodes {
        let join =
            api(http, base, Some(operator), &format!("/v1/admin/pools/{pool}/join-tokens"), json!({"max_uses": 1}))
                .await?["join_token"]
                .as_str()
                .context("join token")?
                .to_string();
        let gpus: Vec<Value> = (0..GPUS_PER_NODE)
            .map(|g| {
                json!({"index": g, "uuid": format!("GPU-log-{i}-{g}"), "name": "NVIDIA H100 80GB HBM3",
                "memory_bytes": 85_520_809_984i64})
            })
            .collect();
        let node = json!({"hostname": format!("log-node-{i}"), "address": format!("10.9.0.{}", i + 1), "gpus": gpus,
            "intra_link": "nvlink", "network_gbps": 400, "rdma": true});
        let registered = api(http, base, None, "/v1/agent/register", json!({"join_token": join, "node": node})).await?;
        agents.push(registered["agent_token"].as_str().context("agent token")?.to_string());
    }
    let lease = api(
        http,
        base,
        Some(tenant),
        "/v1/leases",
        json!({"pool_id": pool,
        "gpu_count": nodes * GPUS_PER_NODE, "duration_hours": 1, "placement": "spread"}),
    )
    .await?;
    api(http, base, Some(operator), "/v1/admin/templates", json!({"name": "sleeper", "argv": ["/bin/sleep", "600"]}))
        .await?;
    let lease_id = lease["id"].as_str().context("lease id")?;
    let job =
        api(http, base, Some(tenant), &format!("/v1/leases/{lease_id}/jobs"), json!({"template": "sleeper"})).await?;
    let mut parts = Vec::new();
    for agent in agents {
        let list: Value =
            http.get(format!("{base}/v1/agent/assignments")).bearer_auth(&agent).send().await?.json().await?;
        let part = list["assignments"][0]["job_node_id"].as_str().context("the node's part")?.to_string();
        parts.push((agent, part));
    }
    Ok((parts, job["id"].as_str().context("job id")?.to_string()))
}

/// Every agent ships its part's output for `seconds`; returns (lines, reports, errors, first error, latencies).
async fn drive(
    cfg: &Config,
    http: &reqwest::Client,
    base: &str,
    parts: &[(String, String)],
    seconds: u64,
) -> (u64, u64, u64, Option<String>, Vec<Duration>) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let tasks: Vec<_> = parts
        .iter()
        .enumerate()
        .map(|(node, (token, part))| {
            let (http, token, per_report) = (http.clone(), token.clone(), cfg.lines_per_report);
            let url: Arc<str> = format!("{base}/v1/agent/assignments/{part}/logs").into();
            tokio::spawn(async move {
                let (mut seq, mut lines, mut reports, mut errors, mut first_error, mut latencies) =
                    (0i64, 0u64, 0u64, 0u64, None, Vec::new());
                while Instant::now() < deadline {
                    let at = Utc::now();
                    let batch: Vec<LogLine> = (1..=per_report as i64)
                        .map(|i| {
                            let rank = (node * GPUS_PER_NODE) as i32 + (i % GPUS_PER_NODE as i64) as i32;
                            LogLine {
                                seq: seq + i,
                                at,
                                stream: LogStream::Stdout,
                                rank: Some(rank),
                                text: step_line(rank, seq + i),
                            }
                        })
                        .collect();
                    let report = LogReport { lines: batch, last: false };
                    match post_timed(&http, &url, &token, &report).await {
                        Ok((200, body, took)) => match serde_json::from_slice::<LogReportResponse>(&body) {
                            Ok(answer) if answer.acked_seq == seq + per_report as i64 => {
                                seq = answer.acked_seq;
                                lines += per_report as u64;
                                reports += 1;
                                latencies.push(took);
                            }
                            other => {
                                errors += 1;
                                first_error.get_or_insert(format!("unexpected answer: {other:?}"));
                            }
                        },
                        Ok((status, body, _)) => {
                            errors += 1;
                            first_error.get_or_insert(format!("{status}: {}", String::from_utf8_lossy(&body)));
                        }
                        Err(err) => {
                            errors += 1;
                            first_error.get_or_insert(err);
                        }
                    }
                }
                (lines, reports, errors, first_error, latencies)
            })
        })
        .collect();
    let mut all = (0, 0, 0, None, Vec::new());
    for task in tasks {
        let (lines, reports, errors, first_error, latencies) = task.await.unwrap_or_default();
        all.0 += lines;
        all.1 += reports;
        all.2 += errors;
        all.3 = all.3.or(first_error);
        all.4.extend(latencies);
    }
    all.4.sort_unstable();
    all
}

async fn case(cfg: &Config, admin: &mut PgConnection, name: &'static str, cap_mib: u64) -> anyhow::Result<Case> {
    let (db, base, operator, tenant, shutdown, server) = service(cfg, admin, cap_mib, LogWakeups::default()).await?;
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(60)).build()?;
    let (parts, job_id) = job_on_nodes(&http, &base, &operator, &tenant, cfg.nodes).await?;

    let started = Instant::now();
    let (lines, reports, errors, first_error, latencies) = drive(cfg, &http, &base, &parts, cfg.seconds).await;
    let seconds = started.elapsed().as_secs_f64();
    let (kept, text_bytes, first_line): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM job_log_lines), coalesce((SELECT sum(octet_length(text)) FROM job_log_lines), 0)::bigint, \
             (SELECT first_line FROM job_logs WHERE job_id = $1::uuid)",
    )
    .bind(&job_id)
    .fetch_one(&db)
    .await?;
    sqlx::query("VACUUM ANALYZE job_log_lines").execute(&db).await?;
    let (stored,): (i64,) = sqlx::query_as("SELECT pg_total_relation_size('job_log_lines')").fetch_one(&db).await?;
    shutdown.cancel();
    let _ = server.await;
    db.close().await;
    Ok(Case {
        name,
        cap_mib,
        seconds,
        lines,
        reports,
        errors,
        first_error,
        latencies,
        text_bytes_per_line: text_bytes as f64 / kept.max(1) as f64,
        stored_bytes_per_line: stored as f64 / kept.max(1) as f64,
        lines_kept: kept,
        first_line,
    })
}

/// Start the service on a fresh database with `wakeups` for its followers: (db, base URL, operator and tenant
/// tokens, shutdown, server task).
async fn service(
    cfg: &Config,
    admin: &mut PgConnection,
    cap_mib: u64,
    wakeups: LogWakeups,
) -> anyhow::Result<(PgPool, String, String, String, CancellationToken, tokio::task::JoinHandle<anyhow::Result<()>>)> {
    recreate_database(admin, BENCH_DB).await?;
    let db = PgPoolOptions::new()
        .max_connections(16)
        .connect_with(PgConnectOptions::from_str(&cfg.server_url)?.database(BENCH_DB))
        .await?;
    gpuplane::db::MIGRATOR.run(&db).await?;
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "bench").await?;
    let tenant_key = {
        let mut conn = db.acquire().await?;
        common::funded_tenants(&mut conn, 1).await?.remove(0)
    };
    let mut settings = Settings::new(Secret::new("log-ingest-bench-secret-0123456789abcdefghijklmnop"));
    settings.job_log_cap_bytes = (cap_mib * 1024 * 1024) as i64;
    let state = AppState { log_wakeups: wakeups, ..AppState::new(db.clone(), settings)? };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(gpuplane::app::run(listener, state, shutdown.clone()));
    let http = reqwest::Client::builder().no_proxy().build()?;
    let mut tokens = Vec::new();
    for key in [operator_key, tenant_key] {
        let answer = api(&http, &base, None, "/v1/auth/token", json!({"api_key": key})).await?;
        tokens.push(answer["access_token"].as_str().context("access token")?.to_string());
    }
    let tenant = tokens.pop().context("tenant token")?;
    let operator = tokens.pop().context("operator token")?;
    Ok((db, base, operator, tenant, shutdown, server))
}

/// `cfg.followers` clients follow one job while its one node ships a line every `cfg.follow_every`.
async fn follow_case(
    cfg: &Config,
    admin: &mut PgConnection,
    name: &'static str,
    wakeups: LogWakeups,
) -> anyhow::Result<FollowCase> {
    let (db, base, operator, tenant, shutdown, server) = service(cfg, admin, 1024, wakeups).await?;
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(600)).build()?;
    let (parts, job_id) = job_on_nodes(&http, &base, &operator, &tenant, 1).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(cfg.seconds + 2);
    let followers: Vec<_> = (0..cfg.followers)
        .map(|_| {
            let (http, url, tenant) =
                (http.clone(), format!("{base}/v1/jobs/{job_id}/logs?follow=true"), tenant.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let Ok(mut response) = http.get(url).bearer_auth(tenant).send().await else { return latencies };
                let mut pending = String::new();
                while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, response.chunk()).await {
                    let received = Utc::now();
                    pending.push_str(&String::from_utf8_lossy(&chunk));
                    while let Some(end) = pending.find('\n') {
                        let line: String = pending.drain(..=end).collect();
                        let Some(data) = line.strip_prefix("data: ") else { continue };
                        if let Ok(shipped) = serde_json::from_str::<Value>(data)
                            .ok()
                            .and_then(|l| l["at"].as_str().map(str::to_owned))
                            .context("at")
                            .and_then(|at| Ok(chrono::DateTime::parse_from_rfc3339(&at)?))
                        {
                            latencies.push((received - shipped.with_timezone(&Utc)).to_std().unwrap_or_default());
                        }
                    }
                }
                latencies
            })
        })
        .collect();
    // Every follower has connected and looked once; then the measured window.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let commits = async || -> anyhow::Result<i64> {
        let (n,): (i64,) = sqlx::query_as("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
            .bind(BENCH_DB)
            .fetch_one(&db)
            .await?;
        Ok(n)
    };
    let (token, part) = &parts[0];
    let url = format!("{base}/v1/agent/assignments/{part}/logs");
    let (before, started) = (commits().await?, Instant::now());
    let mut shipped = 0u64;
    while started.elapsed() < Duration::from_secs(cfg.seconds) {
        shipped += 1;
        let line = LogLine {
            seq: shipped as i64,
            at: Utc::now(),
            stream: LogStream::Stdout,
            rank: Some(0),
            text: step_line(0, shipped as i64),
        };
        match post_timed(&http, &url, token, &LogReport { lines: vec![line], last: false }).await {
            Ok((200, _, _)) => {}
            Ok((status, body, _)) => bail!("a report: {status}: {}", String::from_utf8_lossy(&body)),
            Err(err) => bail!("a report: {err}"),
        }
        // Jittered: a poller's phase does not line up with the reports'.
        tokio::time::sleep(cfg.follow_every + Duration::from_millis(rand::random_range(0..500))).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    // The statistics reach pg_stat_database within a second of each transaction.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let xacts = commits().await? - before;
    let mut latencies = Vec::new();
    for follower in followers {
        latencies.extend(follower.await.unwrap_or_default());
    }
    latencies.sort_unstable();
    shutdown.cancel();
    let _ = server.await;
    db.close().await;
    Ok(FollowCase { name, shipped, latencies, xacts_per_s: xacts as f64 / (seconds + 1.5) })
}

fn report(cfg: &Config, cases: &[Case], follows: &[FollowCase]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Log ingest benchmark\n");
    let _ = writeln!(
        out,
        "`cargo bench --bench log_ingest` ({} agent nodes shipping one job's output, {} lines a report, {} s a case), \
         measured {} on this machine ({} cores). Written by the bench; see its header for what it does.\n",
        cfg.nodes,
        cfg.lines_per_report,
        cfg.seconds,
        Utc::now().format("%Y-%m-%d"),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(
        out,
        "| case | cap | lines/s in all | lines/s per agent | report p50 | report p99 | errors | text bytes/line | \
         stored bytes/line | lines kept | first line kept |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for c in cases {
        let per_s = c.lines as f64 / c.seconds;
        let _ = writeln!(
            out,
            "| {} | {} MiB | {} | {} | {:.1} ms | {:.1} ms | {} | {:.0} | {:.0} | {} | {} |",
            c.name,
            c.cap_mib,
            with_thousands(per_s as i64),
            with_thousands((per_s / cfg.nodes as f64) as i64),
            percentile_ms(&c.latencies, 50.0),
            percentile_ms(&c.latencies, 99.0),
            c.errors,
            c.text_bytes_per_line,
            c.stored_bytes_per_line,
            with_thousands(c.lines_kept),
            with_thousands(c.first_line)
        );
    }
    let _ = writeln!(
        out,
        "\n- **Stored bytes per line** is `pg_total_relation_size('job_log_lines')` (heap, primary key, TOAST) over the \
         lines kept, after `VACUUM`; its excess over the text is the row (header, job id, line number, part id, node, \
         rank, stream, time) and the primary key's entry.\n\
         - The nodes all ship to one job, whose lines are numbered under its log lock: a job's ingest is one writer at \
         a time, and different jobs' ingests run side by side.\n\
         - Under the small cap, each report that passes the cap deletes the oldest tenth of it in the same transaction. \
         Its stored bytes per line count the space those deletes freed: `VACUUM` keeps it for the lines that come \
         next rather than giving it back, so a capped job's table stays near its peak size."
    );
    let _ = writeln!(
        out,
        "\n## Followers\n\n{} clients follow one job over HTTP while its node ships one line every {} ms (and up to \
         500 ms more at random), {} s a case, side by side in one run. Delivery is from a line's report to each follower's receipt; transactions \
         are every transaction the service committed meanwhile (`pg_stat_database.xact_commit`).\n",
        cfg.followers,
        cfg.follow_every.as_millis(),
        cfg.seconds
    );
    let _ =
        writeln!(out, "| followers | lines shipped | lines delivered | delivery p50 | delivery p99 | transactions/s |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for f in follows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} ms | {:.1} ms | {:.0} |",
            f.name,
            f.shipped,
            with_thousands(f.latencies.len() as i64),
            percentile_ms(&f.latencies, 50.0),
            percentile_ms(&f.latencies, 99.0),
            f.xacts_per_s
        );
    }
    out
}

async fn bench() -> anyhow::Result<()> {
    let cfg = Config {
        server_url: std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_string()),
        seconds: env_or("BENCH_SECONDS", 20u64)?.max(1),
        nodes: env_or("BENCH_NODES", 8usize)?.max(1),
        lines_per_report: env_or("BENCH_LINES_PER_REPORT", 2000usize)?.clamp(1, 2000),
        cap_mib: env_or("BENCH_CAP_MIB", 16u64)?.max(1),
        followers: env_or("BENCH_FOLLOWERS", 100usize)?.max(1),
        follow_every: Duration::from_millis(env_or("BENCH_FOLLOW_EVERY_MS", 2000u64)?.max(1)),
        doc: common::doc_path("docs/benchmarks/log-ingest.md"),
    };
    let mut admin = PgConnection::connect(&cfg.server_url).await.context("connecting to PostgreSQL")?;
    let mut cases = Vec::new();
    for (name, cap) in [("under the cap", 1_048_576), ("past a small cap", cfg.cap_mib)] {
        eprintln!("log ingest: {name} ({cap} MiB cap), {} nodes, {} s", cfg.nodes, cfg.seconds);
        let result = case(&cfg, &mut admin, name, cap).await?;
        if let Some(err) = &result.first_error {
            eprintln!("  first error: {err}");
        }
        if result.errors > 0 || result.reports == 0 {
            bail!("{name}: {} errors, {} reports ({:?})", result.errors, result.reports, result.first_error);
        }
        cases.push(result);
    }
    let mut follows = Vec::new();
    let modes = [
        ("polling every 500 ms (before)", LogWakeups::polling(gpuplane::jobs::logs::FOLLOW_MIN_INTERVAL)),
        ("woken by NOTIFY (now)", LogWakeups::default()),
    ];
    for (name, wakeups) in modes {
        eprintln!("log followers: {name}, {} followers, {} s", cfg.followers, cfg.seconds);
        let result = follow_case(&cfg, &mut admin, name, wakeups).await?;
        if result.latencies.is_empty() {
            bail!("{name}: no line reached a follower");
        }
        follows.push(result);
    }
    drop_database(&mut admin, BENCH_DB).await?;
    let page = report(&cfg, &cases, &follows);
    print!("{page}");
    if let Some(doc) = &cfg.doc {
        std::fs::write(doc, &page).with_context(|| format!("writing {}", doc.display()))?;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    common::run(bench())
}
