//! A lease across pools (issue #37 item 1 and 6): parts allocated all or nothing by the one allocation core, read,
//! listed, queued, billed per part at each pool's price, held to per-pool quotas, idempotent; bad input is a 422
//! naming the field and writes nothing.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{Duration, Utc};
use gpuplane::billing::metering::meter_once;
use gpuplane::leases::sweeper::sweep_once;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::TestApp;

/// An operator, a tenant admin, an A100 pool with two 4-GPU nodes (300 per GPU-hour) and an RTX 4090 pool with one
/// 4-GPU node (100 per GPU-hour), both USD in region test-1.
async fn setup(app: &TestApp) -> (String, String, String, String, String) {
    let op = app.operator().await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    let a100 = app.pool(&op, "a100-pool", "a100-80g").await;
    let rtx = app.pool(&op, "rtx-pool", "rtx4090").await;
    for (pool, price) in [(&a100, 300), (&rtx, 100)] {
        app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "price_per_gpu_hour_minor": price }))
            .await
            .expect(StatusCode::OK);
    }
    app.node(&op, &a100, "a100-0", 4).await;
    app.node(&op, &a100, "a100-1", 4).await;
    app.node(&op, &rtx, "rtx-0", 4).await;
    (op, tenant_id, tenant, a100, rtx)
}

fn mixed(a100: &str, a100_gpus: i64, rtx: &str, rtx_gpus: i64) -> Value {
    json!({ "duration_hours": 2, "parts": [
        { "pool_id": a100, "gpu_count": a100_gpus, "placement": "single_node" },
        { "pool_id": rtx, "gpu_count": rtx_gpus },
    ]})
}

/// Free GPUs per pool name, from the nodes' counters, and whether every counter matches its free healthy GPUs.
async fn free_by_pool(db: &PgPool) -> (Vec<(String, i64)>, bool) {
    let free: Vec<(String, i64)> = sqlx::query_as(
        "SELECT p.name, sum(n.free_gpus)::bigint FROM nodes n JOIN pools p ON p.id = n.pool_id GROUP BY p.name ORDER BY p.name",
    )
    .fetch_all(db)
    .await
    .unwrap();
    let (consistent,): (bool,) = sqlx::query_as(
        "SELECT bool_and(n.free_gpus = (SELECT count(*) FROM gpus g WHERE g.node_id = n.id AND g.healthy \
             AND g.held_by IS NULL)) FROM nodes n",
    )
    .fetch_one(db)
    .await
    .unwrap();
    (free, consistent)
}

