//! The tenant's CLI end to end: the real `gpuplane` binary, run as a tenant would, against the real server and a
//! real agent on a test host running real torch. `login` keeps the key (mode 0600); `run` of the committed example
//! task rents the GPUs, uploads the example's directory, trains, streams each rank's lines and exits 0, and
//! releases the lease with `--down`; a failing job exits non-zero with its reason; a task file with faults is
//! refused naming their lines, before anything is rented.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::agents::{agent_command, start_agent};
use crate::support::binary::terminate;
use crate::support::torch::TorchSetUp;

const SEGMENT: u8 = 6;

/// `gpuplane ARGS` with the configuration in `config` (and no key in the environment).
fn gpuplane(config: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuplane"));
    cmd.args(args).env("GPUPLANE_CONFIG", config).env_remove("GPUPLANE_API_KEY").env_remove("GPUPLANE_URL");
    cmd
}

#[sqlx::test]
async fn a_tenant_runs_the_example_task_with_the_cli_and_gets_the_jobs_exit_code(db: PgPool) {
    let TorchSetUp { venv, python_root, net, mut server, base, api, op, path, .. } =
        TorchSetUp::new(&db, SEGMENT, 1).await;
    let (_pool, join, tenant) = api.pool_and_funded_tenant(&op, "cli", 1).await;
    let key = api.post("/v1/tenant/api-keys", &tenant, json!({"name": "cli", "role": "tenant_admin"})).await["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let (venv_arg, python_arg) = (venv.display().to_string(), python_root.display().to_string());
    let dir = crate::support::agents::state_dir("cli-h0");
    let mut cmd = agent_command(
        &base,
        Some(&join),
        "cli-node-0",
        &dir,
        &["--address", &net.address(0), "--insecure-http", "--job-ro-bind", &venv_arg, "--job-ro-bind", &python_arg],
    );
    cmd.env("PATH", &path);
    let mut inside = net.on(0, &cmd);
    inside.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let _agent = start_agent(inside).0;

    // login: the key is checked, then kept for the owner only.
    let home = tempdir("cli-home");
    let config = home.join("gpuplane").join("config.json");
    let mut login =
        gpuplane(&config, &["login", "--url", &base, "--api-key-stdin"]).stdin(Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    login.stdin.take().unwrap().write_all(format!("{key}\n").as_bytes()).unwrap();
    assert!(login.wait().unwrap().success());
    assert_eq!(std::fs::metadata(&config).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(config.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!((kept["url"].as_str(), kept["api_key"].as_str()), (Some(base.as_str()), Some(key.as_str())));
    let bad = gpuplane(&home.join("nowhere.json"), &["login", "--url", &base, "--api-key-stdin"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, said) = finish(bad, "gpk_not-a-real-key\n");
    assert_eq!(status, Some(2), "a refused key: {said}");
    assert!(!home.join("nowhere.json").exists());

    // A task file with faults: refused with their lines, nothing rented.
    let faulty = home.join("faulty.yaml");
    std::fs::write(&faulty, "resources:\n  gpu: h100\n  gpus: lots\n  hours: 1\nrun: [train.py]\ntemplate: t\n")
        .unwrap();
    let out = gpuplane(&config, &["run", faulty.to_str().unwrap()]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("faulty.yaml: line 3: `resources.gpus`"), "{said}");

    // A job the service refuses (tp 3 does not divide the 2 GPUs): exit 2 with the field, and the lease the run
    // made for it is not left behind.
    let task = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/llama-parallel/task.yaml");
    let example_dir = task.parent().unwrap().display().to_string();
    let text = std::fs::read_to_string(&task).unwrap().replace("workdir: .", &format!("workdir: {example_dir}"));
    let refused = home.join("refused.yaml");
    std::fs::write(&refused, text.replace("pins: {tp: 2,", "pins: {tp: 3,")).unwrap();
    let out = gpuplane(&config, &["run", refused.to_str().unwrap()]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("uploaded ") && said.contains("plan_infeasible") && said.contains("released"), "{said}");

    // The committed example: rent, upload, train, stream, release.
    let out = gpuplane(&config, &["run", task.to_str().unwrap(), "--down"]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The same directory: the upload is not sent twice.
    assert!(stderr.contains("unchanged since its upload") && stderr.contains("(plan: tp 2 x pp 1 x dp 1)"), "{stderr}");
    for rank in [0, 1] {
        assert!(
            stdout.lines().any(|l| l.starts_with(&format!("[node 0 rank {rank}] "))),
            "rank {rank}'s lines:\n{stdout}"
        );
    }
    assert!(stdout.contains("mesh of rank 1/2"), "{stdout}");
    // A job that fails, after its setup ran in the uploaded directory (on its node, in its sandbox).
    let failing = home.join("failing.yaml");
    let setup = "setup: |\n  echo \"setup sees $(ls train.py)\"\n";
    std::fs::write(
        &failing,
        text.replace("run: [train.py, --steps, \"5\"]", &format!("{setup}run: [train.py, --no-such-flag]")),
    )
    .unwrap();
    let out = gpuplane(&config, &["run", failing.to_str().unwrap(), "--down"]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!matches!(out.status.code(), Some(0) | Some(2)), "a failed job's exit: {:?}\n{stderr}", out.status);
    assert!(stderr.contains(": failed: ") && stderr.contains("exit code"), "the reason is said:\n{stderr}");
    assert!(stdout.contains("unrecognized arguments: --no-such-flag"), "the ranks' own words:\n{stdout}");
    let said_at = |words: &str| stdout.find(words);
    assert!(said_at("setup sees train.py") < said_at("unrecognized arguments"), "setup, then the command:\n{stdout}");
    assert!(said_at("setup sees train.py").is_some(), "{stdout}");
    let leases = api.get("/v1/leases", &tenant).await;
    let states: Vec<&str> = leases["items"].as_array().unwrap().iter().map(|l| l["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["released"; 3], "every lease the CLI made is released: {leases}");

    assert!(terminate(&mut server).success());
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(home);
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuplane-e2e-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Write `input` to the child's stdin, wait, and return its exit code and stderr.
fn finish(mut child: std::process::Child, input: &str) -> (Option<i32>, String) {
    use std::io::{Read, Write};
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let mut said = String::new();
    child.stderr.take().unwrap().read_to_string(&mut said).unwrap();
    (child.wait().unwrap().code(), said)
}
