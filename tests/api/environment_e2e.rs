//! Interactive access end to end: a real agent runs a lease's environment (an SSH server in the lease's
//! sandbox) and the real `ssh` client logs in with the tenant's registered key: it sees only the lease's GPUs,
//! shares the lease's files with its jobs, sees nothing of another tenant; a removed key and a stranger's key
//! are refused; the host key is the one the API reported; releasing the lease closes the session and frees
//! the port; another tenant's volume on the same host (made, attached and written by its own lease) cannot be
//! found, listed or reached from the session. Also the SSH key API itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use serde_json::json;
use sqlx::PgPool;

use crate::support::agents::HEARTBEAT_1S;
use crate::support::agents::{Api, spawn_agent, state_dir, wait_until};
use crate::support::app::TestApp;
use crate::support::binary::{database_url, spawn_server, terminate};
use crate::support::jobs::{pids_with_argv, wait_job};

fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_string())
}

/// `ssh` as a tenant would run it, trusting only the host keys in `known_hosts`.
fn ssh(key: &Path, known_hosts: &Path, port: u16, command: &str) -> Output {
    ssh_command(key, known_hosts, port, command).output().unwrap()
}

fn ssh_command(key: &Path, known_hosts: &Path, port: u16, command: &str) -> Command {
    ssh_with(key, known_hosts, port, &[], command)
}

