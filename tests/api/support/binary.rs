//! The real `gpuplane` binary, bound to port 0, against the test's database.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::PgPool;

use super::app::TEST_SECRET;

pub fn database_url(db: &PgPool) -> String {
    let opts = db.connect_options();
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let name = opts.get_database().expect("test database name");
    match base.rfind('/') {
        Some(i) => format!("{}/{name}", &base[..i]),
        None => base,
    }
}

/// A child process that is killed when dropped, so a failing test leaves no server or agent behind.
pub struct Proc(pub Child);

impl std::ops::Deref for Proc {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Proc {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Start `gpuplane serve` on port 0 and return the process with its base URL.
pub fn spawn_server(db_url: &str, extra_env: &[(&str, &str)]) -> (Proc, String) {
    spawn_server_on(db_url, "127.0.0.1:0", extra_env)
}

/// Start `gpuplane serve` on `bind` and return the process with its base URL.
pub fn spawn_server_on(db_url: &str, bind: &str, extra_env: &[(&str, &str)]) -> (Proc, String) {
    spawn_server_with(db_url, bind, extra_env, Stdio::inherit())
}

/// The same, with the server's log (stderr) going to `stderr`.
pub fn spawn_server_with(db_url: &str, bind: &str, extra_env: &[(&str, &str)], stderr: Stdio) -> (Proc, String) {
    let (server, base, _) = spawn_and_read(db_url, bind, extra_env, stderr);
    (server, base)
}

/// `gpuplane serve` on `bind` with its gateway on `gateway_bind`: the process, the API's and the gateway's URLs.
pub fn spawn_server_with_gateway(
    db_url: &str,
    bind: &str,
    gateway_bind: &str,
    extra_env: &[(&str, &str)],
) -> (Proc, String, String) {
    let mut env = extra_env.to_vec();
    env.push(("GPUPLANE_GATEWAY_BIND", gateway_bind));
    let (server, base, gateway) = spawn_and_read(db_url, bind, &env, Stdio::inherit());
    (server, base, gateway.expect("the server printed its gateway's address"))
}

/// Start the server; read the addresses it prints (the gateway's first, when it runs one).
fn spawn_and_read(
    db_url: &str,
    bind: &str,
    extra_env: &[(&str, &str)],
    stderr: Stdio,
) -> (Proc, String, Option<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplane"));
    cmd.args(["serve", "--bind", bind])
        .env("DATABASE_URL", db_url)
        .env("GPUPLANE_JWT_SECRET", TEST_SECRET)
        .env("GPUPLANE_SECRETS_KEY", crate::secrets::K1)
        .env_remove("GPUPLANE_SECRETS_KEY_FILE")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(stderr);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn gpuplane");
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).expect("read listening line");
    let gateway = line.trim().strip_prefix("gpuplane gateway listening on ").map(str::to_owned);
    if gateway.is_some() {
        line.clear();
        reader.read_line(&mut line).expect("read listening line");
    }
    let url =
        line.trim().strip_prefix("gpuplane listening on ").unwrap_or_else(|| panic!("unexpected: {line}")).to_string();
    (Proc(child), url, gateway)
}

pub fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("server did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[sqlx::test]
async fn the_binary_serves_health_and_readiness_and_stops_on_sigterm(db: PgPool) {
    let (mut child, url) = spawn_server(&database_url(&db), &[]);
    let client = reqwest::Client::new();
    let health = client.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert!(health.headers().contains_key("x-request-id"));
    let ready = client.get(format!("{url}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let spec: serde_json::Value = client.get(format!("{url}/openapi.json")).send().await.unwrap().json().await.unwrap();
    assert_eq!(spec["info"]["title"], "gpuplane");
    let docs = client.get(format!("{url}/docs/")).send().await.unwrap();
    assert_eq!(docs.status(), 200);
    let status = terminate(&mut child);
    assert!(status.success(), "graceful shutdown exits 0: {status}");
}

#[test]
fn serve_refuses_a_missing_or_weak_secret() {
    for secret in [None, Some("short")] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplane"));
        cmd.args(["serve", "--bind", "127.0.0.1:0"]).env_remove("GPUPLANE_JWT_SECRET").env_remove("GPUPLANE_DEV");
        if let Some(s) = secret {
            cmd.env("GPUPLANE_JWT_SECRET", s);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("GPUPLANE_JWT_SECRET"), "clear error: {err}");
    }
}

/// `gpuplane ARGS` on `db_url` with the secrets keyring `keyring` (None: no keyring at all); its output.
fn gpuplane(args: &[&str], db_url: &str, keyring: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplane"));
    cmd.args(args)
        .env("DATABASE_URL", db_url)
        .env("GPUPLANE_JWT_SECRET", TEST_SECRET)
        .env("RUST_LOG", "warn")
        .env_remove("GPUPLANE_SECRETS_KEY")
        .env_remove("GPUPLANE_SECRETS_KEY_FILE")
        .env_remove("GPUPLANE_DEV");
    if let Some(keyring) = keyring {
        cmd.env("GPUPLANE_SECRETS_KEY", keyring);
    }
    cmd.output().unwrap()
}

#[sqlx::test]
async fn serve_refuses_to_start_without_the_keys_its_secrets_are_sealed_under(db: PgPool) {
    let url = database_url(&db);
    let serve = ["serve", "--bind", "127.0.0.1:0"];
    // No keyring at all: refused before anything is touched, saying what to set.
    let out = gpuplane(&serve, &url, None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GPUPLANE_SECRETS_KEY_FILE") && err.contains("--dev"), "clear error: {err}");
    // A malformed one: refused without quoting the key.
    let out = gpuplane(&serve, &url, Some("k1:c2hvcnQ="));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("GPUPLANE_SECRETS_KEY: entry 1") && !err.contains("c2hvcnQ"),
        "{err}"
    );

    // A secret sealed under k1; a keyring of k2 alone cannot open it: refused, naming k1.
    let app = crate::secrets::app_with(db.clone(), crate::secrets::K1);
    let op = app.operator().await;
    super::webhooks::create_endpoint(&app, &op, "https://hooks.example.com/x", serde_json::json!(["*"])).await;
    let out = gpuplane(&serve, &url, Some(crate::secrets::K2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("key id(s) k1") && err.contains("holds: k2"), "{err}");

    // Rotation with k2 first: once, then nothing to do; then k2 alone serves.
    let both = format!("{}\n{}", crate::secrets::K2, crate::secrets::K1);
    for expected in ["re-sealed 1 webhook secret(s) and 0 job secret(s) under key `k2`", "re-sealed 0 webhook"] {
        let out = gpuplane(&["rotate-secrets"], &url, Some(&both));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && said.contains(expected), "{said} {}", String::from_utf8_lossy(&out.stderr));
    }
    let (mut child, base) = spawn_server(&url, &[("GPUPLANE_SECRETS_KEY", crate::secrets::K2)]);
    assert_eq!(reqwest::get(format!("{base}/healthz")).await.unwrap().status(), 200);
    assert!(terminate(&mut child).success());
}

#[test]
fn the_plan_command_prints_a_table_and_json() {
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_gpuplane")).arg("plan").args(args).output().unwrap();
    let base = [
        "--model",
        "llama3-70b",
        "--gpu",
        "a100-80g",
        "--gpus",
        "64",
        "--gpus-per-node",
        "8",
        "--seq",
        "4096",
        "--global-batch",
        "1024",
    ];
    let table = run(&base);
    assert!(table.status.success());
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("tp") && text.contains("MFU"), "{text}");
    let json = run(&[&base[..], &["--json", "--tp", "8", "--pp", "8"]].concat());
    assert!(json.status.success());
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let best = &value["plans"][0];
    for field in [
        "tp",
        "pp",
        "dp",
        "micro_batch",
        "zero_stage",
        "recompute",
        "memory_per_gpu_bytes",
        "step_time_s",
        "tokens_per_s",
        "tflops_per_gpu",
        "mfu",
    ] {
        assert!(best.get(field).is_some(), "{field}");
    }
    assert_eq!((best["tp"].as_u64(), best["pp"].as_u64()), (Some(8), Some(8)));
    let arch = run(&[
        "--layers", "32", "--hidden", "4096", "--heads", "32", "--ffn", "11008", "--vocab", "32000", "--gpu", "h100",
        "--gpus", "8",
    ]);
    assert!(arch.status.success(), "{}", String::from_utf8_lossy(&arch.stderr));
    let infeasible = run(&["--model", "llama3-70b", "--gpu", "rtx4090", "--gpus", "4"]);
    assert!(!infeasible.status.success());
    assert!(String::from_utf8_lossy(&infeasible.stderr).contains("needs at least"));
}
