//! Jobs that survive a failure, end to end: three agent hosts (each in a network namespace of its own, one GPU
//! each, simulated), a lease of two of them, the runtime's example under real torchrun and gloo, checkpointing
//! every 3 steps to the lease's home. The hosts share their jobs directory (and job uids), as hosts would share a
//! network filesystem for checkpoints that outlive a node.
//!
//! 1. A host dies (its agent killed with SIGKILL; its processes die with it): the service finds the node lost
//!    after the offline limit, heals the lease with the spare host, and the job resumes there from its last
//!    checkpoint; the steps run again reproduce the lost run's losses, and every step is recorded once.
//! 2. The spare dies too, with no host left to replace it: the lease shrinks to the host left and the job goes on
//!    under a plan for one GPU.
//! 3. A rank stops (SIGSTOP): the stall is detected from outside, the job restarts; stopped again, the restart
//!    limit ends it with a clear reason.
//!
//! Before those, one failure two ways side by side (a rank's process killed): restarted by hand through the API
//! as a tenant can today (the job fails; it is posted again and resumes from its checkpoint), and by the service
//! under the restart policy. The recovery time of each (failure to the next step) is printed, split into its
//! parts: docs/benchmarks/recovery.md.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::agents::{Api, job_uids_for, start_agent, state_dir};
use crate::support::binary::{Proc, terminate};
use crate::support::jobs::wait_job;
use crate::support::torch::TorchSetUp;

const SEGMENT: u8 = 4;
const STEPS: i64 = 30;

