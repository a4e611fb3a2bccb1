//! Service configuration: flags with environment fallbacks (see the README's configuration table).

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, ValueEnum};

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
    /// PostgreSQL connection URL. The database is created if missing.
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
    /// Lifetime of access tokens, in seconds.
    #[arg(long, env = "GPUPLANE_TOKEN_TTL_SECS", default_value_t = 900)]
    pub token_ttl_secs: u64,
    /// Log format.
    #[arg(long, env = "GPUPLANE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
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
}

impl ServeArgs {
    /// Validate the secret: present and strong, or dev mode (then a random secret is made).
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let jwt_secret = match &self.jwt_secret {
            Some(s) if s.len() >= MIN_SECRET_BYTES => Secret::new(s.as_bytes()),
            _ if self.dev => {
                tracing::warn!("dev mode: using a random JWT secret; tokens will not survive a restart");
                Secret::new(crate::auth::keys::random_bytes(32))
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
        Ok(Settings { jwt_secret, token_ttl: Duration::from_secs(self.token_ttl_secs) })
    }
}
