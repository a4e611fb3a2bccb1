//! Helpers shared by the benchmarks (`allocation`, `heartbeat`): environment settings, scratch databases,
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
