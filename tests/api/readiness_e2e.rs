//! End to end with the real server and real `gpuplane agent` processes on simulated GPUs: an old driver keeps
//! a node out of allocation until the host is upgraded; the echo probes between a lease's agents measure the
//! latency an agent injects, and raise `comm.latency_high` only then.

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::agents::{Api, spawn_agent, state_dir, wait_until};
use crate::support::binary::{database_url, spawn_server};

const FAST: &[(&str, &str)] = &[
    ("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1"),
    ("GPUPLANE_UNREACHABLE_AFTER_SECS", "5"),
    ("GPUPLANE_OFFLINE_AFTER_SECS", "60"),
];

fn node_id_of(line: &str) -> String {
    line.split_whitespace().nth(3).unwrap().to_string()
}

#[sqlx::test]
async fn an_agent_with_an_old_driver_is_not_ready_until_it_comes_back_upgraded(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (_server, base) = spawn_server(&database_url(&db), FAST);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "ready", 1).await;

    let dir = state_dir("old-driver");
    let old = ["--driver-version", "470.57.02", "--cuda-version", "11.4"];
    let (mut agent, line) = spawn_agent(&base, Some(&join), "e2e-old-driver", &dir, &old);
    let node_id = node_id_of(&line);
    let node = api.get(&format!("/v1/admin/nodes/{node_id}"), &op).await;
    assert_eq!(node["state"], "not_ready");
    assert_eq!(node["not_ready_reason"], "driver 470.57.02 < 525.60.13; CUDA 11.4 < 11.8");
    let lease = json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 });
    let (status, body) = api.call(reqwest::Method::POST, "/v1/leases", &tenant, Some(lease.clone())).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("insufficient_capacity")), "{body}");

    // The host is upgraded and its agent restarted: it attaches with its credential and heartbeats the new
    // versions, and the node is ready.
    agent.kill().unwrap();
    agent.wait().unwrap();
    let (_agent, line) = spawn_agent(&base, None, "e2e-old-driver", &dir, &["--driver-version", "550.54.15"]);
    assert!(line.contains("attached") && line.contains(&node_id), "{line}");
    wait_until("the upgraded node is ready", 20, || async {
        api.get(&format!("/v1/admin/nodes/{node_id}"), &op).await["state"] == "ready"
    })
    .await;
    let leased = api.post("/v1/leases", &tenant, lease).await;
    assert_eq!(leased["gpus"][0]["node_id"], node_id.as_str());
}

/// The pair of `lease` measured from `from` to `to`, once reported.
async fn pair(api: &Api, tenant: &str, lease: &str, from: &str, to: &str) -> Option<Value> {
    let network = api.get(&format!("/v1/leases/{lease}/network"), tenant).await;
    network["pairs"].as_array().unwrap().iter().find(|p| p["node_id"] == from && p["peer_node_id"] == to).cloned()
}

async fn latency_events(api: &Api, tenant: &str, lease: &str) -> usize {
    let events = api.get(&format!("/v1/leases/{lease}/events"), tenant).await;
    events.as_array().unwrap().iter().filter(|e| e["kind"] == "comm.latency_high").count()
}

#[sqlx::test]
async fn agents_of_a_spread_lease_measure_each_other_and_injected_delay_raises_the_alert(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (_server, base) = spawn_server(&database_url(&db), FAST);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "latency", 3).await;
    let local = ["--address", "127.0.0.1"];
    let (dir_a, dir_b, dir_c) = (state_dir("lat-a"), state_dir("lat-b"), state_dir("lat-c"));
    let (_a, line) = spawn_agent(&base, Some(&join), "e2e-lat-a", &dir_a, &local);
    let a = node_id_of(&line);
    let (_b, line) = spawn_agent(&base, Some(&join), "e2e-lat-b", &dir_b, &local);
    let b = node_id_of(&line);
    let spread = json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1, "placement": "spread" });

    // Without delay: both directions measured, well under the threshold, no insight, no alert.
    let lease = api.post("/v1/leases", &tenant, spread.clone()).await["id"].as_str().unwrap().to_string();
    wait_until("both nodes report round trips", 30, || async {
        pair(&api, &tenant, &lease, &a, &b).await.is_some() && pair(&api, &tenant, &lease, &b, &a).await.is_some()
    })
    .await;
    let ab = pair(&api, &tenant, &lease, &a, &b).await.unwrap();
    assert!(ab["p99_us"].as_i64().unwrap() < 20_000, "{ab}");
    let network = api.get(&format!("/v1/leases/{lease}/network"), &tenant).await;
    assert!(network["insights"].as_array().unwrap().is_empty(), "{network}");
    assert_eq!(latency_events(&api, &tenant, &lease).await, 0);
    api.post(&format!("/v1/leases/{lease}/release"), &tenant, json!({})).await;

    // A third host answers 25 ms late; B leaves the pool's allocation, so the next spread lease is A + C.
    let delayed = ["--address", "127.0.0.1", "--simulate-echo-delay-ms", "25"];
    let (_c, line) = spawn_agent(&base, Some(&join), "e2e-lat-c", &dir_c, &delayed);
    let c = node_id_of(&line);
    api.post(&format!("/v1/admin/nodes/{b}/cordon"), &op, json!({})).await;
    let lease = api.post("/v1/leases", &tenant, spread).await;
    let nodes: Vec<&str> = lease["gpus"].as_array().unwrap().iter().map(|g| g["node_id"].as_str().unwrap()).collect();
    assert!(nodes.contains(&a.as_str()) && nodes.contains(&c.as_str()), "{lease}");
    let lease = lease["id"].as_str().unwrap().to_string();
    wait_until("A measures C's delay", 30, || async {
        pair(&api, &tenant, &lease, &a, &c).await.is_some_and(|p| p["p99_us"].as_i64().unwrap() > 20_000)
    })
    .await;
    let ac = pair(&api, &tenant, &lease, &a, &c).await.unwrap();
    assert!(ac["p50_us"].as_i64().unwrap() >= 25_000, "{ac}");
    wait_until("the alert is raised", 10, || async { latency_events(&api, &tenant, &lease).await == 1 }).await;
    let network = api.get(&format!("/v1/leases/{lease}/network"), &tenant).await;
    assert_eq!(network["insights"][0]["kind"], "comm_latency_high", "{network}");
    assert!(network["insights"][0]["figures"]["worst"]["p99_ms"].as_f64().unwrap() > 20.0);
    // Further reports of the same condition do not raise it again.
    let reported = pair(&api, &tenant, &lease, &a, &c).await.unwrap()["measured_at"].clone();
    wait_until("another report", 10, || async {
        pair(&api, &tenant, &lease, &a, &c).await.is_some_and(|p| p["measured_at"] != reported)
    })
    .await;
    assert_eq!(latency_events(&api, &tenant, &lease).await, 1);
}
