//! Jobs that survive a failure, in-process (the agents' side played through their API; `recovery_e2e` runs real
//! agents and torch): the restart policy's rules at create, a dead process restarted into the next generation
//! with a port of its own until the limit, a lost node healed by a spare (billed exactly around the failure) and
//! then, with no spare, the plan shrunk to the GPUs left; a stall detected and restarted (or failing a job without
//! restarts); concurrent failures and two replicas making one restart.

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::app::TestApp;

struct Fixture {
    app: TestApp,
    tenant: String,
    nodes: Vec<String>,
    lease_id: String,
}

/// Three nodes of 2 H100s whose agents report the runtime's launchers, and a lease of 4 GPUs on two of them
/// (`pack`): the third is the spare.
async fn fixture(db: PgPool) -> Fixture {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-pool", "h100").await;
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(app.node(&op, &pool, &format!("node-{i}"), 2).await);
    }
    let full = json!({ "python3": "3.12.3", "torch": "2.9.1", "torchrun": "2.9.1", "gpuplane_runtime": "0.1.0" });
    let f = Fixture { app, tenant, nodes, lease_id: String::new() };
    for i in 0..3 {
        f.app
            .post("/v1/agent/heartbeat", &f.agent(i), json!({ "samples": [], "launchers": full }))
            .await
            .expect(StatusCode::OK);
    }
    let lease = f
        .app
        .post(
            "/v1/leases",
            &f.tenant,
            json!({ "pool_id": pool, "gpu_count": 4, "duration_hours": 2, "placement": "pack" }),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    Fixture { lease_id: lease["id"].as_str().unwrap().to_string(), ..f }
}

impl Fixture {
    fn agent(&self, i: usize) -> String {
        let node: Uuid = self.nodes[i].parse().unwrap();
        self.app.state.tokens.issue_agent(node, 1).unwrap()
    }

    /// The fixture's index of a node id.
    fn index(&self, node_id: &str) -> usize {
        self.nodes.iter().position(|n| n == node_id).unwrap()
    }

    async fn job(&self, restart: Value) -> (String, Value) {
        let body = json!({
            "template": "gpuplane-runtime",
            "model": { "architecture": { "layers": 4, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 256, "vocab": 256 } },
            "workload": { "kind": "train", "precision": "bf16", "seq_len": 32, "global_batch": 8 },
            "pins": { "tp": 2, "dp": 2, "pp": 1 },
            "command": ["train.py"],
            "env": { "GPUPLANE_CHECKPOINT_DIR": "/volumes/ckpt/run" },
            "restart": restart,
        });
        let job = self
            .app
            .post(&format!("/v1/leases/{}/jobs", self.lease_id), &self.tenant, body)
            .await
            .expect(StatusCode::CREATED)
            .body;
        (format!("/v1/jobs/{}", job["id"].as_str().unwrap()), job)
    }

    async fn get(&self, path: &str) -> Value {
        self.app.get(path, &self.tenant).await.expect(StatusCode::OK).body
    }

    /// Every node's agent fetches its assignments and reports the job's parts running: (node index, part id).
    async fn run_parts(&self, job: &Value) -> Vec<(usize, String)> {
        let mut parts = Vec::new();
        for n in job["nodes"].as_array().unwrap() {
            let i = self.index(n["node_id"].as_str().unwrap());
            let listed = self.app.get("/v1/agent/assignments", &self.agent(i)).await.expect(StatusCode::OK).body;
            let id = n["id"].as_str().unwrap().to_string();
            assert!(listed["assignments"].as_array().unwrap().iter().any(|a| a["job_node_id"] == id.as_str()));
            self.report(i, &id, json!({ "state": "running" })).await;
            parts.push((i, id));
        }
        parts
    }

    async fn report(&self, i: usize, part: &str, body: Value) {
        self.app
            .post(&format!("/v1/agent/assignments/{part}/status"), &self.agent(i), body)
            .await
            .expect(StatusCode::OK);
    }

