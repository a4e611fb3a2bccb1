//! Search time of the mixed-GPU planner (issue #37 item 2; target: under 100 ms for a 3-type,
//! 64-GPU mix): `cargo bench -p gpuplane-planner --bench mixed`.
//!
//! Plain `std::time::Instant`, as the server crate's planner bench; each case runs 20 times and
//! reports the median and the max of the whole `plan_mixed` call (the mixed search plus the
//! homogeneous search of every part alone), and the median of those homogeneous searches alone.

use gpuplane_planner::mixed::MixedPlanRequest;
use gpuplane_planner::*;
use std::time::{Duration, Instant};

const RUNS: usize = 20;

fn part(gpu: &str, gpus: u32, gpus_per_node: u32) -> ClusterFields {
    ClusterFields::catalog(gpu, gpus, gpus_per_node, 400.0)
}

fn request(preset: &str, kind: WorkloadKind, parts: Vec<ClusterFields>) -> MixedPlanRequest {
    MixedPlanRequest {
        model: ModelRef::preset(preset),
        workload: WorkloadFields::bf16(kind, 4096, 512),
        parts,
        top_n: None,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    // 3 types, 64 GPUs: 4 nodes of 8 x H100, 2 of 8 x A100 80GB, 2 of 8 x RTX 4090.
    let three_types = || vec![part("h100", 32, 8), part("a100-80g", 16, 8), part("rtx4090", 16, 8)];
    let cases = [
        (
            "llama3-70b train, 32 h100 + 16 a100-80g + 16 rtx4090",
            request("llama3-70b", WorkloadKind::Train, three_types()),
        ),
        (
            "llama2-13b train, 32 h100 + 16 a100-80g + 16 rtx4090",
            request("llama2-13b", WorkloadKind::Train, three_types()),
        ),
        ("llama2-7b lora, 32 h100 + 16 a100-80g + 16 rtx4090", request("llama2-7b", WorkloadKind::Lora, three_types())),
        (
            "llama3-70b train, 32 h100 + 16 a100-40g + 16 a10 (a10s alone: no fit)",
            request(
                "llama3-70b",
                WorkloadKind::Train,
                vec![part("h100", 32, 8), part("a100-40g", 16, 8), part("a10", 16, 8)],
            ),
        ),
        (
            "llama2-13b train, 8 a100-80g (1 node) + 8 rtx4090 (2 nodes)",
            request("llama2-13b", WorkloadKind::Train, vec![part("a100-80g", 8, 8), part("rtx4090", 8, 4)]),
        ),
    ];
    println!("{:<70} {:>10} {:>10} {:>14} {:>10}", "case", "median ms", "max ms", "parts alone ms", "evaluated");
    for (name, req) in &cases {
        let input = req.resolve().expect("valid request");
        let mut total = Vec::with_capacity(RUNS);
        let mut alone = Vec::with_capacity(RUNS);
        let mut evaluated = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            let result = plan_mixed(&input).expect("a plan");
            total.push(t.elapsed());
            evaluated = result.evaluated;
            let t = Instant::now();
            for i in 0..input.parts.len() {
                let _ = search::plans_only(&input.part_input(i));
            }
            alone.push(t.elapsed());
        }
        let max = total.iter().max().copied().unwrap_or_default();
        println!(
            "{name:<70} {:>10.1} {:>10.1} {:>14.1} {:>10}",
            ms(median(total)),
            ms(max),
            ms(median(alone)),
            evaluated
        );
    }
}
