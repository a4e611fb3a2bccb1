//! Gateway benchmark: `cargo bench --bench gateway`.
//!
//! What the gateway costs a request, against the same server called directly, side by side in one run. The
//! server is a minimal OpenAI-style HTTP server in this process (it answers a chat completion's JSON at once, so
//! what is measured is the path, not a model). Two replicas of it, each behind a real agent forwarder
//! (`gpuplane_agent::serving`, the token checked, as on a node); the service, its key and its ready replicas are
//! rows of a fresh database; the gateway is the service's own (`gpuplane::gateway::router`) on 127.0.0.1:0.
//! Clients post the same request with keep-alive, `BENCH_CLIENTS` at once and one at a time, for
//! `BENCH_SECONDS` per case, direct and through the gateway in turn (`BENCH_RUNS` rounds): requests/s and
//! latency percentiles of each, and the gateway's overhead (its p50 and p99 less the direct ones).
//!
//! Environment: `DATABASE_URL` (the server to make the bench database on), `BENCH_SECONDS` (default 10),
//! `BENCH_WARMUP_SECONDS` (default 2), `BENCH_CLIENTS` (default 32), `BENCH_RUNS` (default 2), `BENCH_DOC` (the
//! page, default `docs/benchmarks/gateway.md`; empty: none).

#[path = "common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Context;
use common::{DEFAULT_DATABASE_URL, drop_database, env_or, percentile_ms, recreate_database};
use gpuplane::AppState;
use gpuplane::config::{Secret, Settings};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const BENCH_DB: &str = "gpuplane_bench_gateway";

const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"tiny","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how can I help?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":8,"total_tokens":17}}"#;
const REQUEST: &str = r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":8}"#;

/// The stand-in for a serving engine (the bench measures the gateway, not a model): answers at once.
async fn upstream() -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new()
        .route(
            "/v1/chat/completions",
            axum::routing::post(|_body: axum::body::Bytes| async {
                ([(axum::http::header::CONTENT_TYPE, "application/json")], ANSWER)
            }),
        )
        .route("/health", axum::routing::get(|| async { "ok" }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

/// Rows for one tenant's service on one node with `replicas` running parts; returns (service id, key, parts).
async fn seed(conn: &mut PgConnection, replicas: usize) -> anyhow::Result<(Uuid, String, Vec<Uuid>)> {
    let (tenant, pool, node, lease, job, service) =
        (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    sqlx::query("INSERT INTO tenants (id, name) VALUES ($1, 'bench')").bind(tenant).execute(&mut *conn).await?;
    sqlx::query(
        "INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency) \
         VALUES ($1, 'h100-bench', 'h100', 'bench', 249, 'USD')",
    )
    .bind(pool)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO nodes (id, pool_id, hostname, address, admin_state, liveness, intra_link, intra_link_gbps, \
             network_gbps, rdma, free_gpus, gpu_count, agent_managed, agent_generation, last_heartbeat_at) \
         VALUES ($1, $2, 'bench-node', '127.0.0.1', 'active', 'ready', 'nvlink', 900, 400, true, 8, 8, true, 1, now())",
    )
    .bind(node)
    .bind(pool)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO leases (id, tenant_id, pool_id, gpu_count, placement, term, state, starts_at, ends_at) \
         VALUES ($1, $2, $3, 8, 'pack', 'hourly', 'active', now(), now() + interval '1 hour')",
    )
    .bind(lease)
    .bind(tenant)
    .bind(pool)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO jobs (id, tenant_id, lease_id, template, request, state) \
         VALUES ($1, $2, $3, 'run', '{}', 'running')",
    )
    .bind(job)
    .bind(tenant)
    .bind(lease)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO services (id, tenant_id, job_id, port, health_path, protocol) \
         VALUES ($1, $2, $3, 8000, '/health', 'openai')",
    )
    .bind(service)
    .bind(tenant)
    .bind(job)
    .execute(&mut *conn)
    .await?;
    let key = gpuplane::services::keys::generate();
    sqlx::query(
        "INSERT INTO service_keys (id, service_id, name, prefix, secret_sha256) VALUES ($1, $2, 'bench', $3, $4)",
    )
    .bind(Uuid::now_v7())
    .bind(service)
    .bind(&key.display_prefix)
    .bind(&key.hash)
    .execute(&mut *conn)
    .await?;
    let mut parts = Vec::new();
    for rank in 0..replicas {
        let part = Uuid::now_v7();
        sqlx::query(
            "INSERT INTO job_nodes (id, job_id, node_id, node_rank, spec, state) VALUES ($1, $2, $3, $4, '{}', 'running')",
        )
        .bind(part)
        .bind(job)
        .bind(node)
        .bind(rank as i32)
        .execute(&mut *conn)
        .await?;
        parts.push(part);
    }
    Ok((service, key.secret, parts))
}