    /// Node `i` reports steps `from..=to` of part `part`, each `at` the given time.
    async fn steps(&self, i: usize, part: &str, from: i64, to: i64, at: DateTime<Utc>) {
        let steps: Vec<Value> = (from..=to)
            .map(|s| {
                json!({ "job_node_id": part, "step": s, "step_time_s": 1.0, "tokens": 256, "loss": 5.0 - s as f64 * 0.1,
                        "peak_memory_bytes": 1_000_000, "at": at })
            })
            .collect();
        self.app
            .post("/v1/agent/heartbeat", &self.agent(i), json!({ "samples": [], "steps": steps }))
            .await
            .expect(StatusCode::OK);
    }

    async fn round(&self) {
        gpuplane::jobs::recovery::round(&self.app.state).await.unwrap();
    }

    async fn webhooks(&self, kind: &str) -> Vec<Value> {
        sqlx::query_scalar("SELECT data FROM webhook_events WHERE type = $1 ORDER BY created_at")
            .bind(kind)
            .fetch_all(&self.app.db)
            .await
            .unwrap()
    }
}

fn nodes_of(job: &Value) -> Vec<String> {
    job["nodes"].as_array().unwrap().iter().map(|n| n["node_id"].as_str().unwrap().to_string()).collect()
}

#[sqlx::test]
async fn the_restart_policy_is_resolved_at_create_and_bad_values_are_field_errors(db: PgPool) {
    let f = fixture(db).await;
    let jobs = format!("/v1/leases/{}/jobs", f.lease_id);
    let base = |restart: Value, env: Value| {
        json!({
            "template": "gpuplane-runtime",
            "model": { "architecture": { "layers": 4, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 256, "vocab": 256 } },
            "workload": { "kind": "train", "precision": "bf16", "seq_len": 32, "global_batch": 8 },
            "command": ["train.py"], "env": env, "restart": restart,
        })
    };
    for (restart, field) in [
        (json!({ "max_restarts": 21 }), "restart.max_restarts"),
        (json!({ "backoff_s": 3601 }), "restart.backoff_s"),
        (json!({ "on": ["stalled", "stalled"] }), "restart.on"),
        (json!({ "stall_factor": 1 }), "restart.stall_factor"),
        (json!({ "first_step_within_s": 3 }), "restart.first_step_within_s"),
        (json!({ "max_restarts": 2 }), "restart.from_scratch"),
    ] {
        let refused = f.app.post(&jobs, &f.tenant, base(restart.clone(), json!({}))).await;
        let refused = refused.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(refused.body["errors"][0]["field"], field, "{restart}: {}", refused.body);
    }
    let refused = f.app.post(&jobs, &f.tenant, base(json!({ "on": ["reboot"] }), json!({}))).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs").fetch_one(&f.app.db).await.unwrap();
    assert_eq!(stored, 0, "nothing stored");

    // Without a checkpoint directory: off. With one: 3 restarts. Asked from scratch: as asked.
    let off = f.app.post(&jobs, &f.tenant, base(json!({}), json!({}))).await.expect(StatusCode::CREATED).body;
    assert_eq!((off["restart"]["max_restarts"].clone(), off["restarts"].clone()), (json!(0), json!(0)));
    let env = json!({ "GPUPLANE_CHECKPOINT_DIR": "/volumes/ckpt/x" });
    let on = f.app.post(&jobs, &f.tenant, base(json!({}), env)).await.expect(StatusCode::CREATED).body;
    assert_eq!(
        on["restart"],
        json!({ "max_restarts": 3, "backoff_s": 10, "on": ["node_lost", "gpu_failed", "process_died", "stalled"],
                "from_scratch": false, "detect_stalls": true, "stall_factor": 10, "stall_min_s": 600, "first_step_within_s": 1800 })
    );
    let scratch = json!({ "max_restarts": 1, "from_scratch": true, "on": ["node_lost"] });
    let asked = f.app.post(&jobs, &f.tenant, base(scratch, json!({}))).await.expect(StatusCode::CREATED).body;
    assert_eq!(
        (asked["restart"]["max_restarts"].clone(), asked["restart"]["on"].clone()),
        (json!(1), json!(["node_lost"]))
    );
}

