//! Services in-process: a job with `serve` makes one, its parts' specs tell their agents what to forward and
//! probe (with a token only the service derives), agents' readiness reports count for their own parts only, a
//! failed replica leaves the job serving and runs again on its node, a replan rolls over the nodes with a
//! replica always ready, and the tenant's routes (keys, public, limits) refuse bad input and other tenants. The
//! gateway itself, end to end: `serving_e2e.rs`.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::app::TestApp;

#[sqlx::test]
async fn a_serving_job_is_a_service_whose_replicas_are_its_parts(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, other) = app.tenant_admin(&op, "other").await;
    let pool = app.pool(&op, "h100-pool", "h100").await;
    let nodes = [app.node(&op, &pool, "node-0", 1).await, app.node(&op, &pool, "node-1", 1).await];
    let agent = |i: usize| app.state.tokens.issue_agent(nodes[i].parse::<Uuid>().unwrap(), 1).unwrap();
    app.post("/v1/admin/templates", &op, json!({"name": "server", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let lease = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED)
        .body;
    let jobs = format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap());

    // Bad serving settings: every field named, nothing made.
    let bad = app
        .post(
            &jobs,
            &tenant,
            json!({ "template": "server", "serve": {
                "port": 80, "health_path": "health", "protocol": "grpc", "rate_limit_per_minute": 0 } }),
        )
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(
        bad.error_fields(),
        ["serve.port", "serve.health_path", "serve.protocol", "serve.rate_limit_per_minute"]
    );
    app.post(&jobs, &tenant, json!({ "template": "server", "serve": { "port": 8000, "tls": true } }))
        .await
        .expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(app.get("/v1/services", &tenant).await.expect(StatusCode::OK).body["items"], json!([]));

    let job = app
        .post(
            &jobs,
            &tenant,
            json!({ "template": "server", "serve": { "port": 8000, "protocol": "openai" }, "restart": { "max_restarts": 0 } }),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    let job_id = job["id"].as_str().unwrap().to_string();
    let listed = app.get("/v1/services", &tenant).await.expect(StatusCode::OK).body;
    let service = listed["items"][0].clone();
    let id = service["id"].as_str().unwrap().to_string();
    assert_eq!(service["job_id"], job_id.as_str());
    assert_eq!(service["url"], format!("{}/s/{id}", app.state.settings.gateway_url));
    assert_eq!((service["health_path"].as_str(), service["public"].as_bool()), (Some("/health"), Some(false)));
    assert_eq!((service["replicas"].as_i64(), service["ready_replicas"].as_i64()), (Some(2), Some(0)));

    // Each part's spec: the port in its environment, what its agent forwards and probes, and the replica's token
    // (derived, never stored: the job's own record does not have it).
    let mut parts = Vec::new();
    for i in 0..2 {
        let list = app.get("/v1/agent/assignments", &agent(i)).await.expect(StatusCode::OK).body;
        let assignment = &list["assignments"][0];
        let part: Uuid = assignment["job_node_id"].as_str().unwrap().parse().unwrap();
        assert_eq!(assignment["spec"]["env"]["GPUPLANE_SERVE_PORT"], "8000");
        assert_eq!(assignment["spec"]["serve"]["port"], 8000);
        assert_eq!(assignment["spec"]["serve"]["health_path"], "/health");
        assert_eq!(assignment["spec"]["serve"]["token"], app.state.tokens.replica_token(part));
        parts.push(part);
    }
    assert_ne!(app.state.tokens.replica_token(parts[0]), app.state.tokens.replica_token(parts[1]));
    let stored = app.get(&format!("/v1/jobs/{job_id}"), &tenant).await.expect(StatusCode::OK).body;
    assert!(!stored.to_string().contains(&app.state.tokens.replica_token(parts[0])), "no token in the job");

    let report = |i: usize, part: Uuid, state: &str| {
        let (app, token) = (&app, agent(i));
        let (path, body) = (format!("/v1/agent/assignments/{part}/status"), json!({ "state": state }));
        async move { app.post(&path, &token, body).await.expect(StatusCode::OK) }
    };
    let heartbeat = |i: usize, serving: Value| {
        let (app, token) = (&app, agent(i));
        async move { app.post("/v1/agent/heartbeat", &token, json!({ "samples": [], "serving": serving })).await }
    };
    let ready = || async {
        let service = app.get(&format!("/v1/services/{id}"), &tenant).await.expect(StatusCode::OK).body;
        service["ready_replicas"].as_i64().unwrap()
    };
    report(0, parts[0], "running").await;
    report(1, parts[1], "running").await;
    // Node 0 speaks for both parts: only its own is taken.
    heartbeat(
        0,
        json!([
            { "job_node_id": parts[0], "port": 21000, "ready": true },
            { "job_node_id": parts[1], "port": 21001, "ready": true },
        ]),
    )
    .await
    .expect(StatusCode::OK);
    assert_eq!(ready().await, 1);
    heartbeat(1, json!([{ "job_node_id": parts[1], "port": 21000, "ready": true }])).await.expect(StatusCode::OK);
    assert_eq!(ready().await, 2);
    let bad = heartbeat(1, json!([{ "job_node_id": parts[1], "port": 0, "ready": true }]))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(bad.error_fields(), ["serving[0].port"]);
    // A probe that fails takes it out; a part the report leaves out is out too.
    heartbeat(1, json!([{ "job_node_id": parts[1], "port": 21000, "ready": false }])).await.expect(StatusCode::OK);
    assert_eq!(ready().await, 1);
    heartbeat(1, json!([{ "job_node_id": parts[1], "port": 21000, "ready": true }])).await.expect(StatusCode::OK);
    heartbeat(0, json!([{ "job_node_id": Uuid::now_v7(), "port": 21000, "ready": true }])).await.expect(StatusCode::OK);
    assert_eq!(ready().await, 1, "node 0's part was left out of its report");

    // A replica that fails leaves the job serving with the other; the last one's end ends it.
    report(0, parts[0], "failed").await;
    let job = app.get(&format!("/v1/jobs/{job_id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(job["state"], "running", "{job:#}");
    assert_eq!(job["nodes"][1]["desired"], "run", "the other replica is not stopped");
    assert_eq!(ready().await, 1);
    report(1, parts[1], "failed").await;
    let job = app.get(&format!("/v1/jobs/{job_id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(job["state"], "failed", "{job:#}");
    assert_eq!(ready().await, 0);

    // Keys: made with a secret shown once, listed without it, revoked once (idempotent).
    let keys = format!("/v1/services/{id}/keys");
    let bad = app.post(&keys, &tenant, json!({ "name": "a\u{7}b" })).await;
    assert_eq!(bad.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["name"]);
    let key = app.post(&keys, &tenant, json!({ "name": "app" })).await.expect(StatusCode::CREATED).body;
    let secret = key["secret"].as_str().unwrap();
    assert!(secret.starts_with("gps_") && secret.starts_with(key["prefix"].as_str().unwrap()));
    let listed = app.get(&keys, &tenant).await.expect(StatusCode::OK).body;
    assert!(!listed.to_string().contains(secret), "{listed}");
    let key_path = format!("{keys}/{}", key["id"].as_str().unwrap());
    let first = app.delete(&key_path, &tenant).await.expect(StatusCode::OK).body;
    let again = app.delete(&key_path, &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(first["revoked_at"], again["revoked_at"]);
    app.delete(&format!("{keys}/{}", Uuid::now_v7()), &tenant).await.expect_problem(StatusCode::NOT_FOUND, "not_found");

    // Public and the limit; bad values refused.
    let path = format!("/v1/services/{id}");
    let changed = app.patch(&path, &tenant, json!({ "public": true, "rate_limit_per_minute": 60 })).await;
    let changed = changed.expect(StatusCode::OK).body;
    assert_eq!((changed["public"].as_bool(), changed["rate_limit_per_minute"].as_i64()), (Some(true), Some(60)));
    let cleared = app.patch(&path, &tenant, json!({ "rate_limit_per_minute": null })).await.expect(StatusCode::OK).body;
    assert_eq!((cleared["public"].as_bool(), cleared["rate_limit_per_minute"].clone()), (Some(true), Value::Null));
    let bad = app.patch(&path, &tenant, json!({ "rate_limit_per_minute": 0 })).await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["rate_limit_per_minute"]);

    // Another tenant: nothing of it, anywhere.
    assert_eq!(app.get("/v1/services", &other).await.expect(StatusCode::OK).body["items"], json!([]));
    app.get(&path, &other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.patch(&path, &other, json!({ "public": false })).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.get(&keys, &other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.post(&keys, &other, json!({ "name": "mine" })).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.delete(&key_path, &other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    let still = app.get(&path, &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(still["public"], true, "unchanged by the other tenant");
}

#[sqlx::test]
async fn a_failed_replica_runs_again_on_its_node_and_a_replan_rolls_over_the_nodes(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-pool", "h100").await;
    let nodes = [app.node(&op, &pool, "node-0", 2).await, app.node(&op, &pool, "node-1", 2).await];
    let agent = |i: usize| app.state.tokens.issue_agent(nodes[i].parse::<Uuid>().unwrap(), 1).unwrap();
    for i in 0..2 {
        let launchers = json!({ "samples": [], "launchers": { "vllm": "0.12.0", "python3": "3.12.3" } });
        app.post("/v1/agent/heartbeat", &agent(i), launchers).await.expect(StatusCode::OK);
    }
    let lease = app
        .post(
            "/v1/leases",
            &tenant,
            json!({ "pool_id": pool, "gpu_count": 4, "duration_hours": 1, "placement": "spread" }),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    let jobs = format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap());
    let job = app
        .post(
            &jobs,
            &tenant,
            json!({ "template": "vllm", "model": { "preset": "llama3-8b" }, "workload": { "kind": "inference" },
                    "pins": { "tp": 1 }, "serve": { "port": 8000, "protocol": "openai" },
                    "restart": { "max_restarts": 1, "backoff_s": 0 } }),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    let policy = &job["restart"];
    assert_eq!((policy["from_scratch"].as_bool(), policy["detect_stalls"].as_bool()), (Some(true), Some(false)));
    let job_path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    let service_id = app.get("/v1/services", &tenant).await.expect(StatusCode::OK).body["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let fetch = |i: usize| {
        let (app, token) = (&app, agent(i));
        async move { app.get("/v1/agent/assignments", &token).await.expect(StatusCode::OK).body["assignments"].clone() }
    };
    // The open part of node i that its agent is told to run: (id, the full assignment).
    let open_part = |i: usize| async move {
        let list = fetch(i).await;
        let open = list.as_array().unwrap().iter().find(|a| a["desired"] == "run" && a.get("notice").is_none());
        open.map(|a| (a["job_node_id"].as_str().unwrap().parse::<Uuid>().unwrap(), a.clone()))
    };
    let report = |i: usize, part: Uuid, state: &str| {
        let (app, token) = (&app, agent(i));
        let (path, body) = (format!("/v1/agent/assignments/{part}/status"), json!({ "state": state, "exit_code": 1 }));
        async move { app.post(&path, &token, body).await.expect(StatusCode::OK) }
    };
    let serving = |i: usize, parts: Vec<Uuid>| {
        let (app, token) = (&app, agent(i));
        let reports: Vec<Value> =
            parts.iter().map(|p| json!({ "job_node_id": p, "port": 21000, "ready": true })).collect();
        async move {
            app.post("/v1/agent/heartbeat", &token, json!({ "samples": [], "serving": reports }))
                .await
                .expect(StatusCode::OK)
        }
    };
    let ready = || async {
        let service = app.get(&format!("/v1/services/{service_id}"), &tenant).await.expect(StatusCode::OK).body;
        service["ready_replicas"].as_i64().unwrap()
    };
    let job_now = || async { app.get(&job_path, &tenant).await.expect(StatusCode::OK).body };
    let restart_round = || async { gpuplane::jobs::recovery::round(&app.state).await.unwrap() };

    let (a, _) = open_part(0).await.unwrap();
    let (b, first_b) = open_part(1).await.unwrap();
    assert!(first_b["spec"]["argv"].to_string().contains("\"--data-parallel-size\",\"2\""), "{first_b}");
    for (i, part) in [(0, a), (1, b)] {
        report(i, part, "running").await;
        serving(i, vec![part]).await;
    }
    assert_eq!(ready().await, 2);

    // Node 0's replica fails after it served: the job serves on with node 1's, and node 0's runs again as its
    // next attempt (a part of its own: another id, another token).
    report(0, a, "failed").await;
    let job = job_now().await;
    assert_eq!((job["state"].as_str(), job["nodes"][0]["state"].as_str()), (Some("running"), Some("failed")));
    assert_eq!(ready().await, 1);
    assert_eq!(restart_round().await.len(), 1);
    let (a2, assignment) = open_part(0).await.expect("the next attempt is node 0's to run");
    assert_ne!(a2, a);
    assert_eq!(assignment["spec"]["serve"]["token"], app.state.tokens.replica_token(a2));
    let job = job_now().await;
    assert_eq!(
        (job["nodes"][0]["id"].as_str(), job["nodes"][0]["attempt"].as_i64()),
        (Some(&*a2.to_string()), Some(2))
    );
    assert_eq!(job["nodes"].as_array().unwrap().len(), 2, "the failed attempt is not listed");
    assert!(restart_round().await.is_empty(), "started once");
    // It fails again before it ever answered: once more (max_restarts 1 in a row), then it stays failed.
    report(0, a2, "running").await;
    report(0, a2, "failed").await;
    restart_round().await;
    let (a3, _) = open_part(0).await.expect("a third attempt");
    report(0, a3, "failed").await;
    assert!(restart_round().await.is_empty());
    assert!(open_part(0).await.is_none(), "the limit is reached: {}", fetch(0).await);
    let job = job_now().await;
    assert_eq!((job["state"].as_str(), job["nodes"][0]["attempt"].as_i64()), (Some("running"), Some(3)));
    assert_eq!(ready().await, 1, "node 1's replica serves on");

    // A replan to TP 2 (one replica per node) rolls: node 0, whose replica had failed, starts its new one at
    // once; node 1's old one is left serving until that one answers.
    let accepted = app
        .post(
            &format!("{job_path}/replan"),
            &tenant,
            json!({ "pins": { "tp": 2 }, "reason": "fewer, larger replicas" }),
        )
        .await
        .expect(StatusCode::ACCEPTED)
        .body;
    assert_eq!(
        (accepted["generation"].as_i64(), accepted["generations"][1]["state"].as_str()),
        (Some(1), Some("pending"))
    );
    assert!(fetch(1).await[0].get("notice").is_none(), "node 1 serves on");
    assert_eq!(ready().await, 1);
    let (new_a, assignment) = open_part(0).await.expect("node 0's new replica");
    assert!(assignment["spec"]["argv"].to_string().contains("\"--tensor-parallel-size\",\"2\""), "{assignment}");
    report(0, new_a, "running").await;
    assert!(fetch(1).await[0].get("notice").is_none(), "not before node 0's new replica answers");
    serving(0, vec![new_a]).await;
    // It answered: node 1's old replica gets its notice (no new request; those it has finish in the grace).
    let noticed = fetch(1).await;
    assert_eq!(noticed[0]["notice"]["reason"], "replan to generation 2 (rolling, one node at a time)", "{noticed}");
    assert_eq!(ready().await, 1, "node 0's new replica takes the requests");
    report(1, b, "cancelled").await;
    let (new_b, _) = open_part(1).await.expect("node 1's new replica, once its old one ended");
    assert_eq!(job_now().await["generation"], 1, "the old plan's until every new replica answered");
    report(1, new_b, "running").await;
    serving(1, vec![new_b]).await;
    assert_eq!(ready().await, 2);
    let job = job_now().await;
    assert_eq!((job["state"].as_str(), job["generation"].as_i64()), (Some("running"), Some(2)), "{job:#}");
    let ids: Vec<&str> = job["nodes"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [new_a.to_string(), new_b.to_string()]);
    let replanned: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_events WHERE type = 'job.replanned'")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(replanned, 1);
}

#[sqlx::test]
async fn request_counts_older_than_the_minute_retention_are_deleted(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-pool", "h100").await;
    app.node(&op, &pool, "node-0", 1).await;
    app.post("/v1/admin/templates", &op, json!({"name": "server", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let lease = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED)
        .body;
    let jobs = format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap());
    app.post(&jobs, &tenant, json!({ "template": "server", "serve": { "port": 8000 } }))
        .await
        .expect(StatusCode::CREATED);
    let listed = app.get("/v1/services", &tenant).await.expect(StatusCode::OK).body;
    let id: Uuid = listed["items"][0]["id"].as_str().unwrap().parse().unwrap();

    // Counts of a minute 31 days ago, one 29 days ago, and this minute's.
    let now = chrono::DurationRound::duration_trunc(chrono::Utc::now(), chrono::TimeDelta::minutes(1)).unwrap();
    let minute = |days_ago: i64, requests: i64| gpuplane_store::services::RequestMinute {
        service_id: id,
        minute: now - chrono::TimeDelta::days(days_ago),
        requests,
        errors: 0,
        refused: 0,
        output_tokens: 0,
        latency: vec![0; 16],
    };
    let counts = [minute(31, 5), minute(29, 6), minute(0, 7)];
    gpuplane_store::services::add_request_minutes(&mut db.acquire().await.unwrap(), &counts).await.unwrap();

    let retention = app.state.settings.telemetry_minute_retention;
    assert_eq!(retention.as_secs(), 30 * 86_400, "the default");
    assert!(!gpuplane::services::expire_request_minutes(&db, retention).await.unwrap(), "one round did it all");
    let kept: Vec<i64> =
        sqlx::query_scalar("SELECT requests FROM service_request_minutes WHERE service_id = $1 ORDER BY minute")
            .bind(id)
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(kept, [6, 7], "the minute past the retention went, the others stay");
    let service = app.get(&format!("/v1/services/{id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(service["last_hour"]["requests"], 7);
}
