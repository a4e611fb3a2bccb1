//! A served model, end to end: two agent hosts (each in a network namespace of its own, one simulated GPU each), a
//! tenant's lease across both, and a job that serves a tiny Llama (made here) with `transformers serve`, the
//! OpenAI-compatible server of the pinned transformers, on a CPU: two replicas behind the gateway.
//!
//! - Callers reach it through the gateway with one of the service's keys; without one, with a revoked one, with
//!   another tenant's credentials, it is refused (and another tenant cannot see or manage the service at all).
//! - A public service needs no key; a rate limit answers 429 past it.
//! - One replica's server is killed while requests stream in: no request that started after the kill fails (the
//!   gateway passes over a replica it cannot reach), the job runs on with the other replica, and the killed one
//!   runs again on its node on its own.
//! - A replan rolls over the two hosts one at a time under the same load: no request fails.
//! - The gateway's requests and tokens are in /metrics.
//! - Then a batch generation on the same lease: a JSONL file of prompts through both hosts, every prompt answered
//!   once, the job's progress summed from its parts; and a batch of images (the `diffusion-dp` template, a tiny
//!   Stable Diffusion pipeline), every prompt drawn once as a PNG.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::agents::{Api, agent_command_simulating, start_agent, state_dir, wait_until};
use crate::support::binary::{Proc, database_url, spawn_server_with_gateway, terminate};
use crate::support::jobs::wait_job;
use crate::support::net::{TestNet, shared_with_jobs};
use crate::support::torch::runtime_venv;

const SEGMENT: u8 = 5;

/// A tiny Llama with a character tokenizer and a chat template, saved where jobs can read it.
const MAKE_MODEL: &str = r#"import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
out = sys.argv[1]
vocab = {c: i for i, c in enumerate(["<unk>", "<s>", "</s>"] + [chr(c) for c in range(32, 127)])}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                               model_input_names=["input_ids", "attention_mask"])
fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
fast.save_pretrained(out)
config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
LlamaForCausalLM(config).save_pretrained(out)
"#;

/// The replica's launch script, as a tenant's own would warm its engine (this test's stand-in for the startup a
/// real engine does itself: vLLM loads its model before it listens). `transformers serve` loads its model on the
/// first request, and first requests that arrive together break it for good (that engine's race: "Cannot copy
/// out of meta tensor"), so one request loads it before the job's port opens, in front of the server.
const WARM_SERVE: &str = r#"import asyncio, json, os, subprocess, sys, time, urllib.request
port = int(os.environ["GPUPLANE_SERVE_PORT"])
inner = port + 1
server = subprocess.Popen(sys.argv[1:] + ["--host", "127.0.0.1", "--port", str(inner)])
url = f"http://127.0.0.1:{inner}"
while True:
    if server.poll() is not None:
        sys.exit(server.returncode or 1)
    try:
        urllib.request.urlopen(url + "/health", timeout=1)
        break
    except OSError:
        time.sleep(0.2)
body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
request = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=120).read()

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()

async def handle(reader, writer):
    try:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", inner)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer), return_exceptions=True)

async def main():
    listener = await asyncio.start_server(handle, "0.0.0.0", port)
    async with listener:
        await listener.serve_forever()

asyncio.run(main())
"#;

/// The processes of the job's part of `rank` (its server), found by their environment.
fn part_pids(job_id: &str, rank: u32) -> Vec<u32> {
    let wanted = [format!("GPUPLANE_JOB_ID={job_id}"), format!("NODE_RANK={rank}")];
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()).map(|pid| (pid, e.path())))
        .filter(|(_, path)| {
            std::fs::read(path.join("environ")).is_ok_and(|env| {
                let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
                wanted.iter().all(|w| vars.contains(&w.as_bytes()))
            })
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// A chat completion through the gateway with `key` (None: no key): the status and the body.
async fn chat(client: &reqwest::Client, url: &str, key: Option<&str>) -> (u16, String) {
    let mut request = client.post(format!("{url}/v1/chat/completions")).json(&json!({
        "model": "tiny", "messages": [{ "role": "user", "content": "hi" }], "max_tokens": 4
    }));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.text().await.unwrap_or_else(|e| format!("(body cut off: {e})")))
        }
        Err(err) => (0, format!("(no answer: {err})")),
    }
}

