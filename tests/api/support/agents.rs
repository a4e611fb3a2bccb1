//! Real agents and the real server over HTTP: the API client of the end-to-end tests, agent processes and their
//! state directories, and waiting for a condition.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::binary::Proc;

/// A heartbeat every second (agents fetch assignments on the heartbeat's hint); default liveness, so a briefly
/// dead agent does not interrupt the lease.
pub const HEARTBEAT_1S: &[(&str, &str)] = &[("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1")];

pub struct Api {
    pub base: String,
    pub client: reqwest::Client,
}

impl Api {
    pub async fn call(&self, method: reqwest::Method, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.client.request(method, format!("{}{path}", self.base)).bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }
    pub async fn get(&self, path: &str, token: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, token, None).await;
        assert_eq!(status, 200, "{path}: {body}");
        body
    }
    pub async fn post(&self, path: &str, token: &str, body: Value) -> Value {
        let (status, body) = self.call(reqwest::Method::POST, path, token, Some(body)).await;
        assert!(status == 200 || status == 201, "{path}: {status} {body}");
        body
    }
    /// An H100 pool `{name}` with a join token for `max_uses` hosts, and a tenant `{name}` with a funded admin
    /// key. Returns (pool id, join token, tenant access token).
    pub async fn pool_and_funded_tenant(&self, op: &str, name: &str, max_uses: i32) -> (String, String, String) {
        let pool_body = json!({ "name": format!("h100-{name}"), "gpu_model": "h100", "region": "e2e",
            "price_per_gpu_hour_minor": 300, "currency": "USD" });
        let pool = self.post("/v1/admin/pools", op, pool_body).await["id"].as_str().unwrap().to_string();
        let join = self.post(&format!("/v1/admin/pools/{pool}/join-tokens"), op, json!({ "max_uses": max_uses })).await
            ["join_token"]
            .as_str()
            .unwrap()
            .to_string();
        let (_, tenant) = self.funded_tenant(op, name).await;
        (pool, join, tenant)
    }

    /// A tenant `{name}` with a balance; returns (tenant id, a tenant admin's access token).
    pub async fn funded_tenant(&self, op: &str, name: &str) -> (String, String) {
        let tenant_id =
            self.post("/v1/admin/tenants", op, json!({ "name": name })).await["id"].as_str().unwrap().to_string();
        let top_up = json!({ "kind": "topup", "amount_minor": 1_000_000, "currency": "USD", "reason": "e2e" });
        self.post(&format!("/v1/admin/tenants/{tenant_id}/ledger"), op, top_up).await;
        let admin = self.tenant_token(op, &tenant_id, "tenant_admin").await;
        (tenant_id, admin)
    }

    /// An access token of a new key of the tenant's with `role`.
    pub async fn tenant_token(&self, op: &str, tenant_id: &str, role: &str) -> String {
        let key_body = json!({ "name": role, "role": role });
        let key = self.post(&format!("/v1/admin/tenants/{tenant_id}/api-keys"), op, key_body).await;
        self.token(key["api_key"].as_str().unwrap()).await
    }

    pub async fn token(&self, api_key: &str) -> String {
        let res = self
            .client
            .post(format!("{}/v1/auth/token", self.base))
            .json(&json!({ "api_key": api_key }))
            .send()
            .await
            .unwrap();
        res.json::<Value>().await.unwrap()["access_token"].as_str().unwrap().to_string()
    }
}

pub fn state_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuplane-e2e-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A range of job uids of its own for each agent state directory: agents on one machine (as tests run them)
/// must not share lease users, as no two hosts' agents ever would. The same directory keeps its range across
/// restarts, as a host keeps its configuration.
pub fn job_uids_for(dir: &std::path::Path) -> String {
    static RANGES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut ranges = RANGES.lock().unwrap_or_else(|e| e.into_inner());
    let slot = match ranges.iter().position(|d| d == dir) {
        Some(slot) => slot,
        None => {
            ranges.push(dir.to_owned());
            ranges.len() - 1
        }
    };
    let first = 210_000 + 100 * slot as u32;
    format!("{first}-{}", first + 99)
}

/// Start an agent and wait for its "registered"/"attached" line.
pub fn spawn_agent(
    server: &str,
    join_token: Option<&str>,
    hostname: &str,
    dir: &PathBuf,
    extra: &[&str],
) -> (Proc, String) {
    start_agent(agent_command(server, join_token, hostname, dir, extra))
}

/// `gpuplane agent` on four simulated H100s, with job uids of its own; logs to the test's stderr.
pub fn agent_command(server: &str, join_token: Option<&str>, hostname: &str, dir: &PathBuf, extra: &[&str]) -> Command {
    agent_command_simulating("h100:4", server, join_token, hostname, dir, extra)
}

/// [`agent_command`] on the simulated GPUs `simulate` (`MODEL:COUNT`, e.g. `rtx4090:2`).
pub fn agent_command_simulating(
    simulate: &str,
    server: &str,
    join_token: Option<&str>,
    hostname: &str,
    dir: &PathBuf,
    extra: &[&str],
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplane"));
    cmd.args(["agent", "--server", server, "--simulate", simulate, "--hostname", hostname, "--state-dir"])
        .arg(dir)
        .args(["--job-uids", &job_uids_for(dir)])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(token) = join_token {
        cmd.args(["--join-token", token]);
    }
    cmd
}

/// Spawn it and wait for its "registered"/"attached" line.
pub fn start_agent(mut cmd: Command) -> (Proc, String) {
    let mut child = Proc(cmd.spawn().expect("spawn agent"));
    // The agent says its node once registered; one that cannot reach the service retries for ever, so the
    // wait has a bound (the agent is killed when `child` drops) and a test never hangs on it.
    let stdout = child.stdout.take().unwrap();
    let (said, heard) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = said.send(line);
    });
    let line = heard
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("the agent did not register within 120 s (its log is above)"));
    assert!(line.starts_with("gpuplane agent: node "), "unexpected agent output: {line}");
    (child, line)
}

pub async fn wait_until<F, Fut>(what: &str, secs: u64, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
