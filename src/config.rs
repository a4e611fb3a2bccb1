//! Service configuration: flags with environment fallbacks (see the README's configuration table).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::secrets::Keyring;

/// Default database: the local PostgreSQL of the quick start.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/gpuplane";
/// A signing secret shorter than this is refused outside dev mode.
pub const MIN_SECRET_BYTES: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Where the database is.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// PostgreSQL connection URL; the database is created if missing and migrated. TLS: `?sslmode=require`, or
    /// `?sslmode=verify-full&sslrootcert=ca.pem`.
    #[arg(long, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL)]
    pub database_url: String,
    /// Maximum connections in the pool.
    #[arg(long, env = "GPUPLANE_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,
}

/// Everything `serve` needs.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Address to listen on; port 0 picks a free port (printed on start).
    #[arg(long, env = "GPUPLANE_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// HS256 signing secret for access tokens, at least 32 bytes. Required unless --dev.
    #[arg(long, env = "GPUPLANE_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,
    /// Development mode: allows a missing or weak secret (a random one is generated).
    #[arg(long, env = "GPUPLANE_DEV", default_value_t = false)]
    pub dev: bool,
    /// Where the gateway listens: services' callers reach the replicas there (docs/serving.md). Publish it under a
    /// domain of its own, never the console's (what tenants' servers answer must not share its origin or
    /// cookies). Port 0 picks a free port (printed on start). Unset: this process runs no gateway.
    #[arg(long, env = "GPUPLANE_GATEWAY_BIND")]
    pub gateway_bind: Option<SocketAddr>,
    /// The gateway's public base URL, as services' `url` show it (e.g. `https://apps.example.com`) [default:
    /// `http://` and the --gateway-bind address].
    #[arg(long, env = "GPUPLANE_GATEWAY_URL")]
    pub gateway_url: Option<String>,
    /// Lifetime of access tokens, in seconds.
    #[arg(long, env = "GPUPLANE_TOKEN_TTL_SECS", default_value_t = 900)]
    pub token_ttl_secs: u64,
    /// Log format.
    #[arg(long, env = "GPUPLANE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(flatten)]
    pub agents: AgentArgs,
    #[command(flatten)]
    pub rate_limit: RateLimitArgs,
    /// Mark the console's session cookies `Secure` (browsers then send them over HTTPS only). Set it whenever the
    /// console is reached over TLS; behind a proxy with --trust-forwarded-for, `X-Forwarded-Proto: https` does too.
    #[arg(long, env = "GPUPLANE_SECURE_COOKIES", default_value_t = false)]
    pub secure_cookies: bool,
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    #[command(flatten)]
    pub idle: IdleArgs,
    #[command(flatten)]
    pub secrets: SecretsKeyArgs,
}

/// Environment variable holding the secrets keyring itself (there is no flag: a command line is visible to
/// every user of the host).
pub const SECRETS_KEY_ENV: &str = "GPUPLANE_SECRETS_KEY";

/// The keyring that seals the secrets the service stores (webhook signing secrets, job secret values).
#[derive(Debug, Clone, Default, Args)]
pub struct SecretsKeyArgs {
    /// File holding the secrets keyring: `ID:BASE64KEY` lines (32-byte AES-256 keys, e.g. `k1:$(openssl rand
    /// -base64 32)`), the current key first; older keys after it still open what they sealed. Or set the keyring
    /// itself in GPUPLANE_SECRETS_KEY (entries one a line or comma-separated). Required unless --dev.
    #[arg(long, env = "GPUPLANE_SECRETS_KEY_FILE")]
    pub secrets_key_file: Option<PathBuf>,
}

impl SecretsKeyArgs {
    /// The configured keyring, from the file or `GPUPLANE_SECRETS_KEY`; None when neither is set.
    pub fn configured(&self) -> anyhow::Result<Option<Keyring>> {
        let inline = std::env::var(SECRETS_KEY_ENV).ok().filter(|v| !v.trim().is_empty());
        keyring_from(self.secrets_key_file.as_deref(), inline.as_deref())
    }

