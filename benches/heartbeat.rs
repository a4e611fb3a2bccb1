//! Heartbeat ingest benchmark: `cargo bench --bench heartbeat`.
//!
//! It creates a fresh database, migrates it and seeds it with bulk SQL (one pool of N agent-managed H100 nodes
//! with 8 GPUs each), mints one agent credential per node, starts the real service in-process on 127.0.0.1:0,
//! and drives `POST /v1/agent/heartbeat` over HTTP with concurrent clients, each owning a slice of the nodes
//! and posting, node after node, one heartbeat of 8 GPU samples (one per GPU, stamped with the wall clock)
//! as fast as the service answers. After a warm-up it measures for the run's duration: heartbeats/s,
//! GPU samples/s, latency percentiles, and how much the database grew per million samples stored.
//!
//! Environment:
//! * `DATABASE_URL`: the PostgreSQL server to use (any database on it; the bench creates its own beside it).
//!   Default `postgres://postgres@127.0.0.1:5432/postgres`.
//! * `BENCH_SECONDS`: length of the measured run (default 60). `BENCH_WARMUP_SECONDS`: unmeasured load
//!   before it (default 5).
//! * `BENCH_NODES`: simulated nodes, each with 8 GPUs (default 1000).
//! * `BENCH_CLIENTS`: concurrent clients (default 64). `BENCH_DB_CONNECTIONS`: the service's connection pool
//!   size (default 16, the service's own default).
//! * `BENCH_SYNCHRONOUS_COMMIT`: `synchronous_commit` for the bench database only (default: the server's).
//! * `BENCH_RAW_HOURS`: hours of raw samples loaded for the fleet query phase (default 6).
//! * `BENCH_DOC`: where to write the markdown report (default `docs/benchmarks/heartbeat.md`); empty: nowhere.
//! * `BENCH_KEEP_DB`: set to keep the bench database afterwards (to EXPLAIN the queries on the loaded fleet).

#[path = "common/mod.rs"]
mod common;

use common::{DEFAULT_DATABASE_URL, XorShift, drop_database, env_or, percentile_ms, with_thousands};
use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use gpuplane::AppState;
use gpuplane::agent_api::protocol::{GpuSample, HeartbeatRequest, HeartbeatResponse};
use gpuplane::config::{Secret, Settings};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection, PgPool, Row};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const BENCH_DB: &str = "gpuplane_bench_heartbeat";
const GPUS_PER_NODE: i32 = 8;
/// Target from the node-agents issue.
const TARGET_HEARTBEATS_PER_S: f64 = 2000.0;
/// Targets from the telemetry-at-fleet-scale issue (#20).
const TARGET_BYTES_PER_SAMPLE: i64 = 40;
const TARGET_QUERY_P99_MS: f64 = 50.0;
/// Linux's USER_HZ, the unit of utime/stime in /proc/<pid>/stat (100 on every mainstream architecture).
const CLOCK_TICKS_PER_S: f64 = 100.0;

struct Config {
    server_url: String,
    seconds: u64,
    warmup_seconds: u64,
    nodes: usize,
    clients: usize,
    db_connections: u32,
    /// `synchronous_commit` for the bench database (`ALTER DATABASE ... SET`); None: the server's setting.
    synchronous_commit: Option<String>,
    doc: Option<std::path::PathBuf>,
}

impl Config {
    fn from_env() -> anyhow::Result<Self> {
        let doc = common::doc_path("docs/benchmarks/heartbeat.md");
        let cfg = Config {
            server_url: std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_string()),
            seconds: env_or("BENCH_SECONDS", 60u64)?.max(1),
            warmup_seconds: env_or("BENCH_WARMUP_SECONDS", 5u64)?,
            nodes: env_or("BENCH_NODES", 1000usize)?,
            clients: env_or("BENCH_CLIENTS", 64usize)?.max(1),
            db_connections: env_or("BENCH_DB_CONNECTIONS", 16u32)?.max(1),
            synchronous_commit: std::env::var("BENCH_SYNCHRONOUS_COMMIT").ok().filter(|v| !v.trim().is_empty()),
            doc,
        };
        if let Some(v) = &cfg.synchronous_commit
            && !["on", "off", "local", "remote_write", "remote_apply"].contains(&v.as_str())
        {
            bail!("BENCH_SYNCHRONOUS_COMMIT: on, off, local, remote_write or remote_apply");
        }
        if cfg.nodes < 1 {
            bail!("BENCH_NODES: must be positive");
        }
        Ok(cfg)
    }

    /// The same server, another database.
    fn options(&self, database: &str) -> anyhow::Result<PgConnectOptions> {
        Ok(PgConnectOptions::from_str(&self.server_url).context("DATABASE_URL")?.database(database))
    }
}

/// One pool of H100 nodes, `nodes` x 8 GPUs, each node registered by an agent (generation 1, ready, just
/// heard from). Returns the node ids.
async fn seed(db: &PgPool, nodes: usize) -> anyhow::Result<Vec<Uuid>> {
    let mut conn = db.acquire().await?;
    let pool_id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency) \
         VALUES ($1, 'h100-bench', 'h100', 'bench', 249, 'USD')",
    )
    .bind(pool_id)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO nodes (id, pool_id, hostname, address, admin_state, liveness, intra_link, intra_link_gbps, \
             network_gbps, rdma, free_gpus, gpu_count, agent_managed, agent_generation, last_heartbeat_at) \
         SELECT gen_random_uuid(), $1, 'bench-node-' || i, \
             '10.' || (i / 65536) || '.' || (i / 256 % 256) || '.' || (i % 256), \
             'active', 'ready', 'nvlink', 900, 400, true, $3, $3, true, 1, now() \
         FROM generate_series(1, $2::bigint) AS i",
    )
    .bind(pool_id)
    .bind(nodes as i64)
    .bind(GPUS_PER_NODE)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO gpus (id, node_id, idx, uuid, name, memory_bytes) \
         SELECT gen_random_uuid(), n.id, g, 'GPU-' || n.hostname || '-' || g, 'NVIDIA H100 80GB HBM3', 85520809984 \
         FROM nodes n CROSS JOIN generate_series(0, $1 - 1) AS g",
    )
    .bind(GPUS_PER_NODE)
    .execute(&mut *conn)
    .await?;
    sqlx::query("ANALYZE").execute(&mut *conn).await?;
    let ids: Vec<(Uuid,)> = sqlx::query_as("SELECT id FROM nodes ORDER BY hostname").fetch_all(&mut *conn).await?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}