#[sqlx::test]
async fn a_dead_process_restarts_the_job_into_its_next_generation_until_the_limit(db: PgPool) {
    let f = fixture(db).await;
    let (path, job) = f.job(json!({ "max_restarts": 2, "backoff_s": 0 })).await;
    let parts = f.run_parts(&job).await;
    let (rank0, other) = (&parts[0], &parts[1]);
    f.steps(rank0.0, &rank0.1, 1, 5, Utc::now()).await;

    // Rank 0's process dies: the job runs on, its restart pending; the other part is told to stop.
    f.report(
        rank0.0,
        &rank0.1,
        json!({ "state": "failed", "exit_code": 1, "reason": "exit code 1: RuntimeError: boom" }),
    )
    .await;
    let pending = f.get(&path).await;
    assert_eq!((pending["state"].clone(), pending["restarts"].clone()), (json!("running"), json!(1)), "{pending:#}");
    let g2 = &pending["generations"][1];
    assert_eq!(
        (g2["state"].clone(), g2["cause"].clone(), g2["last_step"].clone()),
        (json!("pending"), json!("process_died"), json!(5))
    );
    let reason = g2["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("restart 1 of 2 (process_died): node node-") && reason.ends_with("RuntimeError: boom"),
        "{reason}"
    );
    assert_eq!(pending["nodes"][1]["desired"], "cancel", "{pending:#}");
    // Nothing starts while a part of the failed generation runs.
    f.round().await;
    assert_eq!(f.get(&path).await["generation"], 1);
    f.report(other.0, &other.1, json!({ "state": "cancelled", "exit_code": 0 })).await;
    f.round().await;

    // Generation 2: the same nodes, the same split, a rendezvous port of its own.
    let second = f.get(&path).await;
    assert_eq!((second["generation"].clone(), second["state"].clone()), (json!(2), json!("running")), "{second:#}");
    assert_eq!(nodes_of(&second), nodes_of(&job));
    assert_eq!(second["plan"]["tp"], 2);
    assert_eq!(second["nodes"][0]["spec"]["env"]["MASTER_PORT"], "29501");
    assert_eq!(second["generations"][0]["state"], "ended");

    // Its first step says where it resumed (the checkpoint at step 3): the restart is announced with what it lost.
    let parts = f.run_parts(&second).await;
    assert!(f.webhooks("job.restarted").await.is_empty(), "announced with its first step");
    f.steps(parts[0].0, &parts[0].1, 4, 6, Utc::now()).await;
    let resumed = f.get(&path).await;
    let g2 = &resumed["generations"][1];
    assert_eq!((g2["resumed_from_step"].clone(), g2["steps_lost"].clone()), (json!(3), json!(2)), "{g2:#}");
    let announced = f.webhooks("job.restarted").await;
    assert_eq!(announced.len(), 1);
    assert_eq!(
        (announced[0]["cause"].clone(), announced[0]["resumed_from_step"].clone()),
        (json!("process_died"), json!(3))
    );
    assert_eq!(announced[0]["steps_lost"], 2);
    assert_eq!(announced[0]["plan"]["tp"], 2);
    // The steps run again are the new generation's record: each step once.
    let steps = f.get(&format!("{path}/steps?limit=100")).await;
    let numbers: Vec<i64> = steps["steps"].as_array().unwrap().iter().map(|s| s["step"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5, 6]);

    // A second failure: restart 2 of 2. A third: the limit, and the job fails saying so.
    f.report(parts[1].0, &parts[1].1, json!({ "state": "failed", "exit_code": 137 })).await;
    f.report(parts[0].0, &parts[0].1, json!({ "state": "cancelled", "exit_code": 0 })).await;
    f.round().await;
    let third = f.get(&path).await;
    assert_eq!((third["generation"].clone(), third["restarts"].clone()), (json!(3), json!(2)), "{third:#}");
    assert_eq!(third["nodes"][0]["spec"]["env"]["MASTER_PORT"], "29502");
    let parts = f.run_parts(&third).await;
    f.report(parts[0].0, &parts[0].1, json!({ "state": "failed", "exit_code": 1 })).await;
    let failed = f.get(&path).await;
    assert_eq!(failed["state"], "failed", "{failed:#}");
    let reason = failed["reason"].as_str().unwrap();
    assert!(reason.starts_with("the restart limit is reached (2 of 2 restarts): node node-"), "{reason}");
    assert_eq!(failed["generations"].as_array().unwrap().len(), 3, "no fourth generation");
}

