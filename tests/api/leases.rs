use std::collections::HashSet;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use gpuplane::leases::sweeper::sweep_once;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::TestApp;

/// A pool with nodes of the given sizes; returns (operator token, tenant admin token, pool id, node ids).
async fn setup(app: &TestApp, node_sizes: &[usize]) -> (String, String, String, Vec<String>) {
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let mut nodes = Vec::new();
    for (i, size) in node_sizes.iter().enumerate() {
        nodes.push(app.node(&op, &pool, &format!("node-{i}"), *size).await);
    }
    (op, tenant, pool, nodes)
}

fn lease_body(pool: &str, gpus: i64) -> Value {
    json!({ "pool_id": pool, "gpu_count": gpus, "duration_hours": 2 })
}

/// Poll a lease until it reaches `state` (10 s deadline).
async fn wait_for_state(app: &TestApp, token: &str, id: &str, state: &str) -> crate::support::app::Response {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let res = app.get(&format!("/v1/leases/{id}"), token).await.expect(StatusCode::OK);
        if res.body["state"] == state {
            return res;
        }
        assert!(std::time::Instant::now() < deadline, "lease {id} never became {state}: {}", res.body);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn nodes_of(lease: &Value) -> HashSet<String> {
    lease["gpus"].as_array().unwrap().iter().map(|g| g["node_id"].as_str().unwrap().to_string()).collect()
}

/// The database's view: GPUs currently held, GPUs given to active leases (a GPU given to two counts twice), and
/// whether every node's counter is right.
async fn allocation_invariants(db: &PgPool) -> (i64, i64, bool) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM gpus WHERE held_by IS NOT NULL), \
                (SELECT count(*) FROM leases l CROSS JOIN unnest(l.gpu_ids) h(gpu_id) WHERE l.state = 'active'), \
                (SELECT bool_and(n.free_gpus = (SELECT count(*) FROM gpus g WHERE g.node_id = n.id AND g.healthy \
                     AND g.held_by IS NULL)) FROM nodes n)",
    )
    .fetch_one(db)
    .await
    .unwrap()
}