    /// The keyring to run with: the configured one (and, with `dev`, the development key after it), or in dev
    /// mode the development key alone. Outside dev mode a keyring is required.
    pub fn keyring(&self, dev: bool) -> anyhow::Result<Keyring> {
        match (self.configured()?, dev) {
            (Some(mut keyring), true) => {
                keyring.add_dev_key();
                Ok(keyring)
            }
            (Some(keyring), false) => Ok(keyring),
            (None, true) => {
                tracing::warn!(
                    "dev mode: secrets are sealed under the public development key `dev`; set \
                     GPUPLANE_SECRETS_KEY_FILE for real secrets"
                );
                Ok(Keyring::dev())
            }
            (None, false) => anyhow::bail!(
                "no secrets key: set GPUPLANE_SECRETS_KEY_FILE (or --secrets-key-file) to a file of `ID:BASE64KEY` \
                 lines, or GPUPLANE_SECRETS_KEY to the keyring itself; make a key with \
                 `echo \"k1:$(openssl rand -base64 32)\"`. Webhook signing secrets and job secrets are stored sealed \
                 under it and cannot be read without it. Or pass --dev for local development"
            ),
        }
    }
}

/// A keyring from a key file or the text of `GPUPLANE_SECRETS_KEY` (not both).
pub fn keyring_from(file: Option<&std::path::Path>, inline: Option<&str>) -> anyhow::Result<Option<Keyring>> {
    let (text, source) = match (file, inline) {
        (Some(_), Some(_)) => anyhow::bail!(
            "both GPUPLANE_SECRETS_KEY_FILE (--secrets-key-file) and {SECRETS_KEY_ENV} are set: set one of them"
        ),
        (None, None) => return Ok(None),
        (None, Some(text)) => (text.to_owned(), SECRETS_KEY_ENV.to_owned()),
        (Some(path), None) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("cannot read the secrets key file {}: {e}", path.display()))?;
            #[cfg(unix)]
            if let Ok(meta) = std::fs::metadata(path) {
                use std::os::unix::fs::PermissionsExt;
                if meta.permissions().mode() & 0o077 != 0 {
                    tracing::warn!(
                        path = %path.display(),
                        "the secrets key file can be read by other users of this host: chmod 600 it"
                    );
                }
            }
            (text, format!("the secrets key file {}", path.display()))
        }
    };
    Keyring::parse(&text).map(Some).map_err(|e| anyhow::anyhow!("{source}: {e}"))
}

/// Webhook delivery and the alerts the background checks raise.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
    /// Allow webhook URLs over plain http and ones that resolve to loopback, private, link-local or metadata
    /// addresses. For tests and local demos only: it lets tenants make the service call into its own network.
    #[arg(long, env = "GPUPLANE_WEBHOOK_ALLOW_PRIVATE", default_value_t = false)]
    pub webhook_allow_private: bool,
    /// Seconds to wait before each retry of a failed delivery, comma-separated; after the last the delivery fails.
    #[arg(
        long,
        env = "GPUPLANE_WEBHOOK_RETRY_SCHEDULE_SECS",
        value_delimiter = ',',
        default_value = "5,300,1800,7200,18000,36000,36000"
    )]
    pub webhook_retry_schedule_secs: Vec<u64>,
    /// An endpoint whose deliveries have failed without a success for this long is disabled.
    #[arg(long, env = "GPUPLANE_WEBHOOK_DISABLE_AFTER_HOURS", default_value_t = 120)]
    pub webhook_disable_after_hours: u64,
    /// `lease.expiring` is sent this long before a lease's end.
    #[arg(long, env = "GPUPLANE_LEASE_EXPIRING_LEAD_SECS", default_value_t = 3600)]
    pub lease_expiring_lead_secs: u64,
    /// `queue.stalled` is sent when a pool's oldest queued lease has waited this long.
    #[arg(long, env = "GPUPLANE_QUEUE_STALLED_AFTER_SECS", default_value_t = 900)]
    pub queue_stalled_after_secs: u64,
}

impl Default for WebhookArgs {
    fn default() -> Self {
        WebhookArgs {
            webhook_allow_private: false,
            webhook_retry_schedule_secs: vec![5, 300, 1800, 7200, 18000, 36000, 36000],
            webhook_disable_after_hours: 120,
            lease_expiring_lead_secs: 3600,
            queue_stalled_after_secs: 900,
        }
    }
}

/// Webhook settings the running service holds.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// See [`WebhookArgs::webhook_allow_private`].
    pub allow_private: bool,
    /// Wait before retry n (n = 1, 2, ...); its length is the number of retries.
    pub retry_schedule: Vec<Duration>,
    /// Continuous failure after which an endpoint is disabled.
    pub disable_after: Duration,
    /// How long before a lease's end `lease.expiring` fires.
    pub lease_expiring_lead: Duration,
    /// How long the head of a pool's queue may wait before `queue.stalled` fires.
    pub queue_stalled_after: Duration,
    /// How often the delivery worker looks for due deliveries when it found none.
    pub poll_interval: Duration,
    /// How often the background alert checks run.
    pub alert_interval: Duration,
}

