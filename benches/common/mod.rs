//! Helpers shared by the benchmarks: environment settings, scratch databases, seeding GPUs and funded tenants,
//! a cheap RNG, percentiles, number formatting and the runtime entry point.

#![allow(dead_code)] // each bench uses its own subset

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use sqlx::{AssertSqlSafe, PgConnection};

pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// An environment setting, or `default` when unset or empty. `_` digit separators are allowed.
pub fn env_or<T: FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().replace('_', "").parse().map_err(|_| anyhow::anyhow!("{name}: cannot parse {v:?}"))
        }
        _ => Ok(default),
    }
}

/// One timed request of a load loop: POST `body` as JSON with the bearer token, and the answer's status and body
/// with the time until the body was read. Err names what failed (`send: ...`, `body: ...`), for the caller to
/// count and go on.
pub async fn post_timed(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    body: &impl serde::Serialize,
) -> Result<(u16, axum::body::Bytes, Duration), String> {
    let started = std::time::Instant::now();
    let res = http.post(url).bearer_auth(token).json(body).send().await.map_err(|err| format!("send: {err}"))?;
    let status = res.status().as_u16();
    let bytes = res.bytes().await;
    let elapsed = started.elapsed();
    let bytes = bytes.map_err(|err| format!("body: {err}"))?;
    Ok((status, bytes, elapsed))
}

/// Where a bench writes its page: `BENCH_DOC`, or `default` (relative to the repository) when unset; None when
/// `BENCH_DOC` is empty (CI's short runs, experiments).
pub fn doc_path(default: &str) -> Option<std::path::PathBuf> {
    match std::env::var("BENCH_DOC") {
        Ok(v) if v.is_empty() => None,
        Ok(v) => Some(v.into()),
        Err(_) => Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(default)),
    }
}

/// How many times a bench repeats each case: `BENCH_RUNS`, or `default`. A value that does not parse stops the
/// bench (as every other setting does) rather than run it with the default unsaid.
pub fn runs(default: usize) -> usize {
    env_or("BENCH_RUNS", default).unwrap_or_else(|err| panic!("{err}")).max(1)
}

/// Drop (if present) and create a database, from a connection to the server's default database.
pub async fn recreate_database(admin: &mut PgConnection, name: &str) -> anyhow::Result<()> {
    drop_database(admin, name).await?;
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut *admin).await?;
    Ok(())
}

pub async fn drop_database(admin: &mut PgConnection, name: &str) -> anyhow::Result<()> {
    sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).execute(&mut *admin).await?;
    Ok(())
}

/// A cheap per-task random number generator (xorshift64*).
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
}

/// Nearest-rank percentile of sorted samples, in milliseconds.
pub fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// `1234567` as `1,234,567`.
pub fn with_thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::from(if n < 0 { "-" } else { "" });
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Log the service's warnings and errors (a 500's cause) to stderr (`RUST_LOG` overrides) and run `bench`.
pub fn run<F: Future<Output = anyhow::Result<()>>>(bench: F) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(bench)
}

/// GPU rows `0..per_node` for every node in the database, as their agents would have registered them.
pub async fn seed_gpus(conn: &mut PgConnection, per_node: i32) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO gpus (id, node_id, idx, uuid) \
         SELECT gen_random_uuid(), n.id, g, 'GPU-' || n.hostname || '-' || g \
         FROM nodes n CROSS JOIN generate_series(0, $1 - 1) AS g",
    )
    .bind(per_node)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// `count` tenants (`bench-tenant-N`), each with a prepaid balance far beyond what a run can spend (no lease is
/// refused for money) and a tenant-admin API key; returns the keys.
pub async fn funded_tenants(conn: &mut PgConnection, count: usize) -> anyhow::Result<Vec<String>> {
    use gpuplane::billing::ledger::{EntryKind, NewEntry, append};
    let mut keys = Vec::with_capacity(count);
    for t in 0..count {
        let tenant_id = uuid::Uuid::now_v7();
        sqlx::query("INSERT INTO tenants (id, name) VALUES ($1, $2)")
            .bind(tenant_id)
            .bind(format!("bench-tenant-{t}"))
            .execute(&mut *conn)
            .await?;
        let entry = NewEntry {
            tenant_id,
            kind: EntryKind::Topup,
            amount_minor: 1_000_000_000_000,
            currency: "USD",
            lease_id: None,
            usage_record_id: None,
            period_at: None,
            reason: Some("bench"),
            created_by: "bench",
        };
        append(&mut *conn, entry).await?;
        let role = gpuplane::auth::Role::TenantAdmin;
        keys.push(gpuplane::auth::routes::insert_api_key(&mut *conn, Some(tenant_id), "bench", role).await?.api_key);
    }
    Ok(keys)
}
