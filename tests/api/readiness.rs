//! Driver/CUDA readiness (a node below the minimums is `not_ready` and never allocated) and the latency
//! between a lease's nodes (reported with heartbeats, shown with the lease, alerted once until it clears).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::TestApp;

/// Register an agent node of `gpus` H100s reporting these versions (and echo port); (node id, agent token).
async fn register(
    app: &TestApp,
    op: &str,
    pool: &str,
    hostname: &str,
    driver: &str,
    cuda: &str,
    echo_port: Option<i32>,
) -> (String, String) {
    let mut node = two_h100s(hostname);
    node["driver_version"] = json!(driver);
    node["cuda_version"] = json!(cuda);
    node["echo_port"] = json!(echo_port);
    register_node(app, &app.join_token(op, pool).await, node).await
}

/// What an agent of a host of two H100s at 127.0.0.1 reports.
fn two_h100s(hostname: &str) -> Value {
    let gpus: Vec<Value> = (0..2)
        .map(|i| {
            json!({ "index": i, "uuid": format!("GPU-{hostname}-{i}"), "name": "NVIDIA H100 80GB HBM3",
                    "memory_bytes": 85_520_809_984i64 })
        })
        .collect();
    json!({ "hostname": hostname, "address": "127.0.0.1", "gpus": gpus, "intra_link": "nvlink", "network_gbps": 400,
            "driver_version": "550.54.15", "cuda_version": "12.4" })
}

async fn register_node(app: &TestApp, token: &str, node: Value) -> (String, String) {
    let res = app
        .call(Method::POST, "/v1/agent/register", None, Some(json!({ "join_token": token, "node": node })))
        .await
        .expect(StatusCode::CREATED);
    (res.body["node_id"].as_str().unwrap().to_string(), res.body["agent_token"].as_str().unwrap().to_string())
}

async fn node(app: &TestApp, op: &str, node_id: &str) -> Value {
    app.get(&format!("/v1/admin/nodes/{node_id}"), op).await.expect(StatusCode::OK).body
}

fn lease_body(pool: &str, gpus: i32) -> Value {
    json!({ "pool_id": pool, "gpu_count": gpus, "duration_hours": 1, "placement": "spread" })
}