#[sqlx::test]
async fn fifty_concurrent_requests_for_twenty_gpus_never_double_book(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[8, 8, 4]).await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let router = app.router.clone();
        let (tenant, pool) = (tenant.clone(), pool.clone());
        tasks.push(tokio::spawn(async move {
            let req = Request::post("/v1/leases")
                .header("authorization", format!("Bearer {tenant}"))
                .header("content-type", "application/json")
                .body(Body::from(lease_body(&pool, 1).to_string()))
                .unwrap();
            tower::ServiceExt::oneshot(router, req).await.unwrap().status()
        }));
    }
    let mut created = 0;
    let mut conflicts = 0;
    for t in tasks {
        match t.await.unwrap() {
            StatusCode::CREATED => created += 1,
            StatusCode::CONFLICT => conflicts += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((created, conflicts), (20, 30));
    assert_eq!(allocation_invariants(&db).await, (20, 20, true));
    let p = app.get(&format!("/v1/pools/{pool}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(p.body["free_gpus"], 0);
    let res = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await;
    let res = res.expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    assert_eq!(res.body["context"]["free_gpus"], 0);
}

/// Creates and releases racing on three nodes: a create written by its admission statement alone must see each
/// node as it is when it locks it (a create or release committed on that node after the statement's snapshot
/// makes it write nothing and go the transaction's way), so every lease gets exactly its GPUs and the counters
/// stay exact.
#[sqlx::test]
async fn racing_creates_and_releases_keep_every_gpu_and_counter_exact(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[8, 8, 4]).await;
    let mut tasks = Vec::new();
    for client in 0..12_i64 {
        let (router, tenant, pool) = (app.router.clone(), tenant.clone(), pool.clone());
        tasks.push(tokio::spawn(async move {
            let send = |uri: String, body: Option<Value>| {
                let mut req = Request::post(uri).header("authorization", format!("Bearer {tenant}"));
                let body = match body {
                    Some(body) => {
                        req = req.header("content-type", "application/json");
                        Body::from(body.to_string())
                    }
                    None => Body::empty(),
                };
                tower::ServiceExt::oneshot(router.clone(), req.body(body).unwrap())
            };
            let mut created = 0;
            for round in 0..15_i64 {
                let gpus = 1 + (client + round) % 4;
                let res = send("/v1/leases".into(), Some(lease_body(&pool, gpus))).await.unwrap();
                let status = res.status();
                let bytes = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
                if status == StatusCode::CONFLICT {
                    continue;
                }
                assert_eq!(status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&bytes));
                let lease: Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(lease["gpus"].as_array().unwrap().len() as i64, gpus, "{lease}");
                created += 1;
                let id = lease["id"].as_str().unwrap();
                let res = send(format!("/v1/leases/{id}/release"), None).await.unwrap();
                assert_eq!(res.status(), StatusCode::OK);
            }
            created
        }));
    }
    let mut created = 0;
    for t in tasks {
        created += t.await.unwrap();
    }
    assert!(created >= 90, "only {created} of 180 creates got GPUs");
    assert_eq!(allocation_invariants(&db).await, (0, 0, true));
    let gpus: i64 =
        sqlx::query_scalar("SELECT count(*) FROM lease_events WHERE kind = 'allocated'").fetch_one(&db).await.unwrap();
    assert_eq!(gpus, created);
}

#[sqlx::test]
async fn two_server_processes_on_one_database_never_double_book(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[8, 8, 4]).await;
    let url = crate::support::binary::database_url(&db);
    let (mut a, url_a) = crate::support::binary::spawn_server(&url, &[]);
    let (mut b, url_b) = crate::support::binary::spawn_server(&url, &[]);
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    for i in 0..50 {
        let base = if i % 2 == 0 { url_a.clone() } else { url_b.clone() };
        let (client, tenant, body) = (client.clone(), tenant.clone(), lease_body(&pool, 1));
        tasks.push(tokio::spawn(async move {
            client
                .post(format!("{base}/v1/leases"))
                .bearer_auth(tenant)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    crate::support::binary::terminate(&mut a);
    crate::support::binary::terminate(&mut b);
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 20, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 30, "{statuses:?}");
    assert_eq!(allocation_invariants(&db).await, (20, 20, true));
}

#[sqlx::test]
async fn a_gpu_has_one_holder_and_it_is_a_lease(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[1]).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect(StatusCode::CREATED);
    let gpu = uuid::Uuid::parse_str(lease.body["gpus"][0]["gpu_id"].as_str().unwrap()).unwrap();
    let holder: Option<uuid::Uuid> =
        sqlx::query_scalar("SELECT held_by FROM gpus WHERE id = $1").bind(gpu).fetch_one(&db).await.unwrap();
    assert_eq!(holder.map(|h| h.to_string()), lease.body["id"].as_str().map(str::to_string));
    // Bypass the code: a holder that is not a lease is refused by the schema. (A second holder cannot even be
    // written: `held_by` is one value.)
    let err = sqlx::query("UPDATE gpus SET held_by = gen_random_uuid() WHERE id = $1")
        .bind(gpu)
        .execute(&db)
        .await
        .unwrap_err();
    assert_eq!(gpuplane::error::constraint_name(&err), Some("gpus_held_by_fkey"));
}

#[sqlx::test]
async fn best_fit_keeps_whole_nodes_free(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, nodes) = setup(&app, &[8, 4, 2]).await;
    // 2 GPUs go to the 2-GPU node, 3 to the 4-GPU node: the 8-GPU node stays whole.
    let two = app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await.expect(StatusCode::CREATED);
    assert_eq!(nodes_of(&two.body), HashSet::from([nodes[2].clone()]));
    let three = app.post("/v1/leases", &tenant, lease_body(&pool, 3)).await.expect(StatusCode::CREATED);
    assert_eq!(nodes_of(&three.body), HashSet::from([nodes[1].clone()]));
    let p = app.get(&format!("/v1/pools/{pool}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(p.body["largest_free_block"], 8);
    let eight = app
        .post(
            "/v1/leases",
            &tenant,
            json!({ "pool_id": pool, "gpu_count": 8, "duration_hours": 1, "placement": "single_node" }),
        )
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(nodes_of(&eight.body), HashSet::from([nodes[0].clone()]));
    // Inside a node the GPUs are adjacent.
    let mut idx: Vec<i64> =
        three.body["gpus"].as_array().unwrap().iter().map(|g| g["index"].as_i64().unwrap()).collect();
    idx.sort();
    assert_eq!(idx[2] - idx[0], 2, "compact indices: {idx:?}");
    assert_eq!(three.body["gpus"][0]["address"], "node-1.test");
    assert!(three.body["gpus"][0]["uuid"].as_str().unwrap().starts_with("GPU-node-1-"));
}

#[sqlx::test]
async fn pack_uses_fewest_nodes_and_spread_uses_most(db: PgPool) {
    let app = TestApp::new(db);
    let (_, tenant, pool, nodes) = setup(&app, &[8, 8, 4, 4]).await;
    let twelve = app.post("/v1/leases", &tenant, lease_body(&pool, 12)).await.expect(StatusCode::CREATED);
    assert_eq!(nodes_of(&twelve.body).len(), 2, "8 + 4");
    let spread = app
        .post(
            "/v1/leases",
            &tenant,
            json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1, "placement": "spread" }),
        )
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(nodes_of(&spread.body).len(), 2);
    // single_node that no node can ever hold is a validation error, not a capacity one.
    let res = app
        .post(
            "/v1/leases",
            &tenant,
            json!({ "pool_id": pool, "gpu_count": 9, "duration_hours": 1, "placement": "single_node" }),
        )
        .await;
    assert_eq!(res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["gpu_count"]);
    let _ = nodes;
}

#[sqlx::test]
async fn cordoned_and_draining_nodes_get_nothing_new(db: PgPool) {
    let app = TestApp::new(db);
    let (op, tenant, pool, nodes) = setup(&app, &[4, 4]).await;
    let held = app.post("/v1/leases", &tenant, lease_body(&pool, 4)).await.expect(StatusCode::CREATED);
    let held_node = nodes_of(&held.body).into_iter().next().unwrap();
    let other = nodes.iter().find(|n| **n != held_node).unwrap().clone();
    app.post(&format!("/v1/admin/nodes/{other}/cordon"), &op, json!({})).await.expect(StatusCode::OK);
    app.post("/v1/leases", &tenant, lease_body(&pool, 1))
        .await
        .expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    // Draining: the held node becomes `drained` once its lease ends.
    let node = app.post(&format!("/v1/admin/nodes/{held_node}/drain"), &op, json!({})).await.expect(StatusCode::OK);
    assert_eq!(node.body["state"], "draining");
    let id = held.body["id"].as_str().unwrap();
    app.post(&format!("/v1/leases/{id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    let node = app.get(&format!("/v1/admin/nodes/{held_node}"), &op).await.expect(StatusCode::OK);
    assert_eq!(node.body["state"], "drained");
    app.post("/v1/leases", &tenant, lease_body(&pool, 1))
        .await
        .expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
}

#[sqlx::test]
async fn queued_leases_start_in_arrival_order_when_capacity_frees(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[4]).await;
    let first = app.post("/v1/leases", &tenant, lease_body(&pool, 4)).await.expect(StatusCode::CREATED);
    let queue = |n: i64| json!({ "pool_id": pool, "gpu_count": n, "duration_hours": 1, "queue": true });
    let q1 = app.post("/v1/leases", &tenant, queue(3)).await.expect(StatusCode::CREATED);
    let q2 = app.post("/v1/leases", &tenant, queue(1)).await.expect(StatusCode::CREATED);
    assert_eq!(q1.body["state"], "queued");
    assert_eq!(q2.body["state"], "queued");
    assert!(q1.body["starts_at"].is_null() && q1.body["gpus"].as_array().unwrap().is_empty());
    // A non-queued request does not jump the queue.
    let first_id = first.body["id"].as_str().unwrap();
    app.post(&format!("/v1/leases/{first_id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    // The release starts the queue at once (in the background); the sweeper is the backstop.
    sweep_once(&app.state, false).await.unwrap();
    let q1 = wait_for_state(&app, &tenant, q1.body["id"].as_str().unwrap(), "active").await;
    wait_for_state(&app, &tenant, q2.body["id"].as_str().unwrap(), "active").await;
    assert_eq!(q1.body["gpus"].as_array().unwrap().len(), 3);
    let events = app
        .get(&format!("/v1/leases/{}/events", q1.body["id"].as_str().unwrap()), &tenant)
        .await
        .expect(StatusCode::OK);
    let kinds: Vec<&str> = events.body.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["queued", "allocated"]);
    assert_eq!(allocation_invariants(&db).await, (4, 4, true));
}

#[sqlx::test]
async fn a_big_queued_head_is_not_starved_by_small_requests(db: PgPool) {
    let app = TestApp::new(db);
    let (_, tenant, pool, _) = setup(&app, &[4]).await;
    app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await.expect(StatusCode::CREATED);
    let big = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 4, "duration_hours": 1, "queue": true }))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(big.body["state"], "queued");
    // Two GPUs are free, but the queue goes first.
    let res = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await;
    let res = res.expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    assert_eq!(res.body["context"]["queued_ahead"], 1);
}