fn pool_of_gpus(lease: &Value, db_nodes: &[(String, String)]) -> Vec<String> {
    lease["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| db_nodes.iter().find(|(node, _)| node == g["node_id"].as_str().unwrap()).unwrap().1.clone())
        .collect()
}

async fn node_pools(db: &PgPool) -> Vec<(String, String)> {
    sqlx::query_as("SELECT id::text, pool_id::text FROM nodes").fetch_all(db).await.unwrap()
}

#[sqlx::test]
async fn a_lease_across_two_pools_gets_every_part_or_none_and_shows_its_parts_everywhere(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, tenant, a100, rtx) = setup(&app).await;

    let lease = app.post("/v1/leases", &tenant, mixed(&a100, 4, &rtx, 2)).await.expect(StatusCode::CREATED).body;
    assert_eq!(lease["state"], "active", "{lease}");
    assert_eq!(lease["gpu_count"], 6);
    assert_eq!(lease["pool_id"], a100.as_str(), "the first part's pool");
    let parts = lease["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!((parts[0]["pool_id"].as_str(), parts[0]["gpu_model"].as_str()), (Some(a100.as_str()), Some("a100-80g")));
    assert_eq!((parts[1]["pool_id"].as_str(), parts[1]["gpu_model"].as_str()), (Some(rtx.as_str()), Some("rtx4090")));
    assert_eq!(parts[0]["placement"], "single_node");
    assert_eq!(parts[0]["gpu_ids"].as_array().unwrap().len(), 4);
    assert_eq!(parts[1]["gpu_ids"].as_array().unwrap().len(), 2);
    // Every GPU is in its part's pool, and a single_node part sits on one node.
    let nodes = node_pools(&db).await;
    let pools = pool_of_gpus(&lease, &nodes);
    assert_eq!(pools.iter().filter(|p| **p == a100).count(), 4);
    assert_eq!(pools.iter().filter(|p| **p == rtx).count(), 2);
    let a100_nodes: std::collections::HashSet<&str> = lease["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| parts[0]["gpu_ids"].as_array().unwrap().contains(&g["gpu_id"]))
        .map(|g| g["node_id"].as_str().unwrap())
        .collect();
    assert_eq!(a100_nodes.len(), 1, "single_node");
    assert_eq!(free_by_pool(&db).await, (vec![("a100-pool".into(), 4), ("rtx-pool".into(), 2)], true));

    // Read, listed (tenant and operator, filtered by either pool), and in its event.
    let id = lease["id"].as_str().unwrap();
    let read = app.get(&format!("/v1/leases/{id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(read["parts"], lease["parts"]);
    let listed = app.get("/v1/leases", &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(listed["items"][0]["parts"], lease["parts"], "{listed}");
    for pool in [&a100, &rtx] {
        let by_pool = app.get(&format!("/v1/admin/leases?pool_id={pool}"), &op).await.expect(StatusCode::OK).body;
        assert_eq!(by_pool["items"].as_array().unwrap().len(), 1, "listed under each of its pools: {by_pool}");
    }
    let events = app.get(&format!("/v1/leases/{id}/events"), &tenant).await.expect(StatusCode::OK).body;
    let allocated =
        events.as_array().or(events["items"].as_array()).unwrap().iter().find(|e| e["kind"] == "allocated").cloned();
    let allocated = allocated.expect("an allocated event");
    assert_eq!(allocated["detail"]["parts"][1]["pool_id"], rtx.as_str(), "{allocated}");
    assert_eq!(allocated["detail"]["parts"][1]["gpu_count"], 2);

    // A single-pool lease is as it always was: no parts field at all.
    let single = app
        .post("/v1/leases", &tenant, json!({ "pool_id": a100, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED)
        .body;
    assert!(single.get("parts").is_none(), "{single}");
    let single_id = single["id"].as_str().unwrap();
    assert!(
        app.get(&format!("/v1/leases/{single_id}"), &tenant).await.expect(StatusCode::OK).body.get("parts").is_none()
    );

    // All or nothing: the RTX part cannot fit (2 free), so the A100 part takes nothing either.
    let before = free_by_pool(&db).await;
    let short = app.post("/v1/leases", &tenant, mixed(&a100, 2, &rtx, 3)).await;
    let short = short.expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    assert_eq!(short.body["context"]["parts"][1]["free_gpus"], 2, "{}", short.body);
    assert_eq!(free_by_pool(&db).await, before, "nothing allocated");

    // Queued, it starts once every part fits: here when the first lease's RTX GPUs come back.
    let mut queued_body = mixed(&a100, 2, &rtx, 3);
    queued_body["queue"] = json!(true);
    let queued = app.post("/v1/leases", &tenant, queued_body).await.expect(StatusCode::CREATED).body;
    assert_eq!(queued["state"], "queued");
    assert_eq!(queued["parts"][1]["gpu_ids"], json!([]));
    let queued_id = queued["id"].as_str().unwrap();
    sweep_once(&app.state, false).await.unwrap();
    assert_eq!(
        app.get(&format!("/v1/leases/{queued_id}"), &tenant).await.expect(StatusCode::OK).body["state"],
        "queued"
    );
    // A lease's answer shows its parts whatever wrote it last: the release's too (the statement that ends a lease
    // reads no parts for a single-pool one).
    let released = app.post(&format!("/v1/leases/{id}/release"), &tenant, json!({})).await.expect(StatusCode::OK).body;
    assert_eq!(released["state"], "released");
    assert_eq!(released["parts"], lease["parts"], "{released}");
    // The release wakes the queue in the background, and the sweeper starts it too: whichever comes first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let started = loop {
        sweep_once(&app.state, false).await.unwrap();
        let lease = app.get(&format!("/v1/leases/{queued_id}"), &tenant).await.expect(StatusCode::OK).body;
        if lease["state"] == "active" || std::time::Instant::now() > deadline {
            break lease;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(started["state"], "active", "{started}");
    assert_eq!(started["parts"][0]["gpu_ids"].as_array().unwrap().len(), 2);
    assert_eq!(started["parts"][1]["gpu_ids"].as_array().unwrap().len(), 3);
    assert_eq!(free_by_pool(&db).await, (vec![("a100-pool".into(), 5), ("rtx-pool".into(), 1)], true));

    // Released, every part's GPUs go back.
    let released =
        app.post(&format!("/v1/leases/{queued_id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    assert_eq!(released.body["parts"], started["parts"], "{}", released.body);
    let released =
        app.post(&format!("/v1/leases/{single_id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    assert!(released.body.get("parts").is_none(), "{}", released.body);
    assert_eq!(free_by_pool(&db).await, (vec![("a100-pool".into(), 8), ("rtx-pool".into(), 4)], true));

    // A job on it runs the gpuplane runtime, planned by the mixed planner: other templates, pins and retuning are
    // refused with the field at fault (the job runs end to end in `mixed_e2e`).
    let live = app.post("/v1/leases", &tenant, mixed(&a100, 1, &rtx, 1)).await.expect(StatusCode::CREATED).body;
    let live_id = live["id"].as_str().unwrap();
    let job = json!({ "template": "megatron", "model": {"preset": "llama2-7b"}, "pins": {"tp": 2},
        "workload": {"kind": "train", "seq_len": 1024, "global_batch": 16}, "command": ["train.py"] });
    let refused = app.post(&format!("/v1/leases/{live_id}/jobs"), &tenant, job).await;
    let refused = refused.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(refused.error_fields(), ["template", "pins"], "{}", refused.body);
    let job = json!({ "template": "auto",
        "model": { "architecture": { "layers": 8, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 256, "vocab": 256 } },
        "workload": {"kind": "train", "seq_len": 32, "global_batch": 8}, "command": ["train.py"] });
    let created = app.post(&format!("/v1/leases/{live_id}/jobs"), &tenant, job).await.expect(StatusCode::CREATED).body;
    assert_eq!(created["template"], "gpuplane-runtime", "{created}");
    let plan = &created["plan"];
    let layers: Vec<u64> = plan["layers_per_stage"].as_array().unwrap().iter().map(|l| l.as_u64().unwrap()).collect();
    assert_eq!((plan["pp"].as_u64(), plan["tp"].as_u64(), plan["dp"].as_u64()), (Some(2), Some(1), Some(1)), "{plan}");
    assert_eq!(layers.iter().sum::<u64>(), 8);
    // The stage with more layers runs on the A100, whose node is rank 0's when it runs first.
    let first_node = created["nodes"][0]["node_id"].as_str().unwrap();
    let a100_node = live["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| live["parts"][0]["gpu_ids"][0] == g["gpu_id"])
        .unwrap()["node_id"]
        .as_str()
        .unwrap();
    assert_eq!(first_node == a100_node, layers[0] > layers[1], "{created}");
}

#[sqlx::test]
async fn bad_parts_are_422_with_field_paths_and_allocate_nothing(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, _, tenant, a100, rtx) = setup(&app).await;
    let mut other_pools = Vec::new();
    for (name, model, region, currency) in [("eur-pool", "h100", "test-1", "EUR"), ("far-pool", "a10", "test-2", "USD")]
    {
        let body = json!({ "name": name, "gpu_model": model, "region": region, "price_per_gpu_hour_minor": 200,
            "currency": currency });
        let created = app.post("/v1/admin/pools", &op, body).await.expect(StatusCode::CREATED);
        other_pools.push(created.body["id"].as_str().unwrap().to_string());
    }
    let (eur, far) = (&other_pools[0], &other_pools[1]);
    let part = |pool: &str, gpus: i64| json!({ "pool_id": pool, "gpu_count": gpus });
    let body = |parts: Vec<Value>| json!({ "duration_hours": 1, "parts": parts });
    let unknown = "0192f5a0-0000-7000-8000-00000000dead";
    let cases: Vec<(Value, &str, &str)> = vec![
        (body(vec![part(&a100, 1)]), "parts", "2 to 4 parts"),
        (body((0..5).map(|_| part(&a100, 1)).collect()), "parts", "2 to 4 parts"),
        (body(vec![part(&a100, 1), part(&a100, 2)]), "parts[1].pool_id", "one part per pool"),
        (body(vec![part(&a100, 0), part(&rtx, 1)]), "parts[0].gpu_count", "between 1 and 4096"),
        (body(vec![part(&a100, 1), part(eur, 1)]), "parts[1].pool_id", "one currency"),
        (body(vec![part(&a100, 1), part(far, 1)]), "parts[1].pool_id", "one region"),
        (body(vec![part(&a100, 1), part(unknown, 1)]), "parts[1].pool_id", "no such pool"),
        (
            body(vec![part(&a100, 1), json!({ "pool_id": rtx, "gpu_model": "h100", "gpu_count": 1 })]),
            "parts[1].gpu_model",
            "offers rtx4090",
        ),
        (
            body(vec![part(&a100, 1), json!({ "gpu_model": "a100-80g", "gpu_count": 1 })]),
            "parts[1].gpu_model",
            "one part per pool",
        ),
        (body(vec![part(&a100, 1), part(&rtx, 5)]), "parts[1].gpu_count", "4 GPUs in all"),
        (
            body(vec![json!({ "pool_id": a100, "gpu_count": 5, "placement": "single_node" }), part(&rtx, 1)]),
            "parts[0].gpu_count",
            "largest node",
        ),
        (
            json!({ "duration_hours": 1, "pool_id": a100, "parts": [part(&a100, 1), part(&rtx, 1)] }),
            "pool_id",
            "parts[]",
        ),
        (
            json!({ "duration_hours": 1, "gpu_count": 2, "parts": [part(&a100, 1), part(&rtx, 1)] }),
            "gpu_count",
            "parts[]",
        ),
    ];
    let before = free_by_pool(&db).await;
    for (request, field, says) in cases {
        let res = app.post("/v1/leases", &tenant, request.clone()).await;
        let res = res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        let errors = res.body["errors"].as_array().unwrap_or_else(|| panic!("{}", res.body));
        assert!(
            errors.iter().any(|e| e["field"] == field && e["message"].as_str().unwrap().contains(says)),
            "{request} should name {field} ({says}): {}",
            res.body
        );
    }
    // Hostile input: a NUL in a model, a count past i32, a part that is not an object; each names its part.
    let hostile = [
        json!({ "duration_hours": 1, "parts": [part(&a100, 1), { "gpu_model": "rtx\u{0}4090", "gpu_count": 1 }] }),
        json!({ "duration_hours": 1, "parts": [part(&a100, 1), { "pool_id": rtx, "gpu_count": 1_u64 << 40 }] }),
        json!({ "duration_hours": 1, "parts": [part(&a100, 1), "rtx"] }),
    ];
    for request in hostile {
        let res = app.post("/v1/leases", &tenant, request.clone()).await;
        let res = res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert!(res.error_fields().iter().any(|f| f.starts_with("parts")), "{request}: {}", res.body);
    }
    assert_eq!(free_by_pool(&db).await, before);
    let (leases,): (i64,) = sqlx::query_as("SELECT count(*) FROM leases").fetch_one(&db).await.unwrap();
    assert_eq!(leases, 0, "nothing written");
}

#[sqlx::test]
async fn each_part_is_billed_at_its_own_pools_price_and_counts_against_its_pools_quota(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, tenant_id, tenant, a100, rtx) = setup(&app).await;
    sqlx::query("UPDATE pool_prices SET effective_from = effective_from - interval '30 days'")
        .execute(&db)
        .await
        .unwrap();
    let post = |body: Value| {
        Request::post("/v1/leases")
            .header("authorization", format!("Bearer {tenant}"))
            .header("content-type", "application/json")
            .header("idempotency-key", "mixed-1")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let lease = app.send(post(mixed(&a100, 3, &rtx, 2))).await.expect(StatusCode::CREATED).body;
    let again = app.send(post(mixed(&a100, 3, &rtx, 2))).await.expect(StatusCode::CREATED);
    assert_eq!(again.body["id"], lease["id"], "a retry replays the first answer");
    assert_eq!(again.headers.get("idempotent-replayed").unwrap(), "true");
    app.send(post(mixed(&a100, 3, &rtx, 1)))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM leases").fetch_one(&db).await.unwrap();
    assert_eq!(count, 1);

    // 1,000 s of use, then ended: each part costs floor(GPUs x price x seconds / 3600).
    let id = lease["id"].as_str().unwrap();
    let start = Utc::now() - Duration::hours(1);
    sqlx::query("UPDATE leases SET starts_at = $2, metered_until = $2 WHERE id = $1::uuid")
        .bind(id)
        .bind(start)
        .execute(&db)
        .await
        .unwrap();
    app.post(&format!("/v1/leases/{id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    sqlx::query("UPDATE leases SET ended_at = $2 WHERE id = $1::uuid")
        .bind(id)
        .bind(start + Duration::seconds(1000))
        .execute(&db)
        .await
        .unwrap();
    meter_once(&db).await.unwrap();
    let records: Vec<(String, i32, i64, i64, i64)> = sqlx::query_as(
        "SELECT pool_id::text, gpu_count, gpu_seconds, unit_price_minor, amount_minor FROM usage_records \
         WHERE lease_id = $1::uuid ORDER BY unit_price_minor DESC",
    )
    .bind(id)
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(
        records,
        vec![(a100.clone(), 3, 3000, 300, 3 * 300 * 1000 / 3600), (rtx.clone(), 2, 2000, 100, 2 * 100 * 1000 / 3600)],
        "one record per part, at its pool's price"
    );
    let (charged, parts_charged): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT -sum(amount_minor)::bigint FROM ledger_entries WHERE lease_id = $1::uuid), \
                (SELECT sum(charged_minor)::bigint FROM lease_parts WHERE lease_id = $1::uuid)",
    )
    .bind(id)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(charged, 250 + 55);
    assert_eq!(parts_charged, charged);
    meter_once(&db).await.unwrap();
    let (records_after,): (i64,) = sqlx::query_as("SELECT count(*) FROM usage_records WHERE lease_id = $1::uuid")
        .bind(id)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(records_after, 2, "metered once");

    // Quotas per pool: the RTX part counts against the RTX pool's limit, the A100 part against the A100 one's.
    app.put(
        &format!("/v1/admin/tenants/{tenant_id}/quotas"),
        &op,
        json!({ "max_gpus_per_pool": 3, "max_concurrent_leases": 2 }),
    )
    .await
    .expect(StatusCode::OK);
    let over = app.post("/v1/leases", &tenant, mixed(&a100, 4, &rtx, 1)).await;
    assert_eq!(over.expect_problem(StatusCode::CONFLICT, "quota_exceeded").body["context"]["requested"], 4);
    app.post("/v1/leases", &tenant, mixed(&a100, 2, &rtx, 3)).await.expect(StatusCode::CREATED);
    app.post("/v1/leases", &tenant, json!({ "pool_id": rtx, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect_problem(StatusCode::CONFLICT, "quota_exceeded");
    // The lease across pools counts once against max_concurrent_leases (2), and only its A100 part (2 GPUs)
    // against the A100 pool's 3.
    app.post("/v1/leases", &tenant, json!({ "pool_id": a100, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
    let (live,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM leases WHERE state = 'active'").fetch_one(&db).await.unwrap();
    assert_eq!(live, 2);
}
