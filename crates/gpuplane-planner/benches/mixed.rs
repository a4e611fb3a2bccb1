//! Search time of the mixed-GPU planner (issue #37 item 2; target: under 100 ms for a 3-type,
//! 64-GPU mix): `cargo bench -p gpuplane-planner --bench mixed`.
//!
//! Plain `std::time::Instant`, as the server crate's planner bench; each case runs 20 times and
//! reports the median and the max of the whole `plan_mixed` call (the mixed search plus the
//! homogeneous search of every part alone), and the median of those homogeneous searches alone.
//!
//! Then the advice with its mixes (`advice()`, every pair of the `MIX_POOLS` pools with the most
//! free GPUs planned with `plan_mixed`), against the same pools each in a currency of its own,
//! which are never mixed: the difference is what the mixes cost.

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

/// One pool per catalog GPU model with `nodes` free nodes of 8, all in USD, or each in a currency
/// of its own (never mixed).
fn pools(nodes: u32, one_currency: bool) -> Vec<PoolOffer> {
    builtin_gpus()
        .into_iter()
        .enumerate()
        .map(|(i, gpu)| PoolOffer {
            pool_id: format!("pool-{}", gpu.key),
            gpu,
            price_per_gpu_hour_minor: 100 + 50 * i as i64,
            currency: if one_currency { "USD".to_string() } else { format!("X{}X", (b'A' + i as u8) as char) },
            free_gpus: nodes * 8,
            gpus_per_node: 8,
            inter_node_gbps: 400.0,
            rdma: true,
        })
        .collect()
}

fn advice_request(preset: &str, global_batch: u32, tokens: u64, pools: Vec<PoolOffer>) -> AdviceRequest {
    AdviceRequest {
        model: ModelRef::preset(preset),
        workload: WorkloadFields::bf16(WorkloadKind::Train, 4096, global_batch),
        target: AdviceTarget { training_tokens: Some(tokens), ..AdviceTarget::default() },
        deadline_hours: None,
        budget_minor: None,
        pools,
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

    println!();
    println!("{:<70} {:>10} {:>10} {:>14} {:>10}", "advice case", "median ms", "max ms", "without mixes", "mixes");
    let worked = || {
        let a100 = PoolOffer {
            pool_id: "a100".into(),
            gpu: gpu_by_key("a100-80g").expect("catalog"),
            price_per_gpu_hour_minor: 179,
            currency: "USD".into(),
            free_gpus: 8,
            gpus_per_node: 8,
            inter_node_gbps: 400.0,
            rdma: true,
        };
        let rtx = PoolOffer {
            pool_id: "rtx".into(),
            gpu: gpu_by_key("rtx4090").expect("catalog"),
            price_per_gpu_hour_minor: 69,
            gpus_per_node: 4,
            ..a100.clone()
        };
        vec![a100, rtx]
    };
    let separate = |mut pools: Vec<PoolOffer>| {
        for (i, p) in pools.iter_mut().enumerate() {
            p.currency = format!("X{}X", (b'A' + i as u8) as char);
        }
        pools
    };
    let advice_cases = [
        (
            "llama2-13b train, 1B tokens: 8 a100-80g + 2 x 4 rtx4090 pools",
            advice_request("llama2-13b", 512, 1_000_000_000, worked()),
            advice_request("llama2-13b", 512, 1_000_000_000, separate(worked())),
        ),
        (
            "llama3-70b train, 2B tokens: 7 pools x 64 GPUs",
            advice_request("llama3-70b", 256, 2_000_000_000, pools(8, true)),
            advice_request("llama3-70b", 256, 2_000_000_000, pools(8, false)),
        ),
        (
            "llama3-70b train, 10B tokens: 7 pools x 1,430 nodes (scripts/bench-advice.sh)",
            advice_request("llama3-70b", 1024, 10_000_000_000, pools(1430, true)),
            advice_request("llama3-70b", 1024, 10_000_000_000, pools(1430, false)),
        ),
    ];
    for (name, with, without) in &advice_cases {
        let mut total = Vec::with_capacity(RUNS);
        let mut alone = Vec::with_capacity(RUNS);
        let mut mixes = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            mixes = advice(with).expect("advice").mixes.len();
            total.push(t.elapsed());
            let t = Instant::now();
            let _ = advice(without).expect("advice");
            alone.push(t.elapsed());
        }
        let max = total.iter().max().copied().unwrap_or_default();
        println!("{name:<70} {:>10.1} {:>10.1} {:>14.1} {:>10}", ms(median(total)), ms(max), ms(median(alone)), mixes);
    }
}