#[sqlx::test]
async fn an_old_driver_registers_not_ready_is_never_allocated_and_an_upgrade_makes_it_ready(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-ready", "h100").await;
    let (old, old_token) = register(&app, &op, &pool, "old-driver", "470.57.02", "11.4", None).await;

    let n = node(&app, &op, &old).await;
    assert_eq!(n["state"], "not_ready");
    assert_eq!(n["not_ready_reason"], "driver 470.57.02 < 525.60.13; CUDA 11.4 < 11.8");
    assert_eq!((n["driver_version"].as_str(), n["cuda_version"].as_str()), (Some("470.57.02"), Some("11.4")));
    let pools = app.get(&format!("/v1/pools/{pool}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!((pools["total_gpus"].as_i64(), pools["free_gpus"].as_i64()), (Some(2), Some(0)));
    // Heartbeats keep it alive but not ready; no lease ever lands on it.
    app.post("/v1/agent/heartbeat", &old_token, json!({ "samples": [] })).await.expect(StatusCode::OK);
    assert_eq!(node(&app, &op, &old).await["state"], "not_ready");
    app.post("/v1/leases", &tenant, lease_body(&pool, 1))
        .await
        .expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    let held: (i64,) = sqlx::query_as("SELECT count(*) FROM gpus WHERE node_id = $1::uuid AND held_by IS NOT NULL")
        .bind(&old)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(held.0, 0);

    // A sufficient node next to it takes the lease.
    let (good, _) = register(&app, &op, &pool, "new-driver", "550.54.15", "12.4", None).await;
    assert_eq!(node(&app, &op, &good).await["state"], "ready");
    assert_eq!(node(&app, &op, &good).await["not_ready_reason"], Value::Null);
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await.expect(StatusCode::CREATED);
    assert!(lease.body["gpus"].as_array().unwrap().iter().all(|g| g["node_id"] == good.as_str()));

    // Bad version text in a heartbeat is a field error, not a verdict.
    let bad = app.post("/v1/agent/heartbeat", &old_token, json!({ "samples": [], "driver_version": "" })).await;
    assert_eq!(
        bad.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(),
        ["driver_version"]
    );

    // The host is upgraded in place: its next heartbeat says so, and it is ready and allocatable.
    let upgraded = json!({ "samples": [], "driver_version": "535.104.05", "cuda_version": "12.2" });
    app.post("/v1/agent/heartbeat", &old_token, upgraded).await.expect(StatusCode::OK);
    let n = node(&app, &op, &old).await;
    assert_eq!((n["state"].as_str(), n["not_ready_reason"].clone()), (Some("ready"), Value::Null));
    assert_eq!(n["driver_version"], "535.104.05");
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect(StatusCode::CREATED);
    assert_eq!(lease.body["gpus"][0]["node_id"], old.as_str());
}

#[sqlx::test]
async fn a_pools_minimum_overrides_the_services_and_reevaluates_its_nodes(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-strict", "h100").await;
    let other = app.pool(&op, "h100-other", "h100").await;
    let (n1, _) = register(&app, &op, &pool, "n-535", "535.54.03", "12.2", None).await;
    let (n2, _) = register(&app, &op, &other, "n-535-b", "535.54.03", "12.2", None).await;
    assert_eq!(node(&app, &op, &n1).await["state"], "ready");

    // Validation: dotted numbers only, operators only.
    let bad = app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "min_driver_version": "550.x" })).await;
    let bad = bad.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(bad.error_fields(), ["min_driver_version"]);
    let two = app
        .patch(
            &format!("/v1/admin/pools/{pool}"),
            &op,
            json!({ "min_driver_version": "", "min_cuda_version": "1.2.3.4.5" }),
        )
        .await;
    assert_eq!(
        two.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(),
        ["min_driver_version", "min_cuda_version"]
    );
    app.patch(&format!("/v1/admin/pools/{pool}"), &tenant, json!({ "min_driver_version": "550" }))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");

    // Raising the pool's minimum turns its node not ready at once; the other pool's node is untouched.
    let patched = app
        .patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "min_driver_version": "550.54" }))
        .await
        .expect(StatusCode::OK);
    assert_eq!(
        (patched.body["min_driver_version"].as_str(), patched.body["min_cuda_version"].clone()),
        (Some("550.54"), Value::Null)
    );
    let n = node(&app, &op, &n1).await;
    assert_eq!(
        (n["state"].as_str(), n["not_ready_reason"].as_str()),
        (Some("not_ready"), Some("driver 535.54.03 < 550.54"))
    );
    assert_eq!(node(&app, &op, &n2).await["state"], "ready");
    app.post("/v1/leases", &tenant, lease_body(&pool, 1))
        .await
        .expect_problem(StatusCode::CONFLICT, "insufficient_capacity");

    // Another field's PATCH leaves the minimum alone; `null` returns to the service's, and the node is ready.
    app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "region": "eu-1" })).await.expect(StatusCode::OK);
    assert_eq!(node(&app, &op, &n1).await["state"], "not_ready");
    let reset = app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "min_driver_version": null })).await;
    assert_eq!(reset.expect(StatusCode::OK).body["min_driver_version"], Value::Null);
    assert_eq!(node(&app, &op, &n1).await["state"], "ready");
    app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect(StatusCode::CREATED);
}

fn report(lease: &str, peer: &str, p50_us: i32, p99_us: i32) -> Value {
    json!({ "samples": [], "latency": [{ "lease_id": lease, "peer_node_id": peer, "p50_us": p50_us, "p99_us": p99_us,
        "probes": 8, "lost": 0 }] })
}