/// One simulated node: its credential and what its next heartbeat carries.
struct SimNode {
    token: String,
    /// Timestamp of its previous samples, microseconds since the epoch: the next is strictly later, so every
    /// (GPU, at) is new even when one node sends twice within a microsecond of wall time.
    last_at_us: i64,
    /// Per-GPU energy counters (millijoules since driver load).
    energy_mj: [i64; GPUS_PER_NODE as usize],
}

impl SimNode {
    fn heartbeat(&mut self, rng: &mut XorShift) -> HeartbeatRequest {
        let at_us = Utc::now().timestamp_micros().max(self.last_at_us + 1);
        self.last_at_us = at_us;
        let at: DateTime<Utc> = DateTime::from_timestamp_micros(at_us).unwrap_or_default();
        let samples = (0..GPUS_PER_NODE)
            .map(|index| {
                let util = rng.range(60.0, 100.0);
                let power_w = 250.0 + 4.5 * util + rng.range(-20.0, 20.0);
                let energy = &mut self.energy_mj[index as usize];
                *energy += (power_w * 500.0) as i64;
                let fb_used_mib = 40_000 + (rng.next() % 30_000) as i64;
                GpuSample {
                    gpu_index: index,
                    at,
                    gpu_util: util,
                    mem_copy_util: rng.range(10.0, 60.0),
                    fb_used_mib,
                    fb_free_mib: 81_559 - fb_used_mib,
                    power_w,
                    energy_mj: *energy,
                    gpu_temp_c: rng.range(55.0, 80.0),
                    mem_temp_c: Some(rng.range(60.0, 85.0)),
                    sm_clock_mhz: 1755 + (rng.next() % 226) as i32,
                    nvlink_bandwidth_gbps: Some(rng.range(50.0, 400.0)),
                    xid_count: 0,
                    xid_codes: Vec::new(),
                }
            })
            .collect();
        HeartbeatRequest {
            echo_port: None,
            samples,
            driver_version: None,
            cuda_version: None,
            latency: Vec::new(),
            steps: Vec::new(),
            launchers: None,
            volume_stores: Vec::new(),
            volumes: Vec::new(),
            cached_models: None,
            serving: Vec::new(),
            progress: Vec::new(),
        }
    }
}

#[derive(Default)]
struct ClientStats {
    latencies: Vec<Duration>,
    accepted_samples: u64,
    errors: u64,
    first_error: Option<String>,
}

impl ClientStats {
    fn error(&mut self, what: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }

    fn merge(&mut self, other: ClientStats) {
        self.latencies.extend(other.latencies);
        self.accepted_samples += other.accepted_samples;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// Post heartbeats for `nodes`, round-robin, until `deadline`. Gives the nodes back for the next run.
async fn client_loop(
    http: reqwest::Client,
    url: Arc<str>,
    mut nodes: Vec<SimNode>,
    seed: u64,
    deadline: Instant,
) -> (Vec<SimNode>, ClientStats) {
    let mut rng = XorShift::new(seed);
    let mut stats = ClientStats::default();
    if nodes.is_empty() {
        return (nodes, stats);
    }
    let mut next = 0;
    while Instant::now() < deadline {
        let count = nodes.len();
        let node = &mut nodes[next];
        next = (next + 1) % count;
        let body = node.heartbeat(&mut rng);
        let (status, bytes, elapsed) = match common::post_timed(&http, &url, &node.token, &body).await {
            Ok(answer) => answer,
            Err(err) => {
                stats.error(err);
                continue;
            }
        };
        if status != 200 {
            stats.error(format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes)));
            continue;
        }
        match serde_json::from_slice::<HeartbeatResponse>(&bytes) {
            Ok(answer) => {
                stats.latencies.push(elapsed);
                stats.accepted_samples += answer.accepted_samples;
            }
            Err(err) => stats.error(format!("unreadable answer: {err}")),
        }
    }
    (nodes, stats)
}

/// Run the clients for `seconds` over the nodes (split evenly, round-robin) and gather their figures.
async fn drive(
    cfg: &Config,
    http: &reqwest::Client,
    url: &Arc<str>,
    nodes: Vec<SimNode>,
    seconds: u64,
    seed: u64,
) -> anyhow::Result<(Vec<SimNode>, ClientStats)> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let clients = cfg.clients.min(nodes.len());
    let mut slices: Vec<Vec<SimNode>> = (0..clients).map(|_| Vec::new()).collect();
    for (i, node) in nodes.into_iter().enumerate() {
        slices[i % clients].push(node);
    }
    let tasks: Vec<_> = slices
        .into_iter()
        .enumerate()
        .map(|(i, slice)| {
            tokio::spawn(client_loop(http.clone(), url.clone(), slice, seed * 1_000_003 + i as u64 + 1, deadline))
        })
        .collect();
    let mut all = ClientStats::default();
    let mut nodes = Vec::with_capacity(cfg.nodes);
    for task in tasks {
        let (slice, stats) = task.await?;
        nodes.extend(slice);
        all.merge(stats);
    }
    Ok((nodes, all))
}

/// Sizes and counters of the bench database at one instant.
struct DbSnapshot {
    rows: i64,
    samples_total: i64,
    samples_heap: i64,
    samples_indexes: i64,
    database: i64,
    nodes_total: i64,
    wal_lsn: i64,
    /// Updates of `nodes` rows so far, and how many were HOT (no index entries written).
    nodes_updates: i64,
    nodes_hot_updates: i64,
}

async fn snapshot(db: &PgPool) -> anyhow::Result<DbSnapshot> {
    // Raw telemetry is partitioned: sizes are the sums over its partitions.
    let row = sqlx::query(
        "WITH parts AS (SELECT inhrelid AS rel FROM pg_inherits WHERE inhparent = 'telemetry_raw'::regclass) \
         SELECT (SELECT COALESCE(sum(length(samples)), 0)::bigint / $1 FROM telemetry_raw), \
             (SELECT COALESCE(sum(pg_total_relation_size(rel)), 0)::bigint FROM parts), \
             (SELECT COALESCE(sum(pg_table_size(rel)), 0)::bigint FROM parts), \
             (SELECT COALESCE(sum(pg_indexes_size(rel)), 0)::bigint FROM parts), pg_database_size(current_database()), \
             pg_total_relation_size('nodes'), (pg_current_wal_lsn() - '0/0')::bigint, \
             (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = 'nodes'::regclass), \
             (SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'nodes'::regclass)",
    )
    .bind(RECORD_LEN)
    .fetch_one(db)
    .await?;
    Ok(DbSnapshot {
        rows: row.try_get(0)?,
        samples_total: row.try_get(1)?,
        samples_heap: row.try_get(2)?,
        samples_indexes: row.try_get(3)?,
        database: row.try_get(4)?,
        nodes_total: row.try_get(5)?,
        wal_lsn: row.try_get(6)?,
        nodes_updates: row.try_get::<Option<i64>, _>(7)?.unwrap_or(0),
        nodes_hot_updates: row.try_get::<Option<i64>, _>(8)?.unwrap_or(0),
    })
}