#[derive(Default)]
struct Case {
    latencies: Vec<Duration>,
    errors: u64,
    seconds: f64,
}

impl Case {
    fn rps(&self) -> f64 {
        self.latencies.len() as f64 / self.seconds
    }
    fn p(&mut self, q: f64) -> f64 {
        self.latencies.sort();
        percentile_ms(&self.latencies, q)
    }
}

/// `clients` clients posting the request to `url` for `seconds` (after `warmup`).
async fn drive(url: &str, key: Option<&str>, clients: usize, warmup: u64, seconds: u64) -> anyhow::Result<Case> {
    let http = reqwest::Client::builder().no_proxy().pool_max_idle_per_host(clients).build()?;
    let run = |secs: u64| {
        let tasks: Vec<_> = (0..clients)
            .map(|_| {
                let (http, url, key) = (http.clone(), url.to_string(), key.map(str::to_owned));
                tokio::spawn(async move {
                    let mut case = Case::default();
                    let until = Instant::now() + Duration::from_secs(secs);
                    while Instant::now() < until {
                        let started = Instant::now();
                        let mut request = http.post(&url).header("content-type", "application/json").body(REQUEST);
                        if let Some(key) = &key {
                            request = request.bearer_auth(key);
                        }
                        let ok = match request.send().await {
                            Ok(answer) => answer.status() == 200 && answer.bytes().await.is_ok(),
                            Err(_) => false,
                        };
                        match ok {
                            true => case.latencies.push(started.elapsed()),
                            false => case.errors += 1,
                        }
                    }
                    case
                })
            })
            .collect();
        async move {
            let mut all = Case { seconds: secs as f64, ..Case::default() };
            for task in tasks {
                let case = task.await?;
                all.latencies.extend(case.latencies);
                all.errors += case.errors;
            }
            anyhow::Ok(all)
        }
    };
    if warmup > 0 {
        run(warmup).await?;
    }
    run(seconds).await
}

