//! Control-plane outages with real processes: the server binary is killed and restarted while real agents
//! keep running.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgPool;

use crate::support::agents::{Api, spawn_agent, state_dir, wait_until};
use crate::support::binary::{database_url, spawn_server, spawn_server_on, terminate};

/// Heartbeats every second; unreachable after 3 s, offline after 6 s of silence.
const FAST: &[(&str, &str)] = &[
    ("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1"),
    ("GPUPLANE_UNREACHABLE_AFTER_SECS", "3"),
    ("GPUPLANE_OFFLINE_AFTER_SECS", "6"),
];

async fn db_now(db: &PgPool) -> DateTime<Utc> {
    sqlx::query_as::<_, (DateTime<Utc>,)>("SELECT now()").fetch_one(db).await.unwrap().0
}

#[sqlx::test]
async fn a_restart_longer_than_the_offline_limit_interrupts_nothing_and_agents_return_at_once(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base) = spawn_server(&database_url(&db), FAST);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "outage", 2).await;
    let dirs = [state_dir("outage-1"), state_dir("outage-2")];
    let _agents: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| spawn_agent(&base, Some(&join), &format!("outage-node-{i}"), dir, &[]).0)
        .collect();
    let lease = api.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 8, "duration_hours": 1 })).await;
    let lease_id = lease["id"].as_str().unwrap().to_string();

    // The control plane crashes and stays down longer than the offline limit; the agents keep running.
    server.kill().unwrap();
    server.wait().unwrap();
    std::thread::sleep(Duration::from_secs(8));
    let bind = base.strip_prefix("http://").unwrap();
    let (mut server, _) = spawn_server_on(&database_url(&db), bind, FAST);
    let restarted = Instant::now();
    let restarted_at = db_now(&db).await;

    // Both agents are back within a few seconds (they probe readiness instead of sleeping out their backoff).
    wait_until("both agents heartbeat again", 20, || async {
        let (back,): (i64,) = sqlx::query_as("SELECT count(*) FROM nodes WHERE last_heartbeat_at > $1")
            .bind(restarted_at)
            .fetch_one(&db)
            .await
            .unwrap();
        back == 2
    })
    .await;
    let returned_in = restarted.elapsed();
    eprintln!("agents returned {returned_in:?} after the restart");
    assert!(returned_in < Duration::from_secs(4), "agents took {returned_in:?} to return");

    // A full offline limit after the restart, with the sweeper running all along: nothing was unreachable,
    // nothing interrupted.
    wait_until("the sweeper has run past the offline limit", 30, || async {
        let (seen,): (DateTime<Utc>,) =
            sqlx::query_as("SELECT last_seen_at FROM control_plane_presence").fetch_one(&db).await.unwrap();
        seen > restarted_at + chrono::Duration::seconds(7)
    })
    .await;
    let (silence_events,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM lease_events WHERE kind IN ('node_unreachable', 'interrupted', 'interruption_held')",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(silence_events, 0);
    assert_eq!(api.get(&format!("/v1/leases/{lease_id}"), &tenant).await["state"], "active");
    let nodes = api.get("/v1/admin/nodes", &op).await;
    assert!(nodes["items"].as_array().unwrap().iter().all(|n| n["state"] == "ready"), "{nodes}");

    assert!(terminate(&mut server).success());
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[sqlx::test]
async fn a_pool_whose_agents_all_die_at_once_holds_its_lease_until_an_operator_releases_it(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base) = spawn_server(&database_url(&db), FAST);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "fleet", 3).await;
    let dirs = [state_dir("fleet-1"), state_dir("fleet-2"), state_dir("fleet-3")];
    let mut agents: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| spawn_agent(&base, Some(&join), &format!("fleet-node-{i}"), dir, &[]).0)
        .collect();
    let lease = api.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 12, "duration_hours": 1 })).await;
    let lease_id = lease["id"].as_str().unwrap().to_string();

    wait_until("every node heartbeats during the lease", 20, || async {
        let (behind,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM nodes WHERE last_heartbeat_at <= (SELECT starts_at FROM leases WHERE id = $1::uuid)",
        )
        .bind(&lease_id)
        .fetch_one(&db)
        .await
        .unwrap();
        behind == 0
    })
    .await;

    // Every agent of the pool dies at once (as if the network to the pool went down).
    for agent in &mut agents {
        agent.kill().unwrap();
        agent.wait().unwrap();
    }
    wait_until("all three nodes offline", 30, || async {
        let nodes = api.get("/v1/admin/nodes", &op).await;
        nodes["items"].as_array().unwrap().iter().all(|n| n["state"] == "offline")
    })
    .await;
    // The pool is held and says so; the lease stays active.
    let holds = api.get("/v1/admin/liveness-holds", &op).await;
    assert_eq!(holds.as_array().unwrap().len(), 1, "{holds}");
    assert_eq!((holds[0]["pool_id"].as_str(), holds[0]["silent_nodes"].as_i64()), (Some(pool.as_str()), Some(3)));
    assert_eq!(api.get(&format!("/v1/leases/{lease_id}"), &tenant).await["state"], "active");
    let events = api.get(&format!("/v1/leases/{lease_id}/events"), &tenant).await;
    assert!(events.as_array().unwrap().iter().any(|e| e["kind"] == "interruption_held"), "{events}");

    // The operator releases it: the lease is interrupted at the earliest last heartbeat of its nodes.
    api.post(&format!("/v1/admin/pools/{pool}/liveness-hold/release"), &op, json!({})).await;
    wait_until("lease interrupted", 20, || async {
        api.get(&format!("/v1/leases/{lease_id}"), &tenant).await["state"] == "interrupted"
    })
    .await;
    let (ended_at, earliest): (DateTime<Utc>, DateTime<Utc>) =
        sqlx::query_as("SELECT ended_at, (SELECT min(last_heartbeat_at) FROM nodes) FROM leases WHERE id = $1::uuid")
            .bind(&lease_id)
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(ended_at, earliest);

    assert!(terminate(&mut server).success());
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}
