use axum::http::StatusCode;
use gpuplane::planner;
use serde_json::json;
use sqlx::PgPool;

use crate::support::app::TestApp;

#[sqlx::test]
async fn plans_multiply_out_to_the_gpus_and_fit(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let req = json!({ "model": { "preset": "llama3-70b" }, "workload": { "kind": "train", "seq_len": 4096, "global_batch": 1024 },
        "cluster": { "gpu": "a100-80g", "gpus": 64, "gpus_per_node": 8, "inter_node_gbps": 1600 }, "top_n": 5 });
    let res = app.post("/v1/plans", &tenant, req).await.expect(StatusCode::OK);
    let plans = res.body["plans"].as_array().unwrap();
    assert!(!plans.is_empty() && plans.len() <= 5);
    for p in plans {
        let product = p["tp"].as_u64().unwrap()
            * p["cp"].as_u64().unwrap()
            * p["pp"].as_u64().unwrap()
            * p["dp"].as_u64().unwrap()
            + p["idle_gpus"].as_u64().unwrap();
        assert_eq!(product, 64);
        assert_eq!(p["ep"], 1, "dense model");
        let stages = p["layers_per_stage"].as_array().unwrap();
        assert_eq!(stages.len() as u64, p["pp"].as_u64().unwrap());
        assert_eq!(stages.iter().map(|l| l.as_u64().unwrap()).sum::<u64>(), 80);
        assert!(p["memory_per_gpu_bytes"].as_u64().unwrap() <= p["memory"]["usable"].as_u64().unwrap());
        assert!(p["tp"].as_u64().unwrap() <= 8, "tensor parallelism stays inside a node");
        assert!(p["explanation"].as_str().unwrap().len() > 40);
    }
    let speeds: Vec<f64> = plans.iter().map(|p| p["tokens_per_s"].as_f64().unwrap()).collect();
    assert!(speeds.windows(2).all(|w| w[0] >= w[1]), "fastest first: {speeds:?}");
    // Pinning evaluates the pinned plan.
    let pinned = json!({ "model": { "preset": "llama3-70b" }, "workload": { "kind": "train", "seq_len": 4096, "global_batch": 1024 },
        "cluster": { "gpu": "a100-80g", "gpus": 64, "gpus_per_node": 8 }, "pins": { "tp": 8, "pp": 8, "dp": 1 } });
    let res = app.post("/v1/plans", &tenant, pinned).await.expect(StatusCode::OK);
    assert!(res.body["plans"].as_array().unwrap().iter().all(|p| p["tp"] == 8 && p["pp"] == 8));
    app.post("/v1/plans", &op, json!({})).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    // Llama 3.1 405B's published split: 126 layers on PP 16, CP and EP in the answer.
    let llama3 = json!({ "model": { "preset": "Llama3.1-405B" }, "workload": { "kind": "train", "seq_len": 8192, "global_batch": 2048 },
        "cluster": { "gpu": "H100", "gpus": 16384, "gpus_per_node": 8, "inter_node_gbps": 3200 },
        "pins": { "tp": 8, "pp": 16, "cp": 1 }, "top_n": 1 });
    let res = app.post("/v1/plans", &tenant, llama3).await.expect(StatusCode::OK);
    let best = &res.body["plans"][0];
    assert_eq!(best["stage_split"], "embedding_and_loss", "{best}");
    assert_eq!(best["layers_per_stage"][0], 7);
    assert_eq!(best["layers_per_stage"][1], 8);
    let moe = json!({ "model": { "preset": "mixtral-8x7b" }, "workload": { "kind": "train", "global_batch": 256 },
        "cluster": { "gpu": "h100", "gpus": 64, "gpus_per_node": 8, "inter_node_gbps": 3200 }, "pins": { "ep": 8 }, "top_n": 1 });
    let res = app.post("/v1/plans", &tenant, moe).await.expect(StatusCode::OK);
    assert_eq!(res.body["plans"][0]["ep"], 8);
    // Offload, as the search picked it for a consumer node.
    let offload = json!({ "model": { "preset": "llama2-7b" }, "workload": { "kind": "train" },
        "cluster": { "gpu": "rtx4090", "gpus": 4, "host_memory_gb": 256 }, "top_n": 1 });
    let res = app.post("/v1/plans", &tenant, offload).await.expect(StatusCode::OK);
    assert_ne!(res.body["plans"][0]["offload"], "none", "{}", res.body);
}

