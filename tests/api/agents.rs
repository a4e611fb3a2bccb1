use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::{Response, TestApp};

/// Mint a join token for `pool` (as `op`).
async fn join_token(app: &TestApp, op: &str, pool: &str, max_uses: i32) -> String {
    let res = app
        .post(&format!("/v1/admin/pools/{pool}/join-tokens"), op, json!({ "max_uses": max_uses, "ttl_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
    res.body["join_token"].as_str().unwrap().to_string()
}

fn facts(hostname: &str, gpus: usize, gpu_name: &str) -> Value {
    let gpu_list: Vec<Value> = (0..gpus)
        .map(|i| json!({ "index": i, "uuid": format!("GPU-{hostname}-{i}"), "name": gpu_name, "memory_bytes": 85_520_809_984i64 }))
        .collect();
    json!({ "hostname": hostname, "address": format!("{hostname}.test"), "gpus": gpu_list, "intra_link": "nvlink",
            "driver_version": "550.54.15", "cuda_version": "12.4", "network_gbps": 400, "rdma": true })
}

async fn register(app: &TestApp, token: &str, hostname: &str, gpus: usize) -> Response {
    app.call(
        Method::POST,
        "/v1/agent/register",
        None,
        Some(json!({ "join_token": token, "node": facts(hostname, gpus, "NVIDIA H100 80GB HBM3") })),
    )
    .await
}

fn sample(index: i64, at: chrono::DateTime<Utc>, util: f64) -> Value {
    json!({ "gpu_index": index, "at": at, "gpu_util": util, "mem_copy_util": 30.0, "fb_used_mib": 40000, "fb_free_mib": 41559,
            "power_w": 550.0, "energy_mj": 123456789, "gpu_temp_c": 61.0, "mem_temp_c": 70.0, "sm_clock_mhz": 1980,
            "nvlink_bandwidth_gbps": 120.5, "xid_count": 0, "xid_codes": [] })
}

async fn heartbeat(app: &TestApp, agent_token: &str, samples: Vec<Value>) -> Response {
    app.post("/v1/agent/heartbeat", agent_token, json!({ "samples": samples })).await
}

async fn setup(app: &TestApp) -> (String, String, String) {
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    (op, tenant, pool)
}

#[sqlx::test]
async fn agents_register_with_join_tokens_and_reattach_without_duplicates(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant, pool) = setup(&app).await;
    app.post(&format!("/v1/admin/pools/{pool}/join-tokens"), &tenant, json!({}))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    let token = join_token(&app, &op, &pool, 3).await;
    assert!(token.starts_with("gpj_"));
    let first = register(&app, &token, "node-a", 8).await.expect(StatusCode::CREATED);
    let node_id = first.body["node_id"].as_str().unwrap().to_string();
    assert_eq!(first.body["pool_id"], pool.as_str());
    assert_eq!(first.body["heartbeat_interval_s"], 10);
    let old_credential = first.body["agent_token"].as_str().unwrap().to_string();
    heartbeat(&app, &old_credential, vec![sample(0, Utc::now(), 50.0)]).await.expect(StatusCode::OK);

    // A join token alone never takes over a registered host name (it is visible to the node's tenants): refused,
    // nothing rotated, the real agent keeps working.
    register(&app, &token, "node-a", 8).await.expect_problem(StatusCode::CONFLICT, "node_identity_required");
    heartbeat(&app, &old_credential, vec![sample(0, Utc::now(), 50.0)]).await.expect(StatusCode::OK);

    // The node itself, proving it with its current credential: same node, new credential, the old one revoked.
    let body = json!({ "join_token": token, "node": facts("node-a", 8, "NVIDIA H100 80GB HBM3") });
    let again = app.call(Method::POST, "/v1/agent/register", Some(&old_credential), Some(body.clone())).await;
    let again = again.expect(StatusCode::OK);
    assert_eq!(again.body["node_id"], node_id.as_str());
    heartbeat(&app, &old_credential, vec![sample(0, Utc::now(), 50.0)])
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    let new_credential = again.body["agent_token"].as_str().unwrap().to_string();
    heartbeat(&app, &new_credential, vec![sample(0, Utc::now(), 50.0)]).await.expect(StatusCode::OK);
    // A rotated credential proves nothing; a forged one is 401.
    app.call(Method::POST, "/v1/agent/register", Some(&old_credential), Some(body.clone()))
        .await
        .expect_problem(StatusCode::CONFLICT, "node_identity_required");
    app.call(Method::POST, "/v1/agent/register", Some("not-a-credential"), Some(body.clone()))
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    // Another node's credential does not prove this one.
    let other = register(&app, &token, "node-c", 8).await.expect(StatusCode::CREATED);
    let other_credential = other.body["agent_token"].as_str().unwrap().to_string();
    let fresh = join_token(&app, &op, &pool, 1).await;
    let body = json!({ "join_token": fresh, "node": facts("node-a", 8, "NVIDIA H100 80GB HBM3") });
    app.call(Method::POST, "/v1/agent/register", Some(&other_credential), Some(body.clone()))
        .await
        .expect_problem(StatusCode::CONFLICT, "node_identity_required");

    // An agent that lost its state: an operator allows one re-registration by join token, which re-attaches.
    let allow = format!("/v1/admin/nodes/{node_id}/allow-reregistration");
    app.post(&allow, &tenant, json!({})).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    app.post(&allow, &op, json!({})).await.expect(StatusCode::OK);
    let token2 = join_token(&app, &op, &pool, 1).await;
    let reattached = register(&app, &token2, "node-a", 8).await.expect(StatusCode::OK);
    assert_eq!(reattached.body["node_id"], node_id.as_str());
    heartbeat(&app, &new_credential, vec![sample(0, Utc::now(), 50.0)])
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    // The permission was used up.
    let token3 = join_token(&app, &op, &pool, 1).await;
    register(&app, &token3, "node-a", 8).await.expect_problem(StatusCode::CONFLICT, "node_identity_required");
    let (nodes,): (i64,) = sqlx::query_as("SELECT count(*) FROM nodes").fetch_one(&db).await.unwrap();
    assert_eq!(nodes, 2, "no duplicate node");
    let node = app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.expect(StatusCode::OK);
    assert_eq!(node.body["state"], "ready");
    assert_eq!(node.body["gpus"].as_array().unwrap().len(), 8);

    // Used up, unknown, revoked and expired tokens are refused.
    register(&app, &token, "node-b", 8).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    register(&app, "gpj_nope", "node-b", 8).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    let revoked = join_token(&app, &op, &pool, 5).await;
    let listed = app.get(&format!("/v1/admin/pools/{pool}/join-tokens"), &op).await.expect(StatusCode::OK);
    let id = listed.body.as_array().unwrap().last().unwrap()["id"].as_str().unwrap().to_string();
    app.delete(&format!("/v1/admin/join-tokens/{id}"), &op).await.expect(StatusCode::NO_CONTENT);
    register(&app, &revoked, "node-b", 8).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    let expired = join_token(&app, &op, &pool, 5).await;
    sqlx::query("UPDATE join_tokens SET expires_at = now() - interval '1 second' WHERE revoked_at IS NULL")
        .execute(&db)
        .await
        .unwrap();
    register(&app, &expired, "node-b", 8).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    let (nodes,): (i64,) = sqlx::query_as("SELECT count(*) FROM nodes").fetch_one(&db).await.unwrap();
    assert_eq!(nodes, 2);
}

#[sqlx::test]
async fn gpus_of_another_model_are_rejected(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, pool) = setup(&app).await;
    let token = join_token(&app, &op, &pool, 1).await;
    let res = app
        .call(
            Method::POST,
            "/v1/agent/register",
            None,
            Some(json!({ "join_token": token, "node": facts("node-x", 2, "NVIDIA GeForce RTX 4090") })),
        )
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(res.error_fields(), ["node.gpus[0].name", "node.gpus[1].name"]);
    assert!(res.body["errors"][0]["message"].as_str().unwrap().contains("H100"));
    let (nodes, uses): (i64, i32) =
        sqlx::query_as("SELECT (SELECT count(*) FROM nodes), (SELECT uses FROM join_tokens)")
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!((nodes, uses), (0, 0), "a refused registration changes nothing");
}

#[sqlx::test]
async fn agent_and_user_credentials_never_cross(db: PgPool) {
    let app = TestApp::new(db);
    let (op, tenant, pool) = setup(&app).await;
    let token = join_token(&app, &op, &pool, 1).await;
    let agent = register(&app, &token, "node-a", 1).await.expect(StatusCode::CREATED);
    let agent_token = agent.body["agent_token"].as_str().unwrap();
    for user in [&op, &tenant] {
        heartbeat(&app, user, vec![]).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    for path in ["/v1/tenant", "/v1/pools", "/v1/admin/nodes", "/v1/leases"] {
        app.get(path, agent_token).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    }
}

#[sqlx::test]
async fn bad_heartbeats_are_4xx_and_store_nothing(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, pool) = setup(&app).await;
    let token = join_token(&app, &op, &pool, 1).await;
    let agent = register(&app, &token, "node-a", 2).await.expect(StatusCode::CREATED);
    let creds = agent.body["agent_token"].as_str().unwrap().to_string();
    let now = Utc::now();
    let mut absurd = sample(0, now, 50.0);
    absurd["power_w"] = json!(-5.0);
    absurd["gpu_temp_c"] = json!(900.0);
    let mut negative_fb = sample(1, now, 50.0);
    negative_fb["fb_used_mib"] = json!(-1);
    let cases = vec![
        (vec![sample(0, now, 50.0), sample(7, now, 50.0)], vec!["samples[1].gpu_index"]),
        (vec![sample(0, now, 150.0)], vec!["samples[0].gpu_util"]),
        (vec![absurd], vec!["samples[0].power_w", "samples[0].gpu_temp_c"]),
        (vec![negative_fb], vec!["samples[0].fb_used_mib"]),
        (vec![sample(0, now + Duration::hours(1), 50.0)], vec!["samples[0].at"]),
    ];
    for (samples, fields) in cases {
        let res = heartbeat(&app, &creds, samples)
            .await
            .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(res.error_fields(), fields);
    }
    // Wrong types and oversized bodies.
    heartbeat(&app, &creds, vec![json!({ "gpu_index": "zero" })])
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let huge: Vec<Value> = (0..5000).map(|i| sample(0, now - Duration::seconds(i), 50.0)).collect();
    let res = heartbeat(&app, &creds, huge).await;
    assert!(
        res.status == StatusCode::PAYLOAD_TOO_LARGE || res.status == StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        res.status
    );
    let (stored,): (i64,) = sqlx::query_as("SELECT count(*) FROM gpu_samples").fetch_one(&db).await.unwrap();
    assert_eq!(stored, 0, "nothing stored from bad heartbeats");
}

#[sqlx::test]
async fn telemetry_is_stored_once_and_readable_by_the_right_people(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant, pool) = setup(&app).await;
    let (_, other_tenant) = app.tenant_admin(&op, "other").await;
    let token = join_token(&app, &op, &pool, 1).await;
    let agent = register(&app, &token, "node-a", 2).await.expect(StatusCode::CREATED);
    let node_id = agent.body["node_id"].as_str().unwrap().to_string();
    let creds = agent.body["agent_token"].as_str().unwrap().to_string();
    let lease = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
    let lease_id = lease.body["id"].as_str().unwrap();
    let leased_index = lease.body["gpus"][0]["index"].as_i64().unwrap();
    let started =
        chrono::DateTime::parse_from_rfc3339(lease.body["starts_at"].as_str().unwrap()).unwrap().with_timezone(&Utc);
    let t0 = started + Duration::milliseconds(10);
    let batch: Vec<Value> =
        (0..2).flat_map(|i| [sample(i, t0, 80.0), sample(i, t0 + Duration::milliseconds(10), 60.0)]).collect();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let res = heartbeat(&app, &creds, batch.clone()).await.expect(StatusCode::OK);
    assert_eq!(res.body["accepted_samples"], 4);
    assert_eq!(res.body["desired_state"], "active");
    // A resent batch (retry after a lost response) is not stored twice.
    let res = heartbeat(&app, &creds, batch).await.expect(StatusCode::OK);
    assert_eq!(res.body["accepted_samples"], 0);

    let range = format!(
        "from={}&to={}&step_s=60",
        (t0 - Duration::minutes(1)).to_rfc3339(),
        (t0 + Duration::minutes(1)).to_rfc3339()
    )
    .replace('+', "%2B");
    let tel = app.get(&format!("/v1/leases/{lease_id}/telemetry?{range}"), &tenant).await.expect(StatusCode::OK);
    let gpus = tel.body["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 1, "only the leased GPU");
    assert_eq!(gpus[0]["index"], leased_index);
    let points: i64 = gpus[0]["points"].as_array().unwrap().iter().map(|p| p["samples"].as_i64().unwrap()).sum();
    assert_eq!(points, 2);
    assert!((tel.body["avg_gpu_util"].as_f64().unwrap() - 70.0).abs() < 0.01);
    app.get(&format!("/v1/leases/{lease_id}/telemetry"), &other_tenant)
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.get(&format!("/v1/leases/{lease_id}/telemetry?step_s=0"), &tenant)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");

    let node_tel = app.get(&format!("/v1/admin/nodes/{node_id}/telemetry?{range}"), &op).await.expect(StatusCode::OK);
    assert_eq!(node_tel.body["gpus"].as_array().unwrap().len(), 2);
    let util = app.get(&format!("/v1/admin/pools/{pool}/utilization?{range}"), &op).await.expect(StatusCode::OK);
    assert_eq!(util.body["samples"], 4);
    assert!((util.body["avg_gpu_util"].as_f64().unwrap() - 70.0).abs() < 0.01);
    app.get(&format!("/v1/admin/nodes/{node_id}/telemetry"), &tenant)
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
}

#[sqlx::test]
async fn silent_nodes_become_unreachable_then_offline_and_their_leases_interrupted(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant, pool) = setup(&app).await;
    let token = join_token(&app, &op, &pool, 1).await;
    let agent = register(&app, &token, "node-a", 4).await.expect(StatusCode::CREATED);
    let node_id = agent.body["node_id"].as_str().unwrap().to_string();
    let creds = agent.body["agent_token"].as_str().unwrap().to_string();
    let lease = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
    let lease_id = lease.body["id"].as_str().unwrap().to_string();
    let sweep = || app.sweep();

    sqlx::query("UPDATE nodes SET last_heartbeat_at = now() - interval '60 seconds'").execute(&db).await.unwrap();
    sweep().await;
    let node = app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.expect(StatusCode::OK);
    assert_eq!(node.body["state"], "unreachable");
    let events = app.get(&format!("/v1/leases/{lease_id}/events"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(events.body.as_array().unwrap().last().unwrap()["kind"], "node_unreachable");
    app.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect_problem(StatusCode::CONFLICT, "insufficient_capacity");

    let (last,): (chrono::DateTime<Utc>,) = sqlx::query_as(
        "UPDATE nodes SET last_heartbeat_at = now() - interval '10 minutes' RETURNING last_heartbeat_at",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    sweep().await;
    sweep().await;
    let node = app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.expect(StatusCode::OK);
    assert_eq!(node.body["state"], "offline");
    let lease = app.get(&format!("/v1/leases/{lease_id}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(lease.body["state"], "interrupted");
    let ended = chrono::DateTime::parse_from_rfc3339(lease.body["ended_at"].as_str().unwrap()).unwrap();
    let started = chrono::DateTime::parse_from_rfc3339(lease.body["starts_at"].as_str().unwrap()).unwrap();
    assert_eq!(
        ended,
        last.max(started.with_timezone(&Utc)),
        "interrupted at the last heartbeat, never before the start"
    );
    let kinds: Vec<String> = app
        .get(&format!("/v1/leases/{lease_id}/events"), &tenant)
        .await
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds.last().unwrap(), "interrupted");

    // An operator cordons it while it is down; when the agent returns the cordon holds.
    app.post(&format!("/v1/admin/nodes/{node_id}/cordon"), &op, json!({})).await.expect(StatusCode::OK);
    let res = heartbeat(&app, &creds, vec![sample(0, Utc::now(), 10.0)]).await.expect(StatusCode::OK);
    assert_eq!(res.body["desired_state"], "drain");
    assert_eq!(app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.body["state"], "cordoned");
    app.post(&format!("/v1/admin/nodes/{node_id}/uncordon"), &op, json!({})).await.expect(StatusCode::OK);
    assert_eq!(app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.body["state"], "ready");
    app.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 4, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
}

#[sqlx::test]
async fn a_fatal_xid_takes_the_gpu_out_of_service_until_restored(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant, pool) = setup(&app).await;
    let token = join_token(&app, &op, &pool, 1).await;
    let agent = register(&app, &token, "node-a", 2).await.expect(StatusCode::CREATED);
    let node_id = agent.body["node_id"].as_str().unwrap().to_string();
    let creds = agent.body["agent_token"].as_str().unwrap().to_string();
    let lease = app
        .post(
            "/v1/leases",
            &tenant,
            json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1, "placement": "single_node" }),
        )
        .await
        .expect(StatusCode::CREATED);
    let leased = lease.body["gpus"][0]["index"].as_i64().unwrap();
    let free = 1 - leased;
    // A non-fatal XID (13, graphics engine exception) changes nothing; 79 (fell off the bus) does.
    let mut benign = sample(free, Utc::now(), 0.0);
    benign["xid_count"] = json!(3);
    benign["xid_codes"] = json!([13]);
    heartbeat(&app, &creds, vec![benign]).await.expect(StatusCode::OK);
    let node = app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.expect(StatusCode::OK);
    assert!(node.body["gpus"].as_array().unwrap().iter().all(|g| g["healthy"] == true));
    let mut fatal_free = sample(free, Utc::now(), 0.0);
    fatal_free["xid_count"] = json!(1);
    fatal_free["xid_codes"] = json!([79]);
    let mut fatal_leased = sample(leased, Utc::now(), 0.0);
    fatal_leased["xid_count"] = json!(2);
    fatal_leased["xid_codes"] = json!([48, 48]);
    heartbeat(&app, &creds, vec![fatal_free, fatal_leased]).await.expect(StatusCode::OK);
    let node = app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.expect(StatusCode::OK);
    assert!(node.body["gpus"].as_array().unwrap().iter().all(|g| g["healthy"] == false));
    let events = app
        .get(&format!("/v1/leases/{}/events", lease.body["id"].as_str().unwrap()), &tenant)
        .await
        .expect(StatusCode::OK);
    let last = events.body.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "gpu_unhealthy");
    assert!(last["reason"].as_str().unwrap().contains("48"));
    // Never allocated while unhealthy, even after the lease releases it.
    app.post(&format!("/v1/leases/{}/release", lease.body["id"].as_str().unwrap()), &tenant, json!({}))
        .await
        .expect(StatusCode::OK);
    app.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    let gpu_id = node.body["gpus"][free as usize]["id"].as_str().unwrap();
    app.post(&format!("/v1/admin/gpus/{gpu_id}/restore"), &tenant, json!({}))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    let restored = app.post(&format!("/v1/admin/gpus/{gpu_id}/restore"), &op, json!({})).await.expect(StatusCode::OK);
    assert_eq!(restored.body["gpus"][free as usize]["healthy"], true);
    let again = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(again.body["gpus"][0]["gpu_id"], gpu_id);
    let (ok,): (bool,) = sqlx::query_as(
        "SELECT bool_and(n.free_gpus = (SELECT count(*) FROM gpus g WHERE g.node_id = n.id AND g.healthy \
         AND g.held_by IS NULL)) FROM nodes n",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert!(ok, "free counters stay exact through health changes");
}

#[sqlx::test]
async fn external_nodes_are_not_subject_to_agent_liveness(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, pool) = setup(&app).await;
    let node = app.manual_node(&op, &pool, "manual-1", 2, true).await;
    sqlx::query("UPDATE nodes SET last_heartbeat_at = now() - interval '1 day'").execute(&db).await.unwrap();
    app.sweep().await;
    assert_eq!(app.get(&format!("/v1/admin/nodes/{node}"), &op).await.body["state"], "ready");
    let _ = Request::builder().method("GET").uri("/").body(Body::empty());
}

