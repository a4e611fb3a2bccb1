//! End to end: the real server binary on port 0 and real `gpuplane agent` processes on simulated GPUs.

use std::process::Command;

use serde_json::json;
use sqlx::PgPool;

use crate::support::agents::{Api, spawn_agent, state_dir, wait_until};
use crate::support::binary::{database_url, spawn_server, terminate};

/// Short liveness timeouts so the test sees unreachable/offline within seconds.
const FAST: &[(&str, &str)] = &[
    ("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1"),
    ("GPUPLANE_UNREACHABLE_AFTER_SECS", "2"),
    ("GPUPLANE_OFFLINE_AFTER_SECS", "4"),
];

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