/// CPU seconds (user + system) used so far by this process (the service and the load generator) and by all
/// processes named `postgres` (the server's backends and helpers; only readable when it runs on this machine).
/// Also the whole machine's busy and iowait CPU seconds (/proc/stat), to tell other load on the machine apart.
fn cpu_seconds() -> CpuTimes {
    fn ticks(stat: &str) -> Option<u64> {
        // The command name is in parentheses and may contain spaces: fields count from after the last ')'.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after pid and comm.
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    }
    let own = std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| ticks(&s)).unwrap_or(0);
    let mut postgres = None;
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            if stat.contains("(postgres)")
                && let Some(t) = ticks(&stat)
            {
                *postgres.get_or_insert(0u64) += t;
            }
        }
    }
    let machine = std::fs::read_to_string("/proc/stat").ok().and_then(|stat| {
        let line = stat.lines().next()?;
        let v: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().unwrap_or(0)).collect();
        // user nice system idle iowait irq softirq steal
        let busy = v.first()? + v.get(1)? + v.get(2)? + v.get(5)? + v.get(6)? + v.get(7).unwrap_or(&0);
        Some((busy as f64 / CLOCK_TICKS_PER_S, *v.get(4)? as f64 / CLOCK_TICKS_PER_S))
    });
    CpuTimes {
        own: own as f64 / CLOCK_TICKS_PER_S,
        postgres: postgres.map(|t| t as f64 / CLOCK_TICKS_PER_S),
        machine_busy: machine.map(|m| m.0),
        machine_iowait: machine.map(|m| m.1),
    }
}

#[derive(Clone, Copy)]
struct CpuTimes {
    own: f64,
    postgres: Option<f64>,
    machine_busy: Option<f64>,
    machine_iowait: Option<f64>,
}

impl CpuTimes {
    fn since(self, earlier: CpuTimes) -> CpuTimes {
        let sub = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
        CpuTimes {
            own: self.own - earlier.own,
            postgres: sub(self.postgres, earlier.postgres),
            machine_busy: sub(self.machine_busy, earlier.machine_busy),
            machine_iowait: sub(self.machine_iowait, earlier.machine_iowait),
        }
    }
}

struct BenchResult {
    seconds: f64,
    heartbeats: u64,
    accepted_samples: u64,
    errors: u64,
    first_error: Option<String>,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    rows_stored: i64,
    before: DbSnapshot,
    after: DbSnapshot,
    /// CPU seconds over the measured run.
    cpu: CpuTimes,
    retention: RetentionResult,
    fleet: FleetResult,
}

impl BenchResult {
    fn heartbeats_per_s(&self) -> f64 {
        self.heartbeats as f64 / self.seconds
    }
    fn bytes_per_sample(&self) -> f64 {
        (self.after.samples_total - self.before.samples_total) as f64 / self.rows_stored.max(1) as f64
    }
    fn samples_per_s(&self) -> f64 {
        self.accepted_samples as f64 / self.seconds
    }
    /// Growth in MB (10^6 bytes) per million rows stored during the measured run.
    fn per_million(&self, delta: i64) -> f64 {
        if self.rows_stored <= 0 { f64::NAN } else { delta as f64 / self.rows_stored as f64 }
    }
}

