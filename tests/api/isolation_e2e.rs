//! End to end, as an attacker would try it: two tenants share one host (tenant A leases GPUs 0-1, tenant B GPUs
//! 2-3 of a real `gpuplane agent` on simulated GPUs), and A's jobs try to reach the agent, B's processes, B's
//! files and B's GPUs. Also: secret environment values never come back, a join token cannot take over the
//! node, and the agent reaches an HTTPS server through a private CA.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::agents::{Api, agent_command, spawn_agent, start_agent, state_dir, wait_until};
use crate::support::binary::{database_url, spawn_server, spawn_server_with, terminate};
use crate::support::jobs::{pids_with_argv, wait_job};

const HEARTBEAT_1S_DEBUG_LOG: &[(&str, &str)] = &[("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1"), ("RUST_LOG", "debug")];
const SECRET: &str = "hf_TOPSECRET_0123456789";

struct Tenant {
    token: String,
    lease: String,
}

/// Run `command` as a job on the tenant's lease; wait for it to end. Returns (state, output lines).
async fn run(api: &Api, t: &Tenant, command: &[&str], extra: Value) -> (String, Vec<String>) {
    let mut body = json!({ "template": "run", "command": command });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let job = api.post(&format!("/v1/leases/{}/jobs", t.lease), &t.token, body).await;
    let id = job["id"].as_str().unwrap().to_string();
    let done = wait_job(api, &t.token, &id, &format!("{command:?} ended"), 30, |j| {
        ["succeeded", "failed", "cancelled"].contains(&j["state"].as_str().unwrap_or(""))
    })
    .await;
    let lines = done["nodes"][0]["output_tail"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string());
    (done["state"].as_str().unwrap().to_string(), lines.collect())
}

async fn output(api: &Api, t: &Tenant, command: &[&str]) -> Vec<String> {
    let (state, lines) = run(api, t, command, json!({})).await;
    assert_eq!(state, "succeeded", "{command:?}: {lines:?}");
    lines
}

fn devices(lines: &[String]) -> BTreeSet<String> {
    lines.iter().filter(|l| l.starts_with("nvidia")).cloned().collect()
}