async fn latency_events(app: &TestApp, tenant: &str, lease: &str) -> Vec<String> {
    let events = app.get(&format!("/v1/leases/{lease}/events"), tenant).await.expect(StatusCode::OK).body;
    events
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str().filter(|k| k.starts_with("comm.")).map(str::to_owned))
        .collect()
}

#[sqlx::test]
async fn latency_reports_are_kept_per_pair_and_alert_once_until_they_clear(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, other_tenant) = app.tenant_admin(&op, "globex").await;
    let pool = app.pool(&op, "h100-net", "h100").await;
    let (a, a_token) = register(&app, &op, &pool, "net-a", "550.54.15", "12.4", Some(40001)).await;
    let (b, _) = register(&app, &op, &pool, "net-b", "550.54.15", "12.4", Some(40002)).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await.expect(StatusCode::CREATED);
    let lease = lease.body["id"].as_str().unwrap().to_string();

    // The assignments tell each node its lease's other nodes and their echo ports.
    let list = app.get("/v1/agent/assignments", &a_token).await.expect(StatusCode::OK).body;
    assert_eq!(
        list["leases"][0]["peers"],
        json!([{ "node_id": b, "address": "127.0.0.1", "echo_port": 40002, "lease_address": null }])
    );

    let network = format!("/v1/leases/{lease}/network");
    let empty = app.get(&network, &tenant).await.expect(StatusCode::OK).body;
    assert_eq!((empty["pairs"].as_array().unwrap().len(), empty["threshold_ms"].as_f64()), (0, Some(20.0)));
    app.get(&network, &other_tenant).await.expect_problem(StatusCode::NOT_FOUND, "not_found");

    // Within the threshold: kept, no insight, no alert.
    app.post("/v1/agent/heartbeat", &a_token, report(&lease, &b, 300, 900)).await.expect(StatusCode::OK);
    let view = app.get(&network, &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(view["pairs"][0]["node_id"], a.as_str());
    assert_eq!((view["pairs"][0]["p50_us"].as_i64(), view["pairs"][0]["p99_us"].as_i64()), (Some(300), Some(900)));
    assert!(view["insights"].as_array().unwrap().is_empty());
    assert!(latency_events(&app, &tenant, &lease).await.is_empty());

    // Over it: the insight with its numbers and the changes to make; raised once however often it repeats.
    for _ in 0..3 {
        app.post("/v1/agent/heartbeat", &a_token, report(&lease, &b, 21_000, 25_000)).await.expect(StatusCode::OK);
    }
    let view = app.get(&network, &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(view["pairs"].as_array().unwrap().len(), 1, "the latest per pair only");
    let insight = &view["insights"][0];
    assert_eq!(insight["kind"], "comm_latency_high");
    assert_eq!(insight["figures"]["worst"]["p99_ms"], 25.0);
    assert!(insight["suggestion"].as_str().unwrap().contains("RDMA"));
    assert!(view["alert_raised_at"].is_string());
    assert_eq!(latency_events(&app, &tenant, &lease).await, ["comm.latency_high"]);

    // Back within: cleared; passing it again raises again.
    app.post("/v1/agent/heartbeat", &a_token, report(&lease, &b, 300, 900)).await.expect(StatusCode::OK);
    assert_eq!(app.get(&network, &tenant).await.body["alert_raised_at"], Value::Null);
    app.post("/v1/agent/heartbeat", &a_token, report(&lease, &b, 21_000, 30_000)).await.expect(StatusCode::OK);
    assert_eq!(
        latency_events(&app, &tenant, &lease).await,
        ["comm.latency_high", "comm.latency_cleared", "comm.latency_high"]
    );

    // A report about a lease the node does not hold, or nonsense figures.
    let stranger = uuid::Uuid::new_v4().to_string();
    app.post("/v1/agent/heartbeat", &a_token, report(&stranger, &b, 1, 2)).await.expect(StatusCode::OK);
    let rows: (i64,) = sqlx::query_as("SELECT count(*) FROM lease_latency").fetch_one(&app.db).await.unwrap();
    assert_eq!(rows.0, 1, "only the lease's own pair is kept");
    let bad = app.post("/v1/agent/heartbeat", &a_token, report(&lease, &b, 900, 300)).await;
    assert_eq!(
        bad.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(),
        ["latency[0].p99_us"]
    );
}

#[sqlx::test]
async fn a_raised_service_minimum_applies_to_registered_nodes_when_the_service_starts(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let pool = app.pool(&op, "h100-start", "h100").await;
    let (n, _) = register(&app, &op, &pool, "n-start", "535.54.03", "12.2", None).await;
    let manual = app.node(&op, &pool, "no-agent", 1).await;
    assert_eq!(node(&app, &op, &n).await["state"], "ready");
    // What the liveness loop runs first on start-up, under a service started with a higher minimum.
    let mut settings = (*app.state.settings).clone();
    settings.min_driver_version = "550".into();
    let not_ready = gpuplane::inventory::readiness::evaluate_all(&app.db, &settings).await.unwrap();
    assert_eq!(not_ready, 1);
    assert_eq!(node(&app, &op, &n).await["not_ready_reason"], "driver 535.54.03 < 550");
    assert_eq!(node(&app, &op, &manual).await["state"], "ready", "a node that reports no versions is not judged");
}

/// The readiness and latency alerts reach webhooks: operators get `node.not_ready` and `node.ready` (fleet
/// events), the tenant gets `comm.latency_high` for its lease, each signed with its endpoint's secret.
#[sqlx::test]
async fn readiness_and_latency_alerts_are_delivered_signed(db: PgPool) {
    use crate::support::webhooks::{
        app as webhook_app, assert_signed, create_endpoint, deliver_until, spawn_receiver, worker,
    };
    let app = webhook_app(db);
    let worker = worker(&app);
    let (receiver, url) = spawn_receiver().await;
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, op_secret) = create_endpoint(&app, &op, &url, json!(["node.*"])).await;
    let (_, tenant_secret) = create_endpoint(&app, &tenant, &url, json!(["comm.latency_high"])).await;
    let pool = app.pool(&op, "h100-alerts", "h100").await;

    let (old, old_token) = register(&app, &op, &pool, "old-driver", "470.57.02", "11.4", Some(40001)).await;
    let upgraded = json!({ "samples": [], "driver_version": "550.54.15", "cuda_version": "12.4" });
    app.post("/v1/agent/heartbeat", &old_token, upgraded).await.expect(StatusCode::OK);
    assert_eq!(node(&app, &op, &old).await["state"], "ready");
    let (peer, _) = register(&app, &op, &pool, "peer", "550.54.15", "12.4", Some(40002)).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await.expect(StatusCode::CREATED);
    let lease = lease.body["id"].as_str().unwrap().to_string();
    app.post("/v1/agent/heartbeat", &old_token, report(&lease, &peer, 21_000, 25_000)).await.expect(StatusCode::OK);

    let wanted = ["node.not_ready", "node.ready", "comm.latency_high"];
    deliver_until(&worker, || {
        let got = receiver.accepted.lock().unwrap();
        wanted.iter().all(|w| got.iter().any(|r| r.body["type"] == *w))
    })
    .await;
    let got = receiver.accepted.lock().unwrap().clone();
    let of = |t: &str| got.iter().find(|r| r.body["type"] == t).unwrap().clone();
    assert_eq!(of("node.not_ready").body["data"]["node_id"], old.as_str());
    assert!(of("node.not_ready").body["data"]["reason"].as_str().unwrap().contains("470.57.02 < 525.60.13"));
    assert_eq!(of("node.ready").body["data"]["node_id"], old.as_str());
    let latency = of("comm.latency_high");
    assert_eq!(latency.body["data"]["lease_id"], lease.as_str());
    assert_eq!(latency.body["data"]["figures"]["worst"]["p99_ms"], 25.0);
    let requests = receiver.requests.lock().unwrap();
    for (event, secret) in
        [(of("node.not_ready"), &op_secret), (of("node.ready"), &op_secret), (latency, &tenant_secret)]
    {
        let (headers, body) = requests.iter().find(|(h, _)| h["webhook-id"] == event.id.as_str()).unwrap();
        assert_signed(headers, body, secret);
    }
}