async fn bench() -> anyhow::Result<()> {
    let seconds: u64 = env_or("BENCH_SECONDS", 10)?;
    let warmup: u64 = env_or("BENCH_WARMUP_SECONDS", 2)?;
    let clients: usize = env_or("BENCH_CLIENTS", 32)?;
    let rounds = common::runs(2);
    let server_url: String = env_or("DATABASE_URL", DEFAULT_DATABASE_URL.to_string())?;
    let mut admin = PgConnection::connect(&server_url).await.context("connecting to PostgreSQL")?;
    recreate_database(&mut admin, BENCH_DB).await?;
    let options: PgConnectOptions = server_url.parse::<PgConnectOptions>()?.database(BENCH_DB);
    let db = PgPoolOptions::new().max_connections(16).connect_with(options).await?;
    gpuplane::db::MIGRATOR.run(&db).await?;
    let (service, key, parts) = seed(&mut *db.acquire().await?, 2).await?;

    let state =
        AppState::new(db.clone(), Settings::new(Secret::new("gateway-bench-secret-0123456789abcdefghijklmno")))?;
    // Two replicas, each its own server behind a real agent forwarder, ready as their agents would report them.
    let mut forwarders =
        gpuplane_agent::serving::ServingReplicas::new(gpuplane_agent::args::PortRange { first: 24000, last: 24999 });
    let mut direct = Vec::new();
    for part in &parts {
        let server = upstream().await?;
        direct.push(format!("http://{server}/v1/chat/completions"));
        let spec = gpuplane_protocol::jobs::ServeSpec {
            port: server.port(),
            health_path: "/health".into(),
            token: state.tokens.replica_token(*part),
        };
        forwarders.start(*part, server, &spec)?;
    }
    for report in forwarders.reports() {
        sqlx::query("INSERT INTO service_replicas (job_node_id, service_id, port, ready) VALUES ($1, $2, $3, true)")
            .bind(report.job_node_id)
            .bind(service)
            .bind(report.port)
            .execute(&db)
            .await?;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let gateway = format!("http://{}/s/{service}/v1/chat/completions", listener.local_addr()?);
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(gpuplane::app::run_gateway(listener, state, shutdown.clone()));

    // Each case in turn, round after round: the machine's noise falls on both alike.
    let mut results: Vec<(String, usize, Case)> = Vec::new();
    for round in 0..rounds {
        for concurrency in [1, clients] {
            for (name, url, key) in [
                ("direct", direct[round % direct.len()].as_str(), None),
                ("gateway", gateway.as_str(), Some(key.as_str())),
            ] {
                let case = drive(url, key, concurrency, warmup, seconds).await?;
                eprintln!(
                    "  round {round}: {name:7} x{concurrency:<3} {:>8.0} req/s, {} errors",
                    case.rps(),
                    case.errors
                );
                results.push((name.to_string(), concurrency, case));
            }
        }
    }
    shutdown.cancel();
    let _ = served.await;
    forwarders.stop_all();
    db.close().await;
    drop_database(&mut admin, BENCH_DB).await?;

    // Merge the rounds per case.
    let mut merged: Vec<(String, usize, Case)> = Vec::new();
    for (name, concurrency, case) in results {
        match merged.iter_mut().find(|(n, c, _)| *n == name && *c == concurrency) {
            Some((_, _, all)) => {
                all.latencies.extend(case.latencies);
                all.errors += case.errors;
                all.seconds += case.seconds;
            }
            None => merged.push((name, concurrency, case)),
        }
    }
    let mut table = String::new();
    let mut overhead = String::new();
    for concurrency in [1, clients] {
        let mut row = |name: &str| {
            let (_, _, case) = merged.iter_mut().find(|(n, c, _)| n == name && *c == concurrency).unwrap();
            let (p50, p99, rps, errors) = (case.p(50.0), case.p(99.0), case.rps(), case.errors);
            let _ = writeln!(table, "| {name} | {concurrency} | {rps:.0} | {p50:.3} | {p99:.3} | {errors} |");
            (p50, p99, rps)
        };
        let (d50, d99, drps) = row("direct");
        let (g50, g99, grps) = row("gateway");
        let _ = writeln!(
            overhead,
            "- {concurrency} client(s) at once: the gateway adds {:.3} ms at p50 and {:.3} ms at p99, and holds {:.0} \
             requests/s where the server alone answers {:.0} ({:.0} %).",
            g50 - d50,
            g99 - d99,
            grps,
            drps,
            100.0 * grps / drps.max(1e-9)
        );
    }
    println!("{table}\n{overhead}");
    if let Some(path) = common::doc_path("docs/benchmarks/gateway.md") {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
        let page = format!(
            "# Gateway benchmark\n\n\
             `cargo bench --bench gateway` ({}). What the gateway ([serving.md](../serving.md)) costs a request, \
             against the same server called directly, side by side in one run on this machine ({cores} cores; the \
             clients, the gateway, the forwarders, the servers and PostgreSQL share them).\n\n\
             The server is a minimal OpenAI-style HTTP server that answers a chat completion's JSON at once (the \
             path is measured, not a model); two replicas of it, each behind a real agent forwarder (the replica \
             token checked, as on a node). Through the gateway, each request is also: the service, the key and \
             the ready replicas read in one query, the rate limiter, a replica chosen (fewest outstanding), an \
             idle connection to its forwarder taken (or a new one made: the token, its acknowledgement), the \
             answer read whole to count its tokens (an OpenAI-compatible JSON answer). Clients use keep-alive; \
             {rounds} rounds of {seconds} s per case, after {warmup} s of warm-up each, merged.\n\n\
             | path | clients at once | requests/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|---|\n{table}\n\
             {overhead}\n\
             Where the time goes: the database round trip per request (keys, revocations, public and limits \
             take effect on the next request, on every service replica) and a second hop (gateway, forwarder). \
             What would cut it: caching a service's route for a second in each gateway (a revoked key would then \
             work for up to that second), and HTTP/2 to the forwarders. A serving engine's own time per request \
             is tens of milliseconds to seconds.\n",
            chrono::Utc::now().format("%Y-%m-%d")
        );
        std::fs::write(&path, page)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    common::run(bench())
}
