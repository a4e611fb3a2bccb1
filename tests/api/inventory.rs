use axum::http::StatusCode;
use serde_json::json;
use sqlx::PgPool;

use crate::support::app::TestApp;

#[sqlx::test]
async fn catalog_is_seeded_and_operators_add_models(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let models = app.get("/v1/gpu-models", &tenant).await.expect(StatusCode::OK);
    let keys: Vec<&str> = models.body.as_array().unwrap().iter().map(|m| m["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["a10", "a100-40g", "a100-80g", "b200", "h100", "h200", "rtx4090"]);
    let h100 = models.body.as_array().unwrap().iter().find(|m| m["key"] == "h100").unwrap();
    assert_eq!(h100["bf16_tflops"], 989.0);
    assert_eq!(h100["memory_bytes"], 80_000_000_000i64);

    let l40s = json!({ "key": "l40s", "name": "L40S", "memory_bytes": 48_000_000_000i64, "memory_bandwidth_gbps": 864,
        "bf16_tflops": 362.0, "fp8_tflops": 733.0, "gpu_link": "none", "gpu_link_gbps": 0, "host_link": "pcie4" });
    app.post("/v1/admin/gpu-models", &tenant, l40s.clone()).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    app.post("/v1/admin/gpu-models", &op, l40s.clone()).await.expect(StatusCode::CREATED);
    app.post("/v1/admin/gpu-models", &op, l40s).await.expect_problem(StatusCode::CONFLICT, "gpu_model_exists");
    let bad = app
        .post(
            "/v1/admin/gpu-models",
            &op,
            json!({ "key": "Bad Key", "name": "x", "memory_bytes": 0, "memory_bandwidth_gbps": 1,
            "bf16_tflops": -1.0, "fp8_tflops": null, "gpu_link": "nvlink9", "gpu_link_gbps": 0, "host_link": "pcie4" }),
        )
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(bad.error_fields(), ["key", "memory_bytes", "bf16_tflops", "gpu_link", "gpu_link_gbps"]);
}

#[sqlx::test]
async fn pools_show_price_capacity_and_largest_free_block(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let n1 = app.node(&op, &pool, "node-1", 8).await;
    app.node(&op, &pool, "node-2", 4).await;

    let pools = app.get("/v1/pools", &tenant).await.expect(StatusCode::OK);
    let p = &pools.body[0];
    assert_eq!(p["name"], "h100-a");
    assert_eq!(p["gpu_model"]["key"], "h100");
    assert_eq!(p["price_per_gpu_hour_minor"], 200);
    assert_eq!(p["currency"], "USD");
    assert_eq!(p["total_gpus"], 12);
    assert_eq!(p["free_gpus"], 12);
    assert_eq!(p["largest_free_block"], 8);

    // A cordoned node keeps its GPUs in the total but offers none.
    let node = app.post(&format!("/v1/admin/nodes/{n1}/cordon"), &op, json!({})).await.expect(StatusCode::OK);
    assert_eq!(node.body["state"], "cordoned");
    let p = app.get(&format!("/v1/pools/{pool}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(
        (p.body["total_gpus"].as_i64(), p.body["free_gpus"].as_i64(), p.body["largest_free_block"].as_i64()),
        (Some(12), Some(4), Some(4))
    );
    for (action, state) in [("drain", "drained"), ("maintenance", "maintenance"), ("uncordon", "ready")] {
        let node = app.post(&format!("/v1/admin/nodes/{n1}/{action}"), &op, json!({})).await.expect(StatusCode::OK);
        assert_eq!(node.body["state"], state);
    }
    let p = app.get(&format!("/v1/pools/{pool}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(p.body["free_gpus"], 12);

    // Price updates; bad values are refused and change nothing.
    let updated = app
        .patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "price_per_gpu_hour_minor": 180 }))
        .await
        .expect(StatusCode::OK);
    assert_eq!(updated.body["price_per_gpu_hour_minor"], 180);
    let bad = app
        .patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "price_per_gpu_hour_minor": -1, "currency": "usd" }))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(bad.error_fields(), ["price_per_gpu_hour_minor", "currency"]);
    let p = app.get(&format!("/v1/pools/{pool}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(p.body["price_per_gpu_hour_minor"], 180);
}

#[sqlx::test]
async fn pool_creation_is_validated(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    app.pool(&op, "a10-eu", "a10").await;
    let dup = json!({ "name": "a10-eu", "gpu_model": "a10", "region": "eu", "price_per_gpu_hour_minor": 1, "currency": "EUR" });
    app.post("/v1/admin/pools", &op, dup).await.expect_problem(StatusCode::CONFLICT, "pool_name_taken");
    let unknown =
        json!({ "name": "x", "gpu_model": "tpu-v9", "region": "eu", "price_per_gpu_hour_minor": 1, "currency": "EUR" });
    let res = app
        .post("/v1/admin/pools", &op, unknown)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(res.error_fields(), ["gpu_model"]);
}

#[sqlx::test]
async fn nodes_are_created_listed_and_validated(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let other = app.pool(&op, "a10-a", "a10").await;
    let id = app.node(&op, &pool, "node-1", 8).await;
    app.node(&op, &other, "node-2", 2).await;

    let node = app.get(&format!("/v1/admin/nodes/{id}"), &op).await.expect(StatusCode::OK);
    assert_eq!(node.body["state"], "ready");
    assert_eq!(node.body["gpus"].as_array().unwrap().len(), 8);
    assert_eq!(node.body["gpus"][3]["index"], 3);
    assert_eq!(node.body["intra_link_gbps"], 900, "NVLink bandwidth defaults to the GPU model's");

    let filtered = app.get(&format!("/v1/admin/nodes?pool_id={pool}"), &op).await.expect(StatusCode::OK);
    assert_eq!(filtered.body["items"].as_array().unwrap().len(), 1);
    app.post(&format!("/v1/admin/nodes/{id}/cordon"), &op, json!({})).await.expect(StatusCode::OK);
    let cordoned = app.get("/v1/admin/nodes?state=cordoned", &op).await.expect(StatusCode::OK);
    assert_eq!(cordoned.body["items"][0]["id"], id.as_str());
    app.get("/v1/admin/nodes?state=sleeping", &op)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");

    // Duplicate hostname; duplicate GPU uuid across nodes.
    let dup = json!({ "pool_id": pool, "hostname": "node-1", "address": "10.0.0.9", "intra_link": "nvlink", "network_gbps": 100, "gpus": [{ "index": 0, "uuid": "GPU-new" }] });
    app.post("/v1/admin/nodes", &op, dup).await.expect_problem(StatusCode::CONFLICT, "node_hostname_taken");
    let dup_uuid = json!({ "pool_id": pool, "hostname": "node-9", "address": "10.0.0.9", "intra_link": "nvlink", "network_gbps": 100, "gpus": [{ "index": 0, "uuid": "GPU-node-1-0" }] });
    app.post("/v1/admin/nodes", &op, dup_uuid).await.expect_problem(StatusCode::CONFLICT, "gpu_uuid_taken");
    // Field-level validation.
    let bad = json!({ "pool_id": pool, "hostname": "-bad host", "address": "", "intra_link": "pcie", "network_gbps": -1,
        "gpus": [{ "index": 0, "uuid": "GPU-a" }, { "index": 0, "uuid": "GPU-a" }, { "index": 99, "uuid": "GPU-b" }] });
    let res = app
        .post("/v1/admin/nodes", &op, bad)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(
        res.error_fields(),
        ["hostname", "address", "network_gbps", "gpus[1].index", "gpus[1].uuid", "gpus[2].index"]
    );
    let no_pool = json!({ "pool_id": "00000000-0000-7000-8000-000000000000", "hostname": "node-7", "address": "a", "intra_link": "pcie", "network_gbps": 1, "gpus": [{ "index": 0, "uuid": "GPU-z" }] });
    let res = app
        .post("/v1/admin/nodes", &op, no_pool)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(res.error_fields(), ["pool_id"]);
    let (nodes, gpus): (i64, i64) = sqlx::query_as("SELECT (SELECT count(*) FROM nodes), (SELECT count(*) FROM gpus)")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!((nodes, gpus), (2, 10), "failed creations left nothing behind");
}

/// The database's hostname constraint (migration 0020 rewrote it without bounded repetition, which was slow)
/// accepts exactly the hostnames of the API's pattern (as the generated OpenAPI document states it): each candidate
/// is inserted directly, past the API's own validation, and must be stored if and only if PostgreSQL matches it
/// against that pattern.
#[sqlx::test]
async fn node_hostname_constraint_accepts_exactly_the_api_pattern(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let pool: uuid::Uuid = app.pool(&op, "edge", "h100").await.parse().unwrap();
    let doc = serde_json::to_value(gpuplane::router::openapi_document()).unwrap();
    let pattern = doc["components"]["schemas"]["CreateNodeRequest"]["properties"]["hostname"]["pattern"]
        .as_str()
        .expect("the API states the hostname pattern")
        .to_owned();
    let candidates = [
        "a".to_owned(),
        "Z9".to_owned(),
        "0.node-1.example".to_owned(),
        "x".repeat(253),
        format!("a{}", "-".repeat(252)),
        "x".repeat(254),
        String::new(),
        "-a".to_owned(),
        ".a".to_owned(),
        "a_b".to_owned(),
        "a b".to_owned(),
        "a\nb".to_owned(),
        "a\n".to_owned(),
        "nodé".to_owned(),
    ];
    for (i, hostname) in candidates.iter().enumerate() {
        let (api_pattern,): (bool,) =
            sqlx::query_as("SELECT $1 ~ $2").bind(hostname).bind(&pattern).fetch_one(&db).await.unwrap();
        let stored = sqlx::query(
            "INSERT INTO nodes (id, pool_id, hostname, address, intra_link, intra_link_gbps, network_gbps) \
             VALUES (gen_random_uuid(), $1, $2, $3, 'nvlink', 900, 400)",
        )
        .bind(pool)
        .bind(hostname)
        .bind(format!("10.0.0.{i}"))
        .execute(&db)
        .await;
        match stored {
            Ok(_) => assert!(api_pattern, "{hostname:?} was stored but the API pattern refuses it"),
            Err(e) => {
                assert!(!api_pattern, "{hostname:?} matches the API pattern but was refused: {e}");
                let constraint = e.as_database_error().and_then(|d| d.constraint()).map(str::to_owned);
                assert_eq!(constraint.as_deref(), Some("nodes_hostname_format"), "{hostname:?}: {e}");
            }
        }
    }
}

/// One definition of an allocatable node, `node_allocatable` (migration 0034): PostgreSQL inlines it, so best
/// fit under it is still a lookup in the partial index built on it; and no statement of the service writes the
/// rule out again.
#[sqlx::test]
async fn best_fit_looks_up_the_index_of_the_one_allocatable_rule(db: PgPool) {
    let mut conn = db.acquire().await.unwrap();
    sqlx::query("SET enable_seqscan = off").execute(&mut *conn).await.unwrap();
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN SELECT id FROM nodes WHERE pool_id = gen_random_uuid() AND node_allocatable(admin_state, liveness) \
         AND free_gpus >= 2 ORDER BY free_gpus, id LIMIT 1",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(plan.contains("nodes_allocatable_free_idx"), "{plan}");
    // The rule written out (rather than called) would not be the one rule.
    let (yes, no): (bool, bool) = sqlx::query_as(
        "SELECT node_allocatable('active', 'ready'), node_allocatable('active', 'unreachable') \
             OR node_allocatable('draining', 'ready') OR node_allocatable('maintenance', 'ready')",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert!(yes && !no);
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(
                    !text.contains("admin_state = 'active' AND"),
                    "{} writes the allocatable rule out",
                    path.display()
                );
            }
        }
    }
}
