//! Planner speed benchmark: `cargo bench --bench planner`.
//!
//! Plain `std::time::Instant`; each case runs 20 times and reports median and max.

#[path = "common/mod.rs"]
mod common;

use gpuplane::planner::*;
use std::time::{Duration, Instant};

/// Runs of each case (`BENCH_RUNS` overrides: CI's short run makes a few).
const DEFAULT_RUNS: usize = 20;

fn train(preset: &str, gpu: &str, gpus: u32, seq: u32, global_batch: u32) -> PlanInput {
    train_on(preset, gpu, gpus, 8, seq, global_batch)
}

fn train_on(preset: &str, gpu: &str, gpus: u32, gpus_per_node: u32, seq: u32, global_batch: u32) -> PlanInput {
    PlanRequest {
        model: ModelRef::preset(preset),
        workload: WorkloadFields {
            kind: WorkloadKind::Train,
            precision: Precision::Bf16,
            seq_len: Some(seq),
            global_batch: Some(global_batch),
            lora_rank: None,
            context_len: None,
            concurrent_seqs: None,
            ..WorkloadFields::bf16(WorkloadKind::Train, 4096, 512)
        },
        cluster: ClusterFields {
            gpu: Some(gpu.to_string()),
            gpu_spec: None,
            gpus,
            gpus_per_node: Some(gpus_per_node),
            inter_node_gbps: Some(3200.0),
            rdma: Some(true),
            host_memory_gb: None,
        },
        pins: Pins::default(),
        top_n: None,
    }
    .resolve()
    .expect("valid request")
}

fn pools() -> Vec<PoolOffer> {
    let prices = [40, 60, 120, 160, 250, 350, 550];
    builtin_gpus()
        .into_iter()
        .zip(prices)
        .map(|(gpu, price)| PoolOffer {
            pool_id: format!("pool-{}", gpu.key),
            gpu,
            price_per_gpu_hour_minor: price,
            currency: "USD".to_string(),
            free_gpus: 64,
            gpus_per_node: 8,
            inter_node_gbps: 400.0,
            rdma: true,
        })
        .collect()
}

fn measure<T>(name: &str, limit_ms: f64, mut f: impl FnMut() -> T) -> T {
    let runs = common::runs(DEFAULT_RUNS);
    let mut times: Vec<Duration> = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        last = Some(std::hint::black_box(f()));
        times.push(start.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let median = ms(times[runs / 2]);
    let max = ms(times[runs - 1]);
    println!(
        "{name:<58} median {median:>9.3} ms   max {max:>9.3} ms   (limit {limit_ms} ms) {}",
        if max < limit_ms { "OK" } else { "OVER" }
    );
    last.expect("ran")
}

fn main() {
    let big = train("gpt-1t", "h100", 3072, 2048, 3072);
    let r = measure("gpt-1t train, 3072 x h100 (8/node), seq 2048, gbs 3072", 50.0, || plan(&big).expect("feasible"));
    println!("  evaluated {} configurations, {} fit", r.evaluated, r.feasible);

    let small = train("llama2-7b", "a100-80g", 8, 4096, 512);
    let r = measure("llama2-7b train, 8 x a100-80g, seq 4096, gbs 512", 1.0, || plan(&small).expect("feasible"));
    println!("  evaluated {} configurations, {} fit", r.evaluated, r.feasible);

    // The larger space: CP, uneven stages, EP, offload.
    let l405 = train("llama3.1-405b", "h100", 16384, 8192, 2048);
    let r =
        measure("llama3.1-405b train, 16384 x h100, seq 8192 (CP, uneven PP)", 50.0, || plan(&l405).expect("feasible"));
    println!("  evaluated {} configurations, {} fit", r.evaluated, r.feasible);
    let ds = train("deepseek-v3", "h100", 1024, 4096, 4096);
    let r = measure("deepseek-v3 train, 1024 x h100, seq 4096 (EP search)", 50.0, || plan(&ds).expect("feasible"));
    println!("  evaluated {} configurations, {} fit", r.evaluated, r.feasible);
    let consumer = train_on("llama2-7b", "rtx4090", 4, 4, 4096, 512);
    let r = measure("llama2-7b train, 4 x rtx4090 (CPU offload)", 50.0, || plan(&consumer).expect("feasible"));
    println!("  evaluated {} configurations, {} fit", r.evaluated, r.feasible);

    let req = AdviceRequest {
        model: ModelRef::preset("llama3-70b"),
        workload: WorkloadFields {
            kind: WorkloadKind::Train,
            precision: Precision::Bf16,
            seq_len: Some(4096),
            global_batch: Some(256),
            lora_rank: None,
            context_len: None,
            concurrent_seqs: None,
            ..WorkloadFields::bf16(WorkloadKind::Train, 4096, 512)
        },
        target: AdviceTarget { training_tokens: Some(2_000_000_000), ..AdviceTarget::default() },
        deadline_hours: Some(72.0),
        budget_minor: None,
        pools: pools(),
    };
    let a = measure("advice, llama3-70b train, 7 pools x 64 free GPUs", 200.0, || advice(&req).expect("advice"));
    println!("  {} options, {} skipped", a.options.len(), a.skipped.len());

    println!("\n{}", render_table(&plan(&big).expect("feasible")));
    println!("{}", render_table(&plan(&small).expect("feasible")));
    for o in &a.options {
        println!(
            "  {:<14} {:>3} GPUs  {:>7.1} h  {:>9} {}  deadline {} budget {}{}{}",
            o.pool_id,
            o.gpu_count,
            o.hours,
            o.cost_minor,
            o.currency,
            o.meets_deadline,
            o.meets_budget,
            if o.cheapest { "  [cheapest]" } else { "" },
            if o.fastest { "  [fastest]" } else { "" },
        );
    }
    for s in &a.skipped {
        println!("  skipped {}: {}", s.pool_id, s.reason);
    }
}
