//! The per-request cost of revocable console sessions: `cargo bench --bench sessions`.
//!
//! Every request re-checks its credential in one statement (`auth::key_check_cte`); a console session's token
//! makes that statement also probe `console_sessions` by primary key (issue #33). This bench measures what the
//! probe adds, side by side in one run: the same statement with the session parameter NULL (a token of
//! `POST /v1/auth/token`: the check without the session lookup) and with a live session, interleaved so drift
//! on the machine falls on both alike. Three views of it:
//!
//! 1. **The check as the service runs it**: `auth::check_key` on a pool of one connection (prepared statement,
//!    as on a warm service connection), client-side round trip, in rounds that rotate which variant goes first;
//!    a third variant is the statement as it was before sessions.
//! 2. **Server time**: `EXPLAIN (ANALYZE, BUFFERS, TIMING OFF)` of the same statement, execution time and the buffer pages
//!    it touched, averaged.
//! 3. **A whole request**: the real service in-process on 127.0.0.1:0, `BENCH_CLIENTS` closed-loop clients
//!    calling `GET /v1/tenant` (key check + one tenant read), in alternating rounds with API tokens and with
//!    console-session tokens (as bearer; the cookie is read the same way).
//!
//! The database is seeded with `BENCH_KEYS` tenant keys (in 100 tenants) holding `BENCH_SESSIONS_PER_KEY` live
//! sessions each, so the probe runs against a table of realistic size, not an empty one.
//!
//! Environment:
//! * `DATABASE_URL`: the PostgreSQL server (the bench creates its own database beside it). Default
//!   `postgres://postgres@127.0.0.1:5432/postgres`.
//! * `BENCH_KEYS` (default 2,000), `BENCH_SESSIONS_PER_KEY` (default 50).
//! * `BENCH_PAIRS`: rounds of view 1 (default 20,000). `BENCH_EXPLAINS`: runs of each variant in view 2
//!   (default 500).
//! * `BENCH_CLIENTS` (default 16), `BENCH_ROUND_SECS` (default 1.5), `BENCH_ROUNDS` (default 24, alternating
//!   in ABBA order; an even number) for view 3. Besides the totals it reports the median over the round pairs
//!   (0-1, 2-3, ...: one of each variant, side by side in time) of the ratio of their rates, which load from
//!   outside the bench (a shared machine) moves much less than the totals.
//! * `BENCH_DOC`: where to write the markdown report (default `docs/benchmarks/sessions.md`); empty: nowhere.

#[path = "common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use common::{DEFAULT_DATABASE_URL, XorShift, drop_database, env_or, percentile_ms, recreate_database, with_thousands};
use gpuplane::AppState;
use gpuplane::auth::{Role, check_key, key_check_cte};
use gpuplane::config::{Secret, Settings};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection, PgPool};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const DB: &str = "gpuplane_bench_sessions";
const TENANTS: i64 = 100;

struct Config {
    server_url: String,
    keys: i64,
    sessions_per_key: i64,
    pairs: usize,
    explains: usize,
    clients: usize,
    round_secs: f64,
    rounds: usize,
    doc: Option<std::path::PathBuf>,
}

impl Config {
    fn from_env() -> anyhow::Result<Self> {
        let doc = common::doc_path("docs/benchmarks/sessions.md");
        let cfg = Config {
            server_url: std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_string()),
            keys: env_or("BENCH_KEYS", 2_000)?,
            sessions_per_key: env_or("BENCH_SESSIONS_PER_KEY", 50)?,
            pairs: env_or("BENCH_PAIRS", 20_000)?,
            explains: env_or("BENCH_EXPLAINS", 500)?,
            clients: env_or("BENCH_CLIENTS", 16)?,
            round_secs: env_or("BENCH_ROUND_SECS", 1.5)?,
            rounds: env_or("BENCH_ROUNDS", 24)?,
            doc,
        };
        if cfg.keys < 1
            || cfg.sessions_per_key < 1
            || cfg.pairs < 1
            || cfg.clients < 1
            || cfg.rounds < 2
            || cfg.rounds % 2 == 1
        {
            bail!(
                "BENCH_KEYS, BENCH_SESSIONS_PER_KEY, BENCH_PAIRS and BENCH_CLIENTS must be positive, BENCH_ROUNDS even"
            );
        }
        Ok(cfg)
    }
}