async fn run(cfg: &Config, admin: &mut PgConnection) -> anyhow::Result<BenchResult> {
    drop_database(admin, BENCH_DB).await?;
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {BENCH_DB}"))).execute(&mut *admin).await?;
    if let Some(v) = &cfg.synchronous_commit {
        // Checked against the list of valid values in Config::from_env.
        sqlx::query(AssertSqlSafe(format!("ALTER DATABASE {BENCH_DB} SET synchronous_commit = {v}")))
            .execute(&mut *admin)
            .await?;
    }
    let db = PgPoolOptions::new()
        .max_connections(cfg.db_connections)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(cfg.options(BENCH_DB)?)
        .await
        .context("connecting to the bench database")?;
    gpuplane::db::MIGRATOR.run(&db).await?;
    let seeding = Instant::now();
    let node_ids = seed(&db, cfg.nodes).await?;
    eprintln!("  seeded {} nodes x {GPUS_PER_NODE} GPUs in {:.1} s", cfg.nodes, seeding.elapsed().as_secs_f64());

    let settings = Settings::new(Secret::new("heartbeat-bench-secret-0123456789abcdefghijklmnop"));
    let state = AppState::new(db.clone(), settings)?;
    let start_us = Utc::now().timestamp_micros();
    let nodes = node_ids
        .iter()
        .map(|&id| {
            Ok(SimNode {
                token: state.tokens.issue_agent(id, 1)?,
                last_at_us: start_us,
                energy_mj: [1_000_000_000; GPUS_PER_NODE as usize],
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let url: Arc<str> = format!("{base}/v1/agent/heartbeat").into();
    let state_for_queries = state.clone();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(gpuplane::app::run(listener, state, shutdown.clone()));

    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(cfg.clients)
        .timeout(Duration::from_secs(60))
        .build()?;

    // Warm-up: the same load, not measured (fills the service's GPU-map cache, opens the connections).
    let mut nodes = nodes;
    if cfg.warmup_seconds > 0 {
        let (back, warmup) = drive(cfg, &http, &url, nodes, cfg.warmup_seconds, 1).await?;
        nodes = back;
        eprintln!(
            "  warm-up: {:.0} heartbeats/s, {} errors{}",
            warmup.latencies.len() as f64 / cfg.warmup_seconds as f64,
            warmup.errors,
            warmup.first_error.map(|e| format!("; first: {e}")).unwrap_or_default()
        );
    }

    let before = snapshot(&db).await?;
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let (nodes, mut all) = drive(cfg, &http, &url, nodes, cfg.seconds, 2).await?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds().since(cpu_before);
    let after = snapshot(&db).await?;

    let retention = retention_under_ingest(cfg, &db, &http, &url, nodes).await?;
    let fleet = fleet_queries(cfg, &db, &state_for_queries, &http, &base).await?;

    shutdown.cancel();
    server.await??;
    db.close().await;

    all.latencies.sort_unstable();
    Ok(BenchResult {
        seconds,
        heartbeats: all.latencies.len() as u64,
        accepted_samples: all.accepted_samples,
        errors: all.errors,
        first_error: all.first_error,
        p50: percentile_ms(&all.latencies, 50.0),
        p90: percentile_ms(&all.latencies, 90.0),
        p99: percentile_ms(&all.latencies, 99.0),
        max: all.latencies.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0),
        rows_stored: after.rows - before.rows,
        cpu,
        retention,
        fleet,
        before,
        after,
    })
}

/// Dropping an expired day of raw samples while the clients keep posting heartbeats.
struct RetentionResult {
    /// Size of the expired day's partition (table and indexes) before the drop.
    partition_bytes: i64,
    partition_samples: i64,
    dropped: usize,
    drop_seconds: f64,
    heartbeats: u64,
    errors: u64,
    p99: f64,
    max: f64,
}

const RETENTION_PHASE_S: u64 = 8;

/// Bytes per GPU in a raw row, as a bind parameter.
const RECORD_LEN: i32 = gpuplane::agent_api::codec::RECORD_LEN as i32;

/// One node's 8 GPUs at one instant, packed as the heartbeat path packs them (utilization `util`, the other
/// fields plausible constants), for the bulk loads.
fn packed_node(util: f32) -> Vec<u8> {
    let sample = GpuSample {
        gpu_index: 0,
        at: Utc::now(),
        gpu_util: util,
        mem_copy_util: 30.0,
        fb_used_mib: 50_000,
        fb_free_mib: 31_559,
        power_w: 600.0,
        energy_mj: 1_000_000_000,
        gpu_temp_c: 65.0,
        mem_temp_c: Some(70.0),
        sm_clock_mhz: 1800,
        nvlink_bandwidth_gbps: Some(200.0),
        xid_count: 0,
        xid_codes: Vec::new(),
    };
    gpuplane::agent_api::codec::encode_instant(&mut (0..GPUS_PER_NODE).map(|g| (g, &sample)).collect::<Vec<_>>())
}

/// Fill the raw partition of three days ago (one hour of every node's samples: the drop costs the same for a
/// full day, it unlinks files), then run the clients for a few seconds and drop it half way through.
async fn retention_under_ingest(
    cfg: &Config,
    db: &PgPool,
    http: &reqwest::Client,
    url: &Arc<str>,
    nodes: Vec<SimNode>,
) -> anyhow::Result<RetentionResult> {
    let settings = Settings::new(Secret::new("heartbeat-bench-secret-0123456789abcdefghijklmnop"));
    let old_day = (Utc::now() - chrono::Duration::days(3)).date_naive();
    let name = format!("telemetry_raw_p{}", old_day.format("%Y%m%d"));
    // Only this one partition is expired: the drop measured is one day's.
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE {name} PARTITION OF telemetry_raw FOR VALUES FROM ('{old_day}T00:00:00Z') TO ('{}T00:00:00Z')",
        old_day + chrono::Duration::days(1)
    )))
    .execute(db)
    .await?;
    sqlx::query(
        "INSERT INTO telemetry_raw (node_key, at, samples) \
         SELECT n.telemetry_key, ($1::date::timestamp AT TIME ZONE 'UTC') + make_interval(hours => 12, secs => 10 * k), \
             $2 \
         FROM nodes n CROSS JOIN generate_series(0, 359) AS k WHERE n.agent_managed",
    )
    .bind(old_day)
    .bind(packed_node(80.0))
    .execute(db)
    .await?;
    let (partition_bytes, partition_samples): (i64, i64) = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT pg_total_relation_size('{name}'), (SELECT COALESCE(sum(length(samples)), 0)::bigint / $1 FROM {name})"
    )))
    .bind(RECORD_LEN)
    .fetch_one(db)
    .await?;
    let dropper = {
        let db = db.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(RETENTION_PHASE_S / 2)).await;
            let started = Instant::now();
            let dropped = gpuplane::agent_api::rollups::drop_expired_partitions(&db, &settings, Utc::now()).await;
            (dropped, started.elapsed().as_secs_f64())
        })
    };
    let (_nodes, mut stats) = drive(cfg, http, url, nodes, RETENTION_PHASE_S, 3).await?;
    let (dropped, drop_seconds) = dropper.await?;
    let dropped = dropped?;
    if !dropped.contains(&name) {
        bail!("{name} was not dropped: {dropped:?}");
    }
    stats.latencies.sort_unstable();
    Ok(RetentionResult {
        partition_bytes,
        partition_samples,
        dropped: dropped.len(),
        drop_seconds,
        heartbeats: stats.latencies.len() as u64,
        errors: stats.errors,
        p99: percentile_ms(&stats.latencies, 99.0),
        max: stats.latencies.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0),
    })
}