#[sqlx::test]
async fn leases_expire_at_their_end_time(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[2]).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await.expect(StatusCode::CREATED);
    let id = lease.body["id"].as_str().unwrap();
    sweep_once(&app.state, false).await.unwrap();
    assert_eq!(app.get(&format!("/v1/leases/{id}"), &tenant).await.body["state"], "active", "not before its end");
    sqlx::query("UPDATE leases SET starts_at = now() - interval '2 hours', ends_at = now() - interval '3 seconds' WHERE id = $1::uuid")
        .bind(id)
        .execute(&db)
        .await
        .unwrap();
    sweep_once(&app.state, false).await.unwrap();
    let lease = app.get(&format!("/v1/leases/{id}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(lease.body["state"], "expired");
    assert_eq!(lease.body["ended_at"], lease.body["ends_at"], "ended exactly at the scheduled end");
    assert_eq!(allocation_invariants(&db).await, (0, 0, true));
    let events = app.get(&format!("/v1/leases/{id}/events"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(events.body[1]["kind"], "expired");
    assert_eq!(events.body[1]["actor"], "system");
}

#[sqlx::test]
async fn the_background_sweeper_expires_within_seconds(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[1]).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect(StatusCode::CREATED);
    let id = lease.body["id"].as_str().unwrap().to_string();
    sqlx::query("UPDATE leases SET ends_at = now() WHERE id = $1::uuid").bind(&id).execute(&db).await.unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let tasks = gpuplane::workers::spawn_background(&app.state, &shutdown);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let state = app.get(&format!("/v1/leases/{id}"), &tenant).await.body["state"].clone();
        if state == "expired" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not expired within 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    for t in tasks {
        t.await.unwrap();
    }
}

#[sqlx::test]
async fn extend_keeps_the_gpus_and_checks_the_generation(db: PgPool) {
    let app = TestApp::new(db);
    let (_, tenant, pool, _) = setup(&app, &[4]).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await.expect(StatusCode::CREATED);
    let id = lease.body["id"].as_str().unwrap();
    let generation = lease.body["generation"].as_i64().unwrap();
    let extend = |g: i64| {
        Request::post(format!("/v1/leases/{id}/extend"))
            .header("authorization", format!("Bearer {tenant}"))
            .header("content-type", "application/json")
            .header("if-match", format!("\"{g}\""))
            .body(Body::from(json!({ "hours": 3 }).to_string()))
            .unwrap()
    };
    let extended = app.send(extend(generation)).await.expect(StatusCode::OK);
    assert_eq!(extended.body["generation"], generation + 1);
    assert_eq!(extended.body["duration_hours"], 5);
    assert_eq!(extended.body["gpus"], lease.body["gpus"], "same GPUs");
    let before = chrono::DateTime::parse_from_rfc3339(lease.body["ends_at"].as_str().unwrap()).unwrap();
    let after = chrono::DateTime::parse_from_rfc3339(extended.body["ends_at"].as_str().unwrap()).unwrap();
    assert_eq!((after - before).num_hours(), 3);
    // The old generation is stale now.
    app.send(extend(generation)).await.expect_problem(StatusCode::PRECONDITION_FAILED, "generation_mismatch");
    // Wrong unit for the term.
    let res = app.post(&format!("/v1/leases/{id}/extend"), &tenant, json!({ "months": 1 })).await;
    res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    // Ended leases cannot be extended.
    app.post(&format!("/v1/leases/{id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    app.post(&format!("/v1/leases/{id}/extend"), &tenant, json!({ "hours": 1 }))
        .await
        .expect_problem(StatusCode::CONFLICT, "lease_not_active");
}

#[sqlx::test]
async fn releasing_twice_is_harmless_and_every_transition_is_an_event(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[4]).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 4)).await.expect(StatusCode::CREATED);
    let id = lease.body["id"].as_str().unwrap();
    let released = app.post(&format!("/v1/leases/{id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    assert_eq!(released.body["state"], "released");
    let again = app.post(&format!("/v1/leases/{id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    assert_eq!(again.body["ended_at"], released.body["ended_at"]);
    let events = app.get(&format!("/v1/leases/{id}/events"), &tenant).await.expect(StatusCode::OK);
    let kinds: Vec<&str> = events.body.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["allocated", "released"]);
    assert!(events.body[1]["actor"].as_str().unwrap().starts_with("tenant:"));
    assert_eq!(allocation_invariants(&db).await, (0, 0, true));
    let p = app.get(&format!("/v1/pools/{pool}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(p.body["free_gpus"], 4);
    let filtered = app.get("/v1/leases?state=released", &tenant).await.expect(StatusCode::OK);
    assert_eq!(filtered.body["items"].as_array().unwrap().len(), 1);
    let active = app.get("/v1/leases?state=active", &tenant).await.expect(StatusCode::OK);
    assert!(active.body["items"].as_array().unwrap().is_empty());
}

#[sqlx::test]
async fn idempotent_retries_never_create_a_second_lease(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[8]).await;
    let post = |key: &str, body: Value| {
        Request::post("/v1/leases")
            .header("authorization", format!("Bearer {tenant}"))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let first = app.send(post("k-1", lease_body(&pool, 2))).await.expect(StatusCode::CREATED);
    let retry = app.send(post("k-1", lease_body(&pool, 2))).await.expect(StatusCode::CREATED);
    assert_eq!(retry.body["id"], first.body["id"]);
    assert_eq!(retry.headers.get("idempotent-replayed").unwrap(), "true");
    app.send(post("k-1", lease_body(&pool, 3)))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    // Concurrent duplicates: one lease.
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let router = app.router.clone();
        let req = post("k-2", lease_body(&pool, 1));
        tasks.push(tokio::spawn(async move { tower::ServiceExt::oneshot(router, req).await.unwrap().status() }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::CREATED);
    }
    let (leases,): (i64,) = sqlx::query_as("SELECT count(*) FROM leases").fetch_one(&db).await.unwrap();
    assert_eq!(leases, 2);
    // A client error is replayed too, and changes nothing.
    let big = app.send(post("k-3", lease_body(&pool, 9))).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    let replay = app.send(post("k-3", lease_body(&pool, 9))).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(big.body, replay.body);
}

#[sqlx::test]
async fn concurrent_requests_cannot_jointly_exceed_quotas(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    app.node(&op, &pool, "node-0", 8).await;
    app.node(&op, &pool, "node-1", 8).await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    app.put(
        &format!("/v1/admin/tenants/{tenant_id}/quotas"),
        &op,
        json!({ "max_concurrent_leases": 3, "max_gpus_per_pool": 5 }),
    )
    .await
    .expect(StatusCode::OK);
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let router = app.router.clone();
        let req = Request::post("/v1/leases")
            .header("authorization", format!("Bearer {tenant}"))
            .header("content-type", "application/json")
            .body(Body::from(lease_body(&pool, 2).to_string()))
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let res = tower::ServiceExt::oneshot(router, req).await.unwrap();
            let status = res.status();
            let bytes = http_body_util::BodyExt::collect(res.into_body()).await.unwrap().to_bytes();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        }));
    }
    let mut ok = 0;
    for t in tasks {
        let (status, body) = t.await.unwrap();
        if status == StatusCode::CREATED {
            ok += 1;
        } else {
            assert_eq!(status, StatusCode::CONFLICT);
            assert_eq!(body["code"], "quota_exceeded");
            assert_eq!(body["context"]["quota"], "max_gpus_per_pool");
        }
    }
    assert_eq!(ok, 2, "5 GPUs allow two 2-GPU leases");
    let res = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect(StatusCode::CREATED);
    assert_eq!(res.body["gpu_count"], 1);
    let res = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await;
    let res = res.expect_problem(StatusCode::CONFLICT, "quota_exceeded");
    assert_eq!(res.body["context"]["quota"], "max_concurrent_leases");
}

#[sqlx::test]
async fn bad_lease_requests_are_422_and_allocate_nothing(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[8]).await;
    let cases = [
        (json!({ "pool_id": pool, "gpu_count": 0, "duration_hours": 1 }), vec!["gpu_count"]),
        (json!({ "pool_id": pool, "gpu_count": -3, "duration_hours": 1 }), vec!["gpu_count"]),
        (json!({ "pool_id": pool, "gpu_count": 1000000, "duration_hours": 1 }), vec!["gpu_count"]),
        (json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 0 }), vec!["duration_hours"]),
        (json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 100000 }), vec!["duration_hours"]),
        (json!({ "pool_id": pool, "gpu_count": 1 }), vec!["duration_hours"]),
        (json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1, "months": 1 }), vec!["duration_hours"]),
        (json!({ "pool_id": pool, "gpu_count": 1, "months": 99 }), vec!["months"]),
        (json!({ "gpu_count": 1, "duration_hours": 1 }), vec!["pool_id"]),
        (
            json!({ "pool_id": "00000000-0000-7000-8000-000000000000", "gpu_count": 1, "duration_hours": 1 }),
            vec!["pool_id"],
        ),
        (json!({ "gpu_model": "tpu-v9", "gpu_count": 1, "duration_hours": 1 }), vec!["gpu_model"]),
        (json!({ "pool_id": pool, "gpu_count": 9, "duration_hours": 1 }), vec!["gpu_count"]),
        (json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1, "placement": "random" }), vec!["placement"]),
    ];
    for (body, fields) in cases {
        let res = app.post("/v1/leases", &tenant, body.clone()).await;
        let res = res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(res.error_fields(), fields, "{body}");
    }
    let (leases, held): (i64, i64) =
        sqlx::query_as("SELECT (SELECT count(*) FROM leases), (SELECT count(*) FROM gpus WHERE held_by IS NOT NULL)")
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!((leases, held), (0, 0));
    // By GPU model instead of pool id.
    let by_model = app
        .post("/v1/leases", &tenant, json!({ "gpu_model": "h100", "gpu_count": 1, "months": 1 }))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(by_model.body["pool_id"], pool.as_str());
    assert_eq!(by_model.body["term"], "monthly");
}