impl From<&WebhookArgs> for WebhookSettings {
    fn from(a: &WebhookArgs) -> Self {
        WebhookSettings {
            allow_private: a.webhook_allow_private,
            retry_schedule: a.webhook_retry_schedule_secs.iter().map(|s| Duration::from_secs(*s)).collect(),
            disable_after: Duration::from_secs(a.webhook_disable_after_hours * 3600),
            lease_expiring_lead: Duration::from_secs(a.lease_expiring_lead_secs),
            queue_stalled_after: Duration::from_secs(a.queue_stalled_after_secs),
            poll_interval: Duration::from_millis(500),
            alert_interval: Duration::from_secs(30),
        }
    }
}

/// When a lease counts as idle (`leases::idle`): the alert, and the release of leases that opt in.
#[derive(Debug, Clone, Args)]
pub struct IdleArgs {
    /// A lease is idle while even its busiest GPU averages under this GPU utilization (percent) over the idle
    /// window; `lease.idle` is sent, and leases with `idle_release_after_minutes` are released once idle that long.
    #[arg(long, env = "GPUPLANE_LEASE_IDLE_GPU_UTIL_PERCENT", default_value_t = DEFAULT_IDLE_GPU_UTIL_PERCENT)]
    pub lease_idle_gpu_util_percent: f64,
    /// The idle window, in minutes: a lease is judged over its last this many minutes, and only once it has been
    /// active that long. It is also the shortest idle spell before a release.
    #[arg(long, env = "GPUPLANE_LEASE_IDLE_AFTER_MINUTES", default_value_t = DEFAULT_IDLE_AFTER_MINUTES)]
    pub lease_idle_after_minutes: u64,
}

pub const DEFAULT_IDLE_GPU_UTIL_PERCENT: f64 = 5.0;
pub const DEFAULT_IDLE_AFTER_MINUTES: u64 = 30;
/// The longest idle window: every lease is judged over it from raw samples (kept an hour at least) each round.
pub const MAX_IDLE_AFTER_MINUTES: u64 = 60;

impl Default for IdleArgs {
    fn default() -> Self {
        IdleArgs {
            lease_idle_gpu_util_percent: DEFAULT_IDLE_GPU_UTIL_PERCENT,
            lease_idle_after_minutes: DEFAULT_IDLE_AFTER_MINUTES,
        }
    }
}

/// Idle-lease settings the running service holds.
#[derive(Debug, Clone, Copy)]
pub struct IdleSettings {
    /// See [`IdleArgs::lease_idle_gpu_util_percent`].
    pub below_percent: f64,
    /// See [`IdleArgs::lease_idle_after_minutes`].
    pub window: Duration,
    /// How often every active lease is judged (each is a query over its window's raw samples).
    pub judge_every: Duration,
}

impl From<&IdleArgs> for IdleSettings {
    fn from(a: &IdleArgs) -> Self {
        IdleSettings {
            below_percent: a.lease_idle_gpu_util_percent,
            window: Duration::from_secs(a.lease_idle_after_minutes * 60),
            judge_every: Duration::from_secs(60),
        }
    }
}

/// Throttling of the credential endpoints (`POST /v1/auth/token`, `POST /v1/agent/register`) per client address.
#[derive(Debug, Clone, Copy, Args)]
pub struct RateLimitArgs {
    /// Sustained attempts per client address and minute on the credential endpoints.
    #[arg(long, env = "GPUPLANE_AUTH_RATE_PER_MINUTE", default_value_t = 30)]
    pub auth_rate_per_minute: u32,
    /// Attempts a client address may make at once before the per-minute rate applies.
    #[arg(long, env = "GPUPLANE_AUTH_RATE_BURST", default_value_t = 10)]
    pub auth_rate_burst: u32,
    /// Behind a reverse proxy: take the client address from the LAST `X-Forwarded-For` entry (the one the proxy
    /// appended) instead of the TCP peer, which is the proxy itself. Never set this when clients can reach the
    /// server directly: they could then pick any address and dodge the limit.
    #[arg(long, env = "GPUPLANE_TRUST_FORWARDED_FOR", default_value_t = false)]
    pub trust_forwarded_for: bool,
}

impl Default for RateLimitArgs {
    fn default() -> Self {
        RateLimitArgs { auth_rate_per_minute: 30, auth_rate_burst: 10, trust_forwarded_for: false }
    }
}

