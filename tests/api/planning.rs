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
    // Serving that fails only because of the concurrency the request fixed says which would fit (one it leaves
    // out is searched: the most throughput that fits).
    let serve = json!({ "model": { "preset": "llama2-7b" }, "workload": { "kind": "inference", "concurrent_seqs": 64 },
        "cluster": { "gpu": "rtx4090", "gpus": 1 } });
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

/// The mixed planner's worked example (docs/planner-mixed.md): llama2-13b over one node of 8 x A100 80GB and two
/// nodes of 4 x RTX 4090.
fn mixed_request() -> serde_json::Value {
    json!({ "model": { "preset": "llama2-13b" }, "workload": { "kind": "train", "seq_len": 4096, "global_batch": 512 },
        "parts": [ { "gpu": "a100-80g", "gpus": 8, "gpus_per_node": 8, "inter_node_gbps": 400 },
                   { "gpu": "rtx4090", "gpus": 8, "gpus_per_node": 4, "inter_node_gbps": 400 } ], "top_n": 3 })
}

#[sqlx::test]
async fn mixed_plans_spread_the_layers_over_unlike_gpus(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let res = app.post("/v1/plans/mixed", &tenant, mixed_request()).await.expect(StatusCode::OK);
    let plans = res.body["plans"].as_array().unwrap();
    assert!(!plans.is_empty() && plans.len() <= 3, "{}", res.body);
    let best = &plans[0];
    assert_eq!(best["parts_used"], 2, "{best}");
    let stages = best["stages"].as_array().unwrap();
    assert_eq!(stages.len() as u64, best["pp"].as_u64().unwrap());
    assert_eq!(stages.iter().map(|s| s["layers"].as_u64().unwrap()).sum::<u64>(), 40, "llama2-13b has 40 layers");
    let parts = best["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    for (i, part) in parts.iter().enumerate() {
        assert!(part["gpus_used"].as_u64().unwrap() > 0, "part {i} is used: {best}");
        assert!(stages.iter().any(|s| s["part"] == i), "part {i} holds stages");
    }
    assert_eq!(parts[0]["gpu_key"], "a100-80g");
    assert_eq!(parts[1]["gpu_key"], "rtx4090");
    // Faster than the A100s alone, as /v1/plans plans them.
    let alone = json!({ "model": { "preset": "llama2-13b" }, "workload": { "kind": "train", "seq_len": 4096, "global_batch": 512 },
        "cluster": { "gpu": "a100-80g", "gpus": 8, "gpus_per_node": 8, "inter_node_gbps": 400 }, "top_n": 1 });
    let alone = app.post("/v1/plans", &tenant, alone).await.expect(StatusCode::OK).body;
    let a100 = alone["plans"][0]["tokens_per_s"].as_f64().unwrap();
    assert!(best["tokens_per_s"].as_f64().unwrap() > a100, "mix {} against A100s alone {a100}", best["tokens_per_s"]);
    app.post("/v1/plans/mixed", &op, mixed_request()).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
}

#[sqlx::test]
async fn mixed_plan_errors_name_the_part_and_field(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let with = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut req = mixed_request();
        edit(&mut req);
        req
    };
    let part = json!({ "gpu": "h100", "gpus": 8 });
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        ("no parts", with(&|r| r["parts"] = json!([])), "parts"),
        ("five parts", with(&|r| r["parts"] = json!([part, part, part, part, part])), "parts"),
        ("zero GPUs", with(&|r| r["parts"][1]["gpus"] = json!(0)), "parts[1].gpus"),
        ("unknown GPU", with(&|r| r["parts"][0]["gpu"] = json!("a100")), "parts[0].gpu"),
        ("GPUs not whole nodes", with(&|r| r["parts"][1]["gpus"] = json!(6)), "parts[1].gpus"),
        ("inference", with(&|r| r["workload"] = json!({ "kind": "inference" })), "workload.kind"),
        ("negative GPUs", with(&|r| r["parts"][1]["gpus"] = json!(-1)), "parts[1].gpus"),
        ("a part as an array", with(&|r| r["parts"][0] = json!(["a100-80g", 8])), "parts[0]"),
    ];
    for (what, req, field) in cases {
        let res = app
            .post("/v1/plans/mixed", &tenant, req)
            .await
            .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(res.error_fields(), vec![field], "{what}: {}", res.body);
    }
    // The unknown key's message lists the valid ones, as /v1/plans does.
    let res = app.post("/v1/plans/mixed", &tenant, with(&|r| r["parts"][0]["gpu"] = json!("a100"))).await;
    assert!(res.body.to_string().contains("a100-80g"), "{}", res.body);
    // Nothing fits, together or alone: the planner's reason, part by part.
    let tiny = json!({ "model": { "preset": "llama3-70b" }, "workload": { "kind": "train" },
        "parts": [ { "gpu": "rtx4090", "gpus": 1 }, { "gpu": "a10", "gpus": 1 } ] });
    let res = app
        .post("/v1/plans/mixed", &tenant, tiny)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "plan_infeasible");
    let detail = res.body["detail"].as_str().unwrap();
    assert!(detail.contains("part 0 alone") && detail.contains("part 1 alone"), "{}", res.body);
    assert!(res.body["context"]["needed_bytes_min"].as_u64().unwrap() > 0, "{}", res.body);
}