/// A registered 2-GPU agent node in a fresh pool: (app, operator, pool, node id, agent credential).
async fn telemetry_node(db: &PgPool) -> (TestApp, String, String, String, String) {
    let app = TestApp::new(db.clone());
    let (op, _tenant, pool) = setup(&app).await;
    let token = join_token(&app, &op, &pool, 1).await;
    let agent = register(&app, &token, "node-a", 2).await.expect(StatusCode::CREATED);
    let node_id = agent.body["node_id"].as_str().unwrap().to_string();
    let creds = agent.body["agent_token"].as_str().unwrap().to_string();
    (app, op, pool, node_id, creds)
}

fn varied_sample(index: i64, at: chrono::DateTime<Utc>, k: i64) -> Value {
    let mut s = sample(index, at, ((k * 37 + index * 11) % 100) as f64);
    s["power_w"] = json!(200.0 + ((k * 13) % 400) as f64);
    s["fb_used_mib"] = json!(1000 + (k * 977) % 70_000);
    s["gpu_temp_c"] = json!(40.0 + (k % 30) as f64);
    s["energy_mj"] = json!(1_000_000_000 + k * 2_500_000);
    s["xid_count"] = json!(k % 3);
    s
}

async fn count_samples(db: &PgPool) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM gpu_samples), (SELECT COALESCE(sum(samples), 0)::bigint FROM gpu_minutes)",
    )
    .fetch_one(db)
    .await
    .unwrap()
}