#[sqlx::test]
async fn a_job_reaches_only_its_own_lease_on_a_shared_host(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let server_log = std::env::temp_dir().join(format!("gpuplane-iso-server-{}.log", std::process::id()));
    let (mut server, base) = spawn_server_with(
        &database_url(&db),
        "127.0.0.1:0",
        HEARTBEAT_1S_DEBUG_LOG,
        std::fs::File::create(&server_log).unwrap().into(),
    );
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    // Two uses: the agent's registration, and the impostor's attempt below (refused, so not counted).
    let (pool, join, token_a) = api.pool_and_funded_tenant(&op, "iso-a", 2).await;
    let (tenant_b, token_b) = api.funded_tenant(&op, "iso-b").await;
    api.post("/v1/admin/templates", &op, json!({ "name": "run", "argv": ["{command}"] })).await;

    let dir = state_dir("iso");
    let agent_log = dir.with_extension("log");
    let mut cmd = agent_command(&base, Some(&join), "iso-node", &dir, &[]);
    cmd.env("RUST_LOG", "debug").stderr(std::fs::File::create(&agent_log).unwrap());
    let (mut agent, _) = start_agent(cmd);
    let jobs_dir = PathBuf::from(format!("{}-jobs", dir.display()));

    let lease = |token: String| async {
        let lease =
            api.post("/v1/leases", &token, json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1 })).await;
        let gpus: Vec<i64> = lease["gpus"].as_array().unwrap().iter().map(|g| g["index"].as_i64().unwrap()).collect();
        (Tenant { token, lease: lease["id"].as_str().unwrap().to_string() }, gpus)
    };
    let (a, gpus_a) = lease(token_a).await;
    let (b, gpus_b) = lease(token_b).await;
    assert_eq!((gpus_a.clone(), gpus_b.clone()), (vec![0, 1], vec![2, 3]), "best fit packs them on one node");

    // Each job runs as its lease's own unprivileged user; different leases, different users.
    let uid_a: u32 = output(&api, &a, &["id", "-u"]).await[0].parse().unwrap();
    let uid_b: u32 = output(&api, &b, &["id", "-u"]).await[0].parse().unwrap();
    assert!(uid_a >= 1000 && uid_b >= 1000 && uid_a != uid_b, "{uid_a} {uid_b}");
    assert_eq!(output(&api, &a, &["id", "-un"]).await, ["tenant"]);

    // The agent's state: invisible, by absolute path and relative to the working directory.
    let credential = std::fs::read_to_string(dir.join("credential.json")).unwrap();
    let agent_token: Value = serde_json::from_str(&credential).unwrap();
    let agent_token = agent_token["agent_token"].as_str().unwrap().to_string();
    for path in [
        format!("{}/credential.json", dir.display()),
        "../../credential.json".into(),
        "../../../credential.json".into(),
    ] {
        let (state, lines) = run(&api, &a, &["cat", &path], json!({})).await;
        assert_eq!(state, "failed", "{path}: {lines:?}");
        assert!(lines.iter().any(|l| l.contains("No such file")), "{path}: {lines:?}");
    }
    assert!(output(&api, &a, &["ls", "-A", &dir.display().to_string()]).await.is_empty(), "an empty tmpfs");
    // Nor any lease's files on the host, B's included.
    assert!(output(&api, &a, &["ls", "-A", &jobs_dir.display().to_string()]).await.is_empty());

    // Devices: only its own GPUs, whatever the environment says.
    let expected_a: BTreeSet<String> = ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"].map(String::from).into();
    let expected_b: BTreeSet<String> = ["nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm"].map(String::from).into();
    assert_eq!(devices(&output(&api, &a, &["ls", "/dev"]).await), expected_a);
    assert_eq!(devices(&output(&api, &b, &["ls", "/dev"]).await), expected_b);
    let widened = output(&api, &a, &["env", "CUDA_VISIBLE_DEVICES=0,1,2,3", "ls", "/dev"]).await;
    assert_eq!(devices(&widened), expected_a, "the variable is not the boundary");
    let (state, lines) = run(&api, &a, &["cat", "/dev/nvidia2"], json!({})).await;
    assert_eq!(state, "failed", "B's GPU is not there: {lines:?}");
    assert!(output(&api, &a, &["cat", "/dev/nvidia1"]).await[0].contains("GPU 1 (GPU-sim-iso-node-1)"));

    // B leaves a process running and a file in its home. It asks for no stop grace: the release below then ends
    // the lease at once (jobs.rs tests the release with notice).
    output(&api, &b, &["touch", "/lease/home/b-private.txt"]).await;
    let b_job = api
        .post(
            &format!("/v1/leases/{}/jobs", b.lease),
            &b.token,
            json!({ "template": "run", "command": ["sleep", "613"], "stop_grace_s": 0 }),
        )
        .await;
    let b_job = b_job["id"].as_str().unwrap().to_string();
    wait_job(&api, &b.token, &b_job, "B's sleep runs", 30, |j| j["state"] == "running").await;
    wait_until("B's sleep on the host", 10, || async { pids_with_argv(&["sleep", "613"]).len() == 1 }).await;
    let b_pid = pids_with_argv(&["sleep", "613"])[0].to_string();

    // A sees only its own processes: not B's, not the agent.
    let ps = output(&api, &a, &["ps", "-eo", "user,args"]).await;
    assert!(!ps.iter().any(|l| l.contains("sleep 613") || l.contains(" agent --server")), "{ps:?}");
    assert!(ps.iter().any(|l| l.starts_with("tenant") && l.contains("ps -eo")), "{ps:?}");
    // No command line A can read names a host path of the agent's: bwrap's options (the lease's directory, the
    // agent's state and jobs directories, the passwd file) reach it on a pipe, not on the command line of the
    // PID namespace's init, and the lease network's `nsenter` is outside the namespace.
    let every_cmdline = ["grep", "-a", "-r", "-H", "-s", "--include=cmdline", ".", "/proc"];
    // (grep exits 2: some files under /proc are unreadable to the lease's user.)
    let (_, cmdlines) = run(&api, &a, &every_cmdline, json!({})).await;
    assert!(cmdlines.iter().any(|l| l.starts_with("/proc/1/cmdline:") && l.contains("bwrap")), "{cmdlines:?}");
    assert!(cmdlines.iter().any(|l| l.contains("--include=cmdline")), "its own: {cmdlines:?}");
    for host_path in [dir.display().to_string(), "/run/netns".into(), a.lease.clone()] {
        assert!(!cmdlines.iter().any(|l| l.contains(&host_path)), "{host_path} in {cmdlines:?}");
    }
    // ... and cannot signal them, by host pid or by name.
    let (state, lines) = run(&api, &a, &["kill", "-KILL", &b_pid], json!({})).await;
    assert_eq!(state, "failed", "{lines:?}");
    let agent_pid = agent.id().to_string();
    let (state, _) = run(&api, &a, &["kill", "-TERM", &agent_pid], json!({})).await;
    assert_eq!(state, "failed");
    let (state, _) = run(&api, &a, &["pkill", "-KILL", "-f", "sleep"], json!({})).await;
    assert_eq!(state, "failed", "pkill matched nothing");
    assert_eq!(pids_with_argv(&["sleep", "613"]).len(), 1, "B's process survived");
    assert!(agent.try_wait().unwrap().is_none(), "the agent survived");
    let (state, _) = run(&api, &a, &["cat", &format!("/proc/{b_pid}/environ")], json!({})).await;
    assert_eq!(state, "failed");

    // A's home is its own; B's file is nowhere A can see.
    assert_eq!(output(&api, &b, &["ls", "/lease/home"]).await, ["b-private.txt"]);
    assert!(output(&api, &a, &["ls", "/lease/home"]).await.is_empty());
    let b_home = jobs_dir.join(&b.lease).join("home/b-private.txt");
    assert!(b_home.exists(), "B's file is on the host");
    let (state, _) = run(&api, &a, &["cat", &b_home.display().to_string()], json!({})).await;
    assert_eq!(state, "failed");

    // Secret values: delivered to the process, never returned, masked in the output, never logged.
    let (state, lines) = run(
        &api,
        &a,
        &["printenv", "HF_TOKEN"],
        json!({ "secret_env": { "HF_TOKEN": SECRET }, "env": { "MODE": "x" } }),
    )
    .await;
    assert_eq!((state.as_str(), lines.as_slice()), ("succeeded", ["***".to_string()].as_slice()));
    let member = api.tenant_token(&op, &tenant_b, "tenant_member").await;
    let jobs_a = api.get(&format!("/v1/leases/{}/jobs?limit=500", a.lease), &a.token).await;
    assert!(!jobs_a.to_string().contains(SECRET), "not in any job of the tenant's");
    for job in jobs_a["items"].as_array().unwrap() {
        let id = job["id"].as_str().unwrap();
        assert!(!api.get(&format!("/v1/jobs/{id}"), &a.token).await.to_string().contains(SECRET));
    }
    let (status, _) = api.call(reqwest::Method::GET, &format!("/v1/leases/{}/jobs", a.lease), &member, None).await;
    assert_eq!(status, 404, "another tenant's member sees nothing of A's");

    // The credential never appeared anywhere A could read.
    assert!(!jobs_a.to_string().contains(&agent_token));

    // A join token alone cannot take the node over; the real agent keeps working.
    let facts = json!({ "hostname": "iso-node", "address": "203.0.113.7", "intra_link": "nvlink", "network_gbps": 100,
        "rdma": false, "gpus": (0..4).map(|i| json!({ "index": i, "uuid": format!("GPU-sim-iso-node-{i}"),
        "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85_520_809_984i64 })).collect::<Vec<_>>() });
    let takeover = api
        .client
        .post(format!("{base}/v1/agent/register"))
        .json(&json!({ "join_token": join, "node": facts }))
        .send()
        .await
        .unwrap();
    assert_eq!(takeover.status().as_u16(), 409);
    assert_eq!(takeover.json::<Value>().await.unwrap()["code"], "node_identity_required");
    assert_eq!(output(&api, &b, &["echo", "still", "mine"]).await, ["still mine"]);

    // The lease ends: its processes are killed and its files removed from the host.
    api.post(&format!("/v1/leases/{}/release", b.lease), &b.token, json!({})).await;
    wait_until("B's sleep killed", 20, || async { pids_with_argv(&["sleep", "613"]).is_empty() }).await;
    wait_until("B's files removed", 20, || async { !jobs_dir.join(&b.lease).exists() }).await;

    let _ = Command::new("kill").args(["-TERM", &agent.id().to_string()]).status();
    assert!(agent.wait().unwrap().success());
    assert!(terminate(&mut server).success());
    for (name, log) in [("server", &server_log), ("agent", &agent_log)] {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(text.len() > 1000, "the {name} logged at debug level: {} bytes", text.len());
        assert!(!text.contains(SECRET), "the {name}'s log holds the secret");
    }
    for path in [dir.clone(), jobs_dir, server_log, agent_log] {
        let _ = std::fs::remove_dir_all(&path);
        let _ = std::fs::remove_file(&path);
    }
}

/// A private CA, a certificate for localhost signed by it, and a TLS proxy in front of the plain server.
fn private_ca(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).stderr(Stdio::piped()).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=gpuplane test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
}

/// On a thread and runtime of its own: the test's runtime blocks while it waits for the agent's first line.
fn tls_proxy(dir: &Path, backend: String) -> String {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(dir.join("server.pem")).unwrap().collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config =
        tokio_rustls::rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, backend) = (acceptor.clone(), backend.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let Ok(mut upstream) = tokio::net::TcpStream::connect(&backend).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                });
            }
        });
    });
    format!("https://localhost:{port}")
}

