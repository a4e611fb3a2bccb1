//! Jobs seen from outside: their processes on the host, and waiting for a job's state.

use std::collections::BTreeMap;
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

/// The lines `<prefix><rank>/<world>: k=v k=v` in a job's output tails (the runtime example's closing report, e.g.
/// `mesh of rank 3/4: pp=1 dp=0 cp=0 tp=1`, said by rank 0 for every rank): rank -> {k: v}.
pub fn rank_lines(job: &Value, prefix: &str) -> BTreeMap<u32, BTreeMap<String, u32>> {
    let mut out = BTreeMap::new();
    for node in job["nodes"].as_array().unwrap() {
        for line in node["output_tail"].as_array().unwrap().iter().filter_map(Value::as_str) {
            let Some((rank, fields)) = line.strip_prefix(prefix).and_then(|rest| rest.split_once(": ")) else {
                continue;
            };
            let rank: u32 = rank.split('/').next().unwrap().parse().unwrap();
            let fields = fields
                .split_whitespace()
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
                .collect();
            out.insert(rank, fields);
        }
    }
    out
}