#[sqlx::test]
async fn infeasible_plans_say_what_would_fit(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let req = json!({ "model": { "preset": "llama3-70b" }, "workload": { "kind": "train" }, "cluster": { "gpu": "rtx4090", "gpus": 4 } });
    let res =
        app.post("/v1/plans", &tenant, req).await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "plan_infeasible");
    assert!(res.body["detail"].as_str().unwrap().contains("RTX 4090"), "{}", res.body);
    assert!(res.body["context"]["smallest_fit"]["gpu_count"].as_u64().unwrap() > 4);
    let bad = json!({ "model": { "preset": "llama-9000" }, "workload": { "kind": "train" }, "cluster": { "gpu": "h100", "gpus": 8 } });
    let res =
        app.post("/v1/plans", &tenant, bad).await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert!(res.error_fields()[0].starts_with("model"), "{:?}", res.error_fields());
    let zero = json!({ "model": { "preset": "llama2-7b" }, "workload": { "kind": "train" }, "cluster": { "gpu": "h100", "gpus": 0 } });
    app.post("/v1/plans", &tenant, zero).await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    // Serving that fails only because of the default concurrency says so.
    let serve = json!({ "model": { "preset": "llama2-7b" }, "workload": { "kind": "inference" }, "cluster": { "gpu": "rtx4090", "gpus": 1 } });
    let res =
        app.post("/v1/plans", &tenant, serve).await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "plan_infeasible");
    let hints = res.body["context"]["hints"].as_array().unwrap();
    assert!(hints.iter().any(|h| h.as_str().unwrap().contains("concurrent")), "{}", res.body);
    // Unknown GPU: the field, a suggestion and the valid keys; bad MoE numbers are field errors, not 500s.
    let typo = json!({ "model": { "preset": "llama2-7b" }, "workload": { "kind": "train" }, "cluster": { "gpu": "a100", "gpus": 8 } });
    let res = app
        .post("/v1/plans", &tenant, typo)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(res.error_fields(), vec!["cluster.gpu"]);
    assert!(res.body.to_string().contains("a100-80g"), "{}", res.body);
    let moe = json!({ "model": { "architecture": { "layers": 8, "hidden": 1024, "heads": 8, "kv_heads": 8, "ffn": 512, "vocab": 1000,
        "moe": { "experts": 4, "experts_per_token": 9 } } }, "workload": { "kind": "train" }, "cluster": { "gpu": "h100", "gpus": 8 },
        "pins": { "cp": 0 } });
    let res =
        app.post("/v1/plans", &tenant, moe).await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(res.error_fields(), vec!["model.architecture.moe.experts_per_token"]);
}

#[sqlx::test]
async fn advice_ranks_the_platforms_pools_by_cost_and_speed(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let h100 = app.pool(&op, "h100-a", "h100").await;
    let a100 = app.pool(&op, "a100-a", "a100-80g").await;
    app.node(&op, &h100, "h-0", 8).await;
    app.node(&op, &a100, "a-0", 8).await;
    app.node(&op, &a100, "a-1", 8).await;
    let req = json!({ "model": { "preset": "llama2-7b" }, "workload": { "kind": "train", "seq_len": 4096, "global_batch": 256 },
        "target": { "training_tokens": 1_000_000_000u64 }, "deadline_hours": 1000 });
    let res = app.post("/v1/advice", &tenant, req).await.expect(StatusCode::OK);
    let options = res.body["options"].as_array().unwrap();
    assert!(!options.is_empty(), "{}", res.body);
    // Every pool is shown or says why not.
    for pool in [&h100, &a100] {
        let shown = options.iter().any(|o| o["pool_id"] == pool.as_str());
        let skipped = res.body["skipped"].as_array().unwrap().iter().any(|s| s["pool_id"] == pool.as_str());
        assert!(shown != skipped, "{pool}: {}", res.body);
    }
    assert_eq!(options.iter().filter(|o| o["cheapest"] == true).count(), 1);
    assert_eq!(options.iter().filter(|o| o["fastest"] == true).count(), 1);
    for o in options {
        let gpus = o["gpu_count"].as_f64().unwrap();
        let hours = o["hours"].as_f64().unwrap();
        let expected = (gpus * hours * 200.0).ceil() as i64;
        assert!((o["cost_minor"].as_i64().unwrap() - expected).abs() <= 1, "cost = ceil(gpus x hours x price): {o}");
        let free = if o["pool_id"] == h100.as_str() { 8 } else { 16 };
        assert!(o["gpu_count"].as_u64().unwrap() <= free, "only GPUs free now");
    }
}