/// A tenant key and one of its live sessions.
#[derive(Clone, Copy)]
struct Credential {
    key_id: Uuid,
    tenant_id: Uuid,
    session_id: Uuid,
}

/// Tenants, keys and live sessions in bulk SQL (keys with placeholder hashes: nothing here exchanges them).
async fn seed(db: &PgPool, cfg: &Config) -> anyhow::Result<Vec<Credential>> {
    let mut conn = db.acquire().await?;
    sqlx::query(
        "INSERT INTO tenants (id, name) SELECT gen_random_uuid(), 'bench-tenant-' || i FROM generate_series(1, $1::bigint) i",
    )
    .bind(TENANTS)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO api_keys (id, tenant_id, role, name, prefix, secret_hash) \
         SELECT gen_random_uuid(), t.id, 'tenant_admin', 'bench', 'gpk_bench', sha256(('bench-key-' || i)::bytea) \
         FROM generate_series(1, $1::bigint) i \
         JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM tenants) t ON t.n = i % $2",
    )
    .bind(cfg.keys)
    .bind(TENANTS)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO console_sessions (id, key_id, expires_at) \
         SELECT gen_random_uuid(), k.id, now() + interval '1 day' FROM api_keys k, generate_series(1, $1::bigint)",
    )
    .bind(cfg.sessions_per_key)
    .execute(&mut *conn)
    .await?;
    sqlx::query("ANALYZE").execute(&mut *conn).await?;
    let rows: Vec<(Uuid, Uuid, Uuid)> = sqlx::query_as(
        "SELECT DISTINCT ON (k.id) k.id, k.tenant_id, s.id FROM api_keys k JOIN console_sessions s ON s.key_id = k.id \
         ORDER BY k.id, s.id",
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.into_iter().map(|(key_id, tenant_id, session_id)| Credential { key_id, tenant_id, session_id }).collect())
}

struct Summary {
    mean_us: f64,
    p50_us: f64,
    p99_us: f64,
}

fn summarize(mut times: Vec<Duration>) -> Summary {
    times.sort_unstable();
    let mean = times.iter().map(Duration::as_secs_f64).sum::<f64>() / times.len() as f64;
    Summary {
        mean_us: mean * 1e6,
        p50_us: percentile_ms(&times, 50.0) * 1000.0,
        p99_us: percentile_ms(&times, 99.0) * 1000.0,
    }
}

/// The check statement as it was before sessions (commit ad128b9's `key_check_cte`), kept here only to
/// measure against: the key and its tenant, no session parameter.
const CHECK_BEFORE_SESSIONS: &str = "WITH key_check AS ( \
     SELECT k.id AS checked_key_id, k.tenant_id AS checked_tenant_id, k.revoked AS key_revoked, \
            NOT k.revoked AND t.status IS DISTINCT FROM 'suspended' AS key_may_act \
     FROM (SELECT id, tenant_id, revoked_at IS NOT NULL OR COALESCE(expires_at <= now(), false) AS revoked \
           FROM api_keys WHERE id = $1::uuid) k \
     LEFT JOIN tenants t ON t.id = k.tenant_id) SELECT * FROM key_check";

/// A row of [`CHECK_BEFORE_SESSIONS`]: key, tenant, revoked, may act.
type BeforeRow = (Option<Uuid>, Option<Uuid>, Option<bool>, Option<bool>);