#[sqlx::test]
async fn partitions_are_made_ahead_idempotently_and_dropped_whole_at_retention(db: PgPool) {
    let (app, _op, _pool, _node, creds) = telemetry_node(&db).await;
    let settings = app.state.settings.clone();
    let now = Utc::now();
    heartbeat(&app, &creds, vec![sample(0, now, 50.0), sample(1, now, 50.0)]).await.expect(StatusCode::OK);
    // Ten days on, from two replicas at once: the partitions ahead exist once, both calls succeed.
    let later = now + Duration::days(10);
    let (a, b) = tokio::join!(
        gpuplane::agent_api::rollups::ensure_partitions(&db, &settings, later),
        gpuplane::agent_api::rollups::ensure_partitions(&db, &settings, later)
    );
    assert!(a.unwrap() + b.unwrap() > 0);
    assert_eq!(gpuplane::agent_api::rollups::ensure_partitions(&db, &settings, later).await.unwrap(), 0);
    let ahead = format!("telemetry_raw_p{}", (later + Duration::days(2)).format("%Y%m%d"));
    let today = format!("telemetry_raw_p{}", now.format("%Y%m%d"));
    let exists = |name: String| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, bool>("SELECT to_regclass($1) IS NOT NULL").bind(name).fetch_one(&db).await.unwrap()
        }
    };
    assert!(exists(ahead.clone()).await, "{ahead} made ahead");
    assert!(exists(format!("node_hours_p{}", (later + Duration::days(2)).format("%Y%m"))).await);

    // Within the raw retention nothing is dropped.
    let dropped = gpuplane::agent_api::rollups::drop_expired_partitions(&db, &settings, now).await.unwrap();
    assert!(!dropped.iter().any(|p| p == &today), "{dropped:?}");
    assert_eq!(count_samples(&db).await.0, 2);
    // Once today is older than the raw retention (24 h), its partition goes whole: the table is gone, not
    // emptied row by row; later raw partitions and the (30-day) minute rollups stay.
    let dropped =
        gpuplane::agent_api::rollups::drop_expired_partitions(&db, &settings, now + Duration::days(3)).await.unwrap();
    assert!(dropped.contains(&today), "{dropped:?}");
    assert!(!exists(today.clone()).await);
    assert!(exists(format!("gpu_minutes_p{}", now.format("%Y%m%d"))).await);
    assert!(exists(ahead).await);
    assert_eq!(count_samples(&db).await.0, 0);
    let (deletes,): (i64,) = sqlx::query_as(
        "SELECT COALESCE(sum(n_tup_del), 0)::bigint FROM pg_stat_user_tables WHERE relname LIKE 'telemetry_raw%'",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(deletes, 0, "no row deleted");
    // Heartbeats still land (the current partition exists again once made ahead for the real now).
    gpuplane::agent_api::rollups::ensure_partitions(&db, &settings, Utc::now()).await.unwrap();
    let res = heartbeat(&app, &creds, vec![sample(0, Utc::now(), 50.0)]).await.expect(StatusCode::OK);
    assert_eq!(res.body["accepted_samples"], 1);
}

