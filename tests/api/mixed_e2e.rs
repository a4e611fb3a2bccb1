//! A job split over unlike GPUs, end to end on the CPU (issue #37 item 5): two agent hosts, each in a network
//! namespace of its own, one simulating 2 x A100 80GB in an A100 pool and one 2 x RTX 4090 in an RTX 4090 pool; one
//! lease across both pools; a job under the `gpuplane-runtime` template, which the mixed planner splits into one
//! pipeline of uneven stages (the faster, larger A100s hold more layers). Real torchrun, real gloo between the hosts.
//!
//! Asserted: the plan uses every GPU of both parts with uneven layer counts; every rank holds exactly the layers
//! the plan gave its stage and sits where the plan puts it (from the ranks' own report in the job's output); the
//! ranks of the first stages run on the part the plan puts first; the loss falls; the job succeeded on both
//! nodes; and once the lease ends each part is billed at its own pool's price.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use serde_json::json;
use sqlx::PgPool;

use crate::support::agents::{agent_command_simulating, start_agent};
use crate::support::binary::{Proc, terminate};
use crate::support::jobs::{rank_lines, wait_job};
use crate::support::torch::TorchSetUp;

const SEGMENT: u8 = 3;
const STEPS: usize = 8;

#[sqlx::test]
async fn a_llama_trains_over_a100s_and_rtx_4090s_in_one_uneven_pipeline(db: PgPool) {
    let TorchSetUp { venv, python_root, example, script, net, mut server, base, api, op, path } =
        TorchSetUp::new(&db, SEGMENT, 2).await;
    let (_, tenant) = api.funded_tenant(&op, "mixed").await;

    let (venv_arg, python_arg) = (venv.display().to_string(), python_root.display().to_string());
    let mut agents: Vec<Proc> = Vec::new();
    let mut dirs = Vec::new();
    let mut pools = Vec::new();
    for (host, (model, price)) in [("a100-80g", 300), ("rtx4090", 100)].into_iter().enumerate() {
        let pool_body = json!({ "name": format!("{model}-mixed"), "gpu_model": model, "region": "e2e",
            "price_per_gpu_hour_minor": price, "currency": "USD" });
        let pool = api.post("/v1/admin/pools", &op, pool_body).await["id"].as_str().unwrap().to_string();
        let join =
            api.post(&format!("/v1/admin/pools/{pool}/join-tokens"), &op, json!({ "max_uses": 1 })).await["join_token"]
                .as_str()
                .unwrap()
                .to_string();
        let dir = crate::support::agents::state_dir(&format!("mixed-h{host}"));
        let address = net.address(host);
        let mut cmd = agent_command_simulating(
            &format!("{model}:2"),
            &base,
            Some(&join),
            &format!("mixed-node-{host}"),
            &dir,
            &["--address", &address, "--insecure-http", "--job-ro-bind", &venv_arg, "--job-ro-bind", &python_arg],
        );
        cmd.env("PATH", &path);
        let mut inside = net.on(host, &cmd);
        inside.stdout(Stdio::piped()).stderr(Stdio::inherit());
        agents.push(start_agent(inside).0);
        dirs.push(dir);
        pools.push((pool, price));
    }

    let lease = api
        .post(
            "/v1/leases",
            &tenant,
            json!({ "duration_hours": 1, "parts": [
                { "pool_id": pools[0].0, "gpu_count": 2 }, { "pool_id": pools[1].0, "gpu_count": 2 } ] }),
        )
        .await;
    assert_eq!(lease["state"], "active", "{lease:#}");
    let lease_id = lease["id"].as_str().unwrap().to_string();
    let node_of_part = |part: usize| -> String {
        let gpu = &lease["parts"][part]["gpu_ids"][0];
        let gpus = lease["gpus"].as_array().unwrap();
        gpus.iter().find(|g| g["gpu_id"] == *gpu).unwrap()["node_id"].as_str().unwrap().to_string()
    };
    let (a100_node, rtx_node) = (node_of_part(0), node_of_part(1));

    let job = api
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &tenant,
            json!({
                "template": "gpuplane-runtime",
                "model": { "architecture": { "layers": 8, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 256, "vocab": 256 } },
                "workload": { "kind": "train", "precision": "bf16", "seq_len": 32, "global_batch": 8 },
                "command": [script, "--steps", STEPS.to_string(), "--layers", "8"],
                "env": { "GPUPLANE_PRECISION": "fp32" },
                "master_port": 29650,
            }),
        )
        .await;
    let plan = job["plan"].clone();
    let (tp, pp, dp) =
        (plan["tp"].as_u64().unwrap() as u32, plan["pp"].as_u64().unwrap() as u32, plan["dp"].as_u64().unwrap() as u32);
    assert_eq!(tp * pp * dp, 4, "every GPU of both parts: {plan:#}");
    let layers: Vec<u32> =
        plan["layers_per_stage"].as_array().unwrap().iter().map(|l| l.as_u64().unwrap() as u32).collect();
    assert_eq!(layers.len() as u32, pp, "{plan:#}");
    assert_eq!(layers.iter().sum::<u32>(), 8);
    assert!(layers.iter().any(|l| *l != layers[0]), "uneven stages on unlike GPUs: {plan:#}");
    // Rank order: the node of the part the plan puts first runs the first stage's ranks.
    let first_node = job["nodes"][0]["node_id"].as_str().unwrap().to_string();
    let a100_first = first_node == a100_node;
    assert!(a100_first || first_node == rtx_node, "{job:#}");
    let (first_layers, last_layers) = (layers[0], layers[layers.len() - 1]);
    assert_eq!(a100_first, first_layers > last_layers, "the A100 stage holds more layers: {plan:#}");
    eprintln!("mixed e2e: plan tp{tp} pp{pp} dp{dp}, layers per stage {layers:?}, A100s first: {a100_first}");

    let id = job["id"].as_str().unwrap().to_string();
    let done = wait_job(&api, &tenant, &id, "the mixed job ends", 300, |j| {
        ["succeeded", "failed", "cancelled"].contains(&j["state"].as_str().unwrap_or(""))
    })
    .await;
    assert_eq!(done["state"], "succeeded", "{done:#}");
    assert!(done["nodes"].as_array().unwrap().iter().all(|n| n["state"] == "succeeded"), "{done:#}");

    // Every rank sits where the plan puts it and holds its stage's layers.
    let placed = rank_lines(&done, "mesh of rank ");
    let held = rank_lines(&done, "layers of rank ");
    assert_eq!(placed.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3], "{done:#}");
    assert_eq!(held.len(), 4, "{done:#}");
    for rank in 0..4u32 {
        let stage = rank / (dp * tp);
        assert_eq!(placed[&rank]["pp"], stage, "rank {rank}");
        assert_eq!(placed[&rank]["dp"], (rank / tp) % dp, "rank {rank}");
        assert_eq!(placed[&rank]["tp"], rank % tp, "rank {rank}");
        let first: u32 = layers[..stage as usize].iter().sum();
        let want = BTreeMap::from([("first".to_string(), first), ("count".to_string(), layers[stage as usize])]);
        assert_eq!(held[&rank], want, "rank {rank} holds stage {stage}'s layers");
    }

    // The loss falls.
    let steps = {
        let mut steps = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while steps.len() < STEPS {
            let page = api.get(&format!("/v1/jobs/{id}/steps"), &tenant).await;
            steps = page["steps"].as_array().unwrap().clone();
            assert!(std::time::Instant::now() < deadline, "{} of {STEPS} steps reported", steps.len());
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        steps
    };
    let losses: Vec<f64> = steps.iter().map(|s| s["loss"].as_f64().unwrap()).collect();
    // Eight steps of a random 8-layer model fall by 0.3 to 0.6 depending on the seed's weights (the 4-layer
    // models of torch_e2e fall further): more than noise, and the same bound for any initialization.
    assert!(losses[STEPS - 1] < losses[0] - 0.25, "the loss falls: {losses:?}");

    // Released and metered: one usage record per part, each at its own pool's price.
    api.post(&format!("/v1/leases/{lease_id}/release"), &tenant, json!({})).await;
    gpuplane::billing::metering::meter_once(&db).await.unwrap();
    let records: Vec<(String, i32, i64, i64, i64)> = sqlx::query_as(
        "SELECT pool_id::text, gpu_count, sum(gpu_seconds)::bigint, min(unit_price_minor), sum(amount_minor)::bigint \
         FROM usage_records WHERE lease_id = $1::uuid GROUP BY pool_id, gpu_count ORDER BY min(unit_price_minor) DESC",
    )
    .bind(&lease_id)
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
    for ((pool, price), (record_pool, gpus, gpu_seconds, unit_price, amount)) in pools.iter().zip(&records) {
        assert_eq!((record_pool, *gpus, *unit_price), (pool, 2, *price));
        assert_eq!(*amount, gpu_seconds * price / 3600, "floor(GPU-seconds x price / 3600) for {pool}");
    }
    assert_eq!(records[0].2, records[1].2, "both parts held their GPUs for the same seconds");

    for mut agent in agents {
        let _ = Command::new("kill").args(["-TERM", &agent.id().to_string()]).status();
        let _ = agent.wait();
    }
    terminate(&mut server);
    for dir in dirs {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&example);
}