/// `ssh` with `options` before the destination.
fn ssh_with(key: &Path, known_hosts: &Path, port: u16, options: &[&str], command: &str) -> Command {
    let mut cmd = Command::new("ssh");
    cmd.args(options)
        .args(["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes"])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
        .args(["-o", "ConnectTimeout=5", "-p", &port.to_string(), "-i"])
        .arg(key)
        .arg("tenant@127.0.0.1")
        .arg(command)
        .stdin(Stdio::null());
    cmd
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "ssh failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[sqlx::test]
async fn a_tenant_logs_in_to_its_lease_and_sees_only_its_lease(db: PgPool) {
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base) = spawn_server(&database_url(&db), HEARTBEAT_1S);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, token_a) = api.pool_and_funded_tenant(&op, "env-a", 1).await;
    let (_, token_b) = api.funded_tenant(&op, "env-b").await;
    api.post("/v1/admin/templates", &op, json!({ "name": "run", "argv": ["{command}"] })).await;
    let dir = state_dir("env");
    let store = dir.join("host-volumes");
    let store_flag = format!("host={}", store.display());
    let (mut agent, _) = spawn_agent(
        &base,
        Some(&join),
        "env-node",
        &dir,
        &["--env-ports", "21700-21709", "--volume-store", &store_flag],
    );
    let storage = json!({"volume_kinds": ["host"]});
    let (status, body) = api.call(Method::PUT, &format!("/v1/admin/pools/{pool}/storage"), &op, Some(storage)).await;
    assert_eq!(status, 200, "{body}");
    api.post(&format!("/v1/admin/pools/{pool}/storage-prices"), &op, json!({"price_per_gib_month_minor": 7})).await;

    let keys = state_dir("env-keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (key1, pub1) = keygen(&keys, "one");
    let (key2, pub2) = keygen(&keys, "two");
    let (stranger, _) = keygen(&keys, "stranger");
    api.post("/v1/tenant/ssh-keys", &token_a, json!({ "name": "one", "public_key": pub1 })).await;
    let two = api.post("/v1/tenant/ssh-keys", &token_a, json!({ "name": "two", "public_key": pub2 })).await;

    let lease = |token: String| async {
        let lease =
            api.post("/v1/leases", &token, json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1 })).await;
        (token, lease["id"].as_str().unwrap().to_string())
    };
    let (token_a, lease_a) = lease(token_a).await;
    // Tenant B has a volume on the same host, attached as its lease is created.
    let b_volume = crate::volumes::create_once_stored(&api, &token_b, &pool, "bvol").await;
    wait_until("B's volume is made", 60, || async {
        api.get(&format!("/v1/volumes/{b_volume}"), &token_b).await["state"] == "ready"
    })
    .await;
    let lease_b = api
        .post(
            "/v1/leases",
            &token_b,
            json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1, "volumes": [{"volume_id": b_volume}] }),
        )
        .await;
    let lease_b = lease_b["id"].as_str().unwrap_or_else(|| panic!("{lease_b}")).to_string();
    // Tenant B works on the same host meanwhile.
    let b_jobs = format!("/v1/leases/{lease_b}/jobs");
    let b_files = ["touch", "/lease/home/b-file", "/volumes/bvol/b-secret"];
    let touched = api.post(&b_jobs, &token_b, json!({ "template": "run", "command": b_files })).await;
    wait_job(&api, &token_b, touched["id"].as_str().unwrap(), "B's file", 30, |j| j["state"] == "succeeded").await;
    let sleeper = api.post(&b_jobs, &token_b, json!({ "template": "run", "command": ["sleep", "617"] })).await;
    wait_job(&api, &token_b, sleeper["id"].as_str().unwrap(), "B's sleep", 30, |j| j["state"] == "running").await;

    // The environment starts, and says how to log in.
    let env_path = format!("/v1/leases/{lease_a}/environment");
    let started = api.post(&env_path, &token_a, json!({})).await;
    assert_eq!(started["state"], "starting", "{started}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let env = loop {
        let env = api.get(&env_path, &token_a).await;
        if env["state"] == "ready" {
            break env;
        }
        assert!(Instant::now() < deadline, "environment not ready: {env}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let node = &env["nodes"][0];
    let port = node["port"].as_u64().unwrap() as u16;
    assert!((21700..=21709).contains(&port), "{env}");
    assert_eq!(node["ssh"], format!("ssh -p {port} tenant@{}", node["host"].as_str().unwrap()));
    assert_eq!(env["files_at_lease_end"].as_str().unwrap().split(':').next(), Some("wiped"));

    // The host key is the one reported: no trust on first use.
    let scan =
        Command::new("ssh-keyscan").args(["-t", "ed25519", "-p", &port.to_string(), "127.0.0.1"]).output().unwrap();
    let known_hosts = keys.join("known_hosts");
    std::fs::write(&known_hosts, &scan.stdout).unwrap();
    let listed = Command::new("ssh-keygen").args(["-l", "-E", "sha256", "-f"]).arg(&known_hosts).output().unwrap();
    let seen = String::from_utf8_lossy(&listed.stdout);
    let reported = node["host_key_fingerprints"][0].as_str().unwrap();
    assert!(seen.contains(reported), "reported {reported}, the server shows {seen}");

    // Inside: the lease's user, only its GPUs, nothing of tenant B's.
    let inside = stdout(&ssh(
        &key1,
        &known_hosts,
        port,
        "id -un; printenv CUDA_VISIBLE_DEVICES; ls /dev; ps -eo args; ls -A /lease/home",
    ));
    let lines: Vec<&str> = inside.lines().collect();
    assert_eq!(lines[..2], ["tenant", "0,1"], "{inside}");
    let devices: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("nvidia")).collect();
    assert_eq!(devices, ["nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"], "{inside}");
    assert!(
        !inside.contains("sleep 617") && !inside.contains("b-file") && !inside.contains("agent --server"),
        "{inside}"
    );
    assert_eq!(pids_with_argv(&["sleep", "617"]).len(), 1, "B's process runs on the host all the same");
    // B's volume, mounted on this host for B's lease: nowhere in A's session (not under /volumes, not in its mount
    // table, no loop device, not the host's store), though B's file is there on the host.
    let b_mount = dir.join("volume-mounts/host").join(&b_volume);
    assert!(b_mount.join("b-secret").exists(), "B's job wrote into its volume");
    let probe = "ls -A /volumes 2>&1; ls /dev; cat /proc/self/mountinfo; \
                 find / -path /proc -prune -o -name 'b-secret*' -print 2>/dev/null; echo probed";
    let seen = stdout(&ssh(&key1, &known_hosts, port, probe));
    assert_eq!(seen.lines().last(), Some("probed"), "{seen}");
    assert!(seen.lines().next().unwrap_or("").contains("No such file or directory"), "no /volumes: {seen}");
    assert!(!seen.contains("b-secret") && !seen.contains(&b_volume), "{seen}");
    assert!(!seen.lines().any(|l| l.starts_with("loop")), "no loop device: {seen}");
    let host_paths = format!("ls -A {} {} 2>&1; true", store.display(), b_mount.display());
    let seen = stdout(&ssh(&key1, &known_hosts, port, &host_paths));
    assert_eq!(seen.matches("No such file or directory").count(), 2, "neither the store nor the mount: {seen}");

    // Jobs of the lease and the environment share its files.
    let a_jobs = format!("/v1/leases/{lease_a}/jobs");
    let job =
        api.post(&a_jobs, &token_a, json!({ "template": "run", "command": ["touch", "/lease/home/from-job"] })).await;
    wait_job(&api, &token_a, job["id"].as_str().unwrap(), "A's job", 30, |j| j["state"] == "succeeded").await;
    assert!(stdout(&ssh(&key1, &known_hosts, port, "ls /lease/home")).lines().any(|l| l == "from-job"));

    // No forwarding of any kind through the environment: not to the control plane (-W / -L), not back (-R).
    let server_port = base.rsplit(':').next().unwrap().to_string();
    let target = format!("127.0.0.1:{server_port}");
    let out = ssh_with(&key1, &known_hosts, port, &["-W", &target], "").output().unwrap();
    assert!(!out.status.success(), "-W reached the control plane: {}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("prohibited"), "{}", String::from_utf8_lossy(&out.stderr));
    let reverse = ["-o", "ExitOnForwardFailure=yes", "-R", "0.0.0.0:22999:127.0.0.1:22"];
    let out = ssh_with(&key1, &known_hosts, port, &reverse, "sleep 5").output().unwrap();
    assert!(!out.status.success(), "-R opened a listener");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("forwarding failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A stranger's key is refused; a removed key is refused within a heartbeat or two, the sessions it has open
    // end, the other key still works.
    assert!(!ssh(&stranger, &known_hosts, port, "true").status.success());
    assert!(ssh(&key2, &known_hosts, port, "true").status.success());
    let mut open = crate::support::binary::Proc(ssh_command(&key2, &known_hosts, port, "sleep 623").spawn().unwrap());
    wait_until("key 2's session runs", 10, || async { !pids_with_argv(&["sleep", "623"]).is_empty() }).await;
    let (status, _) = api
        .call(reqwest::Method::DELETE, &format!("/v1/tenant/ssh-keys/{}", two["id"].as_str().unwrap()), &token_a, None)
        .await;
    assert_eq!(status, 204);
    let removed = Instant::now();
    wait_until("the removed key refused", 10, || async { !ssh(&key2, &known_hosts, port, "true").status.success() })
        .await;
    assert!(removed.elapsed() < Duration::from_secs(4), "within a heartbeat or two: {:?}", removed.elapsed());
    let deadline = Instant::now() + Duration::from_secs(10);
    while open.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the removed key's session stayed open");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_until("the session's processes gone", 5, || async { pids_with_argv(&["sleep", "623"]).is_empty() }).await;
    assert!(ssh(&key1, &known_hosts, port, "true").status.success());

    // Releasing the lease closes the session and frees the port.
    let mut session =
        crate::support::binary::Proc(ssh_command(&key1, &known_hosts, port, "sleep 619").spawn().unwrap());
    wait_until("the session's sleep runs", 10, || async { !pids_with_argv(&["sleep", "619"]).is_empty() }).await;
    api.post(&format!("/v1/leases/{lease_a}/release"), &token_a, json!({})).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while session.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the session outlived the lease");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_until("the port freed", 15, || async { std::net::TcpListener::bind(("0.0.0.0", port)).is_ok() }).await;
    // The session's processes are ended with the environment (the teardown signals them; on a loaded host the
    // last may take a moment to go after sshd's port is free).
    wait_until("the session's processes gone", 10, || async { pids_with_argv(&["sleep", "619"]).is_empty() }).await;
    assert_eq!(api.get(&env_path, &token_a).await["state"], "stopped");

    // B lets its lease go and deletes its volume: the agent destroys it, leaving nothing mounted on the host.
    let sleeper_id = sleeper["id"].as_str().unwrap();
    api.post(&format!("/v1/jobs/{sleeper_id}/cancel"), &token_b, json!({})).await;
    wait_job(&api, &token_b, sleeper_id, "B's sleep cancelled", 30, |j| j["state"] == "cancelled").await;
    api.post(&format!("/v1/leases/{lease_b}/release"), &token_b, json!({})).await;
    let b_path = format!("/v1/volumes/{b_volume}");
    wait_until("B's volume deleted", 30, || async { api.call(Method::DELETE, &b_path, &token_b, None).await.0 == 200 })
        .await;
    wait_until("B's volume destroyed", 30, || async { api.get(&b_path, &token_b).await["state"] == "deleted" }).await;
    assert!(!b_mount.exists() || std::fs::read_dir(&b_mount).unwrap().next().is_none(), "unmounted");

    let _ = Command::new("kill").args(["-TERM", &agent.id().to_string()]).status();
    assert!(agent.wait().unwrap().success());
    assert!(terminate(&mut server).success());
    for path in [dir, keys] {
        let _ = std::fs::remove_dir_all(path);
    }
}

#[sqlx::test]
async fn ssh_keys_are_validated_scoped_and_need_an_admin(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (tenant_id, admin) = app.tenant_admin(&op, "acme").await;
    let (_, other) = app.tenant_admin(&op, "globex").await;
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJmQqpe2LbdAuLcsJBHGH24YDvVpSXVP7y4cwZoJEEJg alice@laptop";
    let added = app.post("/v1/tenant/ssh-keys", &admin, json!({ "name": "laptop", "public_key": key })).await;
    let added = added.expect(StatusCode::CREATED);
    assert_eq!(added.body["fingerprint"], "SHA256:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g50");
    assert_eq!(added.body["key_type"], "ssh-ed25519");
    assert!(!added.body.to_string().contains("AAAAC3"), "the key material is not echoed");
    app.post("/v1/tenant/ssh-keys", &admin, json!({ "name": "again", "public_key": key }))
        .await
        .expect_problem(StatusCode::CONFLICT, "ssh_key_exists");
    for (body, field) in [
        (json!({ "name": "x", "public_key": "ssh-ed25519 AAAA" }), "public_key"),
        (json!({ "name": "x", "public_key": format!("{key}\nssh-ed25519 AAAA") }), "public_key"),
        (json!({ "name": "a\u{0}b", "public_key": key }), "name"),
        (json!({ "name": "", "public_key": "nope" }), "name"),
    ] {
        let bad = app.post("/v1/tenant/ssh-keys", &admin, body).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(bad.error_fields()[0], field, "{}", bad.body);
    }
    let member_key = app.add_key(&op, &tenant_id, gpuplane::auth::Role::TenantMember).await;
    let member = app.token_for(&member_key).await;
    app.post("/v1/tenant/ssh-keys", &member, json!({ "name": "m", "public_key": key }))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    let listed = app.get("/v1/tenant/ssh-keys", &member).await.expect(StatusCode::OK);
    assert_eq!(listed.body.as_array().unwrap().len(), 1);
    assert!(app.get("/v1/tenant/ssh-keys", &other).await.expect(StatusCode::OK).body.as_array().unwrap().is_empty());
    let id = added.body["id"].as_str().unwrap();
    app.call(Method::DELETE, &format!("/v1/tenant/ssh-keys/{id}"), Some(&other), None)
        .await
        .expect(StatusCode::NOT_FOUND);
    app.call(Method::DELETE, &format!("/v1/tenant/ssh-keys/{id}"), Some(&admin), None)
        .await
        .expect(StatusCode::NO_CONTENT);
    // An environment needs an active lease of the caller's.
    let nope = format!("/v1/leases/{}/environment", uuid::Uuid::now_v7());
    app.post(&nope, &admin, json!({})).await.expect(StatusCode::NOT_FOUND);
    app.get(&nope, &admin).await.expect(StatusCode::NOT_FOUND);
}

#[sqlx::test]
async fn a_lease_can_ask_for_its_environment_when_created(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (tenant_id, admin) = app.tenant_admin(&op, "acme").await;
    app.top_up(&op, &tenant_id, 1_000_000).await;
    let pool = app.pool(&op, "h100-env", "h100").await;
    app.node(&op, &pool, "node-0", 8).await;
    let bad =
        json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1, "environment": { "image": "--privileged" } });
    let bad = app.post("/v1/leases", &admin, bad).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad.error_fields(), ["environment.image"]);
    let body = json!({ "pool_id": pool, "gpu_count": 2, "duration_hours": 1, "environment": {} });
    let lease = app.post("/v1/leases", &admin, body).await.expect(StatusCode::CREATED);
    let id = lease.body["id"].as_str().unwrap();
    let env = app.get(&format!("/v1/leases/{id}/environment"), &admin).await.expect(StatusCode::OK);
    assert_eq!(env.body["state"], "starting", "{}", env.body);
    assert_eq!(env.body["nodes"][0]["hostname"], "node-0");
    assert_eq!(env.body["nodes"][0]["ssh"], serde_json::Value::Null, "no port until the node reports one");
    // Stopped by the tenant; it stays stopped.
    let stopped = app.call(Method::DELETE, &format!("/v1/leases/{id}/environment"), Some(&admin), None).await;
    assert_eq!(stopped.expect(StatusCode::OK).body["state"], "stopped");
}
