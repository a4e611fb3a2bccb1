//! End to end: jobs on a 2-node lease run by real `gpuplane agent` processes (simulated GPUs) against the real
//! server: the rendered environment reaches every process, cancel stops every process, an agent restart does not
//! run a job twice, and an injected template never reaches a process.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::agents::HEARTBEAT_1S;
use crate::support::agents::{Api, spawn_agent, state_dir, wait_until};
use crate::support::binary::{database_url, spawn_server, terminate};
use crate::support::jobs::{job, pids_with_argv, wait_job};

/// Processes whose argv is exactly `argv` (read from /proc).
fn processes_with_argv(argv: &[&str]) -> usize {
    pids_with_argv(argv).len()
}

fn node_states(job: &Value) -> Vec<String> {
    job["nodes"].as_array().unwrap().iter().map(|n| n["state"].as_str().unwrap().to_string()).collect()
}

#[sqlx::test]
async fn jobs_run_on_real_agents_cancel_and_survive_an_agent_restart(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base) = spawn_server(&database_url(&db), HEARTBEAT_1S);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "jobs", 2).await;

    // Two hosts of four simulated H100s each.
    let dir_a = state_dir("jobs-a");
    let dir_b = state_dir("jobs-b");
    // Both on this machine's loopback (so their latency probes are answered: nodes that cannot reach each other
    // get no multi-node job), each with a lease subnet of its own, as two hosts have.
    let host_a = ["--address", "127.0.0.1", "--lease-subnet", "100.64.1.0/24"];
    let host_b = ["--address", "127.0.0.1", "--lease-subnet", "100.64.2.0/24"];
    let (mut agent_a, _) = spawn_agent(&base, Some(&join), "jobs-node-a", &dir_a, &host_a);
    let (mut agent_b, _) = spawn_agent(&base, Some(&join), "jobs-node-b", &dir_b, &host_b);
    let lease = api.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 8, "duration_hours": 1 })).await;
    let lease_id = lease["id"].as_str().unwrap().to_string();
    let mut leased: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for g in lease["gpus"].as_array().unwrap() {
        leased.entry(g["node_id"].as_str().unwrap().to_string()).or_default().push(g["index"].as_i64().unwrap());
    }
    assert_eq!(leased.len(), 2, "the lease spans both nodes: {lease}");
    let jobs_path = format!("/v1/leases/{lease_id}/jobs");

    // 1. A job that prints its environment (no shell: /usr/bin/env is the program).
    api.post("/v1/admin/templates", &op, json!({ "name": "envdump", "argv": ["/usr/bin/env"] })).await;
    let created =
        api.post(&jobs_path, &tenant, json!({ "template": "envdump", "env": { "GREETING": "hello world" } })).await;
    let job_id = created["id"].as_str().unwrap().to_string();
    let done = wait_job(&api, &tenant, &job_id, "env job succeeded", 60, |j| j["state"] == "succeeded").await;
    let mut ranks = Vec::new();
    let mut masters = Vec::new();
    for node in done["nodes"].as_array().unwrap() {
        assert_eq!(node["state"], "succeeded");
        assert_eq!(node["exit_code"], 0);
        let env: BTreeMap<String, String> = node["output_tail"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l.as_str().unwrap().split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        assert_eq!(env["WORLD_SIZE"], "8", "{env:?}");
        assert_eq!(env["NNODES"], "2");
        assert_eq!(env["NPROC_PER_NODE"], "4");
        assert_eq!(env["GREETING"], "hello world");
        assert_eq!(env["NODE_RANK"], node["node_rank"].to_string());
        let mut indices = leased[node["node_id"].as_str().unwrap()].clone();
        indices.sort();
        let expected: Vec<String> = indices.iter().map(|i| i.to_string()).collect();
        assert_eq!(env["GPUPLANE_HOST_GPUS"], expected.join(","), "its own leased GPUs");
        // The sandbox holds only those devices, and CUDA numbers what it can open from 0.
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
        assert_eq!(env["HOME"], "/lease/home");
        assert!(env.contains_key("PATH"));
        assert!(
            !env.contains_key("RUST_LOG") && !env.contains_key("GPUPLANE_SERVER"),
            "the agent's env is not passed on"
        );
        ranks.push(env["NODE_RANK"].clone());
        masters.push((env["MASTER_ADDR"].clone(), env["MASTER_PORT"].clone()));
    }
    ranks.sort();
    assert_eq!(ranks, ["0", "1"]);
    assert_eq!(masters[0], masters[1], "one rendezvous for all nodes");
    assert_eq!(masters[0].0, done["nodes"][0]["spec"]["env"]["MASTER_ADDR"].as_str().unwrap());
    // The lease's own address on the first node (its namespace there), from that node's lease subnet.
    assert!(masters[0].0.starts_with("100.64.1.") || masters[0].0.starts_with("100.64.2."), "{masters:?}");

    // 2. An injected value is refused when the template is created, so no job can run it.
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/v1/admin/templates",
            &op,
            Some(json!({ "name": "injected", "argv": ["/bin/echo", "{msg}"],
                "parameters": [{"name": "msg", "type": "string", "default": "hi; rm -rf /"}] })),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (422, Some("validation_failed")), "{body}");
    let (status, _) =
        api.call(reqwest::Method::POST, &jobs_path, &tenant, Some(json!({ "template": "injected" }))).await;
    assert_eq!(status, 422);
    // And a value supplied at job time is checked the same way.
    api.post(
        "/v1/admin/templates",
        &op,
        json!({ "name": "sleeper", "argv": ["/bin/sleep", "{secs}"], "parameters": [{"name": "secs", "type": "string", "default": "601"}] }),
    )
    .await;
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            &jobs_path,
            &tenant,
            Some(json!({ "template": "sleeper", "parameters": { "secs": "1; rm -rf /" } })),
        )
        .await;
    assert_eq!((status, body["errors"][0]["field"].as_str()), (422, Some("parameters.secs")), "{body}");
    assert_eq!(api.get(&jobs_path, &tenant).await["items"].as_array().unwrap().len(), 1, "only the env job exists");

    // 3. Cancel stops the process on every node.
    let sleeping = ["/bin/sleep", "601"];
    let created = api.post(&jobs_path, &tenant, json!({ "template": "sleeper" })).await;
    let job_id = created["id"].as_str().unwrap().to_string();
    wait_job(&api, &tenant, &job_id, "both nodes running", 30, |j| node_states(j) == ["running", "running"]).await;
    wait_until("two sleep processes", 10, || async { processes_with_argv(&sleeping) == 2 }).await;
    let asked = Instant::now();
    api.post(&format!("/v1/jobs/{job_id}/cancel"), &tenant, json!({})).await;
    let cancelled = wait_job(&api, &tenant, &job_id, "job cancelled", 15, |j| j["state"] == "cancelled").await;
    assert!(asked.elapsed() < Duration::from_secs(10), "cancelled within seconds: {:?}", asked.elapsed());
    assert_eq!(node_states(&cancelled), ["cancelled", "cancelled"]);
    wait_until("no sleep process left", 10, || async { processes_with_argv(&sleeping) == 0 }).await;

    // 4. An agent restart does not run the job again: the job is reported failed, its process is gone.
    let sleeping = ["/bin/sleep", "602"];
    let created =
        api.post(&jobs_path, &tenant, json!({ "template": "sleeper", "parameters": { "secs": "602" } })).await;
    let job_id = created["id"].as_str().unwrap().to_string();
    let running =
        wait_job(&api, &tenant, &job_id, "both nodes running", 30, |j| node_states(j) == ["running", "running"]).await;
    wait_until("two sleep processes", 10, || async { processes_with_argv(&sleeping) == 2 }).await;
    let node_a_rank = running["nodes"].as_array().unwrap().iter().position(|n| n["hostname"] == "jobs-node-a").unwrap();
    agent_a.kill().unwrap();
    agent_a.wait().unwrap();
    let (restarted, line) = spawn_agent(&base, None, "jobs-node-a", &dir_a, &host_a);
    agent_a = restarted;
    assert!(line.contains("attached"), "{line}");
    let failed = wait_job(&api, &tenant, &job_id, "job failed after the restart", 30, |j| {
        j["state"] == "failed" && node_states(j).iter().all(|s| s != "running")
    })
    .await;
    let node_a = &failed["nodes"][node_a_rank];
    assert_eq!(node_a["state"], "failed");
    assert_eq!(node_a["reason"], "agent restarted");
    let history: Vec<&str> =
        node_a["history"].as_array().unwrap().iter().map(|h| h["state"].as_str().unwrap()).collect();
    assert_eq!(history, ["pending", "assigned", "running", "failed"], "started once, never again");
    assert!(failed["reason"].as_str().unwrap().contains("agent restarted"), "{failed}");
    wait_until("no sleep process left after the restart", 15, || async { processes_with_argv(&sleeping) == 0 }).await;
    // A few more heartbeats: still nothing started.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(processes_with_argv(&sleeping), 0);
    let again = job(&api, &tenant, &job_id).await;
    assert_eq!(again["nodes"][node_a_rank]["history"].as_array().unwrap().len(), 4);

    // 5. A failed job's reason is the first error its ranks printed, though the kept tail has scrolled past it.
    let script = crate::support::net::shared_with_jobs("first-error", &[("fail.py", FAILING_SCRIPT)]);
    api.post("/v1/admin/templates", &op, json!({ "name": "runner", "argv": ["{command}"] })).await;
    let command = ["/usr/bin/python3".to_string(), script.join("fail.py").display().to_string()];
    let created = api.post(&jobs_path, &tenant, json!({ "template": "runner", "command": command })).await;
    let job_id = created["id"].as_str().unwrap().to_string();
    let failed = wait_job(&api, &tenant, &job_id, "the failing job ends", 60, |j| {
        j["state"] == "failed" && node_states(j).iter().all(|s| s != "running")
    })
    .await;
    let reason = failed["reason"].as_str().unwrap();
    assert!(reason.ends_with("exit code 3: ValueError: the batch has 3 rows, the plan wants 8"), "{reason}");
    let tail = failed["nodes"][0]["output_tail"].as_array().unwrap();
    assert!(tail.iter().all(|l| !l.as_str().unwrap().contains("ValueError")), "the tail lost it: {tail:?}");
    let _ = std::fs::remove_dir_all(&script);

    // 6. A working directory uploaded with the job: both nodes start in a copy of it, owned by the lease's user.
    let archive = crate::uploads::archive(&[
        ("job.sh", 'f', "cat data/input.txt; echo uid=$(id -u) owner=$(stat -c %u job.sh data/input.txt | sort -u)\n"),
        ("data/", 'd', ""),
        ("data/input.txt", 'f', "input: 42\n"),
    ]);
    let uploaded: Value = api
        .client
        .post(format!("{base}/v1/uploads"))
        .bearer_auth(&tenant)
        .header("content-type", "application/octet-stream")
        .body(archive)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let workdir = uploaded["digest"].as_str().unwrap();
    let command = ["/bin/sh", "job.sh"];
    let created =
        api.post(&jobs_path, &tenant, json!({ "template": "runner", "command": command, "workdir": workdir })).await;
    let job_id = created["id"].as_str().unwrap().to_string();
    let done = wait_job(&api, &tenant, &job_id, "the job in its uploaded directory ends", 60, |j| {
        ["succeeded", "failed"].contains(&j["state"].as_str().unwrap_or(""))
    })
    .await;
    assert_eq!(done["state"], "succeeded", "{done:#}");
    for node in done["nodes"].as_array().unwrap() {
        let tail: Vec<&str> = node["output_tail"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(tail.first(), Some(&"input: 42"), "{tail:?}");
        let (uid, owner) = tail[1].split_once(' ').unwrap();
        assert_eq!(uid.strip_prefix("uid="), owner.strip_prefix("owner="), "the files are the lease user's: {tail:?}");
        assert_ne!(uid, "uid=0", "the job runs as the lease's user");
    }

    for agent in [&mut agent_a, &mut agent_b] {
        let _ = std::process::Command::new("kill").args(["-TERM", &agent.id().to_string()]).status();
        assert!(agent.wait().unwrap().success(), "the agent stops cleanly on SIGTERM");
    }
    assert!(terminate(&mut server).success());
    let _ = std::fs::remove_dir_all(dir_a);
    let _ = std::fs::remove_dir_all(dir_b);
}

