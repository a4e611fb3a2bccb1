//! Real PyTorch across two agent hosts: a lease of 2 nodes x 2 (simulated) GPUs on two sandboxed agents, each
//! host in a network namespace of its own on a bridge, runs the runtime's example (`examples/llama-parallel`, a
//! tiny Llama) under the `gpuplane-runtime` template for four plans pinned through the API. torchrun's real
//! static rendezvous and gloo's collectives cross between the hosts at the lease's own addresses.
//!
//! Asserted for each plan: the job succeeded on both nodes; every rank's mesh coordinates are where the plan
//! puts them; the measured steps reached the API and the loss falls. Across the plans: one seed and one data
//! order give the same loss curve (the job asks the runtime to compute in fp32 on the CPU, so within 2e-3).
//!
//! torch and transformers come from the runtime's cached virtual environment (`scripts/runtime-venv.sh`, which
//! installs them once per machine, about 3 GB); the agents share it read-only with every job (`--job-ro-bind`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::agents::{agent_command, start_agent};
use crate::support::binary::{Proc, terminate};
use crate::support::jobs::{rank_lines, wait_job};
use crate::support::torch::{TorchSetUp, runtime_venv};

const SEGMENT: u8 = 1;
const STEPS: usize = 8;

#[sqlx::test]
async fn the_runtime_trains_a_llama_across_two_hosts_under_every_plan(db: PgPool) {
    let TorchSetUp { venv, python_root, example, script, net, mut server, base, api, op, path } =
        TorchSetUp::new(&db, SEGMENT, 2).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "torch", 2).await;

    let (venv_arg, python_arg) = (venv.display().to_string(), python_root.display().to_string());
    let mut agents: Vec<Proc> = Vec::new();
    let mut dirs = Vec::new();
    for host in 0..2 {
        let dir = crate::support::agents::state_dir(&format!("torch-h{host}"));
        let address = net.address(host);
        let mut cmd = agent_command(
            &base,
            Some(&join),
            &format!("torch-node-{host}"),
            &dir,
            &["--address", &address, "--insecure-http", "--job-ro-bind", &venv_arg, "--job-ro-bind", &python_arg],
        );
        cmd.env("PATH", &path);
        let mut inside = net.on(host, &cmd);
        inside.stdout(Stdio::piped()).stderr(Stdio::inherit());
        agents.push(start_agent(inside).0);
        dirs.push(dir);
    }

    let lease = api
        .post(
            "/v1/leases",
            &tenant,
            json!({ "pool_id": pool, "gpu_count": 4, "duration_hours": 1, "placement": "spread" }),
        )
        .await;
    let lease_id = lease["id"].as_str().unwrap().to_string();
    let per_node: BTreeMap<&str, usize> = lease["gpus"].as_array().unwrap().iter().fold(BTreeMap::new(), |mut m, g| {
        *m.entry(g["node_id"].as_str().unwrap()).or_default() += 1;
        m
    });
    assert_eq!(per_node.values().copied().collect::<Vec<_>>(), [2, 2], "2 nodes x 2 GPUs: {lease:#}");

    let plans = [
        ("dp4_zero3", json!({ "dp": 4, "tp": 1, "pp": 1, "zero_stage": 3, "micro_batch": 1 })),
        ("tp2_dp2", json!({ "tp": 2, "dp": 2, "pp": 1, "micro_batch": 2 })),
        ("pp2_dp2", json!({ "pp": 2, "dp": 2, "tp": 1, "micro_batch": 1 })),
        ("tp2_pp2", json!({ "tp": 2, "pp": 2, "dp": 1, "micro_batch": 2 })),
    ];
    let mut curves: Vec<(&str, Vec<f64>)> = Vec::new();
    for (i, (name, pins)) in plans.iter().enumerate() {
        let posted = Instant::now();
        let job = api
            .post(
                &format!("/v1/leases/{lease_id}/jobs"),
                &tenant,
                json!({
                    "template": "gpuplane-runtime",
                    "model": { "architecture": { "layers": 4, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 256, "vocab": 256 } },
                    "workload": { "kind": "train", "precision": "bf16", "seq_len": 32, "global_batch": 8 },
                    "pins": pins,
                    "command": [script, "--steps", STEPS.to_string()],
                    "env": { "GPUPLANE_PRECISION": "fp32" },
                    "master_port": 29600 + i,
                }),
            )
            .await;
        let plan = job["plan"].clone();
        for key in ["tp", "pp", "dp"] {
            assert_eq!(plan[key], pins[key], "{name}: the pinned plan: {plan:#}");
        }
        let id = job["id"].as_str().unwrap().to_string();
        let first_step = wait_job(&api, &tenant, &id, &format!("{name}: a first step"), 300, |j| {
            !j["measured"].is_null() || ["failed", "cancelled"].contains(&j["state"].as_str().unwrap_or(""))
        })
        .await;
        eprintln!("torch e2e: {name}: POST to the first reported step {:.1} s", posted.elapsed().as_secs_f64());
        assert!(!first_step["measured"].is_null(), "{name}: {first_step:#}");
        let done = wait_job(&api, &tenant, &id, &format!("{name} ends"), 300, |j| {
            ["succeeded", "failed", "cancelled"].contains(&j["state"].as_str().unwrap_or(""))
        })
        .await;
        assert_eq!(done["state"], "succeeded", "{name}: {done:#}");
        assert!(done["nodes"].as_array().unwrap().iter().all(|n| n["state"] == "succeeded"), "{done:#}");

        // Every rank sits where the plan puts it: tensor parallel fastest, then data, then pipeline.
        let (tp, dp) = (plan["tp"].as_u64().unwrap() as u32, plan["dp"].as_u64().unwrap() as u32);
        let placed = rank_lines(&done, "mesh of rank ");
        assert_eq!(placed.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3], "{name}: {done:#}");
        for (rank, coords) in &placed {
            let want: BTreeMap<String, u32> =
                [("pp", rank / (dp * tp)), ("dp", (rank / tp) % dp), ("cp", 0), ("tp", rank % tp)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
            assert_eq!(coords, &want, "{name}: rank {rank}");
        }

        // The full output, per rank: rank 0's report of every rank's place, and node 1's ranks are 2 and 3.
        let logs = api.get(&format!("/v1/jobs/{id}/logs?rank=0&limit=10000"), &tenant).await;
        let lines = logs["lines"].as_array().unwrap();
        assert!(lines.iter().all(|l| l["rank"] == 0 && l["node"] == 0), "{name}: {logs:#}");
        assert!(lines.iter().any(|l| l["text"].as_str().unwrap().starts_with("mesh of rank 3/4")), "{name}: {logs:#}");
        let node1 = api.get(&format!("/v1/jobs/{id}/logs?node=1&limit=10000"), &tenant).await;
        let ranks: std::collections::BTreeSet<i64> =
            node1["lines"].as_array().unwrap().iter().filter_map(|l| l["rank"].as_i64()).collect();
        assert!(!ranks.is_empty() && ranks.iter().all(|r| [2, 3].contains(r)), "{name}: {node1:#}");

        // The steps reached the API (the agent ships them after the process ends, too) and the loss falls.
        let steps = {
            let mut steps = Vec::new();
            let deadline = Instant::now() + std::time::Duration::from_secs(30);
            while steps.len() < STEPS {
                let page = api.get(&format!("/v1/jobs/{id}/steps"), &tenant).await;
                steps = page["steps"].as_array().unwrap().clone();
                assert!(Instant::now() < deadline, "{name}: {} of {STEPS} steps reported", steps.len());
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
            steps
        };
        let numbers: Vec<i64> = steps.iter().map(|s| s["step"].as_i64().unwrap()).collect();
        assert_eq!(numbers, (1..=STEPS as i64).collect::<Vec<_>>(), "{name}");
        assert!(steps.iter().all(|s| s["tokens"] == 8 * 32), "{name}: the global batch's tokens: {steps:?}");
        let losses: Vec<f64> = steps.iter().map(|s| s["loss"].as_f64().unwrap()).collect();
        assert!(losses[STEPS - 1] < losses[0] - 0.4, "{name}: the loss falls: {losses:?}");
        let measured = &api.get(&format!("/v1/jobs/{id}"), &tenant).await["measured"];
        assert_eq!(measured["steps"], STEPS, "{name}: {measured:#}");
        assert!(measured["predicted_step_time_s"].as_f64().unwrap() > 0.0);
        eprintln!(
            "torch e2e: {name}: median step {:.3} s measured on 2 CPU cores vs {:.6} s predicted on H100s",
            measured["median_step_time_s"].as_f64().unwrap(),
            measured["predicted_step_time_s"].as_f64().unwrap()
        );
        curves.push((name, losses));
    }

    // One seed and one data order: the same curve whatever the split.
    let (reference_name, reference) = curves[0].clone();
    for (name, curve) in &curves[1..] {
        let worst = curve.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst < 2e-3, "{name} vs {reference_name}: {curve:?} vs {reference:?}");
    }

    // A LoRA fine-tune of a pretrained checkpoint on the hosts, planned by `auto` from the checkpoint's own
    // config.json: it goes to the runtime, which loads each rank's part, trains the adapters and exports a PEFT
    // adapter into the lease's home that PEFT loads onto the base model.
    let base_model = crate::support::net::shared_with_jobs("lora-base", &[]);
    let python = venv.join("bin/python");
    run_python(&python, WRITE_CHECKPOINT, &[&base_model.display().to_string()]);
    let hf_config: Value =
        serde_json::from_str(&std::fs::read_to_string(base_model.join("config.json")).unwrap()).unwrap();
    let lora_steps = 6;
    let job = api
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &tenant,
            json!({
                "template": "auto",
                "model": { "hf_config": hf_config },
                "workload": { "kind": "lora", "precision": "bf16", "seq_len": 32, "global_batch": 8 },
                "command": [script, "--steps", lora_steps.to_string(), "--lr", "0.02"],
                "env": { "GPUPLANE_PRECISION": "fp32", "GPUPLANE_MODEL": base_model.display().to_string(),
                         "GPUPLANE_EXPORT_DIR": "/lease/home/adapter" },
                "master_port": 29610,
            }),
        )
        .await;
    assert_eq!(job["template"], "gpuplane-runtime", "auto sends LoRA to the runtime: {job:#}");
    let id = job["id"].as_str().unwrap().to_string();
    let done = wait_job(&api, &tenant, &id, "the LoRA job ends", 300, |j| {
        ["succeeded", "failed", "cancelled"].contains(&j["state"].as_str().unwrap_or(""))
    })
    .await;
    assert_eq!(done["state"], "succeeded", "lora: {done:#}");
    let plan = &done["plan"];
    eprintln!("torch e2e: lora: plan tp{} pp{} dp{}", plan["tp"], plan["pp"], plan["dp"]);
    let adapter = dirs
        .iter()
        .map(|dir| {
            let mut jobs = dir.as_os_str().to_os_string();
            jobs.push("-jobs");
            Path::new(&jobs).join(&lease_id).join("home/adapter")
        })
        .find(|path| path.join("adapter_config.json").exists())
        .unwrap_or_else(|| panic!("no exported adapter in either host's lease home: {done:#}"));
    let said = run_python(&python, CHECK_ADAPTER, &[&base_model.display().to_string(), &adapter.display().to_string()]);
    assert!(said.contains("adapter loads"), "{said}");

    for mut agent in agents {
        let _ = Command::new("kill").args(["-TERM", &agent.id().to_string()]).status();
        let _ = agent.wait();
    }
    terminate(&mut server);
    for dir in dirs {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&example);
    let _ = std::fs::remove_dir_all(&base_model);
}