/// A request under load: when it started, its status, whether its answer was complete, and a failure's body.
type Answered = (Instant, u16, bool, String);

/// A complete streamed answer: the server's chunks up to its last (`finish_reason`).
fn complete(body: &str) -> bool {
    body.contains("chat.completion.chunk") && body.contains("finish_reason")
}

#[sqlx::test]
async fn a_served_model_is_reached_with_a_key_through_the_gateway_and_outlives_a_replica(db: PgPool) {
    let (venv, python_root) = runtime_venv();
    let net = TestNet::new(SEGMENT, 2);
    let bridge = TestNet::bridge_address(SEGMENT);
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base, gateway) = spawn_server_with_gateway(
        &database_url(&db),
        &format!("{bridge}:0"),
        &format!("{bridge}:0"),
        &[("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1")],
    );
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "serving", 2).await;
    let (_, other) = api.funded_tenant(&op, "serving-other").await;
    api.post("/v1/admin/templates", &op, json!({ "name": "run", "argv": ["{command}"] })).await;

    let shared = shared_with_jobs("serving-e2e", &[("make_model.py", MAKE_MODEL), ("warm_serve.py", WARM_SERVE)]);
    let model = shared.join("model");
    let made = Command::new(venv.join("bin/python"))
        .arg(shared.join("make_model.py"))
        .arg(&model)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let _ = Command::new("chmod").args(["-R", "a+rX"]).arg(&shared).status();

    let path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let mut agents: Vec<Option<Proc>> = Vec::new();
    let mut dirs = Vec::new();
    for host in 0..2 {
        let dir = state_dir(&format!("serving-h{host}"));
        let mut cmd = agent_command_simulating(
            "h100:1",
            &base,
            Some(&join),
            &format!("serving-node-{host}"),
            &dir,
            &["--address", &net.address(host), "--insecure-http"],
        );
        cmd.args(["--job-ro-bind", &venv.display().to_string(), "--job-ro-bind", &python_root.display().to_string()])
            .env("PATH", &path);
        let mut inside = net.on(host, &cmd);
        inside.stdout(Stdio::piped()).stderr(Stdio::inherit());
        agents.push(Some(start_agent(inside).0));
        dirs.push(dir);
    }

    let lease = api.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1 })).await;
    let lease_id = lease["id"].as_str().unwrap().to_string();
    let transformers = venv.join("bin/transformers").display().to_string();
    let (python, warm) = (venv.join("bin/python").display().to_string(), shared.join("warm_serve.py"));
    let command = [
        python.as_str(),
        warm.to_str().unwrap(),
        transformers.as_str(),
        "serve",
        "--device",
        "cpu",
        "--force_model",
        model.to_str().unwrap(),
    ];
    // Bad serving settings are refused field by field, and nothing is made.
    let (status, refused) = api
        .call(
            reqwest::Method::POST,
            &format!("/v1/leases/{lease_id}/jobs"),
            &tenant,
            Some(json!({ "template": "run", "command": command, "serve": { "port": 80, "protocol": "grpc" } })),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    let fields: Vec<&str> =
        refused["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["serve.port", "serve.protocol"], "{refused}");

    let job = api
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &tenant,
            json!({
                "template": "run", "command": command, "env": { "HF_HUB_OFFLINE": "1" },
                "serve": { "port": 8000, "health_path": "/health", "protocol": "openai" },
                // Planned (so it can be replanned), restarted 1 s after a replica fails, stopped 2 s after notice.
                "model": { "preset": "llama3-8b" }, "workload": { "kind": "inference" },
                "restart": { "backoff_s": 1 }, "stop_grace_s": 2,
            }),
        )
        .await;
    let job_id = job["id"].as_str().unwrap().to_string();
    let services = api.get("/v1/services", &tenant).await;
    let service =
        services["items"].as_array().unwrap().iter().find(|s| s["job_id"] == job_id.as_str()).unwrap().clone();
    let service_id = service["id"].as_str().unwrap().to_string();
    let url = service["url"].as_str().unwrap().to_string();
    assert_eq!(url, format!("{gateway}/s/{service_id}"));
    assert_eq!(service["public"], false);

    let started = Instant::now();
    wait_until("both replicas are ready", 180, || async {
        let service = api.get(&format!("/v1/services/{service_id}"), &tenant).await;
        let job = api.get(&format!("/v1/jobs/{job_id}"), &tenant).await;
        assert!(job["finished_at"].is_null(), "the job ended: {job:#}");
        service["ready_replicas"] == 2
    })
    .await;
    eprintln!("serving e2e: both replicas ready {:.1} s after the job was created", started.elapsed().as_secs_f64());

    let client = reqwest::Client::new();
    // Keys: none, a new one, another tenant's credentials, a revoked one.
    let (status, body) = chat(&client, &url, None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("service_key_required"), "{body}");
    let key = api.post(&format!("/v1/services/{service_id}/keys"), &tenant, json!({ "name": "app" })).await;
    let secret = key["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("gps_"));
    let (status, body) = chat(&client, &url, Some(&secret)).await;
    assert_eq!(status, 200, "{body}");
    assert!(complete(&body), "{body}");
    let (status, body) = chat(&client, &url, Some(&other)).await;
    assert_eq!(status, 401, "another tenant's token is no key of this service: {body}");
    assert!(body.contains("service_key_invalid"), "{body}");
    for (method, path) in [
        (reqwest::Method::GET, format!("/v1/services/{service_id}")),
        (reqwest::Method::GET, format!("/v1/services/{service_id}/keys")),
        (reqwest::Method::POST, format!("/v1/services/{service_id}/keys")),
        (reqwest::Method::PATCH, format!("/v1/services/{service_id}")),
    ] {
        let body = (method != reqwest::Method::GET).then(|| json!({ "name": "mine" }));
        let body = if method == reqwest::Method::PATCH { Some(json!({ "public": true })) } else { body };
        let (status, answer) = api.call(method.clone(), &path, &other, body).await;
        assert_eq!(status, 404, "{method} {path} by another tenant: {answer}");
    }
    let listed = api.get("/v1/services", &other).await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 0, "{listed}");
    let second = api.post(&format!("/v1/services/{service_id}/keys"), &tenant, json!({ "name": "old" })).await;
    let revoked = api
        .call(
            reqwest::Method::DELETE,
            &format!("/v1/services/{service_id}/keys/{}", second["id"].as_str().unwrap()),
            &tenant,
            None,
        )
        .await;
    assert_eq!(revoked.0, 200, "{}", revoked.1);
    assert!(revoked.1["revoked_at"].is_string());
    let (status, body) = chat(&client, &url, Some(second["secret"].as_str().unwrap())).await;
    assert_eq!(status, 401, "a revoked key: {body}");

    // Public, then a rate limit.
    let patch = |body: Value| {
        let api = &api;
        let tenant = &tenant;
        let path = format!("/v1/services/{service_id}");
        async move {
            let (status, answer) = api.call(reqwest::Method::PATCH, &path, tenant, Some(body)).await;
            assert_eq!(status, 200, "{answer}");
            answer
        }
    };
    patch(json!({ "public": true })).await;
    let (status, body) = chat(&client, &url, None).await;
    assert_eq!(status, 200, "a public service needs no key: {body}");
    patch(json!({ "public": false, "rate_limit_per_minute": 3 })).await;
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(chat(&client, &url, Some(&secret)).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 429], "three a minute");
    patch(json!({ "rate_limit_per_minute": null })).await;

    // One replica's server dies while requests stream in: only those it was answering may fail.
    let results: Arc<std::sync::Mutex<Vec<Answered>>> = Arc::default();
    let load_from = |results: &Arc<std::sync::Mutex<Vec<Answered>>>| {
        let stop = tokio_util::sync::CancellationToken::new();
        let mut load = Vec::new();
        for _ in 0..3 {
            let (client, url, secret, results, stop) =
                (client.clone(), url.clone(), secret.clone(), results.clone(), stop.clone());
            load.push(tokio::spawn(async move {
                while !stop.is_cancelled() {
                    let at = Instant::now();
                    let (status, body) = chat(&client, &url, Some(&secret)).await;
                    let ok = status == 200 && complete(&body);
                    let body = if ok { String::new() } else { body.chars().take(300).collect() };
                    results.lock().unwrap().push((at, status, ok, body));
                }
            }));
        }
        (stop, load)
    };
    let (stop, load) = load_from(&results);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let victims = part_pids(&job_id, 0);
    assert!(!victims.is_empty(), "rank 0's server runs");
    for pid in &victims {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_secs(6)).await;
    stop.cancel();
    for task in load {
        task.await.unwrap();
    }
    let results = results.lock().unwrap().clone();
    let after: Vec<&Answered> = results.iter().filter(|r| r.0 > killed).collect();
    let before_failed = results.iter().filter(|r| r.0 <= killed && !r.2).count();
    assert!(after.len() >= 10, "requests kept coming after the kill: {}", after.len());
    let failed_after: Vec<(u16, &str)> = after.iter().filter(|r| !r.2).map(|r| (r.1, r.3.as_str())).collect();
    assert!(failed_after.is_empty(), "requests that started after the kill failed: {failed_after:?}");
    eprintln!(
        "serving e2e: {} requests before the kill ({before_failed} failed: in flight), {} after (none failed)",
        results.len() - after.len(),
        after.len()
    );
    // The killed replica's part failed, and runs again on its node as its next attempt; the job ran on.
    wait_job(&api, &tenant, &job_id, "the killed replica runs again", 120, |j| {
        assert_eq!(j["state"], "running", "the other replica serves on: {j:#}");
        j["nodes"][0]["attempt"] == 2 && j["nodes"][0]["state"] == "running"
    })
    .await;
    wait_until("both replicas are ready again", 120, || async {
        api.get(&format!("/v1/services/{service_id}"), &tenant).await["ready_replicas"] == 2
    })
    .await;
    eprintln!("serving e2e: the killed replica answered again {:.1} s after the kill", killed.elapsed().as_secs_f64());

    // A replan rolls over the two hosts one at a time under the same load: no request fails.
    let rolled: Arc<std::sync::Mutex<Vec<Answered>>> = Arc::default();
    let (stop, load) = load_from(&rolled);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let roll_started = Instant::now();
    let (status, replanned) = api
        .call(reqwest::Method::POST, &format!("/v1/jobs/{job_id}/replan"), &tenant, Some(json!({ "reason": "roll" })))
        .await;
    assert_eq!(status, 202, "{replanned}");
    let job = wait_job(&api, &tenant, &job_id, "the new generation takes over", 180, |j| j["generation"] == 2).await;
    assert_eq!(job["state"], "running", "{job:#}");
    eprintln!("serving e2e: the roll over both hosts took {:.1} s", roll_started.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    for task in load {
        task.await.unwrap();
    }
    let rolled = rolled.lock().unwrap().clone();
    let failed: Vec<(u16, &str)> = rolled.iter().filter(|r| !r.2).map(|r| (r.1, r.3.as_str())).collect();
    assert!(rolled.len() >= 10 && failed.is_empty(), "{} requests during the roll, failed: {failed:?}", rolled.len());
    eprintln!("serving e2e: {} requests during the roll, none failed", rolled.len());
    let results: Vec<Answered> = results.into_iter().chain(rolled).collect();

    // What the gateways counted, added up in the database (every few seconds) and shown on the service.
    let counted = |s: &Value| s["last_hour"]["requests"].as_i64().unwrap_or(0);
    let mut service = api.get(&format!("/v1/services/{service_id}"), &tenant).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while (counted(&service) as usize) < results.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        service = api.get(&format!("/v1/services/{service_id}"), &tenant).await;
    }
    let hour = &service["last_hour"];
    assert!(counted(&service) as usize >= results.len(), "{hour}");
    assert!(hour["refused"].as_i64().unwrap() >= 4, "the 401s and the 429: {hour}");
    assert!(hour["output_tokens"].as_i64().unwrap() > 0, "streamed chunks counted: {hour}");
    assert!(hour["p50_ms"].as_f64().is_some() && hour["requests_per_s"].as_f64().unwrap() > 0.0, "{hour}");
    eprintln!("serving e2e: the last hour of the service: {hour}");

    // What the gateway measured.
    let metrics = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    let requests = format!("gpuplane_service_requests_total{{service=\"{service_id}\",status=\"200\"}}");
    assert!(metrics.contains(&requests), "{requests} in /metrics");
    assert!(metrics.contains("status=\"401\""), "refusals are counted");
    assert!(metrics.contains("gpuplane_service_request_duration_seconds_bucket"));

    // The job is cancelled (its server stops on SIGTERM), then the lease ends on its hosts (their namespaces
    // removed) before the hosts stop.
    let (status, cancelled) =
        api.call(reqwest::Method::POST, &format!("/v1/jobs/{job_id}/cancel"), &tenant, None).await;
    assert!(status < 300, "{cancelled}");
    wait_job(&api, &tenant, &job_id, "the cancelled job stops", 60, |j| j["finished_at"].is_string()).await;
    let (status, body) = chat(&client, &url, Some(&secret)).await;
    assert_eq!(status, 503, "no replica once the job ended: {body}");

    // Batch generation on the same lease: a JSONL file of prompts through both hosts' replicas, each writing its
    // share beside the others, the job's progress summed from both.
    let prompts: String = (0..12).map(|i| format!("{{\"prompt\": \"prompt number {i}\"}}\n")).collect();
    std::fs::write(shared.join("prompts.jsonl"), prompts).unwrap();
    let _ = Command::new("chmod").args(["a+r"]).arg(shared.join("prompts.jsonl")).status();
    let input = shared.join("prompts.jsonl").display().to_string();
    let batch = api
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &tenant,
            json!({
                "template": "run", "env": { "HF_HUB_OFFLINE": "1" },
                "command": [python, "-m", "gpuplane_runtime.batch", "--input", input, "--output", "/lease/home/batch-out",
                            "--model", model.to_str().unwrap(), "--max-new-tokens", "4", "--batch-size", "4"],
            }),
        )
        .await;
    let batch_id = batch["id"].as_str().unwrap().to_string();
    let done = wait_job(&api, &tenant, &batch_id, "the batch job ends", 180, |j| j["finished_at"].is_string()).await;
    assert_eq!(done["state"], "succeeded", "{done:#}");
    assert_eq!(done["progress"], json!({ "done": 12, "total": 12 }), "{done:#}");
    let mut answered = Vec::new();
    for dir in &dirs {
        // The lease's files are in the agent's jobs directory (the state directory's path with `-jobs`).
        let jobs_dir = format!("{}-jobs", dir.display());
        let found = Command::new("find").arg(&jobs_dir).args(["-name", "part-*.jsonl"]).output().unwrap();
        for part in String::from_utf8_lossy(&found.stdout).lines() {
            for line in std::fs::read_to_string(part).unwrap().lines() {
                let record: Value = serde_json::from_str(line).unwrap();
                assert!(record["output"].is_string(), "{record}");
                answered.push(record["index"].as_i64().unwrap());
            }
        }
    }
    answered.sort();
    assert_eq!(answered, (0..12).collect::<Vec<i64>>(), "every prompt answered once, across the two hosts");

    // Images: the diffusion-dp template (the runtime's images module under torchrun, a replica per GPU) over a
    // tiny Stable Diffusion pipeline made here, every prompt drawn once as a PNG on one of the two hosts.
    let pipeline = shared.join("tiny-sd");
    let maker = concat!(env!("CARGO_MANIFEST_DIR"), "/runtime/tests/support/tiny_diffusion.py");
    let made = Command::new(venv.join("bin/python")).arg(maker).arg(&pipeline).env("HF_HUB_OFFLINE", "1").output();
    let made = made.unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let drawings: String = ["a red cat", "a blue dog", "a green fox", "a cat", "a dog", "a fox"]
        .iter()
        .map(|p| format!("{{\"prompt\": \"{p}\"}}\n"))
        .collect();
    std::fs::write(shared.join("drawings.jsonl"), drawings).unwrap();
    let _ = Command::new("chmod").args(["-R", "a+rX"]).arg(&shared).status();
    let images = api
        .post(
            &format!("/v1/leases/{lease_id}/jobs"),
            &tenant,
            json!({
                "template": "diffusion-dp", "model": { "preset": "sdxl" }, "workload": { "kind": "inference" },
                "env": { "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1" },
                "parameters": { "prompts": shared.join("drawings.jsonl"), "output": "/lease/home/images-out",
                            "diffusers_model": pipeline },
            }),
        )
        .await;
    let images_id = images["id"].as_str().unwrap().to_string();
    let done = wait_job(&api, &tenant, &images_id, "the images job ends", 240, |j| j["finished_at"].is_string()).await;
    let tails: Vec<&Value> = done["nodes"].as_array().unwrap().iter().map(|n| &n["output_tail"]).collect();
    assert_eq!(done["state"], "succeeded", "{}: {tails:#?}", done["reason"]);
    assert_eq!(done["progress"], json!({ "done": 6, "total": 6 }), "{done:#}");
    let mut drawn = Vec::new();
    for dir in &dirs {
        let jobs_dir = format!("{}-jobs", dir.display());
        let found = Command::new("find").arg(&jobs_dir).args(["-path", "*images-out/part-*.jsonl"]).output().unwrap();
        for part in String::from_utf8_lossy(&found.stdout).lines() {
            let out = std::path::Path::new(part).parent().unwrap();
            for line in std::fs::read_to_string(part).unwrap().lines() {
                let record: Value = serde_json::from_str(line).unwrap();
                let png = std::fs::read(out.join(record["image"].as_str().unwrap())).unwrap();
                assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{record}: a PNG");
                drawn.push(record["index"].as_i64().unwrap());
            }
        }
    }
    drawn.sort();
    assert_eq!(drawn, (0..6).collect::<Vec<i64>>(), "every prompt drawn once, across the two hosts");
    let (status, released) =
        api.call(reqwest::Method::POST, &format!("/v1/leases/{lease_id}/release"), &tenant, Some(json!({}))).await;
    assert!(status < 300, "{released}");
    wait_until("the lease's namespaces are removed", 60, || async {
        let listed = Command::new("ip").args(["netns", "list"]).output().unwrap();
        !String::from_utf8_lossy(&listed.stdout).lines().any(|l| l.contains(lease_id.as_str()))
    })
    .await;
    for agent in agents.iter_mut() {
        if let Some(mut agent) = agent.take() {
            let _ = Command::new("kill").args(["-TERM", &agent.id().to_string()]).status();
            let _ = agent.wait();
        }
    }
    terminate(&mut server);
    for dir in dirs {
        let _ = std::fs::remove_dir_all(format!("{}-jobs", dir.display()));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&shared);
}