/// Two pools of one currency whose GPUs are unlike: the worked example's A100 node and RTX 4090 nodes.
async fn mix_pools(app: &TestApp, op: &str, rtx_currency: &str) -> (String, String) {
    let mut ids = Vec::new();
    for (name, gpu, price, currency, nodes, gpus) in
        [("a100-mix", "a100-80g", 179, "USD", 1, 8), ("rtx-mix", "rtx4090", 69, rtx_currency, 2, 4)]
    {
        let pool = app
            .post(
                "/v1/admin/pools",
                op,
                json!({ "name": name, "gpu_model": gpu, "region": "test-1", "price_per_gpu_hour_minor": price, "currency": currency }),
            )
            .await
            .expect(StatusCode::CREATED)
            .body["id"]
            .as_str()
            .unwrap()
            .to_string();
        for n in 0..nodes {
            app.node(op, &pool, &format!("{name}-{n}"), gpus).await;
        }
        ids.push(pool);
    }
    (ids[0].clone(), ids[1].clone())
}

fn mix_advice_query() -> serde_json::Value {
    json!({ "model": { "preset": "llama2-13b" }, "workload": { "kind": "train", "seq_len": 4096, "global_batch": 512 },
        "target": { "training_tokens": 1_000_000_000u64 } })
}

#[sqlx::test]
async fn advice_proposes_a_mix_of_two_pools_priced_per_pool(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (a100, rtx) = mix_pools(&app, &op, "USD").await;
    let started = std::time::Instant::now();
    let res = app.post("/v1/advice", &tenant, mix_advice_query()).await.expect(StatusCode::OK);
    eprintln!("advice with mixes over 2 pools: {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    let body = &res.body;
    let mixes = body["mixes"].as_array().unwrap();
    assert_eq!(mixes.len(), 1, "{body}");
    let mix = &mixes[0];
    assert_eq!(mix["currency"], "USD");
    assert_eq!(mix["plan"]["parts_used"], 2);
    let hours = mix["hours"].as_f64().unwrap();
    let parts = mix["parts"].as_array().unwrap();
    let mut pools: Vec<&str> = parts.iter().map(|p| p["pool_id"].as_str().unwrap()).collect();
    pools.sort_unstable();
    let mut expected_pools = vec![a100.as_str(), rtx.as_str()];
    expected_pools.sort_unstable();
    assert_eq!(pools, expected_pools);
    // Price: the sum over the parts of ceil(GPUs used x hours x the pool's price), from the response's figures.
    let mut sum = 0i64;
    for (i, part) in parts.iter().enumerate() {
        let price = if part["pool_id"] == a100.as_str() { 179 } else { 69 };
        assert_eq!(part["price_per_gpu_hour_minor"], price);
        assert_eq!(part["gpu_count"], mix["plan"]["parts"][i]["gpus_used"], "the GPUs the plan uses are rented");
        assert_eq!(part["gpu_count"], 8);
        let gpu_key = if part["pool_id"] == a100.as_str() { "a100-80g" } else { "rtx4090" };
        assert_eq!(part["gpu_key"], gpu_key);
        assert_eq!(mix["plan"]["parts"][i]["gpu_key"], gpu_key, "part {i} of the plan is this pool");
        let cost = (part["gpu_count"].as_f64().unwrap() * hours * price as f64).ceil() as i64;
        assert_eq!(part["cost_minor"], cost, "{part}");
        sum += cost;
    }
    assert_eq!(mix["cost_minor"], sum, "{mix}");
    assert!((hours - 1e9 / mix["plan"]["tokens_per_s"].as_f64().unwrap() / 3600.0).abs() < 1e-9);
    // Proposed because it is faster than every single-pool option (or cheaper than every one).
    let options = body["options"].as_array().unwrap();
    assert!(!options.is_empty());
    let faster = options.iter().all(|o| hours < o["hours"].as_f64().unwrap());
    let cheaper = options.iter().all(|o| sum < o["cost_minor"].as_i64().unwrap());
    assert!(faster || cheaper, "{body}");
    assert_eq!(mix["faster"], true, "21,120 tokens/s against 15,433 on the A100s alone: {mix}");
    // The single-pool options keep their shape.
    for o in options {
        assert!(o["pool_id"] == a100.as_str() || o["pool_id"] == rtx.as_str(), "{o}");
        assert!(o["plan"]["tp"].as_u64().is_some() && o["gpu_count"].as_u64().is_some());
    }
}

#[sqlx::test]
async fn pools_of_different_currencies_are_not_mixed(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    mix_pools(&app, &op, "EUR").await;
    let res = app.post("/v1/advice", &tenant, mix_advice_query()).await.expect(StatusCode::OK);
    assert_eq!(res.body["mixes"], json!([]), "{}", res.body);
    let currencies: Vec<&str> =
        res.body["options"].as_array().unwrap().iter().map(|o| o["currency"].as_str().unwrap()).collect();
    assert!(currencies.contains(&"USD") && currencies.contains(&"EUR"), "{currencies:?}");
}