/// One run of variant `v` of view 1: 0 the statement before sessions, 1 `check_key` without a session (an API
/// token), 2 `check_key` with a live session.
async fn check_variant(db: &PgPool, c: &Credential, v: usize) -> anyhow::Result<()> {
    match v {
        0 => {
            let row: Option<BeforeRow> =
                sqlx::query_as(CHECK_BEFORE_SESSIONS).bind(c.key_id).fetch_optional(db).await?;
            anyhow::ensure!(row.is_some_and(|r| r.3 == Some(true)), "the key may act");
        }
        1 => check_key(db, c.key_id, None).await?,
        _ => check_key(db, c.key_id, Some(c.session_id)).await?,
    }
    Ok(())
}

/// View 1: the three variants in rotating order, on one pooled connection.
async fn check_rounds(db: &PgPool, creds: &[Credential], rounds: usize) -> anyhow::Result<[Summary; 3]> {
    let mut rng = XorShift::new(7);
    let one = |rng: &mut XorShift| creds[(rng.next() % creds.len() as u64) as usize];
    for _ in 0..200 {
        let c = one(&mut rng);
        for v in 0..3 {
            check_variant(db, &c, v).await?;
        }
    }
    let mut times: [Vec<Duration>; 3] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    for i in 0..rounds {
        let c = one(&mut rng);
        for k in 0..3 {
            let v = (i + k) % 3;
            let started = Instant::now();
            check_variant(db, &c, v).await?;
            times[v].push(started.elapsed());
        }
    }
    Ok(times.map(summarize))
}

/// Server time of one run of the check statement: (execution ms, shared buffers hit + read). Planning is left
/// out: EXPLAIN plans anew each time, while the service's prepared statement reuses its plan.
async fn explain(conn: &mut PgConnection, c: &Credential, with_session: bool) -> anyhow::Result<(f64, f64)> {
    let sql = format!(
        "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) WITH {} SELECT * FROM key_check",
        key_check_cte("$1", "$2")
    );
    let (plan,): (serde_json::Value,) = sqlx::query_as(AssertSqlSafe(sql))
        .bind(c.key_id)
        .bind(with_session.then_some(c.session_id))
        .fetch_one(&mut *conn)
        .await?;
    let top = &plan[0];
    let ms = top["Execution Time"].as_f64().unwrap_or(0.0);
    let buffers = |node: &serde_json::Value| {
        node["Shared Hit Blocks"].as_f64().unwrap_or(0.0) + node["Shared Read Blocks"].as_f64().unwrap_or(0.0)
    };
    Ok((ms, buffers(&top["Plan"])))
}

/// View 2: mean server time and buffers of each variant.
async fn explains(db: &PgPool, creds: &[Credential], n: usize) -> anyhow::Result<[(f64, f64); 2]> {
    let mut conn = db.acquire().await?;
    let mut rng = XorShift::new(11);
    let mut sums = [(0.0, 0.0); 2];
    for i in 0..(n + 20) {
        let c = creds[(rng.next() % creds.len() as u64) as usize];
        for with_session in [i % 2 == 0, i % 2 == 1] {
            let (ms, buffers) = explain(&mut conn, &c, with_session).await?;
            if i >= 20 {
                let s = &mut sums[usize::from(with_session)];
                s.0 += ms;
                s.1 += buffers;
            }
        }
    }
    Ok(sums.map(|(ms, b)| (ms / n as f64, b / n as f64)))
}

struct Round {
    requests: u64,
    seconds: f64,
    times: Vec<Duration>,
}

/// One round of view 3: every client loops `GET /v1/tenant` with its token for `secs`.
async fn http_round(
    http: &reqwest::Client,
    base: &str,
    tokens: Arc<Vec<String>>,
    clients: usize,
    secs: f64,
) -> anyhow::Result<Round> {
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let (http, url, tokens) = (http.clone(), format!("{base}/v1/tenant"), tokens.clone());
            tokio::spawn(async move {
                let mut times = Vec::new();
                let mut n = i;
                while Instant::now() < until {
                    let token = &tokens[n % tokens.len()];
                    n += clients;
                    let sent = Instant::now();
                    let res = http.get(&url).bearer_auth(token).send().await?;
                    let status = res.status();
                    res.bytes().await?;
                    if status != reqwest::StatusCode::OK {
                        bail!("GET /v1/tenant: {status}");
                    }
                    times.push(sent.elapsed());
                }
                anyhow::Ok(times)
            })
        })
        .collect();
    let mut times = Vec::new();
    for task in tasks {
        times.extend(task.await??);
    }
    Ok(Round { requests: times.len() as u64, seconds: started.elapsed().as_secs_f64(), times })
}