/// The read side at fleet scale: latency of the telemetry endpoints with 10,000 GPUs of history loaded.
struct FleetResult {
    gpus: i64,
    pools: i64,
    load_seconds: f64,
    raw_hours: i64,
    raw_samples: i64,
    hour_rows: i64,
    /// (what, p50, p99, max, slowest first call on a pooled connection) in ms.
    queries: Vec<(&'static str, f64, f64, f64, f64)>,
}

const FLEET_POOLS: i64 = 10;
const FLEET_NODES_PER_POOL: i64 = 125;
const QUERY_ROUNDS: usize = 200;

/// Load a fleet of 10 pools x 125 nodes x 8 GPUs with hourly rollups for 7 days and raw samples (every 10 s)
/// for the last `BENCH_RAW_HOURS` (default 6), with bulk SQL; then time the lease (last 5 minutes), node (last
/// hour) and pool (last 30 days) telemetry endpoints over HTTP, one request at a time.
async fn fleet_queries(
    cfg: &Config,
    db: &PgPool,
    state: &AppState,
    http: &reqwest::Client,
    base: &str,
) -> anyhow::Result<FleetResult> {
    let raw_hours: i64 = env_or("BENCH_RAW_HOURS", 6i64)?.clamp(1, 24);
    let loading = Instant::now();
    let mut tx = db.begin().await?;
    sqlx::query(
        "INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency) \
         SELECT gen_random_uuid(), 'fleet-' || p, 'h100', 'bench', 249, 'USD' FROM generate_series(1, $1) p",
    )
    .bind(FLEET_POOLS)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO nodes (id, pool_id, hostname, address, admin_state, liveness, intra_link, intra_link_gbps, \
             network_gbps, rdma, free_gpus, gpu_count, agent_managed, agent_generation) \
         SELECT gen_random_uuid(), p.id, p.name || '-node-' || i, p.name || '-' || i, 'active', 'ready', 'nvlink', 900, \
             400, true, 8, 8, true, 0 \
         FROM pools p CROSS JOIN generate_series(1, $1) AS i WHERE p.name LIKE 'fleet-%'",
    )
    .bind(FLEET_NODES_PER_POOL)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO gpus (id, node_id, idx, uuid, name, memory_bytes) \
         SELECT gen_random_uuid(), n.id, g, 'GPU-' || n.hostname || '-' || g, 'NVIDIA H100 80GB HBM3', 85520809984 \
         FROM nodes n CROSS JOIN generate_series(0, 7) AS g WHERE n.hostname LIKE 'fleet-%'",
    )
    .execute(&mut *tx)
    .await?;
    // The week of hours reaches into last month in a month's first week: its partition may not exist yet (the
    // migrations make the months around the day they ran, the sweeper the ones ahead).
    sqlx::query(
        "DO $$ DECLARE m date; BEGIN \
             FOR m IN SELECT generate_series(date_trunc('month', now() - interval '7 days'), date_trunc('month', now()), \
                 interval '1 month')::date LOOP \
                 EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF node_hours FOR VALUES FROM (%L) TO (%L)', \
                     'node_hours_p' || to_char(m, 'YYYYMM'), m::timestamp AT TIME ZONE 'UTC', \
                     (m + interval '1 month')::timestamp AT TIME ZONE 'UTC'); \
             END LOOP; END $$",
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO node_hours (node_id, hour, pool_id, samples, gpu_util_sum, gpu_util_max, mem_copy_sum, \
             fb_used_max, power_sum, power_max, xid_count, energy_j) \
         SELECT n.id, h, n.pool_id, 2880, 2880 * (60 + random() * 30), 100, 2880 * 30.0, 60000, 2880 * 600.0, 700, 0, \
             8 * 3600 * 600 \
         FROM nodes n CROSS JOIN generate_series(date_trunc('hour', now() - interval '7 days'), \
             date_trunc('hour', now()) - interval '1 hour', interval '1 hour') AS h \
         WHERE n.hostname LIKE 'fleet-%'",
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO telemetry_raw (node_key, at, samples) \
         SELECT n.telemetry_key, date_trunc('second', now()) - make_interval(secs => 10 * k), \
             set_byte(set_byte($2, 1, (120 + k % 60)::int), $3 + 1, (120 + (k * 7) % 60)::int) \
         FROM nodes n CROSS JOIN generate_series(1, $1 * 360) AS k WHERE n.hostname LIKE 'fleet-%'",
    )
    .bind(raw_hours)
    .bind(packed_node(60.0))
    .bind(RECORD_LEN)
    .execute(&mut *tx)
    .await?;
    let operator_key = Uuid::now_v7();
    let tenant_id = Uuid::now_v7();
    let tenant_key = Uuid::now_v7();
    sqlx::query("INSERT INTO tenants (id, name) VALUES ($1, 'fleet-bench')").bind(tenant_id).execute(&mut *tx).await?;
    sqlx::query(
        "INSERT INTO api_keys (id, tenant_id, role, name, prefix, secret_hash) \
         VALUES ($1, NULL, 'operator', 'bench', 'b1', 'x1'), ($2, $3, 'tenant_admin', 'bench', 'b2', 'x2')",
    )
    .bind(operator_key)
    .bind(tenant_key)
    .bind(tenant_id)
    .execute(&mut *tx)
    .await?;
    // One lease of a whole node for a month.
    let (lease_id, node_id, pool_id): (Uuid, Uuid, Uuid) = sqlx::query_as(
        "WITH n AS (SELECT id, pool_id FROM nodes WHERE hostname = 'fleet-1-node-1'), \
         l AS (INSERT INTO leases (id, tenant_id, pool_id, gpu_count, placement, term, state, duration_hours, \
                   starts_at, ends_at, gpu_ids) \
               SELECT gen_random_uuid(), $1, n.pool_id, 8, 'pack', 'hourly', 'active', 720, now() - interval '1 day', \
                   now() + interval '29 days', ARRAY(SELECT id FROM gpus WHERE node_id = n.id) FROM n RETURNING id, gpu_ids), \
         g AS (UPDATE gpus SET held_by = l.id FROM l WHERE gpus.id = ANY(l.gpu_ids)) \
         SELECT l.id, n.id, n.pool_id FROM l, n",
    )
    .bind(tenant_id)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    // What autovacuum does to closed hours on a running service (it is off on the bench machine): mark the
    // pages all-visible, so the pool query is an index-only scan.
    sqlx::query("VACUUM (ANALYZE) node_hours").execute(db).await?;
    sqlx::query("ANALYZE").execute(db).await?;
    let load_seconds = loading.elapsed().as_secs_f64();
    let (gpus, raw_samples, hour_rows): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.hostname LIKE 'fleet-%'), \
             (SELECT COALESCE(sum(length(r.samples)), 0)::bigint / $1 FROM telemetry_raw r \
                 JOIN nodes n ON n.telemetry_key = r.node_key WHERE n.hostname LIKE 'fleet-%'), \
             (SELECT count(*) FROM node_hours)",
    )
    .bind(RECORD_LEN)
    .fetch_one(db)
    .await?;
    eprintln!("  fleet: {gpus} GPUs loaded in {load_seconds:.1} s ({raw_samples} raw samples, {hour_rows} hour rows)");

    let operator = state.tokens.issue(operator_key, None, gpuplane::auth::Role::Operator)?;
    let tenant = state.tokens.issue(tenant_key, Some(tenant_id), gpuplane::auth::Role::TenantAdmin)?;
    let ago = |d: chrono::Duration| (Utc::now() - d).to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    // Each request holds up to two pooled connections (the key check, then the handler's), and the pool hands
    // out its idle connections in turn: the first two rounds of the pool reach every connection while its
    // backend has not yet loaded the catalog entries and parsed the statements of this endpoint. Those first
    // calls are reported apart: a running service pays them once per connection (at most every
    // `max_lifetime`), not once per 100 requests, which is what folding 2 x 16 of 200 calls into the p99 said.
    let first_calls = 2 * cfg.db_connections as usize;
    let mut queries = Vec::new();
    for what in ["lease, last 5 minutes", "node, last hour", "pool, last 30 days"] {
        let mut latencies = Vec::with_capacity(QUERY_ROUNDS);
        let mut first = Vec::with_capacity(first_calls);
        for round in 0..first_calls + QUERY_ROUNDS {
            let (path, token) = match what {
                "lease, last 5 minutes" => (
                    format!("/v1/leases/{lease_id}/telemetry?from={}&step_s=10", ago(chrono::Duration::minutes(5))),
                    &tenant,
                ),
                "node, last hour" => (format!("/v1/admin/nodes/{node_id}/telemetry"), &operator),
                _ => (
                    format!(
                        "/v1/admin/pools/{pool_id}/utilization?from={}&step_s=86400",
                        ago(chrono::Duration::days(30))
                    ),
                    &operator,
                ),
            };
            let started = Instant::now();
            let res = http.get(format!("{base}{path}")).bearer_auth(token).send().await?;
            let status = res.status();
            let body = res.bytes().await?;
            if round < first_calls {
                first.push(started.elapsed())
            } else {
                latencies.push(started.elapsed())
            }
            if !status.is_success() {
                bail!("{what}: HTTP {status}: {}", String::from_utf8_lossy(&body));
            }
        }
        latencies.sort_unstable();
        queries.push((
            what,
            percentile_ms(&latencies, 50.0),
            percentile_ms(&latencies, 99.0),
            latencies.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0),
            first.iter().max().map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0),
        ));
    }
    Ok(FleetResult { gpus, pools: FLEET_POOLS, load_seconds, raw_hours, raw_samples, hour_rows, queries })
}

