//! Jobs and templates in-process: templates and their validation, planned rendering for a lease's GPUs, tenancy,
//! ended leases, the agents' assignment protocol, and utilization insights.

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::app::TestApp;

struct Fixture {
    app: TestApp,
    op: String,
    tenant: String,
    pool: String,
    nodes: Vec<String>,
}

/// A pool of `model` with `nodes` nodes of `per_node` GPUs, and a tenant admin.
async fn fixture(db: PgPool, model: &str, nodes: usize, per_node: usize) -> Fixture {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, &format!("{model}-pool"), model).await;
    let mut ids = Vec::new();
    for i in 0..nodes {
        ids.push(app.node(&op, &pool, &format!("node-{i}"), per_node).await);
    }
    Fixture { app, op, tenant, pool, nodes: ids }
}

impl Fixture {
    async fn lease(&self, gpus: usize, placement: &str) -> Value {
        self.app
            .post(
                "/v1/leases",
                &self.tenant,
                json!({ "pool_id": self.pool, "gpu_count": gpus, "duration_hours": 1, "placement": placement }),
            )
            .await
            .expect(StatusCode::CREATED)
            .body
    }

    /// An agent credential for node `i` (the fixture's nodes were registered by an agent once: generation 1).
    fn agent(&self, i: usize) -> String {
        let node: Uuid = self.nodes[i].parse().unwrap();
        self.app.state.tokens.issue_agent(node, 1).unwrap()
    }
}

/// The lease's GPU indices per node id, as comma-separated strings.
fn devices_by_node(lease: &Value) -> std::collections::BTreeMap<String, String> {
    let mut map: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    for g in lease["gpus"].as_array().unwrap() {
        map.entry(g["node_id"].as_str().unwrap().to_string()).or_default().push(g["index"].as_i64().unwrap());
    }
    map.into_iter()
        .map(|(k, mut v)| {
            v.sort();
            (k, v.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(","))
        })
        .collect()
}

#[sqlx::test]
async fn templates_are_listed_versioned_and_validated(db: PgPool) {
    let f = fixture(db, "h100", 1, 8).await;
    let list = f.app.get("/v1/templates", &f.tenant).await.expect(StatusCode::OK).body;
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["gpuplane-runtime", "torchrun-ddp", "torchrun-fsdp", "deepspeed", "megatron", "vllm", "diffusion-dp"]
    );
    assert_eq!(
        list[5]["parameters"][1],
        json!({"name": "port", "type": "int", "default": 8000, "description": "HTTP port of the OpenAI-compatible server"})
    );

    let template = json!({ "name": "finetune", "argv": ["python3", "ft.py", "--lr={lr}", "--rank={node_rank}", "{args}"],
        "parameters": [{"name": "lr", "type": "float", "default": 0.0003}] });
    let v1 = f.app.post("/v1/admin/templates", &f.op, template.clone()).await.expect(StatusCode::CREATED).body;
    assert_eq!(v1["version"], 1);
    let v2 = f.app.post("/v1/admin/templates", &f.op, template).await.expect(StatusCode::CREATED).body;
    assert_eq!(v2["version"], 2);
    let list = f.app.get("/v1/templates", &f.tenant).await.expect(StatusCode::OK).body;
    let custom: Vec<&Value> = list.as_array().unwrap().iter().filter(|t| t["builtin"] == false).collect();
    assert_eq!(custom.len(), 1, "the latest version only");
    assert_eq!(custom[0]["version"], 2);
    assert_eq!(custom[0]["parameters"][0]["name"], "lr");

    // Tenants cannot add templates.
    f.app
        .post("/v1/admin/templates", &f.tenant, json!({"name": "x", "argv": ["x"]}))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    // Injection, unknown placeholders and bad types are field errors; nothing is stored.
    let bad = f
        .app
        .post(
            "/v1/admin/templates",
            &f.op,
            json!({ "name": "evil", "argv": ["train", "--tag={tag}", "--x={nope}", "; rm -rf /"],
                "parameters": [{"name": "tag", "type": "string", "default": "x; rm -rf /"},
                               {"name": "n", "type": "int", "default": "ten"}] }),
        )
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(bad.error_fields(), ["parameters[0].default", "parameters[1].default", "argv[2]", "argv[3]"]);
    let list = f.app.get("/v1/templates", &f.tenant).await.body;
    assert!(list.as_array().unwrap().iter().all(|t| t["name"] != "evil"));
    let builtin_name = f.app.post("/v1/admin/templates", &f.op, json!({"name": "megatron", "argv": ["x"]})).await;
    assert_eq!(builtin_name.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["name"]);
}

#[sqlx::test]
async fn auto_plans_a_70b_on_two_a100_nodes_as_megatron_with_each_nodes_own_gpus(db: PgPool) {
    let f = fixture(db, "a100-80g", 2, 8).await;
    let lease = f.lease(16, "pack").await;
    let lease_id = lease["id"].as_str().unwrap();
    let job = f
        .app
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &f.tenant,
            json!({ "template": "auto", "model": {"preset": "llama3-70b"},
                    "workload": {"kind": "train", "seq_len": 4096, "global_batch": 512},
                    "env": {"WANDB_PROJECT": "llama"}, "args": ["--train-iters", "100"] }),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    assert_eq!(job["template"], "megatron");
    assert_eq!(job["state"], "pending");
    let plan = &job["plan"];
    assert!(plan["tp"].as_u64().unwrap() > 1 || plan["pp"].as_u64().unwrap() > 1, "{plan}");
    let devices = devices_by_node(&lease);
    let nodes = job["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    for (rank, node) in nodes.iter().enumerate() {
        let env = &node["spec"]["env"];
        assert_eq!(node["node_rank"], rank);
        assert_eq!(env["NODE_RANK"], rank.to_string());
        assert_eq!(env["WORLD_SIZE"], "16");
        assert_eq!(env["NNODES"], "2");
        assert_eq!(env["MASTER_ADDR"], "node-0.test");
        assert_eq!(env["MASTER_PORT"], "29500");
        assert_eq!(env["WANDB_PROJECT"], "llama");
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], devices[node["node_id"].as_str().unwrap()].as_str());
        let argv: Vec<&str> = node["spec"]["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(argv[0], "torchrun");
        let tp = argv.iter().position(|a| *a == "--tensor-model-parallel-size").unwrap();
        assert_eq!(argv[tp + 1], plan["tp"].to_string());
        assert!(argv.ends_with(&["--train-iters", "100"]));
        assert_eq!(node["spec"]["files"][0]["path"], "megatron_args.txt");
        assert_eq!(node["history"][0]["state"], "pending");
    }

    // Listing and reading it back.
    let list = f.app.get(&format!("/v1/leases/{lease_id}/jobs"), &f.tenant).await.expect(StatusCode::OK).body;
    assert_eq!(list["items"][0]["id"], job["id"]);
    let got = f.app.get(&format!("/v1/jobs/{}", job["id"].as_str().unwrap()), &f.tenant).await.expect(StatusCode::OK);
    assert_eq!(got.body["nodes"][1]["spec"], job["nodes"][1]["spec"]);
}

#[sqlx::test]
async fn a_partial_lease_gets_exactly_its_gpus_and_deepspeed_its_config(db: PgPool) {
    let f = fixture(db, "h100", 2, 8).await;
    // Something else holds part of node-0, so the lease's indices are not 0..n.
    f.lease(3, "single_node").await;
    let lease = f.lease(4, "spread").await;
    let lease_id = lease["id"].as_str().unwrap();
    let job = f
        .app
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &f.tenant,
            json!({ "template": "deepspeed", "model": {"preset": "llama2-7b"}, "command": ["train.py"],
                    "workload": {"kind": "lora", "seq_len": 2048, "global_batch": 64}, "pins": {"zero_stage": 2} }),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    let devices = devices_by_node(&lease);
    let mut seen = 0;
    for node in job["nodes"].as_array().unwrap() {
        let env = &node["spec"]["env"];
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], devices[node["node_id"].as_str().unwrap()].as_str());
        seen += env["NPROC_PER_NODE"].as_str().unwrap().parse::<usize>().unwrap();
        let config: Value = serde_json::from_str(node["spec"]["files"][0]["content"].as_str().unwrap()).unwrap();
        assert_eq!(config["zero_optimization"]["stage"], 2);
        assert_eq!(config["train_micro_batch_size_per_gpu"], job["plan"]["micro_batch"]);
    }
    assert_eq!(seen, 4);
    assert_eq!(job["plan"]["tp"], 1);
    assert_eq!(job["plan"]["zero_stage"], 2);
}