#[sqlx::test]
async fn a_lost_node_is_replaced_by_a_spare_billed_exactly_and_without_a_spare_the_plan_shrinks(db: PgPool) {
    let f = fixture(db).await;
    let (path, job) = f.job(json!({ "backoff_s": 0 })).await;
    assert_eq!(job["restart"]["max_restarts"], 3, "on by default: the job checkpoints");
    let parts = f.run_parts(&job).await;
    let (kept, lost) = (parts[0].0, parts[1].0);
    let spare = (0..3).find(|i| *i != kept && *i != lost).unwrap();

    // The lease began 20 minutes ago; the lost node was last heard 10 minutes ago, the others just now.
    sqlx::query(
        "WITH t AS (SELECT date_trunc('second', now()) AS now) \
         UPDATE leases SET starts_at = (SELECT now FROM t) - interval '20 minutes', \
             metered_until = (SELECT now FROM t) - interval '20 minutes' WHERE id = $1::uuid",
    )
    .bind(&f.lease_id)
    .execute(&f.app.db)
    .await
    .unwrap();
    // The pool's price was in force then too.
    sqlx::query("UPDATE pool_prices SET effective_from = now() - interval '1 hour'").execute(&f.app.db).await.unwrap();
    let starts_at: DateTime<Utc> = sqlx::query_scalar("SELECT starts_at FROM leases WHERE id = $1::uuid")
        .bind(&f.lease_id)
        .fetch_one(&f.app.db)
        .await
        .unwrap();
    let failed_at = starts_at + chrono::Duration::minutes(10);
    sqlx::query("UPDATE nodes SET last_heartbeat_at = CASE WHEN id = $1::uuid THEN $2 ELSE now() END")
        .bind(&f.nodes[lost])
        .bind(failed_at)
        .execute(&f.app.db)
        .await
        .unwrap();
    f.app.sweep().await;

    // The lease is healed: the lost node's GPUs are out, the spare's in; still active, still 4 GPUs.
    let lease = f.get(&format!("/v1/leases/{}", f.lease_id)).await;
    assert_eq!((lease["state"].clone(), lease["gpu_count"].clone()), (json!("active"), json!(4)), "{lease:#}");
    let hosts: std::collections::BTreeSet<String> =
        lease["gpus"].as_array().unwrap().iter().map(|g| g["node_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(hosts, [f.nodes[kept].clone(), f.nodes[spare].clone()].into_iter().collect());
    let events = f.get(&format!("/v1/leases/{}/events", f.lease_id)).await;
    let kinds: Vec<&str> = events.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.ends_with(&["node_removed", "node_replaced"]), "{kinds:?}");

    // Billing: 4 GPUs to the failure (its last heartbeat), 2 from it to the heal, then 4 again.
    let records: Vec<(DateTime<Utc>, DateTime<Utc>, i32, i64)> = sqlx::query_as(
        "SELECT period_start, period_end, gpu_count, gpu_seconds FROM usage_records WHERE lease_id = $1::uuid \
         ORDER BY period_start",
    )
    .bind(&f.lease_id)
    .fetch_all(&f.app.db)
    .await
    .unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0], (starts_at, failed_at, 4, 4 * 600), "every GPU to the failure, to the second");
    assert_eq!((records[1].0, records[1].2), (failed_at, 2), "the GPUs left, from the failure: {records:?}");
    assert_eq!(records[1].3, 2 * (records[1].1 - failed_at).num_seconds());

    // The job: the lost node's part failed of it, the other stopped, the restart blamed on the node.
    let pending = f.get(&path).await;
    let g2 = &pending["generations"][1];
    assert_eq!(
        (g2["cause"].clone(), g2["failed_node_id"].clone()),
        (json!("node_lost"), json!(f.nodes[lost])),
        "{g2:#}"
    );
    assert_eq!(DateTime::parse_from_rfc3339(g2["failed_at"].as_str().unwrap()).unwrap(), failed_at);
    assert_eq!(g2["healing"]["replacement_node_id"], json!(f.nodes[spare]));
    assert_eq!((g2["healing"]["gpus_before"].clone(), g2["healing"]["gpus_after"].clone()), (json!(4), json!(4)));
    let lost_part =
        pending["nodes"].as_array().unwrap().iter().find(|n| n["node_id"] == f.nodes[lost].as_str()).unwrap();
    assert_eq!(lost_part["state"], "failed");
    assert!(lost_part["reason"].as_str().unwrap().starts_with("node node-"), "{lost_part:#}");
    f.round().await;
    assert_eq!(f.get(&path).await["generation"], 1, "waits for the part still running");
    f.report(parts[0].0, &parts[0].1, json!({ "state": "cancelled", "exit_code": 0 })).await;
    f.round().await;
    let second = f.get(&path).await;
    assert_eq!(second["generation"], 2, "{second:#}");
    let mut on: Vec<String> = nodes_of(&second);
    on.sort();
    let mut want = vec![f.nodes[kept].clone(), f.nodes[spare].clone()];
    want.sort();
    assert_eq!(on, want, "the spare took the lost node's place");
    assert_eq!((second["plan"]["tp"].clone(), second["plan"]["dp"].clone()), (json!(2), json!(2)), "the same split");

    // Now the spare is lost too, and no node is free: the lease shrinks to the node left and the plan with it.
    let parts = f.run_parts(&second).await;
    let kept_part = parts.iter().find(|p| p.0 == kept).unwrap().clone();
    sqlx::query("UPDATE nodes SET last_heartbeat_at = CASE WHEN id = $1::uuid THEN now() - interval '10 minutes' ELSE now() END WHERE id <> $2::uuid")
        .bind(&f.nodes[spare])
        .bind(&f.nodes[lost])
        .execute(&f.app.db)
        .await
        .unwrap();
    f.app.sweep().await;
    let lease = f.get(&format!("/v1/leases/{}", f.lease_id)).await;
    assert_eq!((lease["state"].clone(), lease["gpu_count"].clone()), (json!("active"), json!(2)), "{lease:#}");
    f.report(kept_part.0, &kept_part.1, json!({ "state": "cancelled", "exit_code": 0 })).await;
    f.round().await;
    let third = f.get(&path).await;
    assert_eq!((third["generation"].clone(), third["restarts"].clone()), (json!(3), json!(2)), "{third:#}");
    assert_eq!(nodes_of(&third), [f.nodes[kept].clone()], "{third:#}");
    let world = |p: &Value| p["tp"].as_i64().unwrap() * p["pp"].as_i64().unwrap() * p["dp"].as_i64().unwrap();
    assert_eq!(world(&third["plan"]), 2, "planned for the 2 GPUs left: {:#}", third["plan"]);
    assert_eq!(third["generations"][2]["healing"]["gpus_after"], 2);

    // A lease whose jobs do not restart is interrupted as before (the other hosts back, so no fleet hold).
    for i in [lost, spare] {
        f.app.post("/v1/agent/heartbeat", &f.agent(i), json!({ "samples": [] })).await.expect(StatusCode::OK);
    }
    sqlx::query("UPDATE nodes SET last_heartbeat_at = now() - interval '10 minutes' WHERE id = $1::uuid")
        .bind(&f.nodes[kept])
        .execute(&f.app.db)
        .await
        .unwrap();
    sqlx::query("UPDATE jobs SET restart_policy = '{\"max_restarts\": 0}'").execute(&f.app.db).await.unwrap();
    f.app.sweep().await;
    let lease = f.get(&format!("/v1/leases/{}", f.lease_id)).await;
    assert_eq!(lease["state"], "interrupted", "{lease:#}");
    assert_eq!(f.get(&path).await["state"], "failed");
}