fn job_body(script: &str, ckpt: &str, pins: Value, restart: Value, port: u16) -> Value {
    json!({
        "template": "gpuplane-runtime",
        "model": { "architecture": { "layers": 4, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn": 256, "vocab": 256 } },
        "workload": { "kind": "train", "precision": "bf16", "seq_len": 32, "global_batch": 8 },
        "pins": pins,
        "command": [script, "--steps", STEPS.to_string(), "--save-every", "3"],
        "env": { "GPUPLANE_PRECISION": "fp32", "GPUPLANE_CHECKPOINT_DIR": format!("/lease/home/{ckpt}") },
        "restart": restart,
        "master_port": port,
    })
}

/// step -> loss, as the job's record has them now.
async fn steps(api: &Api, token: &str, id: &str) -> Vec<(i64, f64)> {
    let page = api.get(&format!("/v1/jobs/{id}/steps?limit=1000"), token).await;
    page["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["step"].as_i64().unwrap(), s["loss"].as_f64().unwrap()))
        .collect()
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

fn why(job: &Value) -> String {
    let mut why = format!("job {}: {} ({})\n", job["id"], job["state"], job["reason"]);
    for g in job["generations"].as_array().into_iter().flatten() {
        why += &format!("generation {}: {} cause {} ({})\n", g["generation"], g["state"], g["cause"], g["reason"]);
    }
    format!("{why}output:\n{}", output(job))
}

/// The recovery time of restart `g` (an index into `generations`) from the service's records: failure ->
/// healed and planned (the generation's start) -> first step.
fn report_recovery(what: &str, job: &Value, g: usize) -> f64 {
    let at = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let generation = &job["generations"][g];
    let (failed, created, started, first) = (
        at(&generation["failed_at"]),
        at(&generation["created_at"]),
        at(&generation["started_at"]),
        at(&generation["first_step_at"]),
    );
    let s = |a: chrono::DateTime<chrono::FixedOffset>, b: chrono::DateTime<chrono::FixedOffset>| {
        (b - a).num_milliseconds() as f64 / 1000.0
    };
    let total = s(failed, first);
    eprintln!(
        "recovery e2e, {what}: failure -> detected {:.1} s; -> restarted on the lease's GPUs {:.1} s; -> first step \
         (start, rendezvous, checkpoint load, one step) {:.1} s; total {total:.1} s; resumed from step {}, {} steps lost",
        s(failed, created),
        s(created, started),
        s(started, first),
        generation["resumed_from_step"],
        generation["steps_lost"]
    );
    total
}

/// The pids of the job's ranks (their environment names the job and a local rank).
fn rank_pids(job_id: &str) -> Vec<u32> {
    let wanted = format!("GPUPLANE_JOB_ID={job_id}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()).map(|pid| (pid, e.path())))
        .filter(|(_, path)| {
            std::fs::read(path.join("environ")).is_ok_and(|env| {
                let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
                vars.contains(&wanted.as_bytes()) && vars.iter().any(|v| v.starts_with(b"LOCAL_RANK="))
            })
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// Once the job has measured `step` steps, kill one of its ranks (SIGKILL); when.
async fn kill_a_rank_after(api: &Api, token: &str, id: &str, step: i64) -> chrono::DateTime<chrono::Utc> {
    let running = wait_job(api, token, id, "steps before the kill", 300, |j| {
        j["measured"]["last_step"].as_i64().unwrap_or(0) >= step || j["finished_at"].is_string()
    })
    .await;
    assert!(running["finished_at"].is_null(), "{}", why(&running));
    let pids = rank_pids(id);
    assert!(!pids.is_empty(), "the ranks run");
    let _ = Command::new("kill").args(["-KILL", &pids[0].to_string()]).status();
    chrono::Utc::now()
}

/// When the job's first recorded step (of its lowest number) ended.
async fn first_step_at(api: &Api, token: &str, id: &str) -> chrono::DateTime<chrono::Utc> {
    let page = api.get(&format!("/v1/jobs/{id}/steps?limit=1"), token).await;
    serde_json::from_value(page["steps"][0]["at"].clone()).unwrap()
}

/// Cancel a job and wait until it has stopped.
async fn cancel(api: &Api, token: &str, id: &str) {
    let (status, body) = api.call(reqwest::Method::POST, &format!("/v1/jobs/{id}/cancel"), token, None).await;
    assert!(status < 300, "{status}: {body}");
    wait_job(api, token, id, "the cancelled job stops", 120, |j| j["finished_at"].is_string()).await;
}

#[sqlx::test]
async fn a_job_survives_a_lost_host_on_a_spare_then_shrunk_and_a_stalled_rank_until_its_limit(db: PgPool) {
    let env = [("GPUPLANE_UNREACHABLE_AFTER_SECS", "5"), ("GPUPLANE_OFFLINE_AFTER_SECS", "15")];
    let TorchSetUp { venv, python_root, example, script, net, mut server, base, api, op, path } =
        TorchSetUp::with_env(&db, SEGMENT, 3, &env).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "recovery", 3).await;

    let shared = state_dir("recovery-shared");
    let jobs_dir = shared.join("jobs");
    let uids = job_uids_for(&shared);
    let mut agents: Vec<Option<Proc>> = Vec::new();
    let mut dirs = vec![shared.clone()];
    for host in 0..3 {
        let dir = state_dir(&format!("recovery-h{host}"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplane"));
        cmd.args(["agent", "--server", &base, "--simulate", "h100:1", "--hostname", &format!("recovery-node-{host}")])
            .arg("--state-dir")
            .arg(&dir)
            .arg("--jobs-dir")
            .arg(&jobs_dir)
            .args(["--job-uids", &uids, "--join-token", &join, "--address", &net.address(host), "--insecure-http"])
            .args(["--job-ro-bind", &venv.display().to_string(), "--job-ro-bind", &python_root.display().to_string()])
            .env("RUST_LOG", "warn")
            .env("PATH", &path);
        let mut inside = net.on(host, &cmd);
        inside.stdout(Stdio::piped()).stderr(Stdio::inherit());
        agents.push(Some(start_agent(inside).0));
        dirs.push(dir);
    }
    let host_of = |job: &Value, rank: i64| -> usize {
        let node = job["nodes"].as_array().unwrap().iter().find(|n| n["node_rank"] == rank).unwrap();
        node["hostname"].as_str().unwrap().trim_start_matches("recovery-node-").parse().unwrap()
    };
    let kill_host = |agents: &mut Vec<Option<Proc>>, host: usize| {
        let mut agent = agents[host].take().unwrap();
        let _ = Command::new("kill").args(["-KILL", &agent.id().to_string()]).status();
        let _ = agent.wait();
    };
    let lease = api
        .post(
            "/v1/leases",
            &tenant,
            json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1, "placement": "pack" }),
        )
        .await;
    let lease_id = lease["id"].as_str().unwrap().to_string();
    let jobs = format!("/v1/leases/{lease_id}/jobs");
    let dp2 = json!({ "tp": 1, "dp": 2, "pp": 1, "micro_batch": 2 });

    // 0. One failure two ways, side by side: a rank's process killed (SIGKILL) at step 7 or later. By hand, as the
    // API allows without a restart policy: the job fails, and the tenant (this test, the moment it sees it) posts
    // it again, to resume from its checkpoint. With the policy: the service restarts it.
    let by_hand = {
        let body = job_body(&script, "ckpt-hand", dp2.clone(), json!({ "max_restarts": 0 }), 29740);
        let job = api.post(&jobs, &tenant, body).await;
        let id = job["id"].as_str().unwrap().to_string();
        let killed_at = kill_a_rank_after(&api, &tenant, &id, 7).await;
        let failed = wait_job(&api, &tenant, &id, "the job fails", 120, |j| j["finished_at"].is_string()).await;
        assert_eq!(failed["state"], "failed", "{}", why(&failed));
        let seen = chrono::Utc::now();
        let again = api
            .post(&jobs, &tenant, job_body(&script, "ckpt-hand", dp2.clone(), json!({ "max_restarts": 0 }), 29741))
            .await;
        let again_id = again["id"].as_str().unwrap().to_string();
        let resumed = wait_job(&api, &tenant, &again_id, "the job posted again steps", 300, |j| {
            j["measured"]["steps"].as_i64().unwrap_or(0) >= 1 || j["finished_at"].is_string()
        })
        .await;
        let first = steps(&api, &tenant, &again_id).await.first().map(|s| s.0).unwrap_or(0);
        assert!(first > 3, "resumed from the checkpoint: {}", why(&resumed));
        let first_at = first_step_at(&api, &tenant, &again_id).await;
        cancel(&api, &tenant, &again_id).await;
        let split = |a: chrono::DateTime<chrono::Utc>, b: chrono::DateTime<chrono::Utc>| {
            (b - a).num_milliseconds() as f64 / 1000.0
        };
        eprintln!(
            "recovery e2e, a killed rank, by hand: failure -> job failed {:.1} s; -> seen and posted again {:.1} s; \
             -> first step {:.1} s; total {:.1} s",
            split(killed_at, serde_json::from_value(failed["finished_at"].clone()).unwrap()),
            split(serde_json::from_value(failed["finished_at"].clone()).unwrap(), seen),
            split(seen, first_at),
            split(killed_at, first_at)
        );
        split(killed_at, first_at)
    };
    let automatic = {
        let body = job_body(&script, "ckpt-auto", dp2.clone(), json!({ "max_restarts": 1, "backoff_s": 0 }), 29750);
        let job = api.post(&jobs, &tenant, body).await;
        let id = job["id"].as_str().unwrap().to_string();
        let killed_at = kill_a_rank_after(&api, &tenant, &id, 7).await;
        let resumed = wait_job(&api, &tenant, &id, "the restart's first step", 300, |j| {
            j["generations"][1]["first_step_at"].is_string() || j["finished_at"].is_string()
        })
        .await;
        assert_eq!(resumed["generations"][1]["cause"], "process_died", "{}", why(&resumed));
        cancel(&api, &tenant, &id).await;
        let first_at: chrono::DateTime<chrono::Utc> =
            serde_json::from_value(resumed["generations"][1]["first_step_at"].clone()).unwrap();
        report_recovery("a killed rank, restarted by the service", &resumed, 1);
        (first_at - killed_at).num_milliseconds() as f64 / 1000.0
    };
    eprintln!(
        "recovery e2e, a killed rank: failure -> first step by hand {by_hand:.1} s, by the service {automatic:.1} s"
    );

    // 1. A host dies mid-run: the spare takes its place and the job resumes from its checkpoint there.
    let restart = json!({ "max_restarts": 2, "backoff_s": 0 });
    let job = api.post(&jobs, &tenant, job_body(&script, "ckpt-host", dp2.clone(), restart.clone(), 29710)).await;
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(job["restart"]["max_restarts"], 2, "{job:#}");
    let (kept, lost) = (host_of(&job, 0), host_of(&job, 1));
    let spare = (0..3).find(|h| *h != kept && *h != lost).unwrap();
    wait_job(&api, &tenant, &id, "seven steps", 300, |j| {
        j["measured"]["last_step"].as_i64().unwrap_or(0) >= 7 || j["finished_at"].is_string()
    })
    .await;
    let before = steps(&api, &tenant, &id).await;
    kill_host(&mut agents, lost);
    let done =
        wait_job(&api, &tenant, &id, "the job resumed on the spare ends", 400, |j| j["finished_at"].is_string()).await;
    assert_eq!(done["state"], "succeeded", "{}", why(&done));
    assert_eq!((done["generation"].clone(), done["restarts"].clone()), (json!(2), json!(1)), "{}", why(&done));
    let restarted = &done["generations"][1];
    assert_eq!(restarted["cause"], "node_lost", "{}", why(&done));
    let spare_node =
        done["nodes"].as_array().unwrap().iter().find(|n| n["hostname"] == format!("recovery-node-{spare}").as_str());
    assert!(spare_node.is_some(), "the spare runs rank 1: {}", why(&done));
    assert_eq!(restarted["healing"]["replacement_node_id"], spare_node.unwrap()["node_id"]);
    assert!(output(&done).contains("resumed from checkpoint"), "{}", why(&done));
    let resumed_from = restarted["resumed_from_step"].as_i64().unwrap();
    assert!(resumed_from >= 3 && resumed_from % 3 == 0, "from a checkpoint: {restarted:#}");
    let after = steps(&api, &tenant, &id).await;
    assert_eq!(after.iter().map(|s| s.0).collect::<Vec<_>>(), (1..=STEPS).collect::<Vec<_>>(), "each step once");
    for (step, loss) in before.iter().filter(|s| s.0 > resumed_from) {
        let again = after.iter().find(|s| s.0 == *step).unwrap().1;
        assert!((loss - again).abs() < 2e-3, "step {step} run again from the checkpoint: {again}, first {loss}");
    }
    let host_loss = report_recovery("a lost host replaced by the spare", &done, 1);
    assert!(host_loss < 240.0, "resumed within 240 s of the failure ({host_loss:.1} s)");
    // Billed: the lost host's GPU to its last heartbeat, the spare's from its join.
    let failed_at: chrono::DateTime<chrono::Utc> = serde_json::from_value(restarted["failed_at"].clone()).unwrap();
    let records: Vec<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>, i32)> = sqlx::query_as(
        "SELECT period_start, period_end, gpu_count FROM usage_records WHERE lease_id = $1::uuid ORDER BY period_start",
    )
    .bind(&lease_id)
    .fetch_all(&db)
    .await
    .unwrap();
    // (To the whole second of the metering grid.)
    let second = chrono::Duration::seconds(1);
    let at_failure = records
        .iter()
        .position(|r| r.1 <= failed_at && failed_at - r.1 < second)
        .unwrap_or_else(|| panic!("a period ends at the failure ({failed_at}): {records:?}"));
    assert_eq!(records[at_failure].2, 2, "both GPUs to the failure: {records:?}");
    let next = &records[at_failure + 1];
    assert_eq!((next.0, next.2), (records[at_failure].1, 1), "one GPU from it: {records:?}");

    // 2. The spare dies too, and no host is free: the lease shrinks to the host left, the plan to one GPU.
    let job = api.post(&jobs, &tenant, job_body(&script, "ckpt-shrink", dp2.clone(), restart.clone(), 29720)).await;
    let id = job["id"].as_str().unwrap().to_string();
    wait_job(&api, &tenant, &id, "seven steps", 300, |j| {
        j["measured"]["last_step"].as_i64().unwrap_or(0) >= 7 || j["finished_at"].is_string()
    })
    .await;
    kill_host(&mut agents, spare);
    let done = wait_job(&api, &tenant, &id, "the shrunk job ends", 400, |j| j["finished_at"].is_string()).await;
    assert_eq!(done["state"], "succeeded", "{}", why(&done));
    let shrunk = &done["generations"][1];
    assert_eq!((shrunk["cause"].clone(), shrunk["healing"]["gpus_after"].clone()), (json!("node_lost"), json!(1)));
    assert_eq!(done["plan"]["dp"], 1, "one GPU left: {:#}", done["plan"]);
    assert_eq!(done["nodes"].as_array().unwrap().len(), 1);
    let lease_now = api.get(&format!("/v1/leases/{lease_id}"), &tenant).await;
    assert_eq!((lease_now["state"].clone(), lease_now["gpu_count"].clone()), (json!("active"), json!(1)));
    assert_eq!(steps(&api, &tenant, &id).await.len() as i64, STEPS, "every step, once");
    report_recovery("a lost host, no spare: the plan shrunk", &done, 1);

    // 3. A stalled rank: detected past max(10 x the median step, 15 s), stopped and restarted; stopped again,
    // the restart limit (1) ends the job.
    let stall = json!({ "max_restarts": 1, "backoff_s": 0, "stall_factor": 10, "stall_min_s": 15 });
    let one = json!({ "tp": 1, "dp": 1, "pp": 1, "micro_batch": 2 });
    let job = api.post(&jobs, &tenant, job_body(&script, "ckpt-stall", one, stall, 29730)).await;
    let id = job["id"].as_str().unwrap().to_string();
    for round in 1..=2 {
        let want = 4 * round;
        let now = wait_job(&api, &tenant, &id, "steps before the stop", 300, |j| {
            j["generation"] == round && j["measured"]["last_step"].as_i64().unwrap_or(0) >= want
                || j["finished_at"].is_string()
        })
        .await;
        assert!(now["finished_at"].is_null(), "{}", why(&now));
        let pids = rank_pids(&id);
        assert_eq!(pids.len(), 1, "one rank");
        let _ = Command::new("kill").args(["-STOP", &pids[0].to_string()]).status();
        if round == 1 {
            let next = wait_job(&api, &tenant, &id, "the restart after the stall", 300, |j| {
                j["generation"] == 2 && j["generations"][1]["first_step_at"].is_string() || j["finished_at"].is_string()
            })
            .await;
            assert_eq!(next["generations"][1]["cause"], "stalled", "{}", why(&next));
            assert!(next["generations"][1]["reason"].as_str().unwrap().contains("stalled: no step for"));
            report_recovery("a stalled rank", &next, 1);
        }
    }
    let done = wait_job(&api, &tenant, &id, "the limit ends the job", 300, |j| j["finished_at"].is_string()).await;
    assert_eq!(done["state"], "failed", "{}", why(&done));
    let reason = done["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("the restart limit is reached (1 of 1 restarts)") && reason.contains("stalled"),
        "{reason}"
    );
    for _ in 0..60 {
        if rank_pids(&id).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(rank_pids(&id).is_empty(), "the stopped rank was killed");

    for mut agent in agents.into_iter().flatten() {
        let _ = Command::new("kill").args(["-TERM", &agent.id().to_string()]).status();
        let _ = agent.wait();
    }
    terminate(&mut server);
    for dir in dirs {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(Path::new(&example));
}