/// A small pretrained Llama (the example's shape) in two safetensors shards with their index and config.json.
const WRITE_CHECKPOINT: &str = r#"
import os, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(1)
config = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096)
LlamaForCausalLM(config).save_pretrained(sys.argv[1], safe_serialization=True, max_shard_size="1MB")
shards = [f for f in os.listdir(sys.argv[1]) if f.endswith(".safetensors")]
assert len(shards) >= 2, shards
for f in os.listdir(sys.argv[1]):
    os.chmod(os.path.join(sys.argv[1], f), 0o644)
"#;

/// PEFT loads the exported adapter onto the base model; the adapters trained (B no longer zero) and the model
/// with the adapter computes other logits than the base.
const CHECK_ADAPTER: &str = r#"
import sys, torch
from peft import PeftModel
from transformers import AutoModelForCausalLM
base = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32)
ids = torch.arange(16).unsqueeze(0)
with torch.no_grad():
    before = base(ids).logits.clone()
model = PeftModel.from_pretrained(base, sys.argv[2])
bs = [p for n, p in model.named_parameters() if "lora_B" in n]
assert bs and all(float(b.abs().max()) > 0 for b in bs), "untrained adapters"
with torch.no_grad():
    after = model(ids).logits
assert not torch.allclose(before, after), "the adapter changes nothing"
print("adapter loads:", len(bs), "adapted modules")
"#;