#[sqlx::test]
async fn another_tenants_lease_is_404_everywhere(db: PgPool) {
    let app = TestApp::new(db);
    let (op, tenant, pool, _) = setup(&app, &[4]).await;
    let (_, other) = app.tenant_admin(&op, "other").await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect(StatusCode::CREATED);
    let id = lease.body["id"].as_str().unwrap();
    app.get(&format!("/v1/leases/{id}"), &other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.get(&format!("/v1/leases/{id}/events"), &other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.post(&format!("/v1/leases/{id}/release"), &other, json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.post(&format!("/v1/leases/{id}/extend"), &other, json!({ "hours": 1 }))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    let list = app.get("/v1/leases", &other).await.expect(StatusCode::OK);
    assert!(list.body["items"].as_array().unwrap().is_empty());
    assert_eq!(app.get(&format!("/v1/leases/{id}"), &tenant).await.body["state"], "active", "untouched");
}

#[sqlx::test]
async fn operators_list_all_leases_and_terminate_with_a_reason(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant, pool, _) = setup(&app, &[4]).await;
    let (other_id, other) = app.tenant_admin(&op, "other").await;
    app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect(StatusCode::CREATED);
    let theirs = app.post("/v1/leases", &other, lease_body(&pool, 2)).await.expect(StatusCode::CREATED);
    let all = app.get("/v1/admin/leases", &op).await.expect(StatusCode::OK);
    assert_eq!(all.body["items"].as_array().unwrap().len(), 2);
    let filtered = app.get(&format!("/v1/admin/leases?tenant_id={other_id}"), &op).await.expect(StatusCode::OK);
    assert_eq!(filtered.body["items"].as_array().unwrap().len(), 1);
    app.get("/v1/admin/leases", &tenant).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    let id = theirs.body["id"].as_str().unwrap();
    app.post(&format!("/v1/admin/leases/{id}/terminate"), &op, json!({ "reason": "" }))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let done = app
        .post(&format!("/v1/admin/leases/{id}/terminate"), &op, json!({ "reason": "abuse report" }))
        .await
        .expect(StatusCode::OK);
    assert_eq!(done.body["state"], "terminated");
    assert_eq!(done.body["end_reason"], "abuse report");
    let events = app.get(&format!("/v1/leases/{id}/events"), &other).await.expect(StatusCode::OK);
    assert_eq!(events.body[1]["reason"], "abuse report");
    assert!(events.body[1]["actor"].as_str().unwrap().starts_with("operator:"));
    assert_eq!(allocation_invariants(&db).await, (1, 1, true));
}

/// The id of the tenant's (only) API key.
async fn key_of(db: &PgPool, tenant_id: &str) -> uuid::Uuid {
    let tenant_id = uuid::Uuid::parse_str(tenant_id).unwrap();
    sqlx::query_scalar("SELECT id FROM api_keys WHERE tenant_id = $1 ORDER BY id LIMIT 1")
        .bind(tenant_id)
        .fetch_one(db)
        .await
        .unwrap()
}

fn placement_of(lease: &Value) -> Vec<(String, i64)> {
    lease["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["hostname"].as_str().unwrap().to_string(), g["index"].as_i64().unwrap()))
        .collect()
}

fn create_with_idempotency_key(token: &str, key: &str, body: &Value) -> Request<Body> {
    Request::post("/v1/leases")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// A plain request (best-fit node locked by its admission statement) and one with an Idempotency-Key (node
/// searched after the key's record is claimed) take the one allocation path and choose the same GPUs: best
/// fit across nodes and the tightest index window inside one, lowest on ties.
#[sqlx::test]
async fn plain_and_idempotent_requests_choose_the_same_gpus(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[8, 8, 4, 2]).await;
    // node-3 full (2), node-2 with index 3 free (3), node-0 with a hole: 0-1 released, 2-4 held, 5-7 free.
    let mut made = Vec::new();
    for gpus in [2, 3, 2, 3] {
        made.push(app.post("/v1/leases", &tenant, lease_body(&pool, gpus)).await.expect(StatusCode::CREATED).body);
    }
    app.post(&format!("/v1/leases/{}/release", made[2]["id"].as_str().unwrap()), &tenant, json!({}))
        .await
        .expect(StatusCode::OK);
    let node_0 = |idx: &[i64]| idx.iter().map(|i| ("node-0".to_string(), *i)).collect::<Vec<_>>();
    assert_eq!(placement_of(&made[3]), node_0(&[2, 3, 4]));
    assert_eq!(allocation_invariants(&db).await, (8, 8, true));

    let mut seen = Vec::new();
    for gpus in 1..=9 {
        let plain = app.post("/v1/leases", &tenant, lease_body(&pool, gpus)).await.expect(StatusCode::CREATED).body;
        app.post(&format!("/v1/leases/{}/release", plain["id"].as_str().unwrap()), &tenant, json!({}))
            .await
            .expect(StatusCode::OK);
        let idempotent = app
            .send(create_with_idempotency_key(&tenant, &format!("same-{gpus}"), &lease_body(&pool, gpus)))
            .await
            .expect(StatusCode::CREATED)
            .body;
        assert_eq!(placement_of(&plain), placement_of(&idempotent), "{gpus} GPUs");
        assert_eq!(plain["state"], "active");
        assert_eq!(plain["generation"], idempotent["generation"]);
        seen.push(placement_of(&idempotent));
        app.post(&format!("/v1/leases/{}/release", idempotent["id"].as_str().unwrap()), &tenant, json!({}))
            .await
            .expect(StatusCode::OK);
        assert_eq!(allocation_invariants(&db).await, (8, 8, true), "{gpus} GPUs");
    }
    // What the rule says on this inventory: best fit across nodes, the tightest window (lowest on ties) inside.
    assert_eq!(seen[0], [("node-2".to_string(), 3)]);
    assert_eq!(seen[1], node_0(&[0, 1]));
    assert_eq!(seen[2], node_0(&[5, 6, 7]));
    assert_eq!(seen[3], node_0(&[0, 1, 5, 6]));
    assert_eq!(seen[4], node_0(&[0, 1, 5, 6, 7]));
    assert!(seen[5..8].iter().all(|p| p.iter().all(|(host, _)| host == "node-1")));
    assert_eq!(seen[8].len(), 9);
}

/// The admission statement's findings become the right answers: a balance too small (402), a quota (409,
/// the tenant row locked), a queue nobody jumps, an unknown pool (422 on `pool_id`), spread and multi-node
/// requests; a refused request writes nothing.
#[sqlx::test]
async fn admission_answers_the_uncommon_cases(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant, pool, _) = setup(&app, &[8, 8]).await;
    let tenant_id =
        app.get("/v1/tenant", &tenant).await.expect(StatusCode::OK).body["id"].as_str().unwrap().to_string();
    let leases = || async { sqlx::query_scalar::<_, i64>("SELECT count(*) FROM leases").fetch_one(&db).await.unwrap() };
    // A tenant without the balance for the first hour.
    let (_, poor_key) = app.tenant_key_without_balance(&op, "poor", gpuplane::auth::Role::TenantAdmin).await;
    let poor = app.token_for(&poor_key).await;
    app.post("/v1/leases", &poor, lease_body(&pool, 1))
        .await
        .expect_problem(StatusCode::PAYMENT_REQUIRED, "insufficient_balance");
    // An unknown pool.
    let unknown = json!({ "pool_id": uuid::Uuid::nil(), "gpu_count": 1, "duration_hours": 1 });
    let res = app.post("/v1/leases", &tenant, unknown).await;
    assert_eq!(res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["pool_id"]);
    assert_eq!(leases().await, 0);
    // Multi-node pack and spread.
    let nine = app.post("/v1/leases", &tenant, lease_body(&pool, 9)).await.expect(StatusCode::CREATED);
    assert_eq!(nodes_of(&nine.body).len(), 2);
    app.post(&format!("/v1/leases/{}/release", nine.body["id"].as_str().unwrap()), &tenant, json!({}))
        .await
        .expect(StatusCode::OK);
    let spread = json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1, "placement": "spread" });
    let spread = app.post("/v1/leases", &tenant, spread).await.expect(StatusCode::CREATED);
    assert_eq!(nodes_of(&spread.body).len(), 2);
    app.post(&format!("/v1/leases/{}/release", spread.body["id"].as_str().unwrap()), &tenant, json!({}))
        .await
        .expect(StatusCode::OK);
    // A tenant with a quota.
    app.put(&format!("/v1/admin/tenants/{tenant_id}/quotas"), &op, json!({ "max_concurrent_leases": 1 }))
        .await
        .expect(StatusCode::OK);
    app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect(StatusCode::CREATED);
    app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await.expect_problem(StatusCode::CONFLICT, "quota_exceeded");
    app.put(&format!("/v1/admin/tenants/{tenant_id}/quotas"), &op, json!({})).await.expect(StatusCode::OK);
    // A queue in the pool: nobody jumps it, though a GPU is free.
    let queued = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 16, "duration_hours": 1, "queue": true }))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(queued.body["state"], "queued");
    let refused = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await;
    let refused = refused.expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    assert_eq!(refused.body["context"]["queued_ahead"], 1);
    assert_eq!(leases().await, 4);
    assert_eq!(allocation_invariants(&db).await, (1, 1, true));
}