#[sqlx::test]
async fn the_agent_speaks_https_through_a_private_ca(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base) = spawn_server(&database_url(&db), &[("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1")]);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (_, join, _) = api.pool_and_funded_tenant(&op, "tls", 2).await;
    let pki = state_dir("tls-pki");
    private_ca(&pki);
    let https = tls_proxy(&pki, base.trim_start_matches("http://").to_string());

    // Without the CA the agent cannot verify the server: it never registers.
    let stranger_dir = state_dir("tls-stranger");
    let mut stranger = agent_command(&https, Some(&join), "tls-stranger", &stranger_dir, &[]);
    let mut stranger = crate::support::binary::Proc(stranger.stdout(Stdio::null()).spawn().unwrap());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let nodes = api.get("/v1/admin/nodes", &op).await;
    assert!(!nodes.to_string().contains("tls-stranger"), "{nodes}");
    let _ = stranger.kill();

    // With it: registered over HTTPS, and heartbeats flow.
    let dir = state_dir("tls");
    let ca = pki.join("ca.pem");
    let (mut agent, line) = spawn_agent(&https, Some(&join), "tls-node", &dir, &["--ca-cert", ca.to_str().unwrap()]);
    assert!(line.contains("registered"), "{line}");
    let node_id = line.split_whitespace().nth(3).unwrap().to_string();
    wait_until("heartbeats over TLS", 15, || async {
        api.get(&format!("/v1/admin/nodes/{node_id}/telemetry"), &op).await["avg_gpu_util"].is_number()
    })
    .await;
    let _ = Command::new("kill").args(["-TERM", &agent.id().to_string()]).status();
    assert!(agent.wait().unwrap().success());
    assert!(terminate(&mut server).success());
    for path in [pki, dir, stranger_dir] {
        let _ = std::fs::remove_dir_all(path);
    }
}