/// Fails as a training script does: a traceback, then more output than the service keeps, then an exit code.
const FAILING_SCRIPT: &str = r#"
import sys, traceback
print("loading the data", flush=True)
try:
    raise ValueError("the batch has 3 rows, the plan wants 8")
except ValueError:
    traceback.print_exc()
for i in range(80):
    print(f"shutting down {i}: RuntimeWarning, see above", file=sys.stderr)
sys.exit(3)
"#;

/// Steps reach the API about a second after they end, not with the next scheduled heartbeat: with heartbeats
/// every 15 s, each of three steps 5 s apart is seen within 4 s of its end (a 15 s schedule could bring at most
/// one of them that soon). The job is a stand-in that writes the runtime's step lines: the test is about the
/// agent's shipping, not the runtime.
#[sqlx::test]
async fn steps_reach_the_api_a_second_after_they_end_not_with_the_heartbeat(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base) = spawn_server(&database_url(&db), &[("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "15")]);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, "steps", 1).await;
    api.post("/v1/admin/templates", &op, json!({ "name": "run", "argv": ["{command}"] })).await;
    let dir = state_dir("steps-a");
    let (mut agent, _) = spawn_agent(&base, Some(&join), "steps-node", &dir, &["--address", "10.77.3.1"]);
    let lease = api.post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 4, "duration_hours": 1 })).await;
    let writer = "import json, time\n\
                  for step in (1, 2, 3):\n\
                  \x20   time.sleep(5)\n\
                  \x20   line = dict(step=step, step_time_s=5.0, tokens=4096, loss=2.0, peak_memory_bytes=1, time=time.time())\n\
                  \x20   with open('gpuplane_steps.jsonl', 'a') as f:\n\
                  \x20       f.write(json.dumps(line) + '\\n')\n\
                  time.sleep(600)\n";
    let scripts = crate::support::net::shared_with_jobs("steps", &[("steps.py", writer)]);
    let script = scripts.join("steps.py").display().to_string();
    let job = api
        .post(
            &format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap()),
            &tenant,
            json!({ "template": "run", "command": ["/usr/bin/python3", script] }),
        )
        .await;
    let steps_path = format!("/v1/jobs/{}/steps", job["id"].as_str().unwrap());
    let mut seen_after: Vec<f64> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while seen_after.len() < 3 {
        assert!(Instant::now() < deadline, "steps seen so far: {seen_after:?}");
        let page = api.get(&steps_path, &tenant).await;
        let now = chrono::Utc::now();
        for step in page["steps"].as_array().unwrap().iter().skip(seen_after.len()) {
            let ended = chrono::DateTime::parse_from_rfc3339(step["at"].as_str().unwrap()).unwrap();
            seen_after.push((now - ended.with_timezone(&chrono::Utc)).as_seconds_f64());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(seen_after.iter().all(|lag| *lag < 4.0), "seconds from each step's end to the API: {seen_after:?}");
    api.post(&format!("/v1/jobs/{}/cancel", job["id"].as_str().unwrap()), &tenant, json!({})).await;
    let _ = agent.kill();
    terminate(&mut server);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&scripts);
}