#[sqlx::test]
async fn bad_jobs_are_field_errors_and_other_tenants_and_ended_leases_are_refused(db: PgPool) {
    let f = fixture(db.clone(), "h100", 1, 8).await;
    let lease = f.lease(2, "pack").await;
    let lease_id = lease["id"].as_str().unwrap();
    let path = format!("/v1/leases/{lease_id}/jobs");
    f.app
        .post(
            "/v1/admin/templates",
            &f.op,
            json!({"name": "envdump", "argv": ["/usr/bin/env"],
            "parameters": [{"name": "n", "type": "int", "default": 1}]}),
        )
        .await
        .expect(StatusCode::CREATED);

    let bad = f
        .app
        .post(
            &path,
            &f.tenant,
            json!({ "template": "envdump", "env": {"lower": "x", "CUDA_VISIBLE_DEVICES": "0,1,2,3"},
                    "args": ["; rm -rf /"], "command": ["$(id)"], "setup": " \n" }),
        )
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(bad.error_fields(), ["command[0]", "setup", "args[0]", "env.CUDA_VISIBLE_DEVICES", "env.lower"]);
    let long_setup = format!("echo {}", "é".repeat(32 * 1024));
    let bad = f.app.post(&path, &f.tenant, json!({ "template": "envdump", "setup": long_setup })).await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["setup"], "64 KiB, counted in bytes");
    // Control characters are refused by the JSON extractor itself, before the job's own checks run.
    let bad = f.app.post(&path, &f.tenant, json!({ "template": "envdump", "env": {"OK": "a\u{0}b"} })).await;
    assert_eq!(bad.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["env.OK"]);
    let bad = json!({ "template": "envdump", "secret_env": {"NUL": "long\u{0}enough"} });
    let bad = f.app.post(&path, &f.tenant, bad).await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["secret_env.NUL"]);
    // Secret values follow the same rules, are long enough to mask, and do not double an `env` name.
    let bad = f
        .app
        .post(
            &path,
            &f.tenant,
            json!({ "template": "envdump", "env": {"TOKEN": "x"},
                    "secret_env": {"TOKEN": "long-enough-1", "SHORT": "abc", "HOME": "long-enough-2"} }),
        )
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(bad.error_fields(), ["secret_env.TOKEN", "secret_env.SHORT", "secret_env.HOME"]);
    let (jobs,): (i64,) = sqlx::query_as("SELECT count(*) FROM job_secrets").fetch_one(&db).await.unwrap();
    assert_eq!(jobs, 0, "nothing stored");
    let bad = f.app.post(&path, &f.tenant, json!({ "template": "envdump", "parameters": {"n": "x", "m": 1} })).await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["parameters.m", "parameters.n"]);
    let bad = f.app.post(&path, &f.tenant, json!({ "template": "nope" })).await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["template"]);
    let bad = f.app.post(&path, &f.tenant, json!({ "template": "auto" })).await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["model"]);
    let bad = f
        .app
        .post(
            &path,
            &f.tenant,
            json!({ "template": "torchrun-ddp", "model": {"preset": "llama2-7b"},
            "workload": {"kind": "train"}, "pins": {"tp": 2}, "command": ["train.py"] }),
        )
        .await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["pins.tp"]);
    let infeasible = f
        .app
        .post(
            &path,
            &f.tenant,
            json!({ "template": "auto", "model": {"preset": "llama3.1-405b"}, "workload": {"kind": "train"} }),
        )
        .await;
    infeasible.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "plan_infeasible");

    // A custom template without a model renders with the launch environment only.
    let job = f.app.post(&path, &f.tenant, json!({ "template": "envdump" })).await.expect(StatusCode::CREATED).body;
    assert_eq!(job["plan"], Value::Null);
    assert_eq!(job["template_version"], 1);
    assert_eq!(job["nodes"][0]["spec"]["argv"], json!(["/usr/bin/env"]));
    let job_id = job["id"].as_str().unwrap();

    // Another tenant sees none of it.
    let (_, other) = f.app.tenant_admin(&f.op, "other").await;
    f.app
        .post(&path, &other, json!({ "template": "envdump" }))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    f.app.get(&format!("/v1/jobs/{job_id}"), &other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    f.app
        .post(&format!("/v1/jobs/{job_id}/cancel"), &other, json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    f.app.get(&path, &other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    f.app
        .get(&format!("/v1/leases/{lease_id}/insights"), &other)
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");

    // Releasing the lease cancels its unfinished job, with the lease's reason; new jobs are 409.
    f.app.post(&format!("/v1/leases/{lease_id}/release"), &f.tenant, json!({})).await.expect(StatusCode::OK);
    let job = f.app.get(&format!("/v1/jobs/{job_id}"), &f.tenant).await.body;
    assert_eq!(job["state"], "cancelled");
    assert!(job["reason"].as_str().unwrap().contains("released"), "{job}");
    assert_eq!(job["nodes"][0]["state"], "cancelled");
    f.app
        .post(&path, &f.tenant, json!({ "template": "envdump" }))
        .await
        .expect_problem(StatusCode::CONFLICT, "lease_not_active");
}

#[sqlx::test]
async fn agents_fetch_assignments_and_report_forward_only(db: PgPool) {
    let f = fixture(db, "h100", 2, 4).await;
    let lease = f.lease(8, "pack").await;
    let lease_id = lease["id"].as_str().unwrap();
    f.app
        .post("/v1/admin/templates", &f.op, json!({"name": "sleeper", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let job = f
        .app
        .post(&format!("/v1/leases/{lease_id}/jobs"), &f.tenant, json!({ "template": "sleeper" }))
        .await
        .expect(StatusCode::CREATED)
        .body;
    let job_path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    let (a0, a1) = (f.agent(0), f.agent(1));
    let hb = |token: String| {
        let app = &f.app;
        async move {
            app.post("/v1/agent/heartbeat", &token, json!({"samples": []})).await.expect(StatusCode::OK).body
                ["assignments_pending"]
                .clone()
        }
    };
    assert_eq!(hb(a0.clone()).await, true, "a new assignment is hinted");

    let list = f.app.get("/v1/agent/assignments", &a0).await.expect(StatusCode::OK).body;
    let assignments = list["assignments"].as_array().unwrap();
    assert_eq!(assignments.len(), 1, "only this node's part");
    assert_eq!(assignments[0]["desired"], "run");
    assert_eq!(assignments[0]["spec"]["env"]["NODE_RANK"], "0");
    let jn0 = assignments[0]["job_node_id"].as_str().unwrap().to_string();
    assert_eq!(hb(a0.clone()).await, false, "fetched: nothing pending");
    // The other node's assignment is not this agent's to report.
    let list1 = f.app.get("/v1/agent/assignments", &a1).await.expect(StatusCode::OK).body;
    let jn1 = list1["assignments"][0]["job_node_id"].as_str().unwrap().to_string();
    f.app
        .post(&format!("/v1/agent/assignments/{jn1}/status"), &a0, json!({"state": "running"}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    // A user token is not an agent credential.
    f.app.get("/v1/agent/assignments", &f.tenant).await.expect(StatusCode::UNAUTHORIZED);
    assert_ne!(f.app.get(&job_path, &f.tenant).await.body["state"], "failed");

    let report = |token: &str, id: &str, body: Value| {
        let (app, token, path) = (&f.app, token.to_string(), format!("/v1/agent/assignments/{id}/status"));
        async move { app.post(&path, &token, body).await.expect(StatusCode::OK).body }
    };
    report(&a0, &jn0, json!({"state": "running"})).await;
    report(&a0, &jn0, json!({"state": "running"})).await;
    assert_eq!(f.app.get(&job_path, &f.tenant).await.body["state"], "running");
    report(&a1, &jn1, json!({"state": "running", "output_tail": ["hello"]})).await;

    // Cancel: both nodes are told to stop (and the heartbeat hints it); the job is cancelled once both stopped.
    let cancelled = f.app.post(&format!("{job_path}/cancel"), &f.tenant, json!({})).await.expect(StatusCode::OK).body;
    assert_eq!(cancelled["cancel_requested"], true);
    assert_eq!(cancelled["nodes"][0]["desired"], "cancel");
    assert_eq!(hb(a1.clone()).await, true);
    let now = report(&a0, &jn0, json!({"state": "cancelled", "exit_code": 143, "output_tail": ["bye"]})).await;
    assert_eq!(now, json!({"state": "cancelled", "desired": "cancel"}));
    assert_eq!(f.app.get(&job_path, &f.tenant).await.body["state"], "running", "one node still runs");
    // Backwards is ignored; a repeat is harmless.
    assert_eq!(report(&a0, &jn0, json!({"state": "running"})).await["state"], "cancelled");
    let long: Vec<String> = (0..80).map(|i| format!("{i} {}", "x".repeat(1500))).collect();
    report(&a1, &jn1, json!({"state": "cancelled", "exit_code": 143, "output_tail": long})).await;
    let job = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(job["state"], "cancelled");
    let tail = job["nodes"][1]["output_tail"].as_array().unwrap();
    assert_eq!(tail.len(), 50);
    assert!(tail[0].as_str().unwrap().starts_with("30 "));
    assert!(tail.iter().all(|l| l.as_str().unwrap().chars().count() <= 1000));
    let history: Vec<&str> =
        job["nodes"][0]["history"].as_array().unwrap().iter().map(|h| h["state"].as_str().unwrap()).collect();
    assert_eq!(history, ["pending", "assigned", "running", "cancelled"]);
    assert!(f.app.get("/v1/agent/assignments", &a0).await.body["assignments"].as_array().unwrap().is_empty());

    // A failing node fails the job and stops the other node.
    let job = f
        .app
        .post(&format!("/v1/leases/{lease_id}/jobs"), &f.tenant, json!({ "template": "sleeper" }))
        .await
        .expect(StatusCode::CREATED)
        .body;
    let job_path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    let jn0 = f.app.get("/v1/agent/assignments", &a0).await.body["assignments"][0]["job_node_id"]
        .as_str()
        .unwrap()
        .to_string();
    let l1 = f.app.get("/v1/agent/assignments", &a1).await.body;
    let jn1 = l1["assignments"][0]["job_node_id"].as_str().unwrap().to_string();
    report(&a0, &jn0, json!({"state": "running"})).await;
    report(&a1, &jn1, json!({"state": "running"})).await;
    report(&a0, &jn0, json!({"state": "failed", "exit_code": 1, "output_tail": ["CUDA error"]})).await;
    let job = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(job["state"], "failed");
    assert_eq!(job["reason"], "node node-0 (rank 0): exit code 1");
    assert_eq!(job["nodes"][1]["desired"], "cancel");
    assert_eq!(f.app.get("/v1/agent/assignments", &a1).await.body["assignments"][0]["desired"], "cancel");
}

#[sqlx::test]
async fn insights_flag_low_utilization_of_a_running_job(db: PgPool) {
    let f = fixture(db, "h100", 1, 8).await;
    let lease = f.lease(8, "pack").await;
    let lease_id = lease["id"].as_str().unwrap();
    let path = format!("/v1/leases/{lease_id}/insights");
    let none = f.app.get(&path, &f.tenant).await.expect(StatusCode::OK).body;
    assert_eq!(none["job_id"], Value::Null);
    let job = f
        .app
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &f.tenant,
            json!({ "template": "torchrun-ddp", "model": {"preset": "llama2-7b"}, "command": ["train.py"],
                    "workload": {"kind": "lora", "seq_len": 2048, "global_batch": 64} }),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    let agent = f.agent(0);
    let jn = f.app.get("/v1/agent/assignments", &agent).await.body["assignments"][0]["job_node_id"]
        .as_str()
        .unwrap()
        .to_string();
    f.app
        .post(&format!("/v1/agent/assignments/{jn}/status"), &agent, json!({"state": "running"}))
        .await
        .expect(StatusCode::OK);
    // It has run for ten minutes, its GPUs at 35% for the last five.
    let job_id: Uuid = job["id"].as_str().unwrap().parse().unwrap();
    sqlx::query("UPDATE jobs SET started_at = now() - interval '10 minutes' WHERE id = $1")
        .bind(job_id)
        .execute(&f.app.db)
        .await
        .unwrap();
    crate::support::app::write_lease_samples(&f.app.db, Uuid::parse_str(lease_id).unwrap(), 35.0).await;
    let found = f.app.get(&path, &f.tenant).await.expect(StatusCode::OK).body;
    assert_eq!(found["job_id"], job["id"]);
    assert_eq!(found["measured"]["samples"], 8 * 29);
    assert!((found["measured"]["avg_gpu_util"].as_f64().unwrap() - 35.0).abs() < 0.01);
    let kinds: Vec<&str> = found["insights"].as_array().unwrap().iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"low_utilization"), "{found}");
    let low = found["insights"].as_array().unwrap().iter().find(|i| i["kind"] == "low_utilization").unwrap();
    assert!(low["message"].as_str().unwrap().contains("35%"));
    assert!(!low["suggestion"].as_str().unwrap().is_empty());
    assert_eq!(low["figures"]["plan"]["tp"], 1);
}

#[sqlx::test]
async fn measured_steps_reach_the_job_and_its_insights_from_the_jobs_own_node_only(db: PgPool) {
    let f = fixture(db, "h100", 2, 4).await;
    let lease = f.lease(8, "pack").await;
    let lease_id = lease["id"].as_str().unwrap();
    let job = f
        .app
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &f.tenant,
            json!({ "template": "auto", "model": {"preset": "llama2-7b"}, "command": ["train.py"],
                    "workload": {"kind": "lora", "seq_len": 2048, "global_batch": 64} }),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    assert_eq!(job["template"], "gpuplane-runtime", "a training script runs the runtime");
    let spec = &job["nodes"][0]["spec"];
    assert_eq!(spec["env"]["GPUPLANE_PLAN_FILE"], "gpuplane_plan.json");
    let plan_file = spec["files"].as_array().unwrap().iter().find(|f| f["path"] == "gpuplane_plan.json").unwrap();
    let written: Value = serde_json::from_str(plan_file["content"].as_str().unwrap()).unwrap();
    assert_eq!(written["plan"], job["plan"], "the plan file holds the job's plan");
    let predicted = job["plan"]["step_time_s"].as_f64().unwrap();
    let job_id = job["id"].as_str().unwrap();
    let job_path = format!("/v1/jobs/{job_id}");
    assert_eq!(f.app.get(&job_path, &f.tenant).await.body["measured"], Value::Null);

    let (a0, a1) = (f.agent(0), f.agent(1));
    let jn = |token: &str| {
        let (app, token) = (&f.app, token.to_string());
        async move {
            app.get("/v1/agent/assignments", &token).await.body["assignments"][0]["job_node_id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let (jn0, jn1) = (jn(&a0).await, jn(&a1).await);
    f.app.post(&format!("/v1/agent/assignments/{jn0}/status"), &a0, json!({"state": "running"})).await;
    f.app.post(&format!("/v1/agent/assignments/{jn1}/status"), &a1, json!({"state": "running"})).await;
    let step = |job_node_id: &str, step: i64, seconds: f64, loss: f64| {
        json!({ "job_node_id": job_node_id, "step": step, "step_time_s": seconds, "tokens": 131072,
                "loss": loss, "peak_memory_bytes": 40_000_000_000_i64, "at": "2026-12-02T08:00:00Z" })
    };
    // Ten steps at 3x the predicted time: the first is warm-up and is slower still.
    let mut steps = vec![step(&jn0, 1, predicted * 20.0, 11.0)];
    steps.extend((2..=10).map(|i| step(&jn0, i, predicted * 3.0, 11.0 - i as f64 * 0.3)));
    f.app.post("/v1/agent/heartbeat", &a0, json!({"samples": [], "steps": steps})).await.expect(StatusCode::OK);
    // A retried heartbeat changes nothing; another node cannot speak for node 0's assignment.
    f.app.post("/v1/agent/heartbeat", &a0, json!({"samples": [], "steps": steps})).await.expect(StatusCode::OK);
    let forged = vec![step(&jn0, 11, 0.001, 0.0)];
    f.app.post("/v1/agent/heartbeat", &a1, json!({"samples": [], "steps": forged})).await.expect(StatusCode::OK);

    let got = f.app.get(&job_path, &f.tenant).await.expect(StatusCode::OK).body;
    let measured = &got["measured"];
    assert_eq!((measured["steps"].as_i64(), measured["last_step"].as_i64()), (Some(10), Some(10)), "{measured}");
    let median = measured["median_step_time_s"].as_f64().unwrap();
    assert!((median - predicted * 3.0).abs() < 1e-9, "the warm-up step is left out: {measured}");
    assert!((measured["step_time_vs_plan"].as_f64().unwrap() - 3.0).abs() < 1e-6);
    assert!((measured["tokens_per_s"].as_f64().unwrap() - 131072.0 / median).abs() < 1e-6);
    assert_eq!(measured["predicted_step_time_s"].as_f64(), Some(predicted));
    let page = f.app.get(&format!("{job_path}/steps?limit=4&after=2"), &f.tenant).await.expect(StatusCode::OK).body;
    let numbers: Vec<i64> = page["steps"].as_array().unwrap().iter().map(|s| s["step"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [3, 4, 5, 6]);
    assert_eq!(page["next_after"], 6);
    assert_eq!(page["steps"][0]["node_id"], f.nodes[0].as_str());
    let insights = f.app.get(&format!("/v1/leases/{lease_id}/insights"), &f.tenant).await.expect(StatusCode::OK).body;
    let kinds: Vec<&str> =
        insights["insights"].as_array().unwrap().iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"slower_than_plan"), "{insights}");
    assert_eq!(insights["steps"]["steps"], 10);

    // Hostile input is refused field by field and stores nothing.
    let bad = vec![step(&jn0, 0, 1.0, 1.0), step(&jn0, 12, -1.0, 1.0), step(&jn0, 13, 1.0, 1.0)];
    let mut bad = bad;
    bad[2]["loss"] = json!("NaN");
    let refused = f.app.post("/v1/agent/heartbeat", &a0, json!({"samples": [], "steps": bad})).await;
    assert!(refused.status.is_client_error(), "{:?}", refused.body);
    let huge: Vec<Value> = (1..=1025).map(|i| step(&jn0, i, 1.0, 1.0)).collect();
    let refused = f.app.post("/v1/agent/heartbeat", &a0, json!({"samples": [], "steps": huge})).await;
    assert_eq!(refused.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["steps"]);
    let fields = f
        .app
        .post(
            "/v1/agent/heartbeat",
            &a0,
            json!({"samples": [], "steps": [step(&jn0, 0, 1.0, 1.0), step(&jn0, 12, -1.0, 1.0)]}),
        )
        .await
        .expect(StatusCode::UNPROCESSABLE_ENTITY)
        .error_fields();
    assert_eq!(fields, ["steps[0].step", "steps[1].step_time_s"]);
    assert_eq!(f.app.get(&job_path, &f.tenant).await.body["measured"]["steps"], 10);
    f.app
        .get(&format!("{job_path}/steps?limit=0"), &f.tenant)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    // Another tenant's job is not found.
    let (_, other) = f.app.tenant_admin(&f.op, "other").await;
    f.app.get(&format!("{job_path}/steps"), &other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
}

/// Report launchers for node `i` through its agent's heartbeat.
async fn report_launchers(f: &Fixture, i: usize, launchers: Value) {
    f.app
        .post("/v1/agent/heartbeat", &f.agent(i), json!({ "samples": [], "launchers": launchers }))
        .await
        .expect(StatusCode::OK);
}

#[sqlx::test]
async fn a_job_a_node_cannot_launch_is_refused_naming_the_node_and_the_launcher(db: PgPool) {
    let f = fixture(db, "h100", 2, 4).await;
    let lease = f.lease(8, "pack").await;
    let path = format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap());
    let torch = json!({ "python3": "3.12.3", "torch": "2.5.1", "torchrun": "2.5.1" });
    report_launchers(&f, 0, torch.clone()).await;
    report_launchers(&f, 1, json!({ "python3": "3.12.3", "sshd": null })).await;
    let node1 = f.app.get(&format!("/v1/admin/nodes/{}", f.nodes[1]), &f.op).await.expect(StatusCode::OK).body;
    assert_eq!(node1["launchers"], json!({ "python3": "3.12.3", "sshd": null }), "the node view shows them");

    let ddp = json!({ "template": "torchrun-ddp", "model": {"preset": "llama2-7b"}, "command": ["train.py"],
                      "workload": {"kind": "lora", "seq_len": 2048, "global_batch": 64} });
    let refused = f.app.post(&path, &f.tenant, ddp.clone()).await;
    let refused = refused.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "launcher_missing");
    assert_eq!(refused.body["context"]["hostname"], "node-1", "{}", refused.body);
    assert_eq!(refused.body["context"]["node_id"], f.nodes[1].as_str());
    assert_eq!(refused.body["context"]["missing"], json!(["torchrun"]));
    assert!(refused.body["detail"].as_str().unwrap().contains("node-1"), "{}", refused.body);

    // `auto` picks the gpuplane runtime for a training script: refused with what that template needs.
    let auto = json!({ "template": "auto", "model": {"preset": "llama2-7b"}, "command": ["train.py"],
                       "workload": {"kind": "lora", "seq_len": 2048, "global_batch": 64} });
    let refused = f.app.post(&path, &f.tenant, auto.clone()).await;
    let refused = refused.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "launcher_missing");
    assert_eq!(refused.body["context"]["template"], "gpuplane-runtime");
    assert_eq!(refused.body["context"]["hostname"], "node-0", "node-0 lacks the runtime package");
    assert_eq!(refused.body["context"]["missing"], json!(["gpuplane_runtime"]));
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs").fetch_one(&f.app.db).await.unwrap();
    assert_eq!(jobs, 0, "nothing stored");

    // Installed on both: both start.
    let full = json!({ "python3": "3.12.3", "torch": "2.5.1", "torchrun": "2.5.1", "gpuplane_runtime": "0.3.0" });
    report_launchers(&f, 0, full.clone()).await;
    report_launchers(&f, 1, full).await;
    f.app.post(&path, &f.tenant, ddp).await.expect(StatusCode::CREATED);
    let job = f.app.post(&path, &f.tenant, auto).await.expect(StatusCode::CREATED).body;
    assert_eq!(job["template"], "gpuplane-runtime");

    // A report the service cannot trust is refused whole and changes nothing.
    let bad = f
        .app
        .post(
            "/v1/agent/heartbeat",
            &f.agent(0),
            json!({ "samples": [], "launchers": { "nc -e": null, "vllm": "x".repeat(65) } }),
        )
        .await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["launchers.nc -e", "launchers.vllm"]);
    let node0 = f.app.get(&format!("/v1/admin/nodes/{}", f.nodes[0]), &f.op).await.expect(StatusCode::OK).body;
    assert_eq!(node0["launchers"]["gpuplane_runtime"], "0.3.0");
}

#[sqlx::test]
async fn a_job_whose_node_never_fetches_its_part_fails_naming_it_after_the_bound(db: PgPool) {
    let f = fixture(db, "h100", 2, 4).await;
    let lease = f.lease(8, "pack").await;
    f.app
        .post("/v1/admin/templates", &f.op, json!({"name": "sleeper", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let path = format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap());
    let job = f.app.post(&path, &f.tenant, json!({ "template": "sleeper" })).await.expect(StatusCode::CREATED).body;
    let job_path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    // node-0's agent fetches its part; node-1's never does.
    f.app.get("/v1/agent/assignments", &f.agent(0)).await.expect(StatusCode::OK);
    let bound = f.app.state.settings.assignment_pickup_timeout;
    assert_eq!(bound.as_secs(), gpuplane::config::DEFAULT_ASSIGNMENT_PICKUP_TIMEOUT_SECS);

    let failed = gpuplane::agent_api::liveness::fail_unfetched_assignments(&f.app.state).await.unwrap();
    assert!(failed.is_empty(), "within the bound nothing happens");
    assert_ne!(f.app.get(&job_path, &f.tenant).await.body["state"], "failed");

    sqlx::query("UPDATE job_nodes SET created_at = created_at - make_interval(secs => $1 + 1)")
        .bind(bound.as_secs_f64())
        .execute(&f.app.db)
        .await
        .unwrap();
    let failed = gpuplane::agent_api::liveness::fail_unfetched_assignments(&f.app.state).await.unwrap();
    assert_eq!(failed.len(), 1);
    let job = f.app.get(&job_path, &f.tenant).await.expect(StatusCode::OK).body;
    assert_eq!(job["state"], "failed", "{job}");
    let reason = job["reason"].as_str().unwrap();
    assert!(reason.contains("node-1") && reason.contains("did not fetch its assignment"), "{reason}");
    let by_rank = |rank: usize| job["nodes"][rank].clone();
    assert_eq!(by_rank(1)["state"], "failed");
    // The part that did start is told to stop, as when a node of the job fails.
    let list = f.app.get("/v1/agent/assignments", &f.agent(0)).await.expect(StatusCode::OK).body;
    assert_eq!(list["assignments"][0]["desired"], "cancel", "{list}");
    // Again: nothing more to do.
    assert!(gpuplane::agent_api::liveness::fail_unfetched_assignments(&f.app.state).await.unwrap().is_empty());
}

/// Two nodes of 2 H100s whose agents report the runtime's launchers, and a lease of all 4 GPUs (its id).
async fn runtime_fixture(db: PgPool) -> (Fixture, String) {
    let f = fixture(db, "h100", 2, 2).await;
    let full = json!({ "python3": "3.12.3", "torch": "2.9.1", "torchrun": "2.9.1", "gpuplane_runtime": "0.1.0" });
    report_launchers(&f, 0, full.clone()).await;
    report_launchers(&f, 1, full).await;
    let lease = f.lease(4, "spread").await;
    let lease_id = lease["id"].as_str().unwrap().to_string();
    (f, lease_id)
}

/// The body of a `gpuplane-runtime` job of the tiny Llama the torch tests train, with `extra` fields.
fn runtime_job(pins: Value, extra: Value) -> Value {
    let mut body = json!({
        "template": "gpuplane-runtime",
        "model": { "architecture": { "layers": 4, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 256, "vocab": 256 } },
        "workload": { "kind": "train", "precision": "bf16", "seq_len": 32, "global_batch": 8 },
        "pins": pins,
        "command": ["train.py"],
    });
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    body
}

#[sqlx::test]
async fn a_running_job_is_replanned_through_a_notice_into_its_next_generation(db: PgPool) {
    let (f, lease_id) = runtime_fixture(db).await;
    let lease_id = lease_id.as_str();
    let jobs_path = format!("/v1/leases/{lease_id}/jobs");

    // Bad options are field errors and store nothing.
    for (extra, field) in [
        (json!({ "stop_grace_s": 7200 }), "stop_grace_s"),
        (json!({ "stop_grace_s": -1 }), "stop_grace_s"),
        (json!({ "retune": { "mode": "auto", "min_gain_pct": 0 } }), "retune.min_gain_pct"),
    ] {
        let refused = f.app.post(&jobs_path, &f.tenant, runtime_job(json!({"tp": 2}), extra.clone())).await;
        let refused = refused.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(refused.body["errors"][0]["field"], field, "{extra}: {}", refused.body);
    }
    f.app
        .post("/v1/admin/templates", &f.op, json!({"name": "sleeper", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let refused = f
        .app
        .post(&jobs_path, &f.tenant, json!({ "template": "sleeper", "retune": { "mode": "suggest" } }))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(refused.body["errors"][0]["field"], "retune.mode", "{}", refused.body);
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs").fetch_one(&f.app.db).await.unwrap();
    assert_eq!(jobs, 0, "nothing stored");

    let job = f
        .app
        .post(&jobs_path, &f.tenant, runtime_job(json!({"tp": 2, "dp": 2, "pp": 1}), json!({ "stop_grace_s": 30 })))
        .await
        .expect(StatusCode::CREATED)
        .body;
    assert_eq!((job["generation"].clone(), job["stop_grace_s"].clone()), (json!(1), json!(30)));
    assert_eq!(job["generations"].as_array().unwrap().len(), 1);
    assert_eq!(job["generations"][0]["reason"], "created");
    let job_path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    let replan = format!("{job_path}/replan");
    let to_dp4 = json!({ "pins": { "dp": 4, "tp": 1, "pp": 1, "zero_stage": 3 }, "reason": "more data parallel" });

    // Not running yet: refused, nothing changed.
    f.app.post(&replan, &f.tenant, to_dp4.clone()).await.expect_problem(StatusCode::CONFLICT, "job_not_running");
    let (a0, a1) = (f.agent(0), f.agent(1));
    let fetch = |token: String| {
        let app = &f.app;
        async move { app.get("/v1/agent/assignments", &token).await.expect(StatusCode::OK).body["assignments"].clone() }
    };
    let report = |token: String, id: String, body: Value| {
        let app = &f.app;
        async move {
            app.post(&format!("/v1/agent/assignments/{id}/status"), &token, body).await.expect(StatusCode::OK);
        }
    };
    let first = [fetch(a0.clone()).await, fetch(a1.clone()).await];
    let first_ids: Vec<String> = first.iter().map(|a| a[0]["job_node_id"].as_str().unwrap().to_string()).collect();
    assert!(first.iter().all(|a| a[0].get("notice").is_none()), "no notice yet: {first:?}");
    report(a0.clone(), first_ids[0].clone(), json!({"state": "running"})).await;
    report(a1.clone(), first_ids[1].clone(), json!({"state": "running"})).await;
    assert_eq!(f.app.get(&job_path, &f.tenant).await.body["state"], "running");

    // Pins that do not fit, a reason too long, another tenant: refused, nothing changed.
    let refused = f.app.post(&replan, &f.tenant, json!({ "pins": { "tp": 3 } })).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    let refused = f.app.post(&replan, &f.tenant, json!({ "reason": "x".repeat(201) })).await;
    refused.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let (_, other) = f.app.tenant_admin(&f.op, "other").await;
    f.app.post(&replan, &other, to_dp4.clone()).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(f.app.get(&job_path, &f.tenant).await.body["generations"].as_array().unwrap().len(), 1);

    // The replan: pending, the running parts noticed with the job's grace; a second one is refused.
    let accepted = f.app.post(&replan, &f.tenant, to_dp4.clone()).await.expect(StatusCode::ACCEPTED).body;
    assert_eq!(accepted["state"], "running");
    assert_eq!(accepted["generation"], 1, "still the first plan until its processes stop");
    assert_eq!(accepted["generations"][1]["state"], "pending");
    assert_eq!(accepted["generations"][1]["plan"]["dp"], 4);
    assert_eq!(accepted["generations"][1]["reason"], "replan asked for: more data parallel");
    f.app.post(&replan, &f.tenant, to_dp4.clone()).await.expect_problem(StatusCode::CONFLICT, "replan_in_progress");
    for token in [a0.clone(), a1.clone()] {
        let listed = fetch(token).await;
        assert_eq!(listed[0]["notice"], json!({ "reason": "replan to generation 2", "grace_s": 30 }), "{listed}");
    }
    let noticed = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(noticed["nodes"][0]["notice"]["grace_s"], 30, "{noticed:#}");

    // One part stopped as asked: the job waits for the other.
    let stopped =
        json!({"state": "cancelled", "exit_code": 0, "reason": "stopped on its stop notice (replan to generation 2)"});
    report(a0.clone(), first_ids[0].clone(), stopped.clone()).await;
    let waiting = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!((waiting["state"].clone(), waiting["generation"].clone()), (json!("running"), json!(1)));
    report(a1.clone(), first_ids[1].clone(), stopped.clone()).await;

    // Both stopped: the second generation starts on the same GPUs, as new assignments.
    let second = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(second["state"], "running", "{second:#}");
    assert_eq!(second["generation"], 2);
    assert_eq!((second["plan"]["dp"].clone(), second["plan"]["zero_stage"].clone()), (json!(4), json!(3)));
    let states: Vec<&str> =
        second["generations"].as_array().unwrap().iter().map(|g| g["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["ended", "running"]);
    assert!(second["generations"][0]["ended_at"].is_string());
    assert!(second["nodes"].as_array().unwrap().iter().all(|n| n["state"] == "pending" && n["notice"].is_null()));
    let next = [fetch(a0.clone()).await, fetch(a1.clone()).await];
    let next_ids: Vec<String> = next.iter().map(|a| a[0]["job_node_id"].as_str().unwrap().to_string()).collect();
    assert!(next.iter().all(|a| a.as_array().unwrap().len() == 1), "only the new parts are listed: {next:?}");
    assert!(next_ids.iter().all(|id| !first_ids.contains(id)), "new assignments");
    let plan_file =
        next[0][0]["spec"]["files"].as_array().unwrap().iter().find(|f| f["path"] == "gpuplane_plan.json").unwrap();
    assert!(plan_file["content"].as_str().unwrap().contains("\"dp\": 4"), "the new plan's file");
    let replanned: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_events WHERE type = 'job.replanned'")
        .fetch_one(&f.app.db)
        .await
        .unwrap();
    assert_eq!(replanned, 1, "announced once");

    // A replan whose running processes do not stop cleanly fails the job and is abandoned.
    report(a0.clone(), next_ids[0].clone(), json!({"state": "running"})).await;
    report(a1.clone(), next_ids[1].clone(), json!({"state": "running"})).await;
    let started = f.app.get(&job_path, &f.tenant).await.body;
    assert!(started["generations"][1]["started_at"].is_string(), "generation 2 started: {started:#}");
    f.app.post(&replan, &f.tenant, json!({})).await.expect(StatusCode::ACCEPTED);
    report(a0.clone(), next_ids[0].clone(), json!({"state": "failed", "exit_code": 1, "reason": "exit code 1 after its stop notice (replan to generation 3)"})).await;
    let failed = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(failed["state"], "failed", "{failed:#}");
    let reason = failed["reason"].as_str().unwrap();
    assert!(reason.starts_with("the replan to generation 3 was abandoned: node node-0 (rank 0)"), "{reason}");
    assert!(reason.ends_with("the last complete checkpoint is kept"), "{reason}");
    assert_eq!(failed["generations"][2]["state"], "abandoned");
    // The generation that ran ends with the job.
    assert_eq!(failed["generations"][1]["state"], "ended", "{failed:#}");
    assert!(failed["generations"][1]["ended_at"].is_string(), "{failed:#}");
    f.app.post(&replan, &f.tenant, json!({})).await.expect_problem(StatusCode::CONFLICT, "job_not_running");
}

#[sqlx::test]
async fn running_jobs_get_their_notice_before_the_lease_ends_within_the_time_paid_for(db: PgPool) {
    let (f, lease_id) = runtime_fixture(db).await;
    let lease_id = lease_id.as_str();
    let (job_path, parts) = running_job(&f, lease_id, 120).await;
    let (a0, a1) = (parts[0].0.clone(), parts[1].0.clone());
    let notice_of = |token: String| {
        let app = &f.app;
        async move {
            app.get("/v1/agent/assignments", &token).await.expect(StatusCode::OK).body["assignments"][0]["notice"]
                .clone()
        }
    };

    // An hour left: more than the grace, nothing happens.
    gpuplane::leases::sweeper::sweep_once(&f.app.state, false).await.unwrap();
    assert!(notice_of(a0.clone()).await.is_null());
    // 50 s left, a 120 s grace: noticed now, with the 50 s that remain (the lease still ends on time).
    sqlx::query("UPDATE leases SET ends_at = now() + interval '50 seconds' WHERE id = $1::uuid")
        .bind(lease_id)
        .execute(&f.app.db)
        .await
        .unwrap();
    gpuplane::leases::sweeper::sweep_once(&f.app.state, false).await.unwrap();
    let notice = notice_of(a0.clone()).await;
    assert!(notice["reason"].as_str().unwrap().starts_with("the lease ends at "), "{notice}");
    let grace = notice["grace_s"].as_u64().unwrap();
    assert!((45..=50).contains(&grace), "what is left of the lease: {notice}");
    assert_eq!(notice_of(a1.clone()).await, notice, "every running part");
    gpuplane::leases::sweeper::sweep_once(&f.app.state, false).await.unwrap();
    assert_eq!(notice_of(a0.clone()).await, notice, "given once");
    let lease_now = f.app.get(&format!("/v1/leases/{lease_id}"), &f.tenant).await.body;
    assert_eq!(lease_now["state"], "active", "the lease ends at its time, not before");

    // The ranks checkpoint and exit: the job ends cancelled with the notice's reason.
    for (token, id) in &parts {
        let reason = format!("stopped on its stop notice ({})", notice["reason"].as_str().unwrap());
        f.app
            .post(
                &format!("/v1/agent/assignments/{id}/status"),
                token,
                json!({"state": "cancelled", "exit_code": 0, "reason": reason}),
            )
            .await
            .expect(StatusCode::OK);
    }
    let ended = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(ended["state"], "cancelled", "{ended:#}");
    assert!(ended["reason"].as_str().unwrap().contains("stopped on its stop notice (the lease ends at"), "{ended:#}");
}

#[sqlx::test]
async fn running_jobs_get_their_notice_before_the_balance_runs_out_and_not_while_it_lasts(db: PgPool) {
    let (f, lease_id) = runtime_fixture(db).await;
    let (job_path, parts) = running_job(&f, &lease_id, 120).await;
    let tenant_id: Uuid = sqlx::query_scalar("SELECT tenant_id FROM leases WHERE id = $1::uuid")
        .bind(&lease_id)
        .fetch_one(&f.app.db)
        .await
        .unwrap();
    // Leave the tenant `minor` units (4 GPUs at 200 an hour burn 800 an hour), then run one balance round.
    let tenants = [(tenant_id, "USD".to_string())];
    let round = std::time::Duration::from_secs(15);
    let leave_and_enforce = |minor: i64| {
        let (app, op, tenant, tenants) = (&f.app, &f.op, &f.tenant, &tenants);
        async move {
            let balance = app.get("/v1/billing/balance", tenant).await.body[0]["balance_minor"].as_i64().unwrap();
            if balance != minor {
                app.post(
                    &format!("/v1/admin/tenants/{tenant_id}/ledger"),
                    op,
                    json!({ "kind": "adjustment", "amount_minor": minor - balance, "currency": "USD", "reason": "test" }),
                )
                .await
                .expect(StatusCode::CREATED);
            }
            gpuplane::billing::metering::enforce_balances(&app.db, tenants, round).await.unwrap();
        }
    };
    let notice_of = |token: String| {
        let app = &f.app;
        async move {
            app.get("/v1/agent/assignments", &token).await.expect(StatusCode::OK).body["assignments"][0]["notice"]
                .clone()
        }
    };

    // 200 units pay for 900 s: more than the 120 s grace and a round, nothing happens.
    leave_and_enforce(200).await;
    assert!(notice_of(parts[0].0.clone()).await.is_null());
    // 20 units pay for 90 s: the next round may be too late, so every running part is noticed now, with what is
    // left (the lease still runs until the balance is gone).
    leave_and_enforce(20).await;
    for (token, _) in &parts {
        let notice = notice_of(token.clone()).await;
        assert_eq!(notice, json!({ "reason": "the balance runs out in about 90 s", "grace_s": 90 }), "{notice}");
    }
    leave_and_enforce(20).await;
    let job = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(job["nodes"][0]["notice"]["grace_s"], 90, "given once: {job:#}");
    assert_eq!(f.app.get(&format!("/v1/leases/{lease_id}"), &f.tenant).await.body["state"], "active");
    // Gone: the lease ends, and the job with it.
    leave_and_enforce(0).await;
    let ended = f.app.get(&format!("/v1/leases/{lease_id}"), &f.tenant).await.body;
    assert_eq!(ended["state"], "terminated", "{ended:#}");
}

/// Start a `gpuplane-runtime` job with `stop_grace_s` on the fixture's lease and report every part running, as
/// the agents would; the job's path and its parts (agent credential, part id) by node.
async fn running_job(f: &Fixture, lease_id: &str, grace_s: i32) -> (String, Vec<(String, String)>) {
    let job = f
        .app
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &f.tenant,
            runtime_job(json!({"tp": 2}), json!({ "stop_grace_s": grace_s })),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    let mut parts = Vec::new();
    for i in 0..f.nodes.len() {
        let token = f.agent(i);
        let list = f.app.get("/v1/agent/assignments", &token).await.expect(StatusCode::OK).body;
        let id = list["assignments"][0]["job_node_id"].as_str().unwrap().to_string();
        f.app
            .post(&format!("/v1/agent/assignments/{id}/status"), &token, json!({"state": "running"}))
            .await
            .expect(StatusCode::OK);
        parts.push((token, id));
    }
    (format!("/v1/jobs/{}", job["id"].as_str().unwrap()), parts)
}

#[sqlx::test]
async fn a_tenants_release_gives_running_jobs_their_notice_and_ends_the_lease_once_they_stop(db: PgPool) {
    let (f, lease_id) = runtime_fixture(db).await;
    let lease_path = format!("/v1/leases/{lease_id}");
    let (job_path, parts) = running_job(&f, &lease_id, 30).await;
    let sweep = || gpuplane::leases::sweeper::sweep_once(&f.app.state, false);

    // An operator drains a node of the lease: nothing stops (a drain waits for the lease's end), no notice.
    let drained_node = &f.nodes[0];
    let node_path = format!("/v1/admin/nodes/{drained_node}");
    f.app.post(&format!("{node_path}/drain"), &f.op, json!({})).await.expect(StatusCode::OK);
    sweep().await.unwrap();
    let listed = f.app.get("/v1/agent/assignments", &parts[0].0).await.expect(StatusCode::OK).body;
    assert!(listed["assignments"][0]["notice"].is_null(), "a drain gives no notice: {listed}");
    assert_eq!(f.app.get(&node_path, &f.op).await.body["state"], "draining");

    // Another tenant's release of it, or a member's: 404 and 403, no notice given, nothing begun.
    let (_, other) = f.app.tenant_admin(&f.op, "other").await;
    f.app
        .post(&format!("{lease_path}/release"), &other, json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    let member_key = f
        .app
        .post("/v1/tenant/api-keys", &f.tenant, json!({ "name": "member", "role": "tenant_member" }))
        .await
        .expect(StatusCode::CREATED)
        .body["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let member = f.app.token_for(&member_key).await;
    f.app
        .post(&format!("{lease_path}/release"), &member, json!({}))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    let untouched = f.app.get(&lease_path, &f.tenant).await.body;
    assert!(untouched["release_deadline"].is_null(), "{untouched}");
    let listed = f.app.get("/v1/agent/assignments", &parts[1].0).await.expect(StatusCode::OK).body;
    assert!(listed["assignments"][0]["notice"].is_null(), "{listed}");

    // The release: 202, the lease still active (and billed) until the job has stopped, the parts noticed.
    let asked = Utc::now();
    let released =
        f.app.post(&format!("{lease_path}/release"), &f.tenant, json!({})).await.expect(StatusCode::ACCEPTED);
    assert_eq!(released.body["state"], "active", "{}", released.body);
    let deadline: DateTime<Utc> = serde_json::from_value(released.body["release_deadline"].clone()).unwrap();
    let heartbeat = f.app.state.settings.heartbeat_interval.as_secs() as i64;
    let waits = (deadline - asked).num_seconds();
    assert!((30..=30 + heartbeat + 1).contains(&waits), "the grace and a heartbeat: {waits} s");
    for (token, _) in &parts {
        let listed = f.app.get("/v1/agent/assignments", token).await.expect(StatusCode::OK).body;
        let notice = &listed["assignments"][0]["notice"];
        assert_eq!(*notice, json!({ "reason": "lease released by the tenant", "grace_s": 30 }), "{listed}");
    }
    // Asked again: as it is; the settings and new jobs are refused while it is under way.
    let again = f.app.post(&format!("{lease_path}/release"), &f.tenant, json!({})).await.expect(StatusCode::ACCEPTED);
    assert_eq!(again.body["release_deadline"], released.body["release_deadline"]);
    f.app
        .patch(&lease_path, &f.tenant, json!({ "idle_release_after_minutes": 60 }))
        .await
        .expect_problem(StatusCode::CONFLICT, "release_under_way");
    f.app
        .post(&format!("{lease_path}/jobs"), &f.tenant, runtime_job(json!({"tp": 2}), json!({})))
        .await
        .expect_problem(StatusCode::CONFLICT, "release_under_way");
    let events = f.app.get(&format!("{lease_path}/events"), &f.tenant).await.body;
    let requested = events.as_array().unwrap().iter().find(|e| e["kind"] == "release_requested").unwrap();
    assert!(requested["actor"].as_str().unwrap().starts_with("tenant:"), "{requested}");
    assert!(requested["reason"].as_str().unwrap().starts_with("released by the tenant: 1 job given"), "{requested}");
    sweep().await.unwrap();
    assert_eq!(f.app.get(&lease_path, &f.tenant).await.body["state"], "active", "the job still runs");

    // The ranks checkpoint and exit on the notice: the job ends cancelled, and the next sweep releases the lease.
    for (token, id) in &parts {
        let stopped = json!({"state": "cancelled", "exit_code": 0,
            "reason": "stopped on its stop notice (lease released by the tenant)"});
        f.app.post(&format!("/v1/agent/assignments/{id}/status"), token, stopped).await.expect(StatusCode::OK);
    }
    assert_eq!(f.app.get(&job_path, &f.tenant).await.body["state"], "cancelled");
    sweep().await.unwrap();
    let ended = f.app.get(&lease_path, &f.tenant).await.body;
    assert_eq!(
        (ended["state"].as_str(), ended["end_reason"].as_str()),
        (Some("released"), Some("released by the tenant"))
    );
    let ended_at: DateTime<Utc> = serde_json::from_value(ended["ended_at"].clone()).unwrap();
    assert!(ended_at < deadline, "released when the job stopped, not at the deadline");
    let events = f.app.get(&format!("{lease_path}/events"), &f.tenant).await.body;
    let last = events.as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["kind"].clone(), last["actor"].clone()), (json!("released"), requested["actor"].clone()));
    assert_eq!(f.app.get(&node_path, &f.op).await.body["state"], "drained", "the drain completes with the lease");
}

#[sqlx::test]
async fn a_release_whose_jobs_do_not_stop_ends_at_its_deadline_and_one_without_running_jobs_at_once(db: PgPool) {
    let (f, lease_id) = runtime_fixture(db).await;
    let lease_path = format!("/v1/leases/{lease_id}");
    let (job_path, parts) = running_job(&f, &lease_id, 30).await;
    f.app.post(&format!("{lease_path}/release"), &f.tenant, json!({})).await.expect(StatusCode::ACCEPTED);
    // The grace (and the heartbeat after it) has passed, the processes still run.
    sqlx::query("UPDATE leases SET release_deadline = now() - interval '1 second' WHERE id = $1::uuid")
        .bind(&lease_id)
        .execute(&f.app.db)
        .await
        .unwrap();
    gpuplane::leases::sweeper::sweep_once(&f.app.state, false).await.unwrap();
    let ended = f.app.get(&lease_path, &f.tenant).await.body;
    assert_eq!(
        (ended["state"].as_str(), ended["end_reason"].as_str()),
        (Some("released"), Some("released by the tenant"))
    );
    let job = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(job["state"], "cancelled", "{job}");
    let listed = f.app.get("/v1/agent/assignments", &parts[0].0).await.expect(StatusCode::OK).body;
    assert!(listed["assignments"].as_array().unwrap().iter().all(|a| a["job_node_id"] != parts[0].1.as_str()));

    // A job with no grace, or one no agent has fetched yet, is stopped with the lease at once: 200, released.
    for grace in [0, 30] {
        let lease = f.lease(4, "spread").await;
        let lease_id = lease["id"].as_str().unwrap();
        let lease_path = format!("/v1/leases/{lease_id}");
        let job_path = if grace == 0 {
            running_job(&f, lease_id, 0).await.0
        } else {
            let body = runtime_job(json!({"tp": 2}), json!({ "stop_grace_s": grace }));
            let job = f.app.post(&format!("{lease_path}/jobs"), &f.tenant, body).await.expect(StatusCode::CREATED).body;
            format!("/v1/jobs/{}", job["id"].as_str().unwrap())
        };
        let released = f.app.post(&format!("{lease_path}/release"), &f.tenant, json!({})).await.expect(StatusCode::OK);
        assert_eq!(released.body["state"], "released", "grace {grace}: {}", released.body);
        let job = f.app.get(&job_path, &f.tenant).await.body;
        assert_eq!(job["state"], "cancelled", "grace {grace}: {job}");
    }
}

#[sqlx::test]
async fn retune_suggests_once_per_generation_or_replans_by_itself_from_measured_steps(db: PgPool) {
    let (f, lease_id) = runtime_fixture(db).await;
    let lease_id = lease_id.as_str();
    let jobs_path = format!("/v1/leases/{lease_id}/jobs");
    let (a0, a1) = (f.agent(0), f.agent(1));

    // A job started at tp 2 x dp 2 that runs its steps at `slowdown` x the prediction.
    let start = |mode: &'static str, slowdown: f64, min_gain_pct: i32| {
        let (f, jobs_path, a0, a1) = (&f, jobs_path.clone(), a0.clone(), a1.clone());
        async move {
            let job = f
                .app
                .post(
                    &jobs_path,
                    &f.tenant,
                    runtime_job(
                        json!({"tp": 2, "dp": 2, "pp": 1}),
                        json!({ "retune": { "mode": mode, "min_gain_pct": min_gain_pct } }),
                    ),
                )
                .await
                .expect(StatusCode::CREATED)
                .body;
            let predicted = job["plan"]["step_time_s"].as_f64().unwrap();
            let mut parts = Vec::new();
            for token in [&a0, &a1] {
                let list = f.app.get("/v1/agent/assignments", token).await.expect(StatusCode::OK).body;
                let mine =
                    list["assignments"].as_array().unwrap().iter().find(|a| a["job_id"] == job["id"]).unwrap().clone();
                let id = mine["job_node_id"].as_str().unwrap().to_string();
                f.app
                    .post(&format!("/v1/agent/assignments/{id}/status"), token, json!({"state": "running"}))
                    .await
                    .expect(StatusCode::OK);
                parts.push(id);
            }
            let steps: Vec<Value> = (1..=8)
                .map(|i| {
                    json!({ "job_node_id": parts[0], "step": i, "step_time_s": predicted * slowdown, "tokens": 256,
                                 "loss": 5.0, "peak_memory_bytes": 1_000_000, "at": "2026-12-02T08:00:00Z" })
                })
                .collect();
            f.app.post("/v1/agent/heartbeat", &a0, json!({"samples": [], "steps": steps})).await.expect(StatusCode::OK);
            job["id"].as_str().unwrap().to_string()
        }
    };
    let events = |kind: &'static str| {
        let db = f.app.db.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM webhook_events WHERE type = $1")
                .bind(kind)
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };

    // Measured as predicted, with a minimum gain above what any other split is predicted to give: nothing.
    let on_plan = start("suggest", 1.0, 90).await;
    assert_eq!(gpuplane::jobs::retuning::judge_all(&f.app.state).await.unwrap(), Vec::<uuid::Uuid>::new());
    f.app.post(&format!("/v1/jobs/{on_plan}/cancel"), &f.tenant, json!({})).await.expect(StatusCode::OK);

    // 50x slower than predicted: the excess is charged to communication and another split wins by far.
    let suggested = start("suggest", 50.0, 10).await;
    let acted = gpuplane::jobs::retuning::judge_all(&f.app.state).await.unwrap();
    assert_eq!(acted.iter().map(|id| id.to_string()).collect::<Vec<_>>(), std::slice::from_ref(&suggested));
    assert_eq!(events("job.replan_suggested").await, 1);
    assert!(gpuplane::jobs::retuning::judge_all(&f.app.state).await.unwrap().is_empty(), "once per generation");
    assert_eq!(events("job.replan_suggested").await, 1);
    let job = f.app.get(&format!("/v1/jobs/{suggested}"), &f.tenant).await.body;
    assert_eq!(job["generations"].as_array().unwrap().len(), 1, "suggest changes nothing");
    let insights = f.app.get(&format!("/v1/leases/{lease_id}/insights"), &f.tenant).await.expect(StatusCode::OK).body;
    let insight = insights["insights"].as_array().unwrap().iter().find(|i| i["kind"] == "replan_suggested").unwrap();
    assert!(insight["figures"]["gain_pct"].as_f64().unwrap() >= 10.0, "{insight}");
    assert!(insight["suggestion"].as_str().unwrap().contains("/replan"), "{insight}");
    f.app.post(&format!("/v1/jobs/{suggested}/cancel"), &f.tenant, json!({})).await.expect(StatusCode::OK);

    // auto: the service replans by itself, with the correction in the new generation.
    let auto = start("auto", 50.0, 10).await;
    gpuplane::jobs::retuning::judge_all(&f.app.state).await.unwrap();
    let job = f.app.get(&format!("/v1/jobs/{auto}"), &f.tenant).await.body;
    let pending = &job["generations"][1];
    assert_eq!(pending["state"], "pending", "{job:#}");
    assert!(pending["reason"].as_str().unwrap().starts_with("retune auto: measured"), "{pending}");
    assert!((pending["correction"]["measured_vs_predicted"].as_f64().unwrap() - 50.0).abs() < 1e-6, "{pending}");
    assert_ne!(pending["correction"]["to"], pending["correction"]["from"]);
    assert!(job["nodes"].as_array().unwrap().iter().all(|n| n["notice"]["reason"] == "replan to generation 2"));
    assert!(gpuplane::jobs::retuning::judge_all(&f.app.state).await.unwrap().is_empty(), "one replan at a time");
}

#[sqlx::test]
async fn a_jobs_progress_is_its_parts_summed_as_their_own_agents_report_it(db: PgPool) {
    let f = fixture(db, "h100", 2, 1).await;
    let lease = f.lease(2, "pack").await;
    f.app
        .post("/v1/admin/templates", &f.op, json!({"name": "batch", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let jobs = format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap());
    let job = f.app.post(&jobs, &f.tenant, json!({ "template": "batch" })).await.expect(StatusCode::CREATED).body;
    let path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    assert!(job["progress"].is_null(), "no part has said: {job}");
    let mut parts = Vec::new();
    for i in 0..2 {
        let list = f.app.get("/v1/agent/assignments", &f.agent(i)).await.expect(StatusCode::OK).body;
        assert_eq!(list["assignments"][0]["spec"]["env"]["GPUPLANE_PROGRESS_FILE"], "gpuplane_progress.json");
        parts.push(list["assignments"][0]["job_node_id"].as_str().unwrap().to_string());
    }
    let heartbeat = |i: usize, progress: Value| {
        let (app, token) = (&f.app, f.agent(i));
        async move { app.post("/v1/agent/heartbeat", &token, json!({ "samples": [], "progress": progress })).await }
    };
    // Node 0 speaks for its own part only.
    heartbeat(
        0,
        json!([
            { "job_node_id": parts[0], "progress": { "done": 3, "total": 10 } },
            { "job_node_id": parts[1], "progress": { "done": 9, "total": 9 } },
        ]),
    )
    .await
    .expect(StatusCode::OK);
    assert_eq!(f.app.get(&path, &f.tenant).await.body["progress"], json!({ "done": 3, "total": 10 }));
    heartbeat(1, json!([{ "job_node_id": parts[1], "progress": { "done": 1, "total": 9 } }]))
        .await
        .expect(StatusCode::OK);
    let job = f.app.get(&path, &f.tenant).await.body;
    assert_eq!(job["progress"], json!({ "done": 4, "total": 19 }));
    assert_eq!(job["nodes"][1]["progress"], json!({ "done": 1, "total": 9 }));
    let bad = heartbeat(1, json!([{ "job_node_id": parts[1], "progress": { "done": 10, "total": 9 } }])).await;
    assert_eq!(
        bad.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(),
        ["progress[0]"]
    );
    // The last word comes with the part's end.
    let status = format!("/v1/agent/assignments/{}/status", parts[0]);
    f.app.post(&status, &f.agent(0), json!({ "state": "running" })).await.expect(StatusCode::OK);
    let ended = json!({ "state": "succeeded", "exit_code": 0, "progress": { "done": 10, "total": 10 } });
    f.app.post(&status, &f.agent(0), ended).await.expect(StatusCode::OK);
    assert_eq!(f.app.get(&path, &f.tenant).await.body["progress"], json!({ "done": 11, "total": 19 }));
    let bad = json!({ "state": "running", "progress": { "done": -1, "total": 9 } });
    let status1 = format!("/v1/agent/assignments/{}/status", parts[1]);
    f.app.post(&status1, &f.agent(1), bad).await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
}