/// The hot lease endpoints check the key in their own statement: revocation and suspension still stop them
/// at once, and nothing is created or released.
#[sqlx::test]
async fn revoked_keys_and_suspended_tenants_can_neither_create_nor_release(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant, pool, _) = setup(&app, &[8]).await;
    let tenant_id =
        app.get("/v1/tenant", &tenant).await.expect(StatusCode::OK).body["id"].as_str().unwrap().to_string();
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await.expect(StatusCode::CREATED);
    let release = format!("/v1/leases/{}/release", lease.body["id"].as_str().unwrap());

    app.patch(&format!("/v1/admin/tenants/{tenant_id}"), &op, json!({ "status": "suspended" }))
        .await
        .expect(StatusCode::OK);
    app.post("/v1/leases", &tenant, lease_body(&pool, 1))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "tenant_suspended");
    app.post(&release, &tenant, json!({})).await.expect_problem(StatusCode::FORBIDDEN, "tenant_suspended");
    app.patch(&format!("/v1/admin/tenants/{tenant_id}"), &op, json!({ "status": "active" }))
        .await
        .expect(StatusCode::OK);

    let key_id = key_of(&db, &tenant_id).await;
    app.delete(&format!("/v1/tenant/api-keys/{key_id}"), &tenant).await.expect(StatusCode::NO_CONTENT);
    app.post("/v1/leases", &tenant, lease_body(&pool, 1))
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    app.post(&release, &tenant, json!({})).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    // A tenant member's token is refused before any query.
    let member = app.token_for(&app.add_key(&op, &tenant_id, gpuplane::auth::Role::TenantMember).await).await;
    app.post("/v1/leases", &member, lease_body(&pool, 1)).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");

    assert_eq!(allocation_invariants(&db).await, (2, 2, true));
    let state: String = sqlx::query_scalar("SELECT state FROM leases").fetch_one(&db).await.unwrap();
    assert_eq!(state, "active");
}