/// Node agent timing and telemetry retention.
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// Seconds between agent heartbeats (told to agents).
    #[arg(long, env = "GPUPLANE_HEARTBEAT_INTERVAL_SECS", default_value_t = 10)]
    pub heartbeat_interval_secs: u32,
    /// A node without a heartbeat for this long is `unreachable`.
    #[arg(long, env = "GPUPLANE_UNREACHABLE_AFTER_SECS", default_value_t = 40)]
    pub unreachable_after_secs: u64,
    /// A node without a heartbeat for this long is `offline` and its leases are interrupted.
    #[arg(long, env = "GPUPLANE_OFFLINE_AFTER_SECS", default_value_t = 300)]
    pub offline_after_secs: u64,
    /// A job part its node's agent has not fetched this long after the job was created fails the job, with the
    /// node named in the reason (a host whose agent stopped polling, or lost its state).
    #[arg(long, env = "GPUPLANE_ASSIGNMENT_PICKUP_TIMEOUT_SECS", default_value_t = DEFAULT_ASSIGNMENT_PICKUP_TIMEOUT_SECS)]
    pub assignment_pickup_timeout_secs: u64,
    /// Raw telemetry samples are kept this long (whole daily partitions are dropped once entirely older).
    #[arg(long, env = "GPUPLANE_TELEMETRY_RETENTION_HOURS", default_value_t = 24)]
    pub telemetry_retention_hours: u64,
    /// Per-GPU per-minute telemetry rollups (daily partitions) and services' request counts per minute are kept
    /// this long.
    #[arg(long, env = "GPUPLANE_TELEMETRY_MINUTE_RETENTION_DAYS", default_value_t = 30)]
    pub telemetry_minute_retention_days: u64,
    /// Per-node per-hour telemetry rollups (pool utilization, revenue) are kept this long (monthly partitions).
    #[arg(long, env = "GPUPLANE_TELEMETRY_HOUR_RETENTION_DAYS", default_value_t = 365)]
    pub telemetry_hour_retention_days: u64,
    /// When at least this share of a pool's agent nodes is silent at once, interruptions in the pool are held.
    #[arg(long, env = "GPUPLANE_FLEET_SILENCE_THRESHOLD", default_value_t = 0.55)]
    pub fleet_silence_threshold: f64,
    /// Fewest silent agent nodes of a pool that hold its interruptions (with the share above).
    #[arg(long, env = "GPUPLANE_FLEET_SILENCE_MIN_NODES", default_value_t = 3)]
    pub fleet_silence_min_nodes: u32,
    /// Lowest NVIDIA driver version a node may report and still take leases (a pool may override it).
    #[arg(long, env = "GPUPLANE_MIN_DRIVER_VERSION", default_value = DEFAULT_MIN_DRIVER_VERSION)]
    pub min_driver_version: String,
    /// Lowest CUDA version a node may report and still take leases (a pool may override it).
    #[arg(long, env = "GPUPLANE_MIN_CUDA_VERSION", default_value = DEFAULT_MIN_CUDA_VERSION)]
    pub min_cuda_version: String,
    /// Round-trip p99 between two nodes of a lease, milliseconds, above which `comm.latency_high` is raised.
    #[arg(long, env = "GPUPLANE_COMM_LATENCY_P99_MS", default_value_t = 20.0)]
    pub comm_latency_p99_ms: f64,
    /// The longest stop notice a job may ask for (`stop_grace_s`): how long its processes get to checkpoint and
    /// exit before a replan stops them.
    #[arg(long, env = "GPUPLANE_MAX_STOP_GRACE_SECS", default_value_t = 600)]
    pub max_stop_grace_secs: u64,
    /// The most text a job's logs keep, MiB (all its nodes and ranks together): past it, the oldest lines are
    /// deleted, a tenth of the cap at a time.
    #[arg(long, env = "GPUPLANE_JOB_LOG_CAP_MIB", default_value_t = DEFAULT_JOB_LOG_CAP_MIB)]
    pub job_log_cap_mib: u64,
    /// The largest working-directory archive a tenant may upload (`POST /v1/uploads`), MiB.
    #[arg(long, env = "GPUPLANE_UPLOAD_CAP_MIB", default_value_t = DEFAULT_UPLOAD_CAP_MIB)]
    pub upload_cap_mib: u64,
    /// An ended job's log lines are deleted this many days after it ended (the job and its 50-line tails stay);
    /// 0 keeps them for good.
    #[arg(long, env = "GPUPLANE_JOB_LOG_RETENTION_DAYS", default_value_t = DEFAULT_RETENTION_DAYS)]
    pub job_log_retention_days: u64,
    /// An upload is deleted this many days after it was last sent or named by a new job, once no job that has
    /// not ended names it; 0 keeps uploads for good.
    #[arg(long, env = "GPUPLANE_UPLOAD_RETENTION_DAYS", default_value_t = DEFAULT_RETENTION_DAYS)]
    pub upload_retention_days: u64,
}