#[sqlx::test]
async fn a_stalled_job_is_stopped_and_restarted_and_without_restarts_fails_saying_so(db: PgPool) {
    let f = fixture(db).await;
    let policy = json!({ "backoff_s": 0, "stall_factor": 5, "stall_min_s": 10 });
    let (path, job) = f.job(policy).await;
    let parts = f.run_parts(&job).await;
    // Steps of 1 s, the last 30 s ago: past 5 x 1 s and the 10 s floor.
    f.steps(parts[0].0, &parts[0].1, 1, 4, Utc::now() - chrono::Duration::seconds(30)).await;
    f.round().await;
    let stalled = f.get(&path).await;
    let g2 = &stalled["generations"][1];
    assert_eq!((g2["state"].clone(), g2["cause"].clone()), (json!("pending"), json!("stalled")), "{stalled:#}");
    assert!(g2["reason"].as_str().unwrap().contains("stalled: no step for 3"), "{g2:#}");
    assert!(stalled["nodes"].as_array().unwrap().iter().all(|n| n["desired"] == "cancel"), "{stalled:#}");
    // Stopped by their agents (a stopped process is killed): then the restart starts.
    for (i, part) in &parts {
        f.report(*i, part, json!({ "state": "cancelled", "exit_code": -9 })).await;
    }
    f.round().await;
    assert_eq!(f.get(&path).await["generation"], 2);

    // Two replicas' rounds at once start one generation; two parts failing at once open one restart.
    let second = f.get(&path).await;
    let parts = f.run_parts(&second).await;
    f.report(parts[0].0, &parts[0].1, json!({ "state": "failed", "exit_code": 1 })).await;
    f.report(parts[1].0, &parts[1].1, json!({ "state": "failed", "exit_code": 1 })).await;
    let (a, b) =
        tokio::join!(gpuplane::jobs::recovery::round(&f.app.state), gpuplane::jobs::recovery::round(&f.app.state));
    a.unwrap();
    b.unwrap();
    f.round().await;
    let third = f.get(&path).await;
    assert_eq!((third["generation"].clone(), third["restarts"].clone()), (json!(3), json!(2)), "{third:#}");
    assert_eq!(third["generations"].as_array().unwrap().len(), 3);

    // A job without restarts: the stall fails it, with the reason.
    sqlx::query("UPDATE jobs SET restart_policy = restart_policy || '{\"max_restarts\": 0}'")
        .execute(&f.app.db)
        .await
        .unwrap();
    let parts = f.run_parts(&third).await;
    f.steps(parts[0].0, &parts[0].1, 5, 6, Utc::now() - chrono::Duration::seconds(60)).await;
    f.round().await;
    let failed = f.get(&path).await;
    assert_eq!(failed["state"], "failed", "{failed:#}");
    assert!(failed["reason"].as_str().unwrap().contains("stalled: no step for"), "{failed:#}");
}

