//! End to end: the real server binary on port 0 and real `gpuplane agent` processes on simulated GPUs.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::binary::{Proc, database_url, spawn_server, terminate};

/// Short liveness timeouts so the test sees unreachable/offline within seconds.
const FAST: &[(&str, &str)] = &[
    ("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1"),
    ("GPUPLANE_UNREACHABLE_AFTER_SECS", "2"),
    ("GPUPLANE_OFFLINE_AFTER_SECS", "4"),
];

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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplane"));
    cmd.args(["agent", "--server", server, "--simulate", "h100:4", "--hostname", hostname, "--state-dir"])
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
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
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

#[sqlx::test]
async fn agents_register_report_die_and_return(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base) = spawn_server(&database_url(&db), FAST);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "e2e", 3).await;
    // 36,000 per GPU-hour: 10 minor units per GPU-second, so every second shows in the charge.
    let (status, body) = api
        .call(
            reqwest::Method::PATCH,
            &format!("/v1/admin/pools/{pool}"),
            &op,
            Some(json!({ "price_per_gpu_hour_minor": 36_000 })),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // Registration and telemetry.
    let dir = state_dir("n1");
    let (mut agent, line) = spawn_agent(&base, Some(&join), "e2e-node-1", &dir, &[]);
    assert!(line.contains("registered"));
    let node_id = line.split_whitespace().nth(3).unwrap().to_string();
    let node = api.get(&format!("/v1/admin/nodes/{node_id}"), &op).await;
    assert_eq!(node["state"], "ready");
    assert_eq!(node["gpus"].as_array().unwrap().len(), 4);
    wait_until("node telemetry", 20, || async {
        let t = api.get(&format!("/v1/admin/nodes/{node_id}/telemetry?step_s=60"), &op).await;
        t["gpus"].as_array().unwrap().iter().all(|g| !g["points"].as_array().unwrap().is_empty())
    })
    .await;
    let lease = api.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1 })).await;
    let lease_id = lease["id"].as_str().unwrap().to_string();
    wait_until("lease telemetry", 20, || async {
        let t = api.get(&format!("/v1/leases/{lease_id}/telemetry?step_s=1"), &tenant).await;
        t["avg_gpu_util"].is_number() && t["gpus"].as_array().unwrap().len() == 2
    })
    .await;

    // While the agent heartbeats, the lease is metered up to its last heartbeat.
    wait_until("the lease is charged", 20, || async {
        gpuplane::billing::metering::meter_once(&db).await.unwrap();
        let (charged,): (i64,) = sqlx::query_as("SELECT charged_minor FROM leases WHERE id = $1::uuid")
            .bind(&lease_id)
            .fetch_one(&db)
            .await
            .unwrap();
        charged >= 2 * 2 * 10
    })
    .await;

    // The agent dies: unreachable, then offline, and the lease is interrupted.
    agent.kill().unwrap();
    agent.wait().unwrap();
    wait_until("node unreachable", 20, || async {
        let s = api.get(&format!("/v1/admin/nodes/{node_id}"), &op).await["state"].clone();
        s == "unreachable" || s == "offline"
    })
    .await;
    wait_until("lease interrupted", 20, || async {
        api.get(&format!("/v1/leases/{lease_id}"), &tenant).await["state"] == "interrupted"
    })
    .await;
    assert_eq!(api.get(&format!("/v1/admin/nodes/{node_id}"), &op).await["state"], "offline");
    // Billed exactly to the last heartbeat: 2 GPUs x the whole seconds from the start to ended_at x 10,
    // whatever the server's own metering did while the node was silent.
    gpuplane::billing::metering::meter_once(&db).await.unwrap();
    let (seconds, charged, ledger): (i64, i64, i64) = sqlx::query_as(
        "SELECT floor(extract(epoch FROM ended_at - starts_at))::bigint, charged_minor, \
             (SELECT COALESCE(-sum(amount_minor), 0)::bigint FROM ledger_entries WHERE lease_id = l.id) \
         FROM leases l WHERE id = $1::uuid",
    )
    .bind(&lease_id)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!((charged, ledger), (2 * seconds * 10, 2 * seconds * 10), "charged to ended_at, no further");

    // It comes back from its saved credential: the same node, ready again, no duplicate.
    let (mut agent, line) = spawn_agent(&base, None, "e2e-node-1", &dir, &[]);
    assert!(line.contains("attached") && line.contains(&node_id), "{line}");
    wait_until("node ready again", 20, || async {
        api.get(&format!("/v1/admin/nodes/{node_id}"), &op).await["state"] == "ready"
    })
    .await;
    let nodes = api.get("/v1/admin/nodes", &op).await;
    assert_eq!(nodes["items"].as_array().unwrap().len(), 1, "no duplicate node");

    // A second host reports a fatal XID on GPU 1: that GPU leaves service and is never allocated.
    let dir2 = state_dir("n2");
    let (mut faulty, line) = spawn_agent(&base, Some(&join), "e2e-node-2", &dir2, &["--inject-xid", "1:79"]);
    let faulty_id = line.split_whitespace().nth(3).unwrap().to_string();
    wait_until("GPU 1 unhealthy", 20, || async {
        api.get(&format!("/v1/admin/nodes/{faulty_id}"), &op).await["gpus"][1]["healthy"] == false
    })
    .await;
    // Only the faulty node takes leases now: its three healthy GPUs, never GPU 1.
    api.post(&format!("/v1/admin/nodes/{node_id}/cordon"), &op, json!({})).await;
    agent.kill().unwrap();
    let _ = agent.wait();
    let big = api
        .post(
            "/v1/leases",
            &tenant,
            json!({ "pool_id": pool, "gpu_count": 3, "duration_hours": 1, "placement": "single_node" }),
        )
        .await;
    let indices: Vec<i64> = big["gpus"].as_array().unwrap().iter().map(|g| g["index"].as_i64().unwrap()).collect();
    assert_eq!(big["gpus"][0]["node_id"], faulty_id.as_str());
    assert!(!indices.contains(&1), "the unhealthy GPU is never allocated: {indices:?}");
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/v1/leases",
            &tenant,
            Some(json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 })),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("insufficient_capacity")), "{body}");

    let _ = Command::new("kill").args(["-TERM", &faulty.id().to_string()]).status();
    assert!(faulty.wait().unwrap().success(), "the agent stops cleanly on SIGTERM");
    assert!(terminate(&mut server).success());
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(dir2);
}