/// How long ended jobs' log lines and unused uploads are kept unless the operator says.
pub const DEFAULT_RETENTION_DAYS: u64 = 30;

/// A retention in days, 0 meaning none.
fn days(days: u64) -> Option<Duration> {
    (days > 0).then(|| Duration::from_secs(days * 86_400))
}

/// 100 MiB of compressed code and small data: a working directory, not a dataset (those go on volumes).
pub const DEFAULT_UPLOAD_CAP_MIB: u64 = 100;

/// 256 MiB: days of a chatty 8-node job (a line per rank per step), and the whole of nearly any other.
pub const DEFAULT_JOB_LOG_CAP_MIB: u64 = 256;

/// What NCCL-based parallel frameworks need at least.
/// The default bound on a job part waiting for its node to fetch it: an agent learns of a new assignment from its
/// next heartbeat's answer (every 10 s by default) and fetches it at once, so two minutes is a dozen missed
/// chances; a job on a node whose agent is gone then fails with the node named instead of staying `pending`.
pub const DEFAULT_ASSIGNMENT_PICKUP_TIMEOUT_SECS: u64 = 120;

pub const DEFAULT_MIN_DRIVER_VERSION: &str = "525.60.13";
pub const DEFAULT_MIN_CUDA_VERSION: &str = "11.8";

impl Default for AgentArgs {
    fn default() -> Self {
        AgentArgs {
            heartbeat_interval_secs: 10,
            unreachable_after_secs: 40,
            offline_after_secs: 300,
            assignment_pickup_timeout_secs: DEFAULT_ASSIGNMENT_PICKUP_TIMEOUT_SECS,
            telemetry_retention_hours: 24,
            telemetry_minute_retention_days: 30,
            telemetry_hour_retention_days: 365,
            fleet_silence_threshold: 0.55,
            fleet_silence_min_nodes: 3,
            min_driver_version: DEFAULT_MIN_DRIVER_VERSION.to_owned(),
            min_cuda_version: DEFAULT_MIN_CUDA_VERSION.to_owned(),
            comm_latency_p99_ms: 20.0,
            max_stop_grace_secs: 600,
            job_log_cap_mib: DEFAULT_JOB_LOG_CAP_MIB,
            upload_cap_mib: DEFAULT_UPLOAD_CAP_MIB,
            job_log_retention_days: DEFAULT_RETENTION_DAYS,
            upload_retention_days: DEFAULT_RETENTION_DAYS,
        }
    }
}

/// The signing secret, wrapped so that `Debug` never prints it.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(bytes.into())
    }
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Settings the running service holds, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub jwt_secret: Secret,
    pub token_ttl: Duration,
    pub heartbeat_interval: Duration,
    pub unreachable_after: Duration,
    pub offline_after: Duration,
    /// How long a job's node may leave its assignment unfetched before the job fails
    /// (`jobs::lifecycle::fail_unfetched_assignments`).
    pub assignment_pickup_timeout: Duration,
    /// How long raw telemetry samples are kept.
    pub telemetry_retention: Duration,
    /// How long per-GPU per-minute rollups and services' request counts per minute are kept.
    pub telemetry_minute_retention: Duration,
    /// How long per-node per-hour rollups are kept.
    pub telemetry_hour_retention: Duration,
    /// Share of a pool's agent nodes silent at once that opens a liveness hold (0 < x <= 1).
    pub fleet_silence_threshold: f64,
    /// Fewest silent nodes that open a liveness hold.
    pub fleet_silence_min_nodes: u32,
    /// Minimum NVIDIA driver version of a ready node, unless its pool overrides it.
    pub min_driver_version: String,
    /// Minimum CUDA version of a ready node, unless its pool overrides it.
    pub min_cuda_version: String,
    /// p99 round trip between a lease's nodes above which `comm.latency_high` is raised.
    pub comm_latency_p99: Duration,
    /// The longest grace a job's stop notice may give.
    pub max_stop_grace: Duration,
    /// The most bytes of text a job's logs keep.
    pub job_log_cap_bytes: i64,
    /// The largest upload, bytes.
    pub upload_cap_bytes: usize,
    /// How long an ended job's log lines are kept (`None`: for good).
    pub job_log_retention: Option<Duration>,
    /// How long an upload no running job names is kept after its last use (`None`: for good).
    pub upload_retention: Option<Duration>,
    pub rate_limit: RateLimitArgs,
    /// Console cookies always carry `Secure` (see `ServeArgs::secure_cookies`).
    pub secure_cookies: bool,
    pub webhooks: WebhookSettings,
    /// When a lease is idle, and how often that is judged.
    pub idle: IdleSettings,
    /// Seals the secrets the service stores; see [`crate::secrets`].
    pub keyring: Arc<Keyring>,
    /// The gateway's public base URL (services' `url`).
    pub gateway_url: String,
}