/// The sweeper's VACUUM of `nodes` (every allocation rewrites a node row) runs on a plain pool connection,
/// outside any transaction block, and really vacuums the table.
#[sqlx::test]
async fn the_service_vacuums_the_node_table(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[8]).await;
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 4)).await.expect(StatusCode::CREATED);
    app.post(&format!("/v1/leases/{}/release", lease.body["id"].as_str().unwrap()), &tenant, json!({}))
        .await
        .expect(StatusCode::OK);
    let vacuums = || async {
        sqlx::query_scalar::<_, i64>("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'nodes'")
            .fetch_one(&db)
            .await
            .unwrap()
    };
    let before = vacuums().await;
    gpuplane::leases::sweeper::vacuum_nodes(&db).await.unwrap();
    assert_eq!(vacuums().await, before + 1);
}

/// A pool that cannot hold a request now is refused with its figures, the same with or without an
/// Idempotency-Key; requests that can never fit are 422; asked to queue, the lease is queued.
#[sqlx::test]
async fn a_full_pool_is_refused_with_its_figures(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[8, 4]).await;
    app.post("/v1/leases", &tenant, lease_body(&pool, 8)).await.expect(StatusCode::CREATED);
    app.post("/v1/leases", &tenant, lease_body(&pool, 3)).await.expect(StatusCode::CREATED);
    let plain = app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await;
    let plain = plain.expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    assert_eq!(
        plain.body["context"],
        json!({ "requested": 2, "free_gpus": 1, "largest_free_block": 1, "queued_ahead": 0 })
    );
    let idempotent = app
        .send(create_with_idempotency_key(&tenant, "full-409", &lease_body(&pool, 2)))
        .await
        .expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    assert_eq!(plain.body["detail"], idempotent.body["detail"]);
    assert_eq!(plain.body["context"], idempotent.body["context"]);
    // Never fits: 422.
    let single = json!({ "pool_id": pool, "gpu_count": 9, "duration_hours": 1, "placement": "single_node" });
    let res = app.post("/v1/leases", &tenant, single).await;
    assert_eq!(res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["gpu_count"]);
    let res = app.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 13, "duration_hours": 1 })).await;
    assert_eq!(res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["gpu_count"]);
    // Asked to queue: queued.
    let queued = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1, "queue": true }))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(queued.body["state"], "queued");
    assert_eq!(allocation_invariants(&db).await, (11, 11, true));
}