struct HttpResult {
    rate: f64,
    latency: Summary,
    requests: u64,
}

/// View 3: alternating rounds with API tokens and with session tokens, against the real service; the totals of
/// each variant and the median over round pairs of (session rate / API-token rate).
async fn http_rounds(db: &PgPool, creds: &[Credential], cfg: &Config) -> anyhow::Result<([HttpResult; 2], f64)> {
    let mut settings = Settings::new(Secret::new("sessions-bench-secret-0123456789abcdefghijklmnopqr"));
    settings.token_ttl = Duration::from_secs(3600);
    let state = AppState::new(db.clone(), settings)?;
    let api_tokens: Vec<String> = creds
        .iter()
        .map(|c| state.tokens.issue(c.key_id, Some(c.tenant_id), Role::TenantAdmin))
        .collect::<anyhow::Result<_>>()?;
    let session_tokens: Vec<String> = creds
        .iter()
        .map(|c| {
            let mut claims = state.tokens.claims(c.key_id, Some(c.tenant_id), Role::TenantAdmin);
            claims.sid = Some(c.session_id);
            state.tokens.sign(&claims)
        })
        .collect::<anyhow::Result<_>>()?;
    let variants = [Arc::new(api_tokens), Arc::new(session_tokens)];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(gpuplane::app::run(listener, state, shutdown.clone()));
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(30)).build()?;
    // Warm-up: connections open, statements prepared on the service's pool.
    for tokens in &variants {
        http_round(&http, &base, tokens.clone(), cfg.clients, 1.0).await?;
    }
    let mut totals: [(u64, f64, Vec<Duration>); 2] = [(0, 0.0, Vec::new()), (0, 0.0, Vec::new())];
    let mut pair = [0.0f64; 2];
    let mut ratios = Vec::new();
    for r in 0..cfg.rounds {
        // ABBA order: each variant goes first as often as the other.
        let v = if (r / 2 + r) % 2 == 0 { 0 } else { 1 };
        let round = http_round(&http, &base, variants[v].clone(), cfg.clients, cfg.round_secs).await?;
        eprintln!("  round {r}: {} {:.0} req/s", ["api token", "session"][v], round.requests as f64 / round.seconds);
        pair[v] = round.requests as f64 / round.seconds;
        if r % 2 == 1 {
            ratios.push(pair[1] / pair[0]);
        }
        let t = &mut totals[v];
        t.0 += round.requests;
        t.1 += round.seconds;
        t.2.extend(round.times);
    }
    shutdown.cancel();
    server.await??;
    ratios.sort_by(f64::total_cmp);
    let median_ratio = ratios[ratios.len() / 2];
    let results = totals.map(|(requests, seconds, times)| HttpResult {
        rate: requests as f64 / seconds,
        latency: summarize(times),
        requests,
    });
    Ok((results, median_ratio))
}