impl Settings {
    /// Defaults for everything but the secret; secrets are sealed under the development key.
    pub fn new(jwt_secret: Secret) -> Self {
        Settings::from_parts(jwt_secret, Duration::from_secs(900), &AgentArgs::default())
    }

    fn from_parts(jwt_secret: Secret, token_ttl: Duration, agents: &AgentArgs) -> Self {
        Settings {
            jwt_secret,
            token_ttl,
            heartbeat_interval: Duration::from_secs(agents.heartbeat_interval_secs.into()),
            unreachable_after: Duration::from_secs(agents.unreachable_after_secs),
            offline_after: Duration::from_secs(agents.offline_after_secs),
            assignment_pickup_timeout: Duration::from_secs(agents.assignment_pickup_timeout_secs),
            telemetry_retention: Duration::from_secs(agents.telemetry_retention_hours * 3600),
            telemetry_minute_retention: Duration::from_secs(agents.telemetry_minute_retention_days * 86_400),
            telemetry_hour_retention: Duration::from_secs(agents.telemetry_hour_retention_days * 86_400),
            fleet_silence_threshold: agents.fleet_silence_threshold,
            fleet_silence_min_nodes: agents.fleet_silence_min_nodes,
            min_driver_version: agents.min_driver_version.clone(),
            min_cuda_version: agents.min_cuda_version.clone(),
            comm_latency_p99: Duration::from_secs_f64(agents.comm_latency_p99_ms / 1000.0),
            max_stop_grace: Duration::from_secs(agents.max_stop_grace_secs),
            job_log_cap_bytes: (agents.job_log_cap_mib * 1024 * 1024) as i64,
            upload_cap_bytes: (agents.upload_cap_mib * 1024 * 1024) as usize,
            job_log_retention: days(agents.job_log_retention_days),
            upload_retention: days(agents.upload_retention_days),
            rate_limit: RateLimitArgs::default(),
            secure_cookies: false,
            webhooks: WebhookSettings::from(&WebhookArgs::default()),
            idle: IdleSettings::from(&IdleArgs::default()),
            keyring: Arc::new(Keyring::dev()),
            gateway_url: "http://127.0.0.1:8081".into(),
        }
    }
}