fn mb(bytes: i64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// The results table (markdown).
fn table(cfg: &Config, r: &BenchResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| figure | value |");
    let _ = writeln!(out, "|---|---:|");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(out, "| {k} | {v} |");
    };
    row("simulated nodes x GPUs", format!("{} x {GPUS_PER_NODE}", with_thousands(cfg.nodes as i64)));
    row("measured run", format!("{:.1} s", r.seconds));
    row("**heartbeats/s**", format!("**{}**", with_thousands(r.heartbeats_per_s().round() as i64)));
    row("**GPU samples/s**", format!("**{}**", with_thousands(r.samples_per_s().round() as i64)));
    row("latency p50", format!("{:.1} ms", r.p50));
    row("latency p90", format!("{:.1} ms", r.p90));
    row("**latency p99**", format!("**{:.1} ms**", r.p99));
    row("latency max", format!("{:.1} ms", r.max));
    row("heartbeats (HTTP 200)", with_thousands(r.heartbeats as i64));
    row("errors", with_thousands(r.errors as i64));
    row("samples accepted (per the answers)", with_thousands(r.accepted_samples as i64));
    row("GPU samples stored in telemetry_raw (delta)", with_thousands(r.rows_stored));
    let samples_delta = r.after.samples_total - r.before.samples_total;
    row(
        "**raw telemetry growth per million GPU samples** (table + indexes)",
        format!(
            "**{:.0} MB** ({:.0} bytes/sample)",
            r.per_million(samples_delta),
            samples_delta as f64 / r.rows_stored.max(1) as f64
        ),
    );
    row("of which table (heap)", format!("{:.0} MB", r.per_million(r.after.samples_heap - r.before.samples_heap)));
    row(
        "of which indexes (primary key, BRIN)",
        format!("{:.0} MB", r.per_million(r.after.samples_indexes - r.before.samples_indexes)),
    );
    row(
        "whole database growth per million samples",
        format!("{:.0} MB", r.per_million(r.after.database - r.before.database)),
    );
    row("nodes table growth during the run", mb(r.after.nodes_total - r.before.nodes_total));
    let updates = r.after.nodes_updates - r.before.nodes_updates;
    let hot = r.after.nodes_hot_updates - r.before.nodes_hot_updates;
    row(
        "nodes row updates that were HOT",
        if updates > 0 {
            format!("{:.0}% of {}", 100.0 * hot as f64 / updates as f64, with_thousands(updates))
        } else {
            "-".into()
        },
    );
    row("WAL written per million samples", format!("{:.0} MB", r.per_million(r.after.wal_lsn - r.before.wal_lsn)));
    let cores = |secs: Option<f64>| secs.map_or_else(|| "-".into(), |s| format!("{:.2} cores", s / r.seconds));
    row("CPU: service + load generator (this process)", cores(Some(r.cpu.own)));
    row("CPU: PostgreSQL (all `postgres` processes)", cores(r.cpu.postgres));
    row(
        "CPU: anything else on the machine",
        cores(r.cpu.machine_busy.map(|busy| (busy - r.cpu.own - r.cpu.postgres.unwrap_or(0.0)).max(0.0))),
    );
    row("CPU: idle waiting for I/O (iowait)", cores(r.cpu.machine_iowait));
    let t = &r.retention;
    row(
        "expired raw partition dropped under ingest",
        format!(
            "**{:.0} ms** ({} GPU samples, {}; {} partitions in all)",
            t.drop_seconds * 1000.0,
            with_thousands(t.partition_samples),
            mb(t.partition_bytes),
            t.dropped
        ),
    );
    row(
        "heartbeats during that phase",
        format!(
            "{} in {RETENTION_PHASE_S} s, {} errors, p99 {:.1} ms, max {:.1} ms",
            with_thousands(t.heartbeats as i64),
            t.errors,
            t.p99,
            t.max
        ),
    );
    let f = &r.fleet;
    row(
        "fleet loaded for the queries",
        format!(
            "{} GPUs in {} pools: {} raw samples ({} h), {} hourly rows (7 days); {:.0} s",
            with_thousands(f.gpus),
            f.pools,
            with_thousands(f.raw_samples),
            f.raw_hours,
            with_thousands(f.hour_rows),
            f.load_seconds
        ),
    );
    for (what, p50, p99, max, first) in &f.queries {
        row(
            &format!("**{what}** p50 / **p99** / max (first call on a connection)"),
            format!("{p50:.1} / **{p99:.1}** / {max:.1} ms ({first:.1} ms)"),
        );
    }
    out
}