/// Run `code` with the runtime's Python; its stdout, after asserting it succeeded.
fn run_python(python: &Path, code: &str, args: &[&str]) -> String {
    let out = Command::new(python).arg("-c").arg(code).args(args).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}\n{}", String::from_utf8_lossy(&out.stderr));
    said
}

/// Every framework file gpuplane renders is read by that framework's own parser (DeepSpeed's `DeepSpeedConfig`,
/// Accelerate's config loader and launch validation, the runtime's plan parser), for plans across ZeRO stages,
/// offload and parallel splits: `scripts/check-framework-files.py` says which and why Megatron's is not.
#[sqlx::test]
async fn rendered_framework_files_are_read_by_their_frameworks(db: PgPool) {
    use crate::support::app::TestApp;
    use axum::http::StatusCode;

    let (venv, _) = runtime_venv();
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-frameworks", "h100").await;
    for i in 0..2 {
        app.node(&op, &pool, &format!("fw-{i}"), 4).await;
    }
    let lease = app
        .post(
            "/v1/leases",
            &tenant,
            json!({ "pool_id": pool, "gpu_count": 8, "duration_hours": 1, "placement": "pack" }),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    let lease_id = lease["id"].as_str().unwrap();
    let jobs = [
        ("deepspeed", json!({ "zero_stage": 1 })),
        ("deepspeed", json!({ "zero_stage": 2, "offload": "optimizer" })),
        ("deepspeed", json!({ "zero_stage": 3, "offload": "optimizer_and_params", "recompute": "full" })),
        ("torchrun-fsdp", json!({ "zero_stage": 3 })),
        ("torchrun-fsdp", json!({ "zero_stage": 3, "offload": "optimizer_and_params", "recompute": "full" })),
        ("torchrun-fsdp", json!({ "zero_stage": 2 })),
        ("gpuplane-runtime", json!({ "tp": 2, "pp": 2 })),
    ];
    let dir = std::env::temp_dir().join(format!("gpuplane-framework-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (i, (template, pins)) in jobs.iter().enumerate() {
        let job = app
            .post(
                &format!("/v1/leases/{lease_id}/jobs"),
                &tenant,
                json!({ "template": template, "model": {"preset": "llama2-7b"}, "command": ["train.py"], "pins": pins,
                        "workload": {"kind": "train", "seq_len": 4096, "global_batch": 256} }),
            )
            .await;
        assert_eq!(job.status, StatusCode::CREATED, "{template} {pins}: {}", job.body);
        let job = job.body;
        for node in job["nodes"].as_array().unwrap() {
            let spec_dir = dir.join(format!("{i}-{template}-rank{}", node["node_rank"]));
            std::fs::create_dir_all(&spec_dir).unwrap();
            std::fs::write(spec_dir.join("world.json"), json!({ "dp": job["plan"]["dp"] }).to_string()).unwrap();
            for file in node["spec"]["files"].as_array().unwrap() {
                std::fs::write(spec_dir.join(file["path"].as_str().unwrap()), file["content"].as_str().unwrap())
                    .unwrap();
            }
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-framework-files.py");
    let out = Command::new(venv.join("bin/python")).arg(&script).arg(&dir).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}\n{}", String::from_utf8_lossy(&out.stderr));
    for name in ["ds_config.json", "accelerate_config.json", "gpuplane_plan.json"] {
        assert!(said.lines().any(|l| l.starts_with("ok ") && l.ends_with(name)), "{name} not checked: {said}");
    }
    assert_eq!(said.lines().filter(|l| l.starts_with("ok ")).count(), 2 * jobs.len() + 2 * (jobs.len() - 1), "{said}");
    // The check can fail: DeepSpeed refuses a batch that breaks its identity.
    let spec = dir.join("0-deepspeed-rank0");
    let path = spec.join("ds_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["train_batch_size"] = json!(config["train_batch_size"].as_u64().unwrap() + 1);
    std::fs::write(&path, config.to_string()).unwrap();
    let out = Command::new(venv.join("bin/python")).arg(&script).arg(&dir).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success() && said.contains("refused 0-deepspeed-rank0/ds_config.json"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