impl ServeArgs {
    /// Validate the secret: present and strong, or dev mode (then a random secret is made).
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let jwt_secret = match &self.jwt_secret {
            Some(s) if s.len() >= MIN_SECRET_BYTES => Secret::new(s.as_bytes()),
            _ if self.dev => {
                tracing::warn!("dev mode: using a random JWT secret; tokens will not survive a restart");
                Secret::new(crate::secrets::random_bytes(32))
            }
            Some(_) => anyhow::bail!(
                "GPUPLANE_JWT_SECRET is too weak: use at least {MIN_SECRET_BYTES} bytes \
                 (for example `openssl rand -hex 32`), or pass --dev for local development"
            ),
            None => anyhow::bail!(
                "GPUPLANE_JWT_SECRET is not set: set it to at least {MIN_SECRET_BYTES} random bytes \
                 (for example `openssl rand -hex 32`), or pass --dev for local development"
            ),
        };
        if self.token_ttl_secs == 0 || self.token_ttl_secs > 24 * 3600 {
            anyhow::bail!("--token-ttl-secs must be between 1 and 86400");
        }
        let a = &self.agents;
        if a.heartbeat_interval_secs == 0 || a.heartbeat_interval_secs > 3600 {
            anyhow::bail!("--heartbeat-interval-secs must be between 1 and 3600");
        }
        if a.unreachable_after_secs <= a.heartbeat_interval_secs as u64
            || a.offline_after_secs <= a.unreachable_after_secs
        {
            anyhow::bail!("need heartbeat interval < --unreachable-after-secs < --offline-after-secs");
        }
        if a.assignment_pickup_timeout_secs <= a.heartbeat_interval_secs as u64 {
            anyhow::bail!("--assignment-pickup-timeout-secs must be above the heartbeat interval");
        }
        if !(a.fleet_silence_threshold > 0.0 && a.fleet_silence_threshold <= 1.0) {
            anyhow::bail!("--fleet-silence-threshold must be in (0, 1]");
        }
        if a.max_stop_grace_secs > 86_400 {
            anyhow::bail!("--max-stop-grace-secs must be at most 86400");
        }
        if !(1..=1024).contains(&a.upload_cap_mib) {
            anyhow::bail!("--upload-cap-mib must be between 1 and 1024");
        }
        if !(1..=1_048_576).contains(&a.job_log_cap_mib) {
            anyhow::bail!("--job-log-cap-mib must be between 1 and 1048576");
        }
        for (flag, value) in [
            ("--job-log-retention-days", a.job_log_retention_days),
            ("--upload-retention-days", a.upload_retention_days),
        ] {
            if value > 36_500 {
                anyhow::bail!("{flag} must be at most 36500 (0 keeps for good)");
            }
        }
        if a.fleet_silence_min_nodes == 0 {
            anyhow::bail!("--fleet-silence-min-nodes must be at least 1");
        }
        for (flag, version) in
            [("--min-driver-version", &a.min_driver_version), ("--min-cuda-version", &a.min_cuda_version)]
        {
            if gpuplane_protocol::versions::parse_version(version).is_none() {
                anyhow::bail!("{flag} `{version}` is not a version: 1-4 dot-separated numbers, e.g. 525.60.13");
            }
        }
        if !(a.comm_latency_p99_ms > 0.0 && a.comm_latency_p99_ms <= 60_000.0) {
            anyhow::bail!("--comm-latency-p99-ms must be in (0, 60000]");
        }
        if a.telemetry_retention_hours == 0 {
            anyhow::bail!("--telemetry-retention-hours must be at least 1");
        }
        // Rollups are recomputed from the tier below for late samples: each tier must outlive the one below.
        if a.telemetry_minute_retention_days * 24 < a.telemetry_retention_hours
            || a.telemetry_hour_retention_days < a.telemetry_minute_retention_days
        {
            anyhow::bail!(
                "need --telemetry-retention-hours <= --telemetry-minute-retention-days <= --telemetry-hour-retention-days"
            );
        }
        let r = self.rate_limit;
        if r.auth_rate_per_minute == 0 || r.auth_rate_burst == 0 {
            anyhow::bail!("--auth-rate-per-minute and --auth-rate-burst must be at least 1");
        }
        let w = &self.webhooks;
        if w.webhook_retry_schedule_secs.len() > 20 || w.webhook_retry_schedule_secs.iter().any(|s| *s > 7 * 86_400) {
            anyhow::bail!("--webhook-retry-schedule-secs takes at most 20 waits of at most 604800 s each");
        }
        if w.webhook_disable_after_hours == 0 || w.lease_expiring_lead_secs == 0 || w.queue_stalled_after_secs == 0 {
            anyhow::bail!(
                "--webhook-disable-after-hours, --lease-expiring-lead-secs and --queue-stalled-after-secs must be at least 1"
            );
        }
        let i = &self.idle;
        if !(i.lease_idle_gpu_util_percent > 0.0 && i.lease_idle_gpu_util_percent <= 100.0) {
            anyhow::bail!("--lease-idle-gpu-util-percent must be in (0, 100]");
        }
        if !(1..=MAX_IDLE_AFTER_MINUTES).contains(&i.lease_idle_after_minutes) {
            anyhow::bail!("--lease-idle-after-minutes must be between 1 and {MAX_IDLE_AFTER_MINUTES}");
        }
        let mut settings = Settings::from_parts(jwt_secret, Duration::from_secs(self.token_ttl_secs), a);
        settings.rate_limit = r;
        settings.secure_cookies = self.secure_cookies;
        settings.webhooks = WebhookSettings::from(w);
        settings.idle = IdleSettings::from(i);
        settings.keyring = Arc::new(self.secrets.keyring(self.dev)?);
        if let Some(url) = &self.gateway_url {
            let parsed = reqwest::Url::parse(url).map_err(|e| anyhow::anyhow!("--gateway-url `{url}`: {e}"))?;
            if !["http", "https"].contains(&parsed.scheme()) || parsed.query().is_some() {
                anyhow::bail!("--gateway-url must be an http(s) URL without a query, e.g. https://apps.example.com");
            }
            settings.gateway_url = url.trim_end_matches('/').to_string();
        } else if let Some(bind) = self.gateway_bind {
            settings.gateway_url = format!("http://{bind}");
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn settings(args: &[&str]) -> anyhow::Result<super::Settings> {
        let cli = Cli::try_parse_from(["gpuplane", "serve", "--dev"].iter().chain(args)).unwrap();
        let Command::Serve(serve) = cli.command else { unreachable!() };
        serve.settings()
    }

    #[test]
    fn fleet_silence_limits_default_to_the_kubernetes_rule_and_are_checked() {
        let s = settings(&[]).unwrap();
        assert_eq!((s.fleet_silence_threshold, s.fleet_silence_min_nodes), (0.55, 3));
        let s = settings(&["--fleet-silence-threshold", "1", "--fleet-silence-min-nodes", "5"]).unwrap();
        assert_eq!((s.fleet_silence_threshold, s.fleet_silence_min_nodes), (1.0, 5));
        for bad in [
            ["--fleet-silence-threshold", "0"],
            ["--fleet-silence-threshold", "1.5"],
            ["--fleet-silence-min-nodes", "0"],
        ] {
            assert!(settings(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn readiness_minimums_and_latency_threshold_default_and_are_checked() {
        let s = settings(&[]).unwrap();
        assert_eq!((s.min_driver_version.as_str(), s.min_cuda_version.as_str()), ("525.60.13", "11.8"));
        assert_eq!(s.comm_latency_p99.as_millis(), 20);
        let s = settings(&["--min-driver-version", "535.104", "--comm-latency-p99-ms", "5"]).unwrap();
        assert_eq!((s.min_driver_version.as_str(), s.comm_latency_p99.as_millis()), ("535.104", 5));
        for bad in [
            ["--min-driver-version", "latest"],
            ["--min-cuda-version", "12..1"],
            ["--comm-latency-p99-ms", "0"],
            ["--comm-latency-p99-ms", "NaN"],
        ] {
            assert!(settings(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_secrets_keyring_comes_from_a_file_or_the_environment_not_both() {
        use super::keyring_from;
        const KEY: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let dir = std::env::temp_dir().join(format!("gpuplane-keyring-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("keys");
        std::fs::write(&file, format!("# current first\nk2:Hx4dHBsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA\n{KEY}\n"))
            .unwrap();
        let keyring = keyring_from(Some(&file), None).unwrap().unwrap();
        assert_eq!(keyring.ids().collect::<Vec<_>>(), ["k2", "k1"]);
        assert_eq!(keyring_from(None, Some(KEY)).unwrap().unwrap().current_id(), "k1");
        assert!(keyring_from(None, None).unwrap().is_none());
        let both = keyring_from(Some(&file), Some(KEY)).unwrap_err().to_string();
        assert!(both.contains("set one of them"), "{both}");
        let missing = keyring_from(Some(&dir.join("nope")), None).unwrap_err().to_string();
        assert!(missing.contains("cannot read the secrets key file") && missing.contains("nope"), "{missing}");
        std::fs::write(&file, "k1:AAECAwQFBgcICQoLDA0ODw==\n").unwrap();
        let short = keyring_from(Some(&file), None).unwrap_err().to_string();
        assert!(
            short.contains("secrets key file") && short.contains("entry 1") && !short.contains("AAECAw"),
            "{short}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        // --dev without a keyring: the development key.
        assert_eq!(settings(&[]).unwrap().keyring.current_id(), crate::secrets::DEV_KEY_ID);
    }

    #[test]
    fn idle_lease_threshold_and_window_default_and_are_checked() {
        let s = settings(&[]).unwrap();
        assert_eq!((s.idle.below_percent, s.idle.window.as_secs()), (5.0, 30 * 60));
        let s = settings(&["--lease-idle-gpu-util-percent", "2.5", "--lease-idle-after-minutes", "10"]).unwrap();
        assert_eq!((s.idle.below_percent, s.idle.window.as_secs()), (2.5, 600));
        for bad in [
            ["--lease-idle-gpu-util-percent", "0"],
            ["--lease-idle-gpu-util-percent", "101"],
            ["--lease-idle-gpu-util-percent", "NaN"],
            ["--lease-idle-after-minutes", "0"],
            ["--lease-idle-after-minutes", "61"],
        ] {
            assert!(settings(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn telemetry_retention_per_tier_defaults_and_order() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.telemetry_retention.as_secs(), 24 * 3600);
        assert_eq!(s.telemetry_minute_retention.as_secs(), 30 * 86_400);
        assert_eq!(s.telemetry_hour_retention.as_secs(), 365 * 86_400);
        let s = settings(&["--telemetry-retention-hours", "48", "--telemetry-minute-retention-days", "7"]).unwrap();
        assert_eq!((s.telemetry_retention.as_secs(), s.telemetry_minute_retention.as_secs()), (48 * 3600, 7 * 86_400));
        assert!(settings(&["--telemetry-retention-hours", "200", "--telemetry-minute-retention-days", "7"]).is_err());
        assert!(settings(&["--telemetry-minute-retention-days", "400"]).is_err());
    }
}
