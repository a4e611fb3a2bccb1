//! Logging (text or JSON, with the request id on every line of a request) and Prometheus metrics.
//!
//! Metrics follow Prometheus conventions: every family is prefixed `gpuplane_` (except the standard `process_*`),
//! names carry base units (`_seconds`, `_bytes`), counters end in `_total`, and every family has `# HELP` and
//! `# TYPE`. Counters and histograms of this process go through the `metrics` recorder; what describes the fleet
//! (GPUs, nodes, leases, queue, heartbeats, metering) is read from the database at scrape time, in one query over
//! small indexed tables, so every replica answers the same figures and nothing drifts after a restart.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderName;
use axum::middleware::Next;
use axum::response::Response;
use gpuplane_store::ops::FleetRow;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use sqlx::PgPool;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Install the global tracing subscriber. `RUST_LOG` overrides the default level (info). Text logs are coloured
/// only when stderr is a terminal: a file, a pipe or journald gets plain text.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
    };
}

/// Request latency buckets, seconds.
/// Service requests run from milliseconds to minutes (a long generation streamed).
const SERVICE_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];
const LATENCY_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];
/// Background round buckets, seconds.
const SWEEP_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

/// The process-wide Prometheus recorder (installed once, shared by every router in the process).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full("gpuplane_http_request_duration_seconds".into()), LATENCY_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full("gpuplane_sweeper_duration_seconds".into()), SWEEP_BUCKETS)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("gpuplane_service_request_duration_seconds".into()),
                        SERVICE_BUCKETS,
                    )
                })
                .map(|b| b.build_recorder())
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
            let handle = recorder.handle();
            // Another recorder may exist already (e.g. a test harness); then metrics go there, and /metrics
            // still answers with whatever this handle holds.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

/// `# HELP` for the families this process records itself.
fn describe() {
    use metrics::{Unit, describe_counter, describe_histogram};
    describe_counter!("gpuplane_http_requests_total", "HTTP requests answered, by method, route template and status");
    describe_histogram!(
        "gpuplane_http_request_duration_seconds",
        Unit::Seconds,
        "HTTP request latency, by method and route template"
    );
    describe_counter!(
        "gpuplane_sweeper_runs_total",
        "Rounds of the background loops (lease lifecycle, node liveness, metering), by sweeper and outcome"
    );
    describe_histogram!(
        "gpuplane_sweeper_duration_seconds",
        Unit::Seconds,
        "Duration of one background round, by sweeper"
    );
    describe_counter!(
        "gpuplane_service_requests_total",
        "Requests to services through this replica's gateway, by service and status (the gateway's refusals too)"
    );
    describe_histogram!(
        "gpuplane_service_request_duration_seconds",
        Unit::Seconds,
        "Time from a service request's arrival at the gateway to the end of its answer, by service"
    );
    describe_counter!(
        "gpuplane_service_output_tokens_total",
        "Tokens that OpenAI-compatible services' answers report (usage.completion_tokens), by service"
    );
    describe_counter!(
        "gpuplane_service_replica_unreachable_total",
        "Replicas the gateway could not reach and passed over (the request went to another), by service"
    );
    describe_counter!("gpuplane_heartbeats_total", "Agent heartbeats accepted by this replica");
    describe_counter!("gpuplane_heartbeat_samples_total", "GPU telemetry samples ingested by this replica");
    describe_counter!(
        "gpuplane_db_errors_total",
        "Database errors that failed a request or a readiness check, by kind (pool_timeout, io, tls, database, other)"
    );
}

/// Count requests by method, route template and status, and time them.
pub async fn track_metrics(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let method = req.method().as_str().to_owned();
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("gpuplane_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("gpuplane_http_request_duration_seconds", "method" => method, "route" => route)
        .record(start.elapsed().as_secs_f64());
    response
}

/// Record one round of a background loop.
pub fn record_sweep<T, E>(sweeper: &'static str, started: Instant, result: &Result<T, E>) {
    let outcome = if result.is_ok() { "ok" } else { "error" };
    metrics::counter!("gpuplane_sweeper_runs_total", "sweeper" => sweeper, "outcome" => outcome).increment(1);
    metrics::histogram!("gpuplane_sweeper_duration_seconds", "sweeper" => sweeper)
        .record(started.elapsed().as_secs_f64());
}

/// Count a database error by a coarse kind (bounded label values).
pub fn record_db_error(err: &sqlx::Error) {
    let kind = match err {
        sqlx::Error::PoolTimedOut => "pool_timeout",
        sqlx::Error::Io(_) => "io",
        sqlx::Error::Tls(_) => "tls",
        sqlx::Error::Database(_) => "database",
        _ => "other",
    };
    metrics::counter!("gpuplane_db_errors_total", "kind" => kind).increment(1);
}

/// The whole `/metrics` page: this process's recorder, then the pool, process and fleet families.
pub async fn render(handle: &PrometheusHandle, db: &PgPool) -> String {
    let mut out = handle.render();
    let mut page = Page(&mut out);
    page.gauge("gpuplane_db_pool_connections", "Open connections in this replica's database pool", &[], db.size());
    page.gauge(
        "gpuplane_db_pool_idle_connections",
        "Idle connections in this replica's database pool",
        &[],
        db.num_idle() as f64,
    );
    page.gauge(
        "gpuplane_db_pool_max_connections",
        "Most connections this replica's database pool opens",
        &[],
        db.options().get_max_connections(),
    );
    process_metrics(&mut page);
    match fleet(db).await {
        Ok(rows) => {
            page.gauge("gpuplane_fleet_scrape_success", "1 when the fleet figures below were read", &[], 1);
            write_fleet(&mut page, &rows);
        }
        Err(err) => {
            tracing::warn!(error = %err, "reading the fleet figures for /metrics failed");
            record_db_error(&err);
            page.gauge("gpuplane_fleet_scrape_success", "1 when the fleet figures below were read", &[], 0);
        }
    }
    out
}

/// Writes families in the text exposition format.
struct Page<'a>(&'a mut String);