#[sqlx::test]
async fn resent_and_late_samples_are_counted_once_in_raw_and_rollups(db: PgPool) {
    let (app, _op, _pool, _node, creds) = telemetry_node(&db).await;
    let fold = || gpuplane::agent_api::rollups::fold(&db, std::time::Duration::ZERO);
    let minute =
        chrono::DurationRound::duration_trunc(Utc::now() - Duration::minutes(3), Duration::minutes(1)).unwrap();
    let batch: Vec<Value> =
        (0..6).flat_map(|k| (0..2).map(move |i| varied_sample(i, minute + Duration::seconds(k * 10), k))).collect();
    let res = heartbeat(&app, &creds, batch.clone()).await.expect(StatusCode::OK);
    assert_eq!(res.body["accepted_samples"], 12);
    fold().await.unwrap();
    assert_eq!(count_samples(&db).await, (12, 12));
    // The agent resends its buffer (a lost answer, an outage): nothing new, before or after a fold.
    let res = heartbeat(&app, &creds, batch.clone()).await.expect(StatusCode::OK);
    assert_eq!(res.body["accepted_samples"], 0);
    fold().await.unwrap();
    assert_eq!(count_samples(&db).await, (12, 12));
    // A sample for the already folded minute arriving late (a buffered one) is folded in, once.
    let late =
        vec![varied_sample(0, minute + Duration::seconds(5), 9), varied_sample(1, minute + Duration::seconds(5), 9)];
    let mut mixed = batch;
    mixed.extend(late.clone());
    let res = heartbeat(&app, &creds, mixed).await.expect(StatusCode::OK);
    assert_eq!(res.body["accepted_samples"], 2);
    fold().await.unwrap();
    fold().await.unwrap();
    assert_eq!(count_samples(&db).await, (14, 14));
    let (hour_samples,): (i64,) =
        sqlx::query_as("SELECT sum(samples)::bigint FROM node_hours").fetch_one(&db).await.unwrap();
    assert_eq!(hour_samples, 14);
}

