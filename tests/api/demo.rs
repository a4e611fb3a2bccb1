//! `gpuplane demo` end to end: the real binary, its own `gpuplane_demo` database, and real agent processes.
//! Not `#[sqlx::test]`: the demo owns (drops and recreates) its database.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::binary::{Proc, terminate};

/// The demo database on the test's PostgreSQL server: DATABASE_URL names the server, the demo names the database.
fn demo_database_url() -> String {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let (url, query) = base.split_once('?').map_or((base.as_str(), None), |(u, q)| (u, Some(q)));
    let server = url.rsplit_once('/').map_or(url, |(server, _)| server);
    match query {
        Some(query) => format!("{server}/gpuplane_demo?{query}"),
        None => format!("{server}/gpuplane_demo"),
    }
}

/// Live processes whose parent is `pid` (from /proc).
fn children_of(pid: u32) -> Vec<u32> {
    let parent = pid.to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // After the command name: state, then the parent's pid.
            stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1).map(|p| p == parent))
                == Some(true)
        })
        .collect()
}

fn is_running_agent(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    cmdline.split(|b| *b == 0).any(|arg| arg == b"agent")
}

/// The demo process; on drop (a failing test) its agents are killed too, since killing the demo alone would
/// orphan them.
struct Demo(Proc);

