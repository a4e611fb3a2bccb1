//! Jobs seen from outside: their processes on the host, and waiting for a job's state.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::agents::Api;

/// The host pids of processes whose argv is exactly `argv`.
pub fn pids_with_argv(argv: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain(std::iter::once(0))).collect();
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()).map(|pid| (pid, e.path())))
                .filter(|(_, path)| std::fs::read(path.join("cmdline")).is_ok_and(|c| c == wanted))
                .map(|(pid, _)| pid)
                .collect()
        })
        .unwrap_or_default()
}

pub async fn job(api: &Api, token: &str, id: &str) -> Value {
    api.get(&format!("/v1/jobs/{id}"), token).await
}

pub async fn wait_job(
    api: &Api,
    token: &str,
    id: &str,
    what: &str,
    secs: u64,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let j = job(api, token, id).await;
        if check(&j) {
            return j;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}; job: {j:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