#[sqlx::test]
async fn rollups_equal_the_aggregate_of_raw_samples_and_serve_long_ranges(db: PgPool) {
    let (app, op, pool, node_id, creds) = telemetry_node(&db).await;
    // Three minutes of samples every 10 s on both GPUs, with varied values, across an hour boundary maybe.
    let start = chrono::DurationRound::duration_trunc(Utc::now() - Duration::minutes(5), Duration::minutes(1)).unwrap();
    let batch: Vec<Value> =
        (0..18).flat_map(|k| (0..2).map(move |i| varied_sample(i, start + Duration::seconds(k * 10), k))).collect();
    heartbeat(&app, &creds, batch).await.expect(StatusCode::OK);
    gpuplane::agent_api::rollups::fold(&db, std::time::Duration::ZERO).await.unwrap();

    /// gpu, minute, samples, util sum and max, fb max, power sum, temp max, XIDs, energy.
    type MinuteRow = (uuid::Uuid, chrono::DateTime<Utc>, i32, f64, f32, i32, f64, f32, i32, i64);
    let minutes: Vec<MinuteRow> = sqlx::query_as(
        "SELECT gpu_id, minute, samples, gpu_util_sum, gpu_util_max, fb_used_max, power_sum, temp_max, xid_count, energy_j \
         FROM gpu_minutes ORDER BY 1, 2",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    let raw: Vec<MinuteRow> = sqlx::query_as(
        "SELECT gpu_id, date_trunc('minute', at), count(*)::int, sum(gpu_util::float8), max(gpu_util), max(fb_used_mib), \
             sum(power_w::float8), max(gpu_temp_c), sum(xid_count)::int, max(energy_j) - min(energy_j) \
         FROM gpu_samples GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(minutes.len(), 6, "2 GPUs x 3 minutes");
    assert_eq!(minutes, raw);
    // Energy: the counter advanced 2.5 kJ per 10 s sample, 5 intervals within each minute.
    assert!(minutes.iter().all(|m| m.9 == 12_500), "{minutes:?}");
    let (hours, raw_hours): ((i64, f64, f64), (i64, f64, f64)) = (
        sqlx::query_as("SELECT sum(samples)::bigint, sum(gpu_util_sum), sum(power_sum) FROM node_hours")
            .fetch_one(&db)
            .await
            .unwrap(),
        sqlx::query_as("SELECT count(*), sum(gpu_util::float8), sum(power_w::float8) FROM gpu_samples")
            .fetch_one(&db)
            .await
            .unwrap(),
    );
    assert_eq!(hours, raw_hours);

    // The API answers a long range from the rollups with the same figures as a short one from raw samples.
    let range = |from: chrono::DateTime<Utc>| {
        format!("from={}&to={}&step_s=3600", from.to_rfc3339(), (start + Duration::minutes(3)).to_rfc3339())
            .replace('+', "%2B")
    };
    let short =
        app.get(&format!("/v1/admin/nodes/{node_id}/telemetry?{}", range(start)), &op).await.expect(StatusCode::OK);
    let long = app
        .get(&format!("/v1/admin/nodes/{node_id}/telemetry?{}", range(start - Duration::hours(8))), &op)
        .await
        .expect(StatusCode::OK);
    let samples = |t: &Value| -> i64 {
        t["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["points"].as_array().unwrap())
            .map(|p| p["samples"].as_i64().unwrap())
            .sum()
    };
    assert_eq!((samples(&short.body), samples(&long.body)), (36, 36));
    let avg = |t: &Value| t["avg_gpu_util"].as_f64().unwrap();
    assert!((avg(&short.body) - avg(&long.body)).abs() < 1e-3, "{} vs {}", short.body, long.body);
    let short =
        app.get(&format!("/v1/admin/pools/{pool}/utilization?{}", range(start)), &op).await.expect(StatusCode::OK);
    let long = app
        .get(&format!("/v1/admin/pools/{pool}/utilization?{}", range(start - Duration::hours(8))), &op)
        .await
        .expect(StatusCode::OK);
    assert_eq!((short.body["samples"].as_i64(), long.body["samples"].as_i64()), (Some(36), Some(36)));
    assert!((avg(&short.body) - avg(&long.body)).abs() < 1e-3);
}

#[sqlx::test]
async fn heartbeats_are_stored_packed_and_read_back_as_sent(db: PgPool) {
    use gpuplane::agent_api::codec;
    use gpuplane::agent_api::protocol::GpuSample;
    let (app, op, _pool, node_id, creds) = telemetry_node(&db).await;
    let at = chrono::DurationRound::duration_trunc(Utc::now() - Duration::minutes(2), Duration::seconds(1)).unwrap();
    // Odd values on purpose: fractions the units round, fields not reported, a value beyond its field's range.
    let mut a = varied_sample(0, at, 7);
    a["gpu_util"] = json!(33.3);
    a["power_w"] = json!(612.34);
    a["mem_temp_c"] = Value::Null;
    a["nvlink_bandwidth_gbps"] = Value::Null;
    a["xid_count"] = json!(2);
    a["xid_codes"] = json!([13, 31]);
    let mut b = varied_sample(1, at, 8);
    b["nvlink_bandwidth_gbps"] = json!(100_000.0);
    b["gpu_temp_c"] = json!(-12.0);
    let later = varied_sample(1, at + Duration::seconds(10), 9);
    let sent = vec![b.clone(), a.clone(), later.clone()];
    let res = heartbeat(&app, &creds, sent.clone()).await.expect(StatusCode::OK);
    assert_eq!(res.body["accepted_samples"], 3);

    // One row per instant, keyed by the node's 4-byte key, 25 bytes per GPU, XIDs beside.
    type RawRow = (i32, chrono::DateTime<Utc>, Vec<u8>, Option<Vec<i32>>);
    let rows: Vec<RawRow> = sqlx::query_as(
        "SELECT r.node_key, r.at, r.samples, r.xids FROM telemetry_raw r \
         JOIN nodes n ON n.telemetry_key = r.node_key WHERE n.id = $1::uuid ORDER BY r.at",
    )
    .bind(&node_id)
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].1, rows[1].1), (at, at + Duration::seconds(10)));
    assert_eq!((rows[0].2.len(), rows[1].2.len()), (2 * codec::RECORD_LEN, codec::RECORD_LEN));
    assert_eq!(rows[0].3, Some(vec![0, 13, 0, 31]));
    assert_eq!(rows[1].3, None);

    // What is stored is what the codec makes of what was sent...
    let parse = |v: &Value| serde_json::from_value::<GpuSample>(v.clone()).unwrap();
    let (a, b, later) = (parse(&a), parse(&b), parse(&later));
    let stored: Vec<codec::StoredSample> = rows.iter().flat_map(|r| codec::decode(&r.2).unwrap()).collect();
    let expected: Vec<codec::StoredSample> = [vec![(0, &a), (1, &b)], vec![(1, &later)]]
        .into_iter()
        .flat_map(|mut gpus| codec::decode(&codec::encode_instant(&mut gpus)).unwrap())
        .collect();
    assert_eq!(stored, expected);
    assert_eq!((stored[0].gpu_util, stored[0].power_w, stored[0].mem_temp_c), (33.5, 612.3, None));
    assert_eq!((stored[1].nvlink_bandwidth_gbps, stored[1].gpu_temp_c), (Some(6553.4), -12.0));
    // ...and SQL (`telemetry_decode`, behind the `gpu_samples` view) reads the bytes as the codec does.
    type ViewRow = (i32, f32, f32, i32, i32, f32, i64, f32, Option<f32>, i32, Option<f32>, i32);
    let view: Vec<ViewRow> = sqlx::query_as(
        "SELECT g.idx, s.gpu_util, s.mem_copy_util, s.fb_used_mib, s.fb_free_mib, s.power_w, s.energy_j, \
             s.gpu_temp_c, s.mem_temp_c, s.sm_clock_mhz, s.nvlink_bandwidth_gbps, s.xid_count \
         FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id ORDER BY s.at, g.idx",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    let from_codec: Vec<ViewRow> = stored
        .iter()
        .map(|s| {
            (
                s.gpu_index,
                s.gpu_util,
                s.mem_copy_util,
                s.fb_used_mib as i32,
                s.fb_free_mib as i32,
                s.power_w,
                i64::from(s.energy_j),
                s.gpu_temp_c,
                s.mem_temp_c,
                s.sm_clock_mhz,
                s.nvlink_bandwidth_gbps,
                s.xid_count,
            )
        })
        .collect();
    assert_eq!(view, from_codec);

    // Bytes that are not whole records never get in, whoever writes them.
    let torn = sqlx::query(
        "INSERT INTO telemetry_raw (node_key, at, samples) SELECT telemetry_key, now(), $1 FROM nodes WHERE id = $2::uuid",
    )
    .bind(vec![0u8; codec::RECORD_LEN + 3])
    .bind(&node_id)
    .execute(&db)
    .await
    .unwrap_err();
    assert_eq!(torn.as_database_error().and_then(|e| e.constraint()), Some("telemetry_raw_whole_records"));

    // The API serves the stored values (a 10 s bucket holds one sample).
    let path = format!(
        "/v1/admin/nodes/{node_id}/telemetry?from={}&step_s=10",
        (at - Duration::seconds(30)).to_rfc3339().replace('+', "%2B")
    );
    let read = app.get(&path, &op).await.expect(StatusCode::OK).body;
    let gpu0 = &read["gpus"][0]["points"][0];
    assert_eq!(gpu0["samples"], 1);
    assert!((gpu0["gpu_util"].as_f64().unwrap() - 33.5).abs() < 1e-6, "{read}");
    assert!((gpu0["power_w"].as_f64().unwrap() - 612.3).abs() < 1e-3, "{read}");
    assert_eq!(gpu0["xid_count"], 2);
    assert_eq!(read["gpus"][1]["points"].as_array().unwrap().len(), 2);
}

#[sqlx::test]
async fn a_hostile_lease_subnet_is_refused_at_registration_and_changes_nothing(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, pool) = setup(&app).await;
    let token = join_token(&app, &op, &pool, 10).await;
    for bad in ["10.0.0.0/8", "10.0.0.0/25", "10.0.0.1/24", "not-a-net", "::1/64", "10.0.0.0/24; rm -rf /", ""] {
        let mut node = facts("node-net", 2, "NVIDIA H100 80GB HBM3");
        node["lease_subnet"] = json!(bad);
        let res = app
            .call(Method::POST, "/v1/agent/register", None, Some(json!({ "join_token": token, "node": node })))
            .await;
        assert_eq!(res.status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {:?}", res.body);
        assert_eq!(res.error_fields(), ["node.lease_subnet"], "{bad}");
    }
    let (nodes, uses): (i64, i32) =
        sqlx::query_as("SELECT (SELECT count(*) FROM nodes), (SELECT uses FROM join_tokens)")
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!((nodes, uses), (0, 0), "a refused registration changes nothing");
    // A good one is stored as given.
    let mut node = facts("node-net", 2, "NVIDIA H100 80GB HBM3");
    node["lease_subnet"] = json!("10.233.7.0/24");
    app.call(Method::POST, "/v1/agent/register", None, Some(json!({ "join_token": token, "node": node })))
        .await
        .expect(StatusCode::CREATED);
    let stored: Option<String> = sqlx::query_scalar("SELECT lease_subnet FROM nodes").fetch_one(&db).await.unwrap();
    assert_eq!(stored.as_deref(), Some("10.233.7.0/24"));
}

#[sqlx::test]
async fn registration_reports_launchers_bounded_and_a_new_report_replaces_them(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, pool) = setup(&app).await;
    let token = join_token(&app, &op, &pool, 2).await;
    let mut body = json!({ "join_token": token, "node": facts("node-l", 1, "NVIDIA H100 80GB HBM3") });
    body["node"]["launchers"] = json!({ "torchrun": "2.5.1", "curl | sh": null, "vllm": "1.".repeat(40) });
    let refused = app.call(Method::POST, "/v1/agent/register", None, Some(body.clone())).await;
    assert_eq!(
        refused.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(),
        ["node.launchers.curl | sh", "node.launchers.vllm"]
    );
    let nodes: i64 = sqlx::query_scalar("SELECT count(*) FROM nodes").fetch_one(&db).await.unwrap();
    assert_eq!(nodes, 0, "nothing registered");

    body["node"]["launchers"] = json!({ "torchrun": "2.5.1", "sshd": null });
    let agent = app.call(Method::POST, "/v1/agent/register", None, Some(body)).await.expect(StatusCode::CREATED).body;
    let node_id = agent["node_id"].as_str().unwrap();
    let creds = agent["agent_token"].as_str().unwrap();
    let node = app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.expect(StatusCode::OK).body;
    assert_eq!(node["launchers"], json!({ "torchrun": "2.5.1", "sshd": null }));
    // Installed meanwhile: the next heartbeat says so.
    let report = json!({ "samples": [], "launchers": { "torchrun": "2.5.1", "sshd": null, "vllm": "0.6.3" } });
    app.post("/v1/agent/heartbeat", creds, report).await.expect(StatusCode::OK);
    let node = app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.expect(StatusCode::OK).body;
    assert_eq!(node["launchers"]["vllm"], "0.6.3");
    // A heartbeat without them leaves them as they are.
    heartbeat(&app, creds, vec![]).await.expect(StatusCode::OK);
    let node = app.get(&format!("/v1/admin/nodes/{node_id}"), &op).await.expect(StatusCode::OK).body;
    assert_eq!(node["launchers"]["vllm"], "0.6.3");
}