fn verdict(r: &BenchResult) -> String {
    let hb = r.heartbeats_per_s();
    format!(
        "- Throughput target (>= {:.0} heartbeats/s, {:.0} GPU samples/s): {} heartbeats/s, {} samples/s -- {}\n",
        TARGET_HEARTBEATS_PER_S,
        TARGET_HEARTBEATS_PER_S * GPUS_PER_NODE as f64,
        with_thousands(hb.round() as i64),
        with_thousands(r.samples_per_s().round() as i64),
        if hb >= TARGET_HEARTBEATS_PER_S && r.errors == 0 { "met" } else { "NOT met" }
    ) + &format!(
        "- Size target (<= {TARGET_BYTES_PER_SAMPLE} bytes per GPU sample, heap + indexes): {:.1} bytes -- {}\n\
         - Query target (p99 < {TARGET_QUERY_P99_MS} ms each): {} -- {}\n\
         - Retention target (a day's partition dropped in < 1 s without blocking ingest): {:.0} ms, {} errors, \
         heartbeat max {:.0} ms -- {}\n",
        r.bytes_per_sample(),
        if r.bytes_per_sample() <= TARGET_BYTES_PER_SAMPLE as f64 { "met" } else { "NOT met" },
        r.fleet.queries.iter().map(|q| format!("{:.1} ms", q.2)).collect::<Vec<_>>().join(", "),
        if r.fleet.queries.iter().all(|q| q.2 < TARGET_QUERY_P99_MS) { "met" } else { "NOT met" },
        r.retention.drop_seconds * 1000.0,
        r.retention.errors,
        r.retention.max,
        if r.retention.drop_seconds < 1.0 && r.retention.errors == 0 { "met" } else { "NOT met" },
    )
}

struct Environment {
    cores: usize,
    postgres: String,
    synchronous_commit: String,
    shared_buffers: String,
}

fn document(cfg: &Config, env: &Environment, r: &BenchResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Heartbeat ingest benchmark\n");
    let _ = writeln!(
        out,
        "Generated by `cargo bench --bench heartbeat` (source: `benches/heartbeat.rs`); rerun it to refresh this page.\n"
    );
    let _ = writeln!(out, "## Results\n");
    let _ = writeln!(
        out,
        "{} s measured after {} s of warm-up; {} simulated nodes x {GPUS_PER_NODE} GPUs; {} concurrent clients; \
         service pool of {} PostgreSQL connections.\n",
        cfg.seconds,
        cfg.warmup_seconds,
        with_thousands(cfg.nodes as i64),
        cfg.clients,
        cfg.db_connections
    );
    out.push_str(&table(cfg, r));
    out.push('\n');
    out.push_str(&verdict(r));
    out.push_str(
        "\nBefore issue #20 (one `gpu_samples` row per GPU sample, three b-tree indexes, retention by DELETE), the \
         same bench on the same machine measured 2,937 heartbeats/s, p99 33.4 ms, 210 bytes per GPU sample \
         (134 heap + 76 in three indexes) and 525 MB of WAL per million samples. The first round of #20 (one \
         `telemetry_raw` row per node per instant keyed by the node's uuid, the GPUs' values in two 2-D \
         smallint/integer arrays; migration 0011) measured 2,191 heartbeats/s, p99 47.0 ms, 56 bytes per GPU \
         sample (49 heap + 7 indexes), 99 MB of WAL per million samples, and query p99s of 54.0 ms (lease, last \
         5 minutes: its first calls on each pooled connection were folded in), 24.4 ms (node, last hour) and \
         20.1 ms (pool, last 30 days).\n",
    );
    let _ = writeln!(out, "\n## Machine\n");
    let _ = writeln!(
        out,
        "{} CPU cores, shared by PostgreSQL, the service and the load generator (all on one machine, talking over \
         loopback). {} with synchronous_commit = {} (`SHOW synchronous_commit`; every heartbeat is a committed \
         transaction that waits for its WAL flush), shared_buffers = {}, default settings otherwise.\n",
        env.cores, env.postgres, env.synchronous_commit, env.shared_buffers
    );
    let _ = writeln!(out, "## What is measured\n");
    out.push_str(
        "The bench creates a fresh database `gpuplane_bench_heartbeat`, migrates it, and seeds one pool of H100 \
nodes with 8 GPUs each, as an agent would have registered them (agent-managed, credential generation 1, ready). \
It mints one agent credential per node, starts the real service in-process (the full router and middleware, \
bound to 127.0.0.1:0; the liveness and lease sweepers are not started) and runs the clients over HTTP/1.1 \
keep-alive connections. The nodes are dealt round-robin to the clients; each client loops over its nodes and \
posts, for each in turn, `POST /v1/agent/heartbeat` with that node's credential and 8 samples (one per GPU, \
every DCGM field filled with plausible values, no XIDs), stamped with the wall clock in microseconds (strictly \
increasing per node, so no sample is a duplicate). A client sends its next heartbeat as soon as the previous one \
is answered: this is the sustained maximum, not a paced fleet. The measured period follows a warm-up at the same \
load (which also fills the service's per-node GPU-map cache, as on a running service). The database is dropped \
at the end.\n\n\
- **heartbeats/s**: heartbeats answered 200 per second of wall time. Each one is a single SQL statement (touch \
the node row, insert one `telemetry_raw` row holding the 8 GPUs' samples packed in one bytea, 25 bytes a GPU: \
`src/agent_api/codec.rs`) in its own transaction.\n\
- **GPU samples/s**: samples the service reported as stored (`accepted_samples` of the answers) per second; \
8 x heartbeats/s when no sample is a duplicate.\n\
- **latency p50/p90/p99/max**: client-side time of successful heartbeats, from sending the request to having \
read the answer, including HTTP and JSON on both ends and the queueing of the closed-loop clients.\n\
- **errors**: any answer other than 200, or a transport error (expected 0).\n\
- **GPU samples stored**: the GPU samples in `telemetry_raw` (the rows' packed bytes over 25 bytes a GPU) after the run \
minus before it; should equal the samples accepted.\n\
- **raw telemetry growth per million GPU samples**: the sum over `telemetry_raw`'s partitions of \
`pg_total_relation_size` (table, TOAST and its indexes: the `(node_key, at)` primary key and a BRIN index on \
`ingested_at`) after minus before the run, divided by the GPU samples stored, scaled to one million; split into \
the tables (`pg_table_size`) and the indexes (`pg_indexes_size`). This is what a million samples cost on disk; \
at one 8-GPU heartbeat per node every 10 s a node stores 69,120 samples a day.\n\
- **whole database growth**: `pg_database_size` likewise, which adds the bloat of the `nodes` table (each \
heartbeat updates its node's row) and the catalog; **nodes table growth** is that table's own growth in the run.\n\
- **WAL written**: bytes of write-ahead log generated in the run (`pg_current_wal_lsn()` difference), per \
million samples (includes full-page images after checkpoints).\n\
- **CPU**: user + system CPU time over the run divided by its length, for this process (the service and the \
load generator share it), for all `postgres` processes (read from /proc; `-` when the server is elsewhere), and \
for everything else on the machine (busy time from /proc/stat minus those two: other people's work, the \
kernel's). Their sum is near the core count when the machine is CPU-bound; iowait is idle time with I/O (here: \
WAL flushes) outstanding. The machine is shared: when \"anything else\" is well above zero, other work \
competed for the cores during the run, and heartbeats/s is lower than the service and PostgreSQL reach on the \
machine alone (their own CPU cost per heartbeat is the two first CPU lines divided by heartbeats/s).\n- **expired raw partition dropped under ingest**: after the measured run, a raw partition for the day three \
days ago is created and filled (one hour of every node's samples, 10 s apart: dropping unlinks files, so a full \
day costs the same), then the clients run for 8 s more and, half way, the sweeper's retention \
(`drop_expired_partitions`: `DETACH PARTITION ... CONCURRENTLY`, then `DROP TABLE`) removes it; the time is \
that call's, the heartbeat figures are those of the 8 s (errors and the worst latency show whether ingest was \
blocked).\n- **fleet loaded for the queries / query latencies**: then a fleet of 10 pools x 125 nodes x 8 GPUs (10,000 \
GPUs) is loaded with bulk SQL (`generate_series`): per-node hourly rollups for the last 7 days and raw samples \
every 10 s for the last `BENCH_RAW_HOURS` (default 6; the queries measured read at most the last hour of raw \
samples, so a full day of raw rows would only lengthen the load), and a month-long lease of one node's 8 GPUs. \
`node_hours` is vacuumed after the load, as autovacuum (off on the bench machine) would have done to closed \
hours. Each endpoint is then called 200 times, one request at a time, over HTTP through the full router: a \
lease's last 5 minutes (`/v1/leases/{id}/telemetry?from=...&step_s=10`, raw samples), a node's last hour \
(`/v1/admin/nodes/{id}/telemetry`, defaults: raw samples, 60 s buckets), a pool's last 30 days \
(`/v1/admin/pools/{id}/utilization?from=...`, hourly rollups of its 125 nodes). Before the 200 calls of \
each endpoint, 2 x the pool size calls reach every pooled connection once while it has not yet served that \
endpoint (its backend loads the catalog entries and parses the statements); the slowest of those first calls \
is shown in brackets, apart from the p50/p99/max of the 200 that follow, since a running service pays it once per \
connection, not once per hundred requests.\n\n",
    );
    let _ = writeln!(out, "## How to run\n");
    out.push_str(
        "```sh\n\
# PostgreSQL on 127.0.0.1:5432 (user postgres, trust auth)\n\
cargo bench --bench heartbeat\n\
# quicker: 5 s, report not written\n\
BENCH_SECONDS=5 BENCH_DOC= cargo bench --bench heartbeat\n\
```\n\n\
Other settings: `DATABASE_URL` (the server; the bench creates and drops `gpuplane_bench_heartbeat` on it), \
`BENCH_NODES` (1000), `BENCH_CLIENTS` (64), `BENCH_DB_CONNECTIONS` (16), `BENCH_WARMUP_SECONDS` (5), \
`BENCH_RAW_HOURS` (6, 1-24: hours of raw samples loaded for the fleet queries), \
`BENCH_SYNCHRONOUS_COMMIT` (unset: the server's setting; `off` etc. sets it for the bench database only), `BENCH_DOC` (where this page is written; empty for nowhere), `BENCH_KEEP_DB` (set: keep the database afterwards, to EXPLAIN the queries on the loaded fleet).\n",
    );
    out
}