/// How many deliveries of `event_type` the outbox holds (one per subscribed endpoint and event).
async fn deliveries(db: &PgPool, event_type: &str) -> i64 {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE e.type = $1",
    )
    .bind(event_type)
    .fetch_one(db)
    .await
    .unwrap();
    n
}

/// An alert is a transition, not a re-evaluation: a node already not ready for its driver hears nothing more
/// however often it is judged again (five PATCHes of the minimum, heartbeats, a restart's fleet judgement);
/// a new cause is one more alert, the node clearing is one `node.ready`; the tenant of a lease on the node
/// hears the same once; a verdict that changed while the node was silent is announced when it is back.
#[sqlx::test]
async fn readiness_alerts_fire_once_per_transition_and_cause(db: PgPool) {
    use crate::support::webhooks::{
        app as webhook_app, create_endpoint, deliver_until, spawn_receiver, types_of, worker,
    };
    let app = webhook_app(db.clone());
    let worker = worker(&app);
    let (receiver, url) = spawn_receiver().await;
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    create_endpoint(&app, &op, &url, json!(["node.ready", "node.not_ready"])).await;
    let pool = app.pool(&op, "h100-noise", "h100").await;
    let (n, token) = register(&app, &op, &pool, "n-noise", "535.54.03", "12.2", None).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect(StatusCode::CREATED);
    let lease = lease.body["id"].as_str().unwrap().to_string();
    let patch = |body: Value| {
        let (app, op, pool) = (&app, &op, &pool);
        async move { app.patch(&format!("/v1/admin/pools/{pool}"), op, body).await.expect(StatusCode::OK) }
    };
    let beat = |body: Value| {
        let (app, token) = (&app, &token);
        async move { app.post("/v1/agent/heartbeat", token, body).await.expect(StatusCode::OK) }
    };
    let settings = app.state.settings.clone();

    // Five raises of the minimum, each with another reason text, heartbeats in between (one reporting another
    // version still short), and the fleet judged again as at start-up: one `node.not_ready`.
    let mut driver = "535.54.03";
    for (i, min) in ["550", "550.54", "551", "560.1", "570"].into_iter().enumerate() {
        patch(json!({ "min_driver_version": min })).await;
        assert_eq!(node(&app, &op, &n).await["not_ready_reason"], format!("driver {driver} < {min}"));
        beat(json!({ "samples": [] })).await;
        if i == 2 {
            driver = "540.1.1";
            beat(json!({ "samples": [], "driver_version": driver })).await;
            assert_eq!(node(&app, &op, &n).await["not_ready_reason"], format!("driver {driver} < {min}"));
        }
    }
    gpuplane::inventory::readiness::evaluate_all(&app.db, &settings).await.unwrap();
    assert_eq!(node(&app, &op, &n).await["state"], "not_ready");
    assert_eq!(deliveries(&db, "node.not_ready").await, 1, "one delivery for one transition");
    assert_eq!(deliveries(&db, "node.ready").await, 0);

    // A second cause is news once; so is the node clearing, however it is judged afterwards.
    for _ in 0..3 {
        patch(json!({ "min_cuda_version": "12.4" })).await;
    }
    assert_eq!(deliveries(&db, "node.not_ready").await, 2, "the CUDA cause is alerted once");
    patch(json!({ "min_cuda_version": null })).await;
    assert_eq!(deliveries(&db, "node.not_ready").await, 2, "one cause of two gone: still not ready, no news");
    assert_eq!(deliveries(&db, "node.ready").await, 0);
    for _ in 0..3 {
        patch(json!({ "min_driver_version": null })).await;
        beat(json!({ "samples": [] })).await;
    }
    gpuplane::inventory::readiness::evaluate_all(&app.db, &settings).await.unwrap();
    assert_eq!(node(&app, &op, &n).await["state"], "ready");
    assert_eq!(deliveries(&db, "node.ready").await, 1, "one delivery when it clears");

    // The tenant of the lease on the node heard each transition once too.
    let events = app.get(&format!("/v1/leases/{lease}/events"), &tenant).await.expect(StatusCode::OK).body;
    let kinds: Vec<&str> = events.as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    let of_node: Vec<&str> = kinds.into_iter().filter(|k| k.starts_with("node.")).collect();
    assert_eq!(of_node, ["node.not_ready", "node.not_ready", "node.ready"]);

    // Silent while its pool's minimum is raised: nothing then; the heartbeat that ends the silence announces it.
    sqlx::query("UPDATE nodes SET liveness = 'unreachable' WHERE id = $1::uuid").bind(&n).execute(&db).await.unwrap();
    for min in ["560", "561"] {
        patch(json!({ "min_driver_version": min })).await;
    }
    assert_eq!(deliveries(&db, "node.not_ready").await, 2, "a silent node's verdict waits for its return");
    beat(json!({ "samples": [] })).await;
    beat(json!({ "samples": [] })).await;
    assert_eq!(node(&app, &op, &n).await["state"], "not_ready");
    assert_eq!(deliveries(&db, "node.not_ready").await, 3, "announced once on its return");

    // What the receiver got, once each.
    deliver_until(&worker, || types_of(&receiver).len() == 4).await;
    assert_eq!(types_of(&receiver), ["node.not_ready", "node.not_ready", "node.ready", "node.not_ready"]);
    let got = receiver.accepted.lock().unwrap().clone();
    assert_eq!(got[0].body["data"]["causes"], json!(["driver_version"]));
    assert_eq!(got[1].body["data"]["causes"], json!(["driver_version", "cuda_version"]));
    assert_eq!(got[1].body["data"]["new_causes"], json!(["cuda_version"]));
    assert_eq!(got[2].body["data"]["causes"], json!([]));
}