impl Drop for Demo {
    fn drop(&mut self) {
        for pid in children_of(self.0.id()) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
}

#[tokio::test]
async fn the_demo_serves_four_pools_of_simulated_nodes_and_stops_cleanly() {
    // The runtime's environment (installed once per machine): the demo's hosts run a real planned job with it.
    let (venv, _) = crate::support::torch::runtime_venv();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplane"));
    cmd.args(["demo", "--bind", "127.0.0.1:0", "--database-url", &demo_database_url()])
        .env("GPUPLANE_RUNTIME_VENV", &venv)
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut demo = Demo(Proc(cmd.spawn().expect("spawn gpuplane demo")));
    let stdout = demo.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });

    // The welcome, up to its last line.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut welcome = Vec::new();
    let base = loop {
        let line = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).unwrap_or_else(|err| {
            panic!("no ready line ({err}); the demo printed:\n{}", welcome.join("\n"));
        });
        if let Some(url) = line.strip_prefix("gpuplane demo ready on ") {
            break url.to_owned();
        }
        welcome.push(line);
    };
    let text = welcome.join("\n");
    let tenant_key = welcome.iter().find_map(|l| l.strip_prefix("TENANT_KEY=")).expect("the tenant key").to_owned();
    assert!(tenant_key.starts_with("gpk_"), "{text}");
    assert!(welcome.iter().any(|l| l.contains("operator key") && l.contains("gpk_")), "{text}");
    assert!(text.contains(&format!("{base}/docs")) && text.contains("curl -s $API/v1/pools"), "{text}");
    // The console is in the banner, and is there.
    let console_line = welcome.iter().find(|l| l.trim_start().starts_with("console")).expect("a console line");
    assert!(console_line.contains(&format!("{base}/")), "{text}");
    let page = reqwest::get(format!("{base}/")).await.unwrap();
    assert!(page.status().is_success());
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));

    // As the demo tenant: four pools, every node registered and ready.
    let client = reqwest::Client::new();
    let token: Value = client
        .post(format!("{base}/v1/auth/token"))
        .json(&json!({ "api_key": tenant_key }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = token["access_token"].as_str().expect("an access token").to_owned();
    let ready_by = Instant::now() + Duration::from_secs(20);
    let pools = loop {
        let pools: Value =
            client.get(format!("{base}/v1/pools")).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
        let all_ready = pools.as_array().unwrap().iter().all(|p| p["free_gpus"] == p["total_gpus"]);
        if all_ready || Instant::now() > ready_by {
            break pools;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut shape: Vec<(String, i64, i64)> = pools
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let key = p["gpu_model"]["key"].as_str().unwrap().to_owned();
            (key, p["total_gpus"].as_i64().unwrap(), p["free_gpus"].as_i64().unwrap())
        })
        .collect();
    shape.sort();
    let expected = [("a10", 4, 4), ("a100-80g", 16, 16), ("b200", 8, 8), ("rtx4090", 16, 16)];
    assert_eq!(shape, expected.map(|(k, t, f)| (k.to_owned(), t, f)), "{pools}");

    // The welcome's lease example works: one whole A100 node.
    let a100 = pools.as_array().unwrap().iter().find(|p| p["gpu_model"]["key"] == "a100-80g").unwrap()["id"].clone();
    let lease = client
        .post(format!("{base}/v1/leases"))
        .bearer_auth(&token)
        .json(&json!({ "pool_id": a100, "gpu_count": 8, "duration_hours": 1, "placement": "single_node" }))
        .send()
        .await
        .unwrap();
    assert_eq!(lease.status(), 201, "{}", lease.text().await.unwrap());

    // docs/runtime.md's job on the demo, run as written (its first sh block after "## 3b"), beside the welcome's
    // own planned job below: a small Llama planned for a 2-GPU lease, trained by the runtime.
    let example = welcome.iter().find_map(|l| l.strip_prefix("EXAMPLE=")).expect("the shared example").to_owned();
    let example = example.split_whitespace().next().unwrap().to_owned();
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/runtime.md")).unwrap();
    let section = &doc[doc.find("## 3b").expect("runtime.md's section 3b")..];
    let block = section.split("```sh\n").nth(1).unwrap().split("```").next().unwrap().to_owned();
    let runtime_md = {
        let script = format!("API={base}\nTENANT_KEY={tenant_key}\nEXAMPLE={example}\n{block}");
        std::thread::spawn(move || Command::new("bash").args(["-euc", &script]).output().unwrap())
    };
    let step7: Vec<&str> = welcome
        .iter()
        .skip_while(|l| !l.starts_with("# 7."))
        .take_while(|l| !l.starts_with("Stop with"))
        .map(String::as_str)
        .collect();
    assert!(step7.iter().any(|l| l.starts_with("JOB=")), "{text}");
    let script =
        format!("API={base}\nTOKEN={token}\nEXAMPLE={example}\n{}\necho\necho \"JOB_ID=$JOB\"\n", step7.join("\n"));
    let ran = Command::new("bash").args(["-euc", &script]).output().unwrap();
    let out = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "{out}{}", String::from_utf8_lossy(&ran.stderr));
    let job_id = out.lines().find_map(|l| l.strip_prefix("JOB_ID=")).unwrap_or_else(|| panic!("{out}")).to_owned();
    let done_by = Instant::now() + Duration::from_secs(300);
    let job = loop {
        let job: Value = client
            .get(format!("{base}/v1/jobs/{job_id}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if job["finished_at"].is_string() {
            break job;
        }
        assert!(Instant::now() < done_by, "the demo's job did not finish in 300 s: {job:#}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(job["template"], "gpuplane-runtime", "{job:#}");
    assert_eq!(job["measured"]["last_step"], 20, "{job:#}");
    assert!(job["plan"]["summary"].as_str().unwrap().contains("2 GeForce RTX 4090 GPUs"), "{job:#}");
    let ran = runtime_md.join().unwrap();
    let said = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "runtime.md's block: {said}{}", String::from_utf8_lossy(&ran.stderr));
    assert!(said.contains("succeeded 2 GeForce RTX 4090 GPUs"), "runtime.md's block: {said}");
    assert!(said.lines().any(|l| l == "20"), "20 steps in the API: {said}");

    // SIGTERM: the agents stop, then the demo, which exits 0 and leaves no agent or state directory behind.
    let demo_pid = demo.0.id();
    let agents = children_of(demo_pid);
    assert_eq!(agents.len(), 6, "one agent process per node: {agents:?}");
    assert!(agents.iter().all(|pid| is_running_agent(*pid)), "{agents:?}");
    let status = terminate(&mut demo.0);
    assert!(status.success(), "the demo exits 0 on SIGTERM: {status}");
    let left: Vec<u32> = agents.into_iter().filter(|pid| is_running_agent(*pid)).collect();
    assert!(left.is_empty(), "agents still running after the demo stopped: {left:?}");
    let prefix = format!("gpuplane-demo-{demo_pid}-");
    let dirs: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(&prefix))
        .collect();
    assert!(dirs.is_empty(), "agent state directories (or the shared example) left behind: {dirs:?}");
}
