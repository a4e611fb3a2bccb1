//! The runtime's torch environment and the example that jobs run with it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sqlx::PgPool;

use super::agents::Api;
use super::binary::{Proc, database_url, spawn_server_on};
use super::net::TestNet;

/// The runtime's virtual environment (built on first use, then reused) and the Python installation it was made
/// from: both are bound read-only into every sandbox. The script runs once per test process: it reinstalls the
/// runtime package from this checkout, and a second run while another test's agents look for that package (or
/// its jobs import it) would make it vanish under them.
pub fn runtime_venv() -> (PathBuf, PathBuf) {
    static VENV: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    VENV.get_or_init(make_runtime_venv).clone()
}

fn make_runtime_venv() -> (PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/runtime-venv.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/runtime-venv.sh runs");
    assert!(out.status.success(), "scripts/runtime-venv.sh failed: the runtime's torch environment is needed");
    let venv = PathBuf::from(String::from_utf8(out.stdout).unwrap().lines().last().unwrap().trim());
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).unwrap();
    let home = cfg.lines().find_map(|l| l.strip_prefix("home = ")).expect("pyvenv.cfg names its Python");
    let python_root = Path::new(home.trim()).parent().unwrap().to_owned();
    (venv, python_root)
}

/// The example, where every job can read it.
pub fn example() -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/llama-parallel/train.py");
    super::net::shared_with_jobs("torch-e2e", &[("train.py", &std::fs::read_to_string(source).unwrap())])
}

/// What every multi-host torch test starts from: the runtime's environment, the example where jobs read it,
/// `hosts` test hosts on network segment `segment`, the real server listening on that segment's bridge with
/// heartbeats every second, and an operator's token.
pub struct TorchSetUp {
    pub venv: PathBuf,
    pub python_root: PathBuf,
    /// The example's folder, shared with jobs.
    pub example: PathBuf,
    /// The example's `train.py` in it.
    pub script: String,
    pub net: TestNet,
    pub server: Proc,
    /// The server's base URL, on the bridge.
    pub base: String,
    pub api: Api,
    /// The operator's bearer token.
    pub op: String,
    /// `PATH` with the environment's `bin` first, for the agents (torchrun).
    pub path: String,
}

impl TorchSetUp {
    pub async fn new(db: &PgPool, segment: u8, hosts: usize) -> Self {
        Self::with_env(db, segment, hosts, &[]).await
    }

    /// As [`TorchSetUp::new`], the server started with `env` too.
    pub async fn with_env(db: &PgPool, segment: u8, hosts: usize, env: &[(&str, &str)]) -> Self {
        let (venv, python_root) = runtime_venv();
        let example = example();
        let script = example.join("train.py").display().to_string();
        let net = TestNet::new(segment, hosts);
        let bridge = TestNet::bridge_address(segment);
        let operator_key = gpuplane::cli::bootstrap_operator(db, "e2e").await.unwrap();
        let mut server_env = vec![("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1")];
        server_env.extend_from_slice(env);
        let (server, base) = spawn_server_on(&database_url(db), &format!("{bridge}:0"), &server_env);
        let api = Api { base: base.clone(), client: reqwest::Client::new() };
        let op = api.token(&operator_key).await;
        let path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default());
        TorchSetUp { venv, python_root, example, script, net, server, base, api, op, path }
    }
}
