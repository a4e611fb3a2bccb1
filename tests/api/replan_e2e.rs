//! A running job re-planned with real PyTorch across two agent hosts (each in a network namespace of its own, as
//! in `torch_e2e`): the runtime's example (a tiny Llama, fp32 on the CPU) starts at tp 2 x dp 2 and is moved
//! to dp 4 with ZeRO-3 through `POST /v1/jobs/{id}/replan`, and a second job is moved by retune `auto` from
//! what it measures. Asserted: the stop notice reached the ranks, which checkpointed at one step and exited;
//! the next generation resumed from that step on the same lease and GPUs; the step counter continues with no
//! step lost or run twice; each step's loss equals (within 2e-3) the loss an uninterrupted run of the same seed
//! reaches at that step.
//!
//! Checkpoints need one filesystem every node of the job shares: the two agents here share their jobs
//! directory (and their job uids), as hosts would share a network filesystem.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::agents::{Api, job_uids_for, start_agent, state_dir, wait_until};
use crate::support::binary::{Proc, terminate};
use crate::support::jobs::wait_job;
use crate::support::torch::TorchSetUp;

const SEGMENT: u8 = 2;
const STEPS: i64 = 24;

fn job_body(script: &str, pins: Value, extra: Value, port: u16) -> Value {
    let mut body = json!({
        "template": "gpuplane-runtime",
        "model": { "architecture": { "layers": 4, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 256, "vocab": 256 } },
        "workload": { "kind": "train", "precision": "bf16", "seq_len": 32, "global_batch": 8 },
        "pins": pins,
        "command": [script, "--steps", STEPS.to_string()],
        "env": { "GPUPLANE_PRECISION": "fp32" },
        "stop_grace_s": 120,
        "master_port": port,
    });
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    body
}