impl Page<'_> {
    fn header(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Into<f64>) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                let _ = write!(self.0, "{k}=\"{v}\"");
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {}", value.into());
    }
    fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: impl Into<f64>) {
        self.header(name, help, "gauge");
        self.sample(name, labels, value);
    }
}

/// `process_*` families from /proc/self (Linux); absent elsewhere.
fn process_metrics(page: &mut Page<'_>) {
    // The kernel reports CPU times in USER_HZ ticks, 100 a second on every Linux ABI.
    const USER_HZ: f64 = 100.0;
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat")
        && let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r)
    {
        // Fields after the command name, starting at field 3 (state): utime is field 14, stime 15, starttime 22.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
        if let (Some(utime), Some(stime)) = (field(14), field(15)) {
            page.header("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter");
            page.sample("process_cpu_seconds_total", &[], (utime + stime) / USER_HZ);
        }
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse::<f64>().ok())));
        if let (Some(start), Some(boot)) = (field(22), boot) {
            page.gauge(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                &[],
                boot + start / USER_HZ,
            );
        }
    }
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let kb = |key: &str| {
            status.lines().find_map(|l| {
                l.strip_prefix(key).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
        };
        if let Some(rss) = kb("VmRSS:") {
            page.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", &[], rss * 1024.0);
        }
        if let Some(vsz) = kb("VmSize:") {
            page.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", &[], vsz * 1024.0);
        }
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        page.gauge("process_open_fds", "Number of open file descriptors.", &[], dir.count() as f64);
    }
    if let Ok(limits) = std::fs::read_to_string("/proc/self/limits")
        && let Some(max) = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse::<f64>().ok())
    {
        page.gauge("process_max_fds", "Maximum number of open file descriptors.", &[], max);
    }
}

/// Every fleet figure in one round trip (`gpuplane_store::ops::fleet_figures`).
async fn fleet(db: &PgPool) -> Result<Vec<FleetRow>, sqlx::Error> {
    let mut conn = db.acquire().await?;
    Ok(gpuplane_store::ops::fleet_figures(&mut conn).await?)
}

fn write_fleet(page: &mut Page<'_>, rows: &[FleetRow]) {
    let families: [(&str, &str, &str); 7] = [
        (
            "gpus",
            "gpuplane_gpus",
            "GPUs by pool and state: allocated (held by a lease), unhealthy, unavailable (healthy and free on a node \
             not active or not ready), free (allocatable)",
        ),
        ("nodes_liveness", "gpuplane_nodes", "Nodes by pool and liveness (ready, unreachable, offline)"),
        (
            "nodes_admin",
            "gpuplane_nodes_admin",
            "Nodes by pool and admin state (active, cordoned, draining, maintenance)",
        ),
        ("leases", "gpuplane_leases", "Live leases by pool and state (queued, active)"),
        (
            "queue_oldest_age",
            "gpuplane_queue_oldest_age_seconds",
            "Age of the oldest queued lease by pool, 0 when none",
        ),
        (
            "heartbeat_age_max",
            "gpuplane_heartbeat_age_max_seconds",
            "Age of the oldest last heartbeat among the ready agent nodes of a pool, 0 when none",
        ),
        (
            "metering_lag",
            "gpuplane_metering_lag_seconds",
            "Largest gap between now (or a lease's end) and what is metered, over active leases",
        ),
    ];
    for (key, name, help) in families {
        page.header(name, help, "gauge");
        for (_, pool, state, value) in rows.iter().filter(|r| r.0 == key) {
            let label = if key == "nodes_admin" { "admin_state" } else { "state" };
            match (pool.is_empty(), state.is_empty()) {
                (true, _) => page.sample(name, &[], *value),
                (false, true) => page.sample(name, &[("pool", pool)], *value),
                (false, false) => page.sample(name, &[("pool", pool), (label, state)], *value),
            }
        }
    }
}
