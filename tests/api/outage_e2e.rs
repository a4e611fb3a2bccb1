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

/// What a follower of `GET /v1/jobs/{id}/logs?follow=true` received: (line number, text) of each `line` event,
/// in order, and whether the `end` event came. It reconnects with `Last-Event-ID` whenever the stream breaks.
async fn follow_logs(base: String, token: String, job_id: String, deadline: Duration) -> (Vec<(i64, String)>, bool) {
    let client = reqwest::Client::new();
    let mut got: Vec<(i64, String)> = Vec::new();
    let until = Instant::now() + deadline;
    while Instant::now() < until {
        let mut request = client.get(format!("{base}/v1/jobs/{job_id}/logs?follow=true")).bearer_auth(&token);
        if let Some((last, _)) = got.last() {
            request = request.header("last-event-id", last.to_string());
        }
        let Ok(mut response) = request.send().await else {
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        };
        let mut pending = String::new();
        let mut id = None;
        while let Ok(Some(chunk)) = response.chunk().await {
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find('\n') {
                let field: String = pending.drain(..=end).collect();
                let field = field.trim_end();
                if let Some(value) = field.strip_prefix("id: ") {
                    id = value.parse::<i64>().ok();
                } else if let Some(data) = field.strip_prefix("data: ")
                    && let Some(line) = id.take()
                {
                    let value: serde_json::Value = serde_json::from_str(data).unwrap();
                    got.push((line, value["text"].as_str().unwrap().to_string()));
                } else if field == "event: end" {
                    return (got, true);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    (got, false)
}

#[sqlx::test]
async fn a_jobs_output_reaches_its_follower_whole_and_once_through_a_control_plane_restart(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base) = spawn_server(&database_url(&db), FAST);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "logs", 1).await;
    let dir = state_dir("logs-1");
    let _agent = spawn_agent(&base, Some(&join), "logs-node-0", &dir, &[]).0;
    let lease = api.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 4, "duration_hours": 1 })).await;
    let lease_id = lease["id"].as_str().unwrap().to_string();
    // 500 numbered lines over about 10 s, a line on stderr, and one holding the job's secret.
    let scripts = crate::support::net::shared_with_jobs(
        "logs",
        &[(
            "count.sh",
            "i=1; while [ $i -le 500 ]; do echo \"line $i\"; i=$((i+1)); sleep 0.02; done\n\
             echo 'to stderr' >&2; echo \"token $HF_TOKEN\"\n",
        )],
    );
    let script = scripts.join("count.sh").display().to_string();
    api.post("/v1/admin/templates", &op, json!({ "name": "run", "argv": ["{command}"] })).await;
    let job = api
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &tenant,
            json!({ "template": "run", "command": ["/bin/sh", script], "secret_env": {"HF_TOKEN": "hf_LoGsEcReT42"} }),
        )
        .await;
    let job_id = job["id"].as_str().unwrap().to_string();
    let follower = tokio::spawn(follow_logs(base.clone(), tenant.clone(), job_id.clone(), Duration::from_secs(120)));

    // Once output flows, the control plane goes away for 3 s while the job prints on.
    wait_until("the first lines are stored", 60, || async {
        let (lines,): (i64,) = sqlx::query_as("SELECT count(*) FROM job_log_lines WHERE job_id = $1::uuid")
            .bind(&job_id)
            .fetch_one(&db)
            .await
            .unwrap();
        lines >= 20
    })
    .await;
    let down_at = Utc::now();
    server.kill().unwrap();
    server.wait().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let bind = base.strip_prefix("http://").unwrap();
    let (mut server, _) = spawn_server_on(&database_url(&db), bind, FAST);
    let up_at = Utc::now();

    let (got, ended) = follower.await.unwrap();
    // The job printed while the service was away: its agent kept those lines and shipped them on its return.
    let (buffered,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM job_log_lines WHERE job_id = $1::uuid AND at BETWEEN $2 AND $3")
            .bind(&job_id)
            .bind(down_at)
            .bind(up_at)
            .fetch_one(&db)
            .await
            .unwrap();
    assert!(buffered > 20, "{buffered} lines were read during the outage");
    assert!(ended, "the follow ended with the job; got {} lines", got.len());
    let numbers: Vec<i64> = got.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, (1..=got.len() as i64).collect::<Vec<_>>(), "every line once, in order");
    let texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
    let counted: Vec<String> = (1..=500).map(|i| format!("line {i}")).collect();
    assert_eq!(&texts[..500], counted.iter().map(String::as_str).collect::<Vec<_>>().as_slice());
    assert_eq!(texts.len(), 502, "{:?}", &texts[500..]);
    assert!(texts.contains(&"to stderr") && texts.contains(&"token ***"), "{:?}", &texts[500..]);
    let job = api.get(&format!("/v1/jobs/{job_id}"), &tenant).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let page = api.get(&format!("/v1/jobs/{job_id}/logs?tail=1&rank=0"), &tenant).await;
    assert_eq!((page["lines"].as_array().unwrap().len(), page["lost_lines"].as_i64()), (0, Some(0)), "{page}");

    assert!(terminate(&mut server).success());
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(scripts);
}