async fn bench() -> anyhow::Result<()> {
    let cfg = Config::from_env()?;
    let load_before = std::fs::read_to_string("/proc/loadavg").ok();
    let load_before = load_before.as_deref().and_then(|l| l.split_whitespace().next()).unwrap_or("unknown").to_string();
    let mut admin = PgConnection::connect_with(&PgConnectOptions::from_str(&cfg.server_url).context("DATABASE_URL")?)
        .await
        .context("connecting to PostgreSQL (set DATABASE_URL)")?;
    let (postgres,): (String,) = sqlx::query_as("SELECT version()").fetch_one(&mut admin).await?;
    let postgres = postgres.split(" on ").next().unwrap_or(&postgres).to_string();
    recreate_database(&mut admin, DB).await?;
    let outcome = run(&cfg).await;
    drop_database(&mut admin, DB).await?;
    admin.close().await?;
    let (check, server, (http, median_ratio)) = outcome?;

    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let load = std::fs::read_to_string("/proc/loadavg").ok();
    let load = load.as_deref().and_then(|l| l.split_whitespace().next()).unwrap_or("unknown");
    let build = if cfg!(debug_assertions) { "debug (`--profile dev`)" } else { "release" };
    let sessions = cfg.keys * cfg.sessions_per_key;
    let mut out = String::new();
    let _ = writeln!(out, "# Revocable sessions: the per-request cost of the session check\n");
    let _ = writeln!(
        out,
        "Generated by `cargo bench --bench sessions` (source: `benches/sessions.rs`); rerun it to refresh this page.\n"
    );
    let _ = writeln!(
        out,
        "Every request checks its credential in one statement (`auth::key_check_cte`: the key, its tenant and, for a \
         console sign-in's token, its `console_sessions` row by primary key). Side by side in one run, interleaved: \
         **without** = the statement with the session parameter NULL (a token of `POST /v1/auth/token`), \
         **with** = the same statement finding a live session, and in the first table **before sessions** = the \
         statement as it was before this change. {} tenant keys in {TENANTS} tenants, {} \
         live session rows. {cores} cores shared by PostgreSQL, the service and the load generator, {postgres}, \
         {build} build; 1-minute load average {load_before} at the start, {load} at the end (anything above \
         the bench's own share is other work on the machine, which the interleaving spreads over both \
         variants).\n",
        with_thousands(cfg.keys),
        with_thousands(sessions),
    );
    let _ = writeln!(out, "## The check statement (`auth::check_key`, one warm connection, round trip)\n");
    let _ = writeln!(
        out,
        "{} rounds of three, random key each, rotating which goes first. **before sessions**: the statement as it \
         was before this change (the key and its tenant only, kept in the bench to measure against).\n",
        with_thousands(cfg.pairs as i64)
    );
    let _ = writeln!(out, "| | mean µs | p50 µs | p99 µs |\n|---|---:|---:|---:|");
    let rows = [
        ("before sessions", &check[0]),
        ("without session lookup (API token, `sid` NULL)", &check[1]),
        ("with session lookup (console token)", &check[2]),
    ];
    for (name, s) in rows {
        let _ = writeln!(out, "| {name} | {:.1} | {:.1} | {:.1} |", s.mean_us, s.p50_us, s.p99_us);
    }
    for (name, base) in [("**with - without**", &check[1]), ("**with - before sessions**", &check[0])] {
        let _ = writeln!(
            out,
            "| {name} | **{:+.1}** | {:+.1} | {:+.1} |",
            check[2].mean_us - base.mean_us,
            check[2].p50_us - base.p50_us,
            check[2].p99_us - base.p99_us
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "## Server time (`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF)`, mean of {} runs each)\n",
        cfg.explains
    );
    let _ = writeln!(out, "Execution only: EXPLAIN plans each run anew, the service's prepared statement does not.\n");
    let _ = writeln!(out, "| | execution µs | shared buffers touched |\n|---|---:|---:|");
    for (name, (ms, buffers)) in [("without session lookup", server[0]), ("with session lookup", server[1])] {
        let _ = writeln!(out, "| {name} | {:.1} | {buffers:.1} |", ms * 1000.0);
    }
    let _ = writeln!(
        out,
        "| **difference** | **{:+.1}** | {:+.1} |\n",
        (server[1].0 - server[0].0) * 1000.0,
        server[1].1 - server[0].1
    );
    let _ = writeln!(
        out,
        "## A whole request (`GET /v1/tenant` over HTTP/1.1 keep-alive, real service in-process)\n\n\
         {} closed-loop clients; {} alternating rounds of {:.1} s (ABBA order) after a warm-up; the tokens are \
         sent as bearer tokens (a cookie is read into the same check).\n",
        cfg.clients, cfg.rounds, cfg.round_secs
    );
    let _ = writeln!(out, "| | requests | requests/s | mean ms | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|---:|");
    for (name, h) in [("API tokens (no session)", &http[0]), ("console-session tokens", &http[1])] {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {:.2} | {:.2} | {:.2} |",
            with_thousands(h.requests as i64),
            with_thousands(h.rate as i64),
            h.latency.mean_us / 1000.0,
            h.latency.p50_us / 1000.0,
            h.latency.p99_us / 1000.0
        );
    }
    let _ = writeln!(
        out,
        "| **difference** | | **{:+.1}%** | {:+.3} | {:+.3} | {:+.3} |",
        (http[1].rate / http[0].rate - 1.0) * 100.0,
        (http[1].latency.mean_us - http[0].latency.mean_us) / 1000.0,
        (http[1].latency.p50_us - http[0].latency.p50_us) / 1000.0,
        (http[1].latency.p99_us - http[0].latency.p99_us) / 1000.0
    );
    let _ = writeln!(
        out,
        "\nMedian over the {} round pairs of (session rate / API-token rate): **{:+.1}%** (the totals above also \
         carry whatever else the machine did during each round).",
        cfg.rounds / 2,
        (median_ratio - 1.0) * 100.0
    );
    let _ = writeln!(
        out,
        "\n## Reading it\n\n\
         - What a request pays is the round-trip difference of the first table: the statement it runs anyway does \
         one more primary-key probe (the buffers of the second table: about 4 pages of `console_sessions`, its \
         index root and leaf and the heap page), in the same round trip. The second table's execution times come \
         from plans made anew for each EXPLAIN, so they overstate both variants and the difference; the round \
         trip of the prepared statement is the figure to use.\n\
         - A whole request costs tens of times the check, and on a shared 2-core machine the HTTP rate swings from \
         round to round by far more than a few microseconds per request: neither the totals nor the paired \
         median can resolve the probe, whatever their sign; they show that sessions cost no throughput that \
         this machine can measure.\n\
         - The tokens of `POST /v1/auth/token` (no `sid`) run the same statement with the session parameter NULL: \
         the probe reads no index page (compare the first two rows of the first table)."
    );
    print!("{out}");
    if let Some(path) = &cfg.doc {
        std::fs::write(path, &out).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

type Outcome = ([Summary; 3], [(f64, f64); 2], ([HttpResult; 2], f64));

async fn run(cfg: &Config) -> anyhow::Result<Outcome> {
    let options = PgConnectOptions::from_str(&cfg.server_url)?.database(DB);
    let db = PgPoolOptions::new().max_connections(16).connect_with(options.clone()).await?;
    gpuplane::db::MIGRATOR.run(&db).await?;
    let seeding = Instant::now();
    let creds = seed(&db, cfg).await?;
    eprintln!(
        "seeded {} keys, {} sessions in {:.1} s",
        creds.len(),
        with_thousands(cfg.keys * cfg.sessions_per_key),
        seeding.elapsed().as_secs_f64()
    );
    let single = PgPoolOptions::new().max_connections(1).connect_with(options).await?;
    eprintln!("check statement, {} pairs...", cfg.pairs);
    let check = check_rounds(&single, &creds, cfg.pairs).await?;
    eprintln!(
        "  before sessions {:.1} µs, without {:.1} µs, with {:.1} µs (mean)",
        check[0].mean_us, check[1].mean_us, check[2].mean_us
    );
    eprintln!("EXPLAIN ANALYZE, {} runs each...", cfg.explains);
    let server = explains(&single, &creds, cfg.explains).await?;
    single.close().await;
    eprintln!("HTTP rounds...");
    let http = http_rounds(&db, &creds, cfg).await?;
    db.close().await;
    Ok((check, server, http))
}

fn main() -> anyhow::Result<()> {
    common::run(bench())
}
