//! What the job sandbox costs at start: `cargo bench --bench sandbox` (as root, with bubblewrap installed).
//!
//! Starts `/bin/true` 100 times directly and 100 times through the agent's own sandbox command line
//! (`agent::sandbox::Sandbox::command_line`, the code every job goes through, bwrap's options on a pipe), side by
//! side in one run, and reports the median and p99 of each.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuplane_agent::sandbox::{Launch, Sandbox, group_file, passwd_file};

/// Runs of each case (`BENCH_RUNS` overrides: CI's short run makes a few).
const DEFAULT_RUNS: usize = 100;

/// Start the command `BENCH_RUNS` times (each made afresh by `command`: a sandboxed one has its options pipe).
fn time_runs(command: impl Fn() -> Command) -> Vec<Duration> {
    let mut times: Vec<Duration> = (0..common::runs(DEFAULT_RUNS))
        .map(|_| {
            let start = Instant::now();
            let mut command = command();
            let status = command.stdin(Stdio::null()).status().expect("spawn");
            assert!(status.success(), "{command:?} failed: {status}");
            start.elapsed()
        })
        .collect();
    times.sort();
    times
}

fn report(name: &str, times: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<10} median {:>6.2} ms   p99 {:>6.2} ms   ({} starts)",
        ms(times[times.len() / 2]),
        ms(times[times.len() * 99 / 100]),
        times.len()
    );
}

fn main() {
    let scratch = std::env::temp_dir().join(format!("gpuplane-sandbox-bench-{}", std::process::id()));
    let (state, jobs, lease) = (scratch.join("state"), scratch.join("jobs"), scratch.join("jobs/lease"));
    for dir in [&state, &lease] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let uid = 299_990;
    std::fs::write(state.join("passwd"), passwd_file(uid)).unwrap();
    std::fs::write(state.join("group"), group_file(uid)).unwrap();
    let sandbox =
        Sandbox::discover(vec![state.clone(), jobs.clone()], Vec::new(), 4096).expect("bubblewrap and util-linux");
    let argv = ["/bin/true".to_string()];
    let sandboxed = sandbox.command_line(&Launch {
        uid,
        lease_dir: &lease,
        passwd: &state.join("passwd"),
        group: &state.join("group"),
        cwd: "/lease",
        devices: &[],
        argv: &argv,
        volumes: &[],
    });
    report("plain", &time_runs(|| Command::new(&argv[0])));
    report("sandboxed", &time_runs(|| sandboxed.std_command().expect("the options pipe")));
    let _ = std::fs::remove_dir_all(Path::new(&scratch));
}