/// Every step the job reported, once it has all `STEPS`: step -> loss.
async fn all_steps(api: &Api, token: &str, id: &str) -> Vec<(i64, f64)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = api.get(&format!("/v1/jobs/{id}/steps?limit=1000"), token).await;
        let steps: Vec<(i64, f64)> = page["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["step"].as_i64().unwrap(), s["loss"].as_f64().unwrap()))
            .collect();
        if steps.len() as i64 >= STEPS {
            return steps;
        }
        assert!(Instant::now() < deadline, "{} of {STEPS} steps reported: {steps:?}", steps.len());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The replan's time and its parts, from the service's own records: the old generation's last step, its end
/// (notice, checkpoint, exit, reported), the new one's start (assignments fetched, processes up) and first step
/// (torch started, rendezvous, checkpoint loaded under the new plan, one step).
async fn report_replan_time(api: &Api, token: &str, id: &str, job: &Value) {
    let at = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let page = api.get(&format!("/v1/jobs/{id}/steps?limit=1000"), token).await;
    let steps = page["steps"].as_array().unwrap();
    let old = &job["generations"][0];
    let new = &job["generations"][1];
    let asked = at(&new["created_at"]);
    let ended = at(&old["ended_at"]);
    let last_step = steps.iter().map(|s| at(&s["at"])).filter(|t| *t <= asked).max().unwrap();
    let first_new = steps.iter().map(|s| at(&s["at"])).filter(|t| *t > ended).min().unwrap();
    let ms =
        |a: chrono::DateTime<chrono::FixedOffset>, b: chrono::DateTime<chrono::FixedOffset>| (b - a).num_milliseconds();
    eprintln!(
        "replan e2e: asked -> old generation ended {} ms (notice, checkpoint, exit, report); -> new generation's first step {} ms (start, rendezvous, load under the new plan, one step); total {} ms; the last step before the ask ended {} ms before it",
        ms(asked, ended),
        ms(ended, first_new),
        ms(asked, first_new),
        ms(last_step, asked)
    );
}

/// Every step once, in order, each with the uninterrupted run's loss (fp32: within 2e-3).
fn assert_same_training(steps: &[(i64, f64)], expected: &[(i64, f64)], after: &str) {
    let numbers: Vec<i64> = steps.iter().map(|s| s.0).collect();
    assert_eq!(numbers, (1..=STEPS).collect::<Vec<_>>(), "no step lost or run twice after {after}");
    for ((step, loss), (_, want)) in steps.iter().zip(expected) {
        assert!((loss - want).abs() < 2e-3, "step {step}: {loss} after {after}, {want} uninterrupted");
    }
}

/// The job succeeded; else a failure message that leads with why (the job's and each part's reason, each
/// generation's state and reason, the output tails), ahead of the whole job.
fn assert_succeeded(job: &Value) {
    if job["state"] == "succeeded" {
        return;
    }
    let mut why = format!("job {}: {} ({})\n", job["id"], job["state"], job["reason"]);
    for g in job["generations"].as_array().into_iter().flatten() {
        why += &format!("generation {}: {} ({})\n", g["generation"], g["state"], g["reason"]);
    }
    for n in job["nodes"].as_array().into_iter().flatten() {
        why += &format!("part on {}: {} ({}), exit {}\n", n["hostname"], n["state"], n["reason"], n["exit_code"]);
    }
    panic!("{why}output:\n{}\n\nthe job: {job:#}", output(job));
}

fn output(job: &Value) -> String {
    job["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["output_tail"].as_array().unwrap().iter().filter_map(Value::as_str).map(str::to_owned))
        .collect::<Vec<_>>()
        .join("\n")
}

#[sqlx::test]
async fn a_running_job_is_replanned_by_the_api_and_by_retune_and_resumes_the_same_training(db: PgPool) {
    let TorchSetUp { venv, python_root, example, script, net, mut server, base, api, op, path } =
        TorchSetUp::new(&db, SEGMENT, 2).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "replan", 2).await;

    // Two hosts sharing one jobs directory (the lease's home, where checkpoints go) and one uid range.
    let shared = state_dir("replan-shared");
    let jobs_dir = shared.join("jobs");
    let uids = job_uids_for(&shared);
    let mut agents: Vec<Proc> = Vec::new();
    let mut dirs = vec![shared.clone()];
    for host in 0..2 {
        let dir = state_dir(&format!("replan-h{host}"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplane"));
        cmd.args(["agent", "--server", &base, "--simulate", "h100:2", "--hostname", &format!("replan-node-{host}")])
            .arg("--state-dir")
            .arg(&dir)
            .arg("--jobs-dir")
            .arg(&jobs_dir)
            .args(["--job-uids", &uids, "--join-token", &join, "--address", &net.address(host), "--insecure-http"])
            .args(["--job-ro-bind", &venv.display().to_string(), "--job-ro-bind", &python_root.display().to_string()])
            .env("RUST_LOG", "warn")
            .env("PATH", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
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
    let jobs = format!("/v1/leases/{lease_id}/jobs");
    let tp2_dp2 = json!({ "tp": 2, "dp": 2, "pp": 1, "micro_batch": 2 });

    // The reference: the same seed uninterrupted.
    let reference = api.post(&jobs, &tenant, job_body(&script, tp2_dp2.clone(), json!({}), 29700)).await;
    let reference_id = reference["id"].as_str().unwrap().to_string();
    let done = wait_job(&api, &tenant, &reference_id, "the reference run", 300, |j| j["finished_at"].is_string()).await;
    assert_succeeded(&done);
    let expected = all_steps(&api, &tenant, &reference_id).await;

    // 1. Through the API, once the job has measured a few steps.
    let job = api.post(&jobs, &tenant, job_body(&script, tp2_dp2.clone(), json!({}), 29701)).await;
    let id = job["id"].as_str().unwrap().to_string();
    wait_job(&api, &tenant, &id, "a few steps", 300, |j| {
        j["measured"]["last_step"].as_i64().unwrap_or(0) >= 3 || j["finished_at"].is_string()
    })
    .await;
    let asked = Instant::now();
    let (status, accepted) = api
        .call(
            reqwest::Method::POST,
            &format!("/v1/jobs/{id}/replan"),
            &tenant,
            Some(json!({ "pins": { "dp": 4, "tp": 1, "pp": 1, "zero_stage": 3, "micro_batch": 1 } })),
        )
        .await;
    assert_eq!(status, 202, "{accepted:#}");
    let replanned = wait_job(&api, &tenant, &id, "generation 2 running", 300, |j| {
        j["generation"] == 2 && j["nodes"].as_array().unwrap().iter().all(|n| n["state"] == "running")
            || j["finished_at"].is_string()
    })
    .await;
    eprintln!("replan e2e: replan asked -> generation 2 running: {:.1} s", asked.elapsed().as_secs_f64());
    assert_eq!(replanned["generation"], 2, "{replanned:#}");
    let ended = &replanned["generations"][0];
    assert_eq!(ended["state"], "ended");
    let stopped_at = ended["measured"]["last_step"].as_i64().unwrap();
    assert!((3..STEPS).contains(&stopped_at), "{ended:#}");
    let done = wait_job(&api, &tenant, &id, "the replanned job ends", 300, |j| j["finished_at"].is_string()).await;
    assert_succeeded(&done);
    assert_eq!((done["plan"]["dp"].clone(), done["plan"]["zero_stage"].clone()), (json!(4), json!(3)));
    assert!(output(&done).contains("resumed from checkpoint"), "{}", output(&done));
    assert_same_training(&all_steps(&api, &tenant, &id).await, &expected, "the replan");
    report_replan_time(&api, &tenant, &id, &done).await;

    // 2. retune auto: the measured steps, far slower than the plan's H100 prediction, make the corrected
    // planner prefer another split by more than 10%: the service replans by itself.
    let job = api
        .post(
            &jobs,
            &tenant,
            job_body(&script, tp2_dp2.clone(), json!({ "retune": { "mode": "auto", "min_gain_pct": 10 } }), 29702),
        )
        .await;
    let id = job["id"].as_str().unwrap().to_string();
    let done = wait_job(&api, &tenant, &id, "the retuned job ends", 400, |j| j["finished_at"].is_string()).await;
    assert_succeeded(&done);
    assert_eq!(done["generation"], 2, "retuned once: {:#}", done["generations"]);
    let auto = &done["generations"][1];
    assert!(auto["reason"].as_str().unwrap().starts_with("retune auto: measured"), "{auto:#}");
    assert!(auto["correction"]["gain_pct"].as_f64().unwrap() >= 10.0, "{auto:#}");
    let split = |p: &Value| (p["tp"].clone(), p["pp"].clone(), p["dp"].clone(), p["micro_batch"].clone());
    assert_ne!(split(&done["plan"]), split(&done["generations"][0]["plan"]), "another split: {:#}", done["plan"]);
    assert_same_training(&all_steps(&api, &tenant, &id).await, &expected, "the retune");

    // Through every replan the lease kept its GPUs and stayed active, and its bill ran on without a gap: each
    // metered period starts where the one before it ended.
    let now = api.get(&format!("/v1/leases/{lease_id}"), &tenant).await;
    assert_eq!((now["state"].clone(), now["gpus"].clone()), (json!("active"), lease["gpus"].clone()), "{now:#}");
    let events = api.get(&format!("/v1/leases/{lease_id}/events"), &tenant).await;
    // Its only change of state is the allocation (other events, such as latency alerts between the hosts of a
    // loaded machine, change nothing).
    let transitions: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["from_state"] != e["to_state"])
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(transitions, ["allocated"], "no end or new allocation between the plans: {events:#}");
    let periods: Vec<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>, i64)> = sqlx::query_as(
        "SELECT period_start, period_end, gpu_seconds FROM usage_records WHERE lease_id = $1::uuid ORDER BY period_start",
    )
    .bind(&lease_id)
    .fetch_all(&db)
    .await
    .unwrap();
    assert!(!periods.is_empty(), "metered while the jobs ran");
    let starts_at: chrono::DateTime<chrono::Utc> = serde_json::from_value(now["starts_at"].clone()).unwrap();
    assert_eq!(periods[0].0, starts_at, "metered from the lease's start");
    for pair in periods.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "contiguous periods: {periods:?}");
    }
    let seconds: i64 = periods.iter().map(|p| p.2).sum();
    assert_eq!(seconds, 4 * (periods.last().unwrap().1 - starts_at).num_seconds(), "4 GPUs, every second");

    // The lease ends on its hosts (their namespaces removed) before the hosts stop: an agent stopped while a lease
    // runs leaves that lease's namespace to its own next start.
    api.post(&format!("/v1/leases/{lease_id}/release"), &tenant, json!({})).await;
    wait_until("the lease's namespaces are removed", 60, || async {
        let listed = Command::new("ip").args(["netns", "list"]).output().unwrap();
        !String::from_utf8_lossy(&listed.stdout).lines().any(|l| l.contains(lease_id.as_str()))
    })
    .await;
    for mut agent in agents {
        let _ = Command::new("kill").args(["-TERM", &agent.id().to_string()]).status();
        let _ = agent.wait();
    }
    terminate(&mut server);
    for dir in dirs {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(Path::new(&example));
}