/// Two replicas judging the same node at once (two transactions): the alert is raised by one of them.
#[sqlx::test]
async fn racing_judgements_announce_once(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let pool = app.pool(&op, "h100-race", "h100").await;
    let (n, _) = register(&app, &op, &pool, "n-race", "535.54.03", "12.2", None).await;
    let node_id: uuid::Uuid = n.parse().unwrap();
    let mut settings = (*app.state.settings).clone();
    settings.min_driver_version = "550".into();
    let settings = std::sync::Arc::new(settings);
    let judge = |db: PgPool, settings: std::sync::Arc<gpuplane::config::Settings>| async move {
        let mut tx = db.begin().await.unwrap();
        gpuplane::inventory::readiness::evaluate_node(&mut tx, node_id, &settings).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        tx.commit().await.unwrap();
    };
    let racers: Vec<_> = (0..4).map(|_| tokio::spawn(judge(db.clone(), settings.clone()))).collect();
    for racer in racers {
        racer.await.unwrap();
    }
    let (events,): (i64,) = sqlx::query_as("SELECT count(*) FROM webhook_events WHERE type = 'node.not_ready'")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(events, 1);
}

/// A multi-node job whose nodes cannot reach each other is refused before it starts, naming the nodes: two nodes
/// that give the lease one address, or a pair whose every probe was lost (which the lease's network shows).
#[sqlx::test]
async fn a_multi_node_job_is_refused_when_its_nodes_cannot_reach_each_other(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    app.post("/v1/admin/templates", &op, json!({ "name": "hello", "argv": ["/bin/echo", "hi"] }))
        .await
        .expect(StatusCode::CREATED);
    let job = json!({ "template": "hello" });

    // Probes: a pair with every probe lost.
    let pool = app.pool(&op, "h100-net", "h100").await;
    let (a, a_token) = register(&app, &op, &pool, "net-a", "550.54.15", "12.4", Some(40001)).await;
    let (b, b_token) = register(&app, &op, &pool, "net-b", "550.54.15", "12.4", Some(40002)).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 4)).await.expect(StatusCode::CREATED);
    let lease = lease.body["id"].as_str().unwrap().to_string();
    let jobs = format!("/v1/leases/{lease}/jobs");
    app.post("/v1/agent/heartbeat", &a_token, report(&lease, &b, 300, 900)).await.expect(StatusCode::OK);
    let first = app.post(&jobs, &tenant, job.clone()).await.expect(StatusCode::CREATED);
    app.post(&format!("/v1/jobs/{}/cancel", first.body["id"].as_str().unwrap()), &tenant, json!({})).await;
    let cut = json!({ "samples": [], "latency": [{ "lease_id": lease, "peer_node_id": b, "p50_us": 0, "p99_us": 0,
        "probes": 0, "lost": 12 }] });
    app.post("/v1/agent/heartbeat", &a_token, cut).await.expect(StatusCode::OK);
    let view = app.get(&format!("/v1/leases/{lease}/network"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(view["insights"][0]["kind"], "comm_unreachable", "{view}");
    assert_eq!(latency_events(&app, &tenant, &lease).await, ["comm.latency_high"], "the tenant is told");
    let jobs_before: (i64,) = sqlx::query_as("SELECT count(*) FROM jobs").fetch_one(&app.db).await.unwrap();
    let refused = app.post(&jobs, &tenant, job.clone()).await;
    let problem = refused.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(problem.error_fields(), ["lease_id"]);
    let message = problem.body["errors"][0]["message"].as_str().unwrap().to_string();
    assert!(message.contains("net-a -> net-b (12 probes lost"), "{message}");
    let jobs_after: (i64,) = sqlx::query_as("SELECT count(*) FROM jobs").fetch_one(&app.db).await.unwrap();
    assert_eq!(jobs_before, jobs_after, "nothing was made");
    // B's agent restarted and listens on another port: its first heartbeat says so, the lease's other nodes are
    // told the new port, and what they measured to the old one is forgotten (jobs are accepted again).
    let moved = json!({ "samples": [], "echo_port": 40099 });
    app.post("/v1/agent/heartbeat", &b_token, moved).await.expect(StatusCode::OK);
    let list = app.get("/v1/agent/assignments", &a_token).await.expect(StatusCode::OK).body;
    assert_eq!(list["leases"][0]["peers"][0]["echo_port"], 40099, "{list}");
    let view = app.get(&format!("/v1/leases/{lease}/network"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(view["pairs"], json!([]), "{view}");
    app.post(&jobs, &tenant, job.clone()).await.expect(StatusCode::CREATED);
    let bad = app.post("/v1/agent/heartbeat", &b_token, json!({ "samples": [], "echo_port": 70000 })).await;
    assert_eq!(bad.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["echo_port"]);
    let _ = a;

    // Addresses: two hosts that give their leases one subnet.
    let pool = app.pool(&op, "h100-overlap", "h100").await;
    for (host, address) in [("ovl-a", "10.9.0.1"), ("ovl-b", "10.9.0.2")] {
        let mut node = two_h100s(host);
        node["address"] = json!(address);
        node["lease_subnet"] = json!("100.70.0.0/24");
        register_node(&app, &app.join_token(&op, &pool).await, node).await;
    }
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 4)).await.expect(StatusCode::CREATED);
    let jobs = format!("/v1/leases/{}/jobs", lease.body["id"].as_str().unwrap());
    let problem =
        app.post(&jobs, &tenant, job).await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let message = problem.body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("ovl-a and ovl-b") && message.contains("100.70.0.2"), "{message}");
}