async fn bench() -> anyhow::Result<()> {
    let cfg = Config::from_env()?;
    let mut admin = PgConnection::connect_with(&PgConnectOptions::from_str(&cfg.server_url).context("DATABASE_URL")?)
        .await
        .context("connecting to PostgreSQL (set DATABASE_URL)")?;
    let (postgres,): (String,) = sqlx::query_as("SELECT version()").fetch_one(&mut admin).await?;
    let postgres = postgres.split(" on ").next().unwrap_or(&postgres).to_string();
    let (synchronous_commit,): (String,) = sqlx::query_as("SHOW synchronous_commit").fetch_one(&mut admin).await?;
    let synchronous_commit = match &cfg.synchronous_commit {
        Some(v) => {
            format!("{v} (for the bench database, by BENCH_SYNCHRONOUS_COMMIT; the server's: {synchronous_commit})")
        }
        None => synchronous_commit,
    };
    let (shared_buffers,): (String,) = sqlx::query_as("SHOW shared_buffers").fetch_one(&mut admin).await?;
    let env = Environment {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        postgres,
        synchronous_commit,
        shared_buffers,
    };
    eprintln!(
        "heartbeat bench: {} s (+{} s warm-up), {} nodes x {GPUS_PER_NODE} GPUs, {} clients, {} DB connections; \
         {} cores, {}, synchronous_commit = {}",
        cfg.seconds,
        cfg.warmup_seconds,
        cfg.nodes,
        cfg.clients,
        cfg.db_connections,
        env.cores,
        env.postgres,
        env.synchronous_commit
    );

    let outcome = run(&cfg, &mut admin).await;
    if std::env::var_os("BENCH_KEEP_DB").is_some() {
        eprintln!("kept the database {BENCH_DB} (BENCH_KEEP_DB)");
    } else {
        drop_database(&mut admin, BENCH_DB).await?;
    }
    admin.close().await?;
    let r = outcome?;
    if let Some(err) = &r.first_error {
        eprintln!("  first error: {err}");
    }

    print!("{}", table(&cfg, &r));
    println!();
    print!("{}", verdict(&r));
    if let Some(path) = &cfg.doc {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, document(&cfg, &env, &r))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    common::run(bench())
}