/// The demo's LoRA query over its B200 and A100 pools: 1 x B200 at 45.00 USD for 7.5 h is not advised over
/// 8 x B200 at 45.01 USD for 0.94 h, and every label is true of what is shown.
#[sqlx::test]
async fn advice_is_the_cost_time_frontier_and_a_cent_does_not_decide_it(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let mut pools = Vec::new();
    for (name, gpu, price, nodes) in [("b200-demo", "b200", 599, 1), ("a100-demo", "a100-80g", 179, 2)] {
        let pool = app
            .post(
                "/v1/admin/pools",
                &op,
                json!({ "name": name, "gpu_model": gpu, "region": "test-1", "price_per_gpu_hour_minor": price, "currency": "USD" }),
            )
            .await
            .expect(StatusCode::CREATED)
            .body["id"]
            .as_str()
            .unwrap()
            .to_string();
        for n in 0..nodes {
            app.node(&op, &pool, &format!("{name}-{n}"), 8).await;
        }
        pools.push(pool);
    }
    let req = json!({ "model": { "preset": "llama2-7b" }, "workload": { "kind": "lora", "seq_len": 4096, "global_batch": 64 },
        "target": { "training_tokens": 1_000_000_000u64 } });
    let res = app.post("/v1/advice", &tenant, req).await.expect(StatusCode::OK);
    let body = &res.body;
    assert_eq!(body["cost_tie_bps"], planner::advice::COST_TIE_BPS);
    let options = body["options"].as_array().unwrap();
    let view: Vec<(u64, &str, f64, i64)> = options
        .iter()
        .map(|o| {
            (
                o["gpu_count"].as_u64().unwrap(),
                o["gpu_key"].as_str().unwrap(),
                o["hours"].as_f64().unwrap(),
                o["cost_minor"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(!view.iter().any(|&(n, k, _, _)| n == 1 && k == "b200"), "a cent bought 6.6 hours: {view:?}");
    let fastest: Vec<&serde_json::Value> = options.iter().filter(|o| o["fastest"] == true).collect();
    assert_eq!(fastest.len(), 1);
    let least_hours = view.iter().map(|v| v.2).fold(f64::INFINITY, f64::min);
    assert_eq!(fastest[0]["hours"].as_f64().unwrap(), least_hours, "fastest is the least time shown: {view:?}");
    let cheapest: Vec<&serde_json::Value> = options.iter().filter(|o| o["cheapest"] == true).collect();
    assert_eq!(cheapest.len(), 1);
    assert_eq!(cheapest[0]["cost_minor"].as_i64().unwrap(), view.iter().map(|v| v.3).min().unwrap());
    // Cheapest first, and each dearer option is faster by more than a tie's worth of cost.
    for w in view.windows(2) {
        assert!(w[0].3 < w[1].3 && w[0].2 > w[1].2, "{view:?}");
        assert!(!planner::advice::costs_tie(w[0].3, w[1].3), "a tie is shown: {view:?}");
    }
    for pool in &pools {
        let shown = options.iter().any(|o| o["pool_id"] == pool.as_str());
        let skipped = body["skipped"].as_array().unwrap().iter().find(|s| s["pool_id"] == pool.as_str());
        assert!(shown || skipped.is_some_and(|s| s["reason"].as_str().unwrap().contains("is beaten by")), "{body}");
    }
}

#[sqlx::test]
async fn the_database_catalog_matches_the_planners(db: PgPool) {
    let mut conn = db.acquire().await.unwrap();
    let models = gpuplane_store::inventory::gpu_models::list_gpu_models(&mut conn).await.unwrap();
    let mut from_db: Vec<planner::GpuSpec> = models.iter().map(gpuplane::planning_api::gpu_spec).collect();
    let mut builtin = planner::builtin_gpus();
    from_db.sort_by(|a, b| a.key.cmp(&b.key));
    builtin.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(from_db, builtin);
}