#[sqlx::test]
async fn a_fatal_xid_on_a_leased_gpu_moves_the_job_off_its_node_onto_the_spare(db: PgPool) {
    let f = fixture(db).await;
    let (path, job) = f.job(json!({ "backoff_s": 0 })).await;
    let parts = f.run_parts(&job).await;
    let (kept, failing) = (parts[0].0, parts[1].0);
    let spare = (0..3).find(|i| *i != kept && *i != failing).unwrap();
    // XID 79: the GPU fell off the bus.
    let sample = json!({ "gpu_index": 1, "at": Utc::now(), "gpu_util": 0.0, "mem_copy_util": 0.0, "fb_used_mib": 0,
        "fb_free_mib": 81559, "power_w": 0.0, "energy_mj": 1, "gpu_temp_c": 40.0, "mem_temp_c": 40.0,
        "sm_clock_mhz": 0, "nvlink_bandwidth_gbps": 0.0, "xid_count": 1, "xid_codes": [79] });
    f.app.post("/v1/agent/heartbeat", &f.agent(failing), json!({ "samples": [sample] })).await.expect(StatusCode::OK);
    let lease = f.get(&format!("/v1/leases/{}", f.lease_id)).await;
    assert_eq!((lease["state"].clone(), lease["gpu_count"].clone()), (json!("active"), json!(4)), "{lease:#}");
    let hosts: std::collections::BTreeSet<String> =
        lease["gpus"].as_array().unwrap().iter().map(|g| g["node_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(hosts, [f.nodes[kept].clone(), f.nodes[spare].clone()].into_iter().collect(), "off the failing node");
    let pending = f.get(&path).await;
    let g2 = &pending["generations"][1];
    assert_eq!(
        (g2["cause"].clone(), g2["failed_node_id"].clone()),
        (json!("gpu_failed"), json!(f.nodes[failing])),
        "{g2:#}"
    );
    assert!(g2["reason"].as_str().unwrap().contains("fatal XID 79"), "{g2:#}");
    f.report(parts[0].0, &parts[0].1, json!({ "state": "cancelled", "exit_code": 0 })).await;
    f.round().await;
    let mut on = nodes_of(&f.get(&path).await);
    on.sort();
    let mut want = vec![f.nodes[kept].clone(), f.nodes[spare].clone()];
    want.sort();
    assert_eq!(on, want);
}