/// A queued lease that starts while it is being ended: the ending statement waits for the start's lock, sees the
/// lease row changed after its snapshot, and runs again; the GPUs the lease got are released with it.
#[sqlx::test]
async fn a_lease_that_starts_while_it_is_ended_releases_the_gpus_it_got(db: PgPool) {
    use gpuplane::leases::lifecycle;
    use gpuplane_store::leases::allocation::{BestFit, LeaseWrite};
    use gpuplane_store::leases::events::NewEvent;
    use gpuplane_store::leases::{Actor, LeaseState, Placement};
    let app = TestApp::new(db.clone());
    let (_, tenant, pool, _) = setup(&app, &[4]).await;
    let first = app.post("/v1/leases", &tenant, lease_body(&pool, 4)).await.expect(StatusCode::CREATED);
    let queued = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1, "queue": true }))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(queued.body["state"], "queued");
    let first_id: uuid::Uuid = first.body["id"].as_str().unwrap().parse().unwrap();
    let queued_id: uuid::Uuid = queued.body["id"].as_str().unwrap().parse().unwrap();
    let pool_id: uuid::Uuid = pool.parse().unwrap();

    // A: the first lease ends and the queued one starts on its GPUs, not yet committed.
    let mut a = db.begin().await.unwrap();
    gpuplane_store::leases::ending::end_lease(
        &mut a,
        first_id,
        None,
        LeaseState::Released,
        "test",
        &Actor::System,
        None,
    )
    .await
    .unwrap();
    let plan = gpuplane_store::leases::allocation::place(&mut a, pool_id, 2, Placement::Pack, BestFit::Search)
        .await
        .unwrap()
        .unwrap();
    let event = NewEvent::new("allocated", Some(LeaseState::Queued), Some(LeaseState::Active), &Actor::System);
    let started = lifecycle::write_lease(&mut a, LeaseWrite::Activate(queued_id), Some(&plan), event).await.unwrap();
    assert_eq!(started.unwrap().gpus.len(), 2);

    // B: the queued lease is ended meanwhile; its statement's snapshot still has it queued, holding nothing.
    let db_b = db.clone();
    let ending = tokio::spawn(async move {
        let mut b = db_b.acquire().await.unwrap();
        gpuplane_store::leases::ending::end_lease(
            &mut b,
            queued_id,
            None,
            LeaseState::Terminated,
            "test",
            &Actor::System,
            None,
        )
        .await
        .unwrap()
    });
    let mut waited = 0;
    loop {
        let (waiting,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(&db)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        waited += 1;
        assert!(waited < 200, "the ending statement never waited for the start's lock");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    a.commit().await.unwrap();
    let ended = ending.await.unwrap().expect("the lease was live");
    assert_eq!(ended.from, LeaseState::Active, "it ended as the active lease it had become");
    assert_eq!(ended.lease.gpus.len(), 2, "the GPUs it got are released with it");
    assert_eq!(allocation_invariants(&db).await, (0, 0, true));
}

#[sqlx::test]
async fn a_node_no_agent_reported_takes_no_lease_until_its_agent_registers(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant, pool, _) = setup(&app, &[]).await;
    let bare = app.manual_node(&op, &pool, "bare-0", 8, false).await;
    let node = app.get(&format!("/v1/admin/nodes/{bare}"), &op).await.expect(StatusCode::OK).body;
    assert_eq!(node["state"], "awaiting_agent");
    assert_eq!(node["external"], false);
    assert_eq!(node["launchers"], Value::Null);
    let refused = app.post("/v1/leases", &tenant, lease_body(&pool, 1)).await;
    let refused = refused.expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    assert_eq!(refused.body["context"]["free_gpus"], 0, "{}", refused.body);
    let pools = app.get("/v1/pools", &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(pools[0]["free_gpus"], 0, "not offered as capacity either: {pools}");

    // The schema holds the rule even against code that forgets it: such a node is never ready and holds nothing.
    let ready = sqlx::query("UPDATE nodes SET liveness = 'ready' WHERE id = $1::uuid").bind(&bare).execute(&db).await;
    assert!(ready.unwrap_err().to_string().contains("nodes_ready_runs_work"));
    let taken =
        sqlx::query("UPDATE nodes SET free_gpus = free_gpus - 1 WHERE id = $1::uuid").bind(&bare).execute(&db).await;
    assert!(taken.unwrap_err().to_string().contains("nodes_unverified_hold_nothing"));

    // Its agent registers the host name with the pool's join token: now it takes leases.
    let token = app.join_token(&op, &pool).await;
    let gpus: Vec<Value> = (0..8)
        .map(|i| {
            json!({ "index": i, "uuid": format!("GPU-bare-0-{i}"), "name": "NVIDIA H100 80GB HBM3",
                         "memory_bytes": 85_520_809_984i64 })
        })
        .collect();
    let facts = json!({ "hostname": "bare-0", "address": "bare-0.test", "gpus": gpus, "intra_link": "nvlink",
                        "network_gbps": 400, "launchers": { "python3": "3.12.3", "torchrun": "2.5.1" } });
    let registered = app
        .call(axum::http::Method::POST, "/v1/agent/register", None, Some(json!({ "join_token": token, "node": facts })))
        .await;
    assert_eq!(registered.expect(StatusCode::OK).body["node_id"], bare.as_str());
    let node = app.get(&format!("/v1/admin/nodes/{bare}"), &op).await.expect(StatusCode::OK).body;
    assert_eq!(node["state"], "ready");
    assert_eq!(node["launchers"], json!({ "python3": "3.12.3", "torchrun": "2.5.1" }));
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 8)).await.expect(StatusCode::CREATED).body;
    assert_eq!(lease["external"], false);
    assert_eq!(nodes_of(&lease), HashSet::from([bare]));
}

