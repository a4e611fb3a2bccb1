//! The runtime's torch environment and the example that jobs run with it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The runtime's virtual environment (built on first use, then reused) and the Python installation it was made
/// from: both are bound read-only into every sandbox. The script runs once per test process: it reinstalls the
/// runtime package from this checkout, and a second run while another test's agents look for that package (or
/// its jobs import it) would make it vanish under them.
pub fn runtime_venv() -> (PathBuf, PathBuf) {
    static VENV: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    VENV.get_or_init(make_runtime_venv).clone()
}

fn make_runtime_venv() -> (PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/runtime-venv.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/runtime-venv.sh runs");
    assert!(out.status.success(), "scripts/runtime-venv.sh failed: the runtime's torch environment is needed");
    let venv = PathBuf::from(String::from_utf8(out.stdout).unwrap().lines().last().unwrap().trim());
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).unwrap();
    let home = cfg.lines().find_map(|l| l.strip_prefix("home = ")).expect("pyvenv.cfg names its Python");
    let python_root = Path::new(home.trim()).parent().unwrap().to_owned();
    (venv, python_root)
}

/// The example, where every job can read it.
pub fn example() -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/llama-parallel/train.py");
    super::net::shared_with_jobs("torch-e2e", &[("train.py", &std::fs::read_to_string(source).unwrap())])
}