#[sqlx::test]
async fn an_external_node_is_leased_and_its_lease_says_so(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant, pool, agent_nodes) = setup(&app, &[2]).await;
    let external = app.manual_node(&op, &pool, "ext-0", 4, true).await;
    let node = app.get(&format!("/v1/admin/nodes/{external}"), &op).await.expect(StatusCode::OK).body;
    assert_eq!((node["state"].as_str(), node["external"].as_bool()), (Some("ready"), Some(true)));

    let on_agent = app.post("/v1/leases", &tenant, lease_body(&pool, 2)).await.expect(StatusCode::CREATED).body;
    assert_eq!(on_agent["external"], false);
    assert_eq!(nodes_of(&on_agent), HashSet::from([agent_nodes[0].clone()]));
    let lease = app.post("/v1/leases", &tenant, lease_body(&pool, 4)).await.expect(StatusCode::CREATED).body;
    assert_eq!(lease["external"], true, "{lease}");
    assert!(lease["gpus"].as_array().unwrap().iter().all(|g| g["external"] == true));
    let id = lease["id"].as_str().unwrap();
    let read = app.get(&format!("/v1/leases/{id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!((read["external"].as_bool(), read["gpus"][0]["external"].as_bool()), (Some(true), Some(true)));

    // Billing is explicit: the external lease is charged to now on the operator's word; the agent lease only up
    // to its node's last heartbeat (silent for the last 30 minutes here).
    let agent_lease = on_agent["id"].as_str().unwrap();
    sqlx::query(
        "UPDATE leases SET starts_at = now() - interval '1 hour', metered_until = now() - interval '1 hour' \
         WHERE id IN ($1::uuid, $2::uuid)",
    )
    .bind(id)
    .bind(agent_lease)
    .execute(&db)
    .await
    .unwrap();
    sqlx::query("UPDATE pool_prices SET effective_from = effective_from - interval '1 day'")
        .execute(&db)
        .await
        .unwrap();
    sqlx::query("UPDATE nodes SET last_heartbeat_at = now() - interval '30 minutes' WHERE id = $1::uuid")
        .bind(&agent_nodes[0])
        .execute(&db)
        .await
        .unwrap();
    gpuplane::billing::metering::meter_once(&db).await.unwrap();
    let metered = |lease: &str| {
        let db = db.clone();
        let lease = lease.to_owned();
        async move {
            let (behind,): (f64,) = sqlx::query_as(
                "SELECT extract(epoch FROM now() - metered_until)::float8 FROM leases WHERE id = $1::uuid",
            )
            .bind(lease)
            .fetch_one(&db)
            .await
            .unwrap();
            behind
        }
    };
    assert!(metered(id).await < 60.0, "the external lease is metered to now");
    let agent_behind = metered(agent_lease).await;
    assert!((1790.0..1900.0).contains(&agent_behind), "the agent lease stops at the last heartbeat: {agent_behind}");

    // No agent runs jobs there: a job is refused up front instead of staying pending.
    app.post("/v1/admin/templates", &op, json!({"name": "hello", "argv": ["/bin/echo", "hi"]}))
        .await
        .expect(StatusCode::CREATED);
    let job = app.post(&format!("/v1/leases/{id}/jobs"), &tenant, json!({ "template": "hello" })).await;
    let job = job.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "launcher_missing");
    assert_eq!(job.body["context"]["hostname"], "ext-0");
    assert!(job.body["detail"].as_str().unwrap().contains("external"), "{}", job.body);
}
