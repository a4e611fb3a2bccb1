//! Unit tests of the serving model: one per modelling change of issue #49.

use crate::inference::llm::Replica;
use crate::search::{plan, plan_request};
use crate::types::*;

/// A serving request for `preset` on `gpus` x `gpu` (one node), BF16, everything else defaulted.
fn serve(preset: &str, gpu: &str, gpus: u32) -> PlanRequest {
    PlanRequest {
        model: ModelRef::preset(preset),
        workload: WorkloadFields {
            seq_len: None,
            global_batch: None,
            ..WorkloadFields::bf16(WorkloadKind::Inference, 1, 1)
        },
        cluster: ClusterFields::catalog(gpu, gpus, gpus, 400.0),
        pins: Pins::default(),
        top_n: None,
    }
}

fn spec_of(input: &PlanInput) -> InferenceSpec {
    match input.workload {
        Workload::Inference(s) => s,
        _ => panic!("not a serving workload"),
    }
}

fn best(req: &PlanRequest) -> Plan {
    plan_request(req).unwrap_or_else(|e| panic!("{e}")).plans.remove(0)
}

#[test]
fn existing_requests_still_parse_and_keep_their_concurrency() {
    let json = r#"{"model": {"preset": "llama3-8b"}, "cluster": {"gpu": "h100", "gpus": 1},
        "workload": {"kind": "inference", "context_len": 4096, "concurrent_seqs": 16}}"#;
    let req: PlanRequest = serde_json::from_str(json).unwrap();
    let spec = spec_of(&req.resolve().unwrap());
    assert_eq!((spec.context_len, spec.input_len, spec.output_len), (4096, 3840, 256));
    assert!(spec.fixed_concurrency && spec.concurrent_seqs == 16);
    let p = best(&req);
    assert_eq!(p.micro_batch, 16);
    let s = p.serving.unwrap();
    assert!(!s.concurrency_searched && s.concurrency == 16);
    // Lengths given alone make the context; they must fit one that is given.
    let mut req = serve("llama3-8b", "h100", 1);
    req.workload.input_len = Some(1000);
    req.workload.output_len = Some(500);
    assert_eq!(spec_of(&req.resolve().unwrap()).context_len, 1500);
    req.workload.context_len = Some(1200);
    assert!(matches!(req.resolve(), Err(PlanError::Invalid { field, .. }) if field == "workload.input_len"));
}

#[test]
fn prefill_is_charged_against_decode() {
    let mut short = serve("llama3-8b", "h100", 1);
    short.workload.input_len = Some(128);
    short.workload.output_len = Some(512);
    short.workload.concurrent_seqs = Some(32);
    let mut long = short.clone();
    long.workload.input_len = Some(4096);
    let (a, b) = (best(&short), best(&long));
    let (sa, sb) = (a.serving.unwrap(), b.serving.unwrap());
    // The time per output token is a decode step plus the prompts' prefill spread over the outputs.
    let input = long.resolve().unwrap();
    let replica = Replica::new(&input.model, &input.cluster, &spec_of(&input), 1, 1);
    let load = replica.load(32);
    let share = 32.0 * replica.prefill_s() / 512.0;
    assert!((load.tpot_s - load.decode_step_s - share).abs() < 1e-9);
    assert!((sb.tpot_s - load.tpot_s).abs() < 1e-9);
    // 32 prompts of 4096 tokens per 512 generated cost half a decode step more per token.
    assert!(share > 0.5 * load.decode_step_s, "prefill share {share} vs decode {}", load.decode_step_s);
    assert!(b.tokens_per_s < 0.6 * a.tokens_per_s, "{} vs {}", b.tokens_per_s, a.tokens_per_s);
    assert!(sb.ttft_s > sa.ttft_s * 10.0);
}

#[test]
fn fp8_kv_cache_holds_twice_the_tokens() {
    let mut req = serve("llama3-8b", "h100", 1);
    req.workload.concurrent_seqs = Some(32);
    let bf16 = best(&req);
    req.workload.kv_cache_precision = Some(Precision::Fp8);
    let fp8 = best(&req);
    let ratio = fp8.memory.kv_cache as f64 / bf16.memory.kv_cache as f64;
    assert!((ratio - 0.5).abs() < 1e-6, "{ratio}");
    assert_eq!(fp8.memory.weights, bf16.memory.weights);
    // FP8 weights default to an FP8 KV cache; searched, twice the sequences fit.
    let mut searched = serve("llama3-8b", "h100", 1);
    let b16 = best(&searched).serving.unwrap().max_concurrency;
    searched.workload.kv_cache_precision = Some(Precision::Fp8);
    let b8 = best(&searched).serving.unwrap().max_concurrency;
    assert!((b8 as f64 / b16 as f64 - 2.0).abs() < 0.05, "{b16} -> {b8}");
    searched.workload.kv_cache_precision = None;
    searched.workload.precision = Precision::Fp8;
    assert_eq!(spec_of(&searched.resolve().unwrap()).kv_precision, Precision::Fp8);
}

#[test]
fn decode_reads_the_average_context() {
    // Same average context (input + output / 2), very different full contexts: the same decode step.
    let step = |input: u32, output: u32| {
        let mut req = serve("llama3-8b", "h100", 1);
        req.workload.input_len = Some(input);
        req.workload.output_len = Some(output);
        let input = req.resolve().unwrap();
        Replica::new(&input.model, &input.cluster, &spec_of(&input), 1, 1).load(64).decode_step_s
    };
    let (a, b) = (step(1000, 2000), step(1999, 2));
    assert!((a / b - 1.0).abs() < 1e-3, "{a} vs {b}");
    // Reading the whole context (3000 tokens) would be slower.
    assert!(step(3000, 2) > a * 1.1);
}

#[test]
fn memory_is_counted_in_the_units_cards_have() {
    let p = best(&serve("llama3-8b", "h100", 1));
    // An H100 "80 GB" holds 80 GiB; the CUDA context (1.5 GB) is not usable.
    let usable = 80.0 * 1024f64.powi(3) - 1.5e9;
    assert!((p.memory.usable as f64 - usable).abs() < 1e3, "{}", p.memory.usable);
    assert!(p.memory.total <= p.memory.usable);
}

#[test]
fn step_overhead_makes_tensor_parallelism_sublinear() {
    let tokens = |tp: u32| {
        let mut req = serve("llama3-8b", "h100", 8);
        req.workload.input_len = Some(128);
        req.workload.output_len = Some(128);
        req.workload.concurrent_seqs = Some(16);
        req.pins.tp = Some(tp);
        let p = best(&req);
        p.tokens_per_s / f64::from(p.replicas)
    };
    let speedup = tokens(8) / tokens(1);
    println!("TP 8 / TP 1 per replica: {speedup:.2}");
    assert!((1.1..=1.5).contains(&speedup), "TP 8 per replica is {speedup:.2}x TP 1");
    // So on 8 GPUs the planner runs replicas.
    let mut req = serve("llama3-8b", "h100", 8);
    req.workload.input_len = Some(128);
    req.workload.output_len = Some(128);
    req.workload.concurrent_seqs = Some(16);
    assert_eq!(best(&req).tp, 1);
}

#[test]
fn concurrency_search_respects_latency_bounds() {
    let mut req = serve("llama3-70b", "h100", 4);
    req.workload.input_len = Some(1000);
    req.workload.output_len = Some(500);
    req.pins.tp = Some(4);
    let free = best(&req);
    let s = free.serving.clone().unwrap();
    assert!(s.concurrency_searched && s.concurrency > 1);
    assert_eq!(free.micro_batch, s.concurrency);
    // Unbounded, the searched concurrency is the best throughput (within 1%) of every one that fits.
    let input = req.resolve().unwrap();
    let replica = Replica::new(&input.model, &input.cluster, &spec_of(&input), 4, 1);
    let top = (1..=s.max_concurrency.min(2048)).map(|b| replica.load(b).tokens_per_s).fold(0.0, f64::max);
    assert!(free.tokens_per_s >= 0.99 * top && free.tokens_per_s <= top * (1.0 + 1e-9));
    // A TPOT bound at half the unbounded one: fewer sequences, less throughput, the bound met.
    let tpot_ms = s.tpot_s * 1e3 / 2.0;
    req.workload.tpot_ms = Some(tpot_ms);
    let bounded = best(&req);
    let b = bounded.serving.unwrap();
    assert!(b.tpot_s * 1e3 <= tpot_ms && b.concurrency < s.concurrency);
    assert!(bounded.tokens_per_s < free.tokens_per_s);
    // And a TTFT bound too.
    let ttft_ms = b.ttft_s * 1e3 * 0.8;
    req.workload.ttft_ms = Some(ttft_ms);
    let both = best(&req).serving.unwrap();
    assert!(both.ttft_s * 1e3 <= ttft_ms && both.tpot_s * 1e3 <= tpot_ms);
    // A bound no concurrency meets says so.
    req.workload.tpot_ms = Some(1.0);
    match plan_request(&req) {
        Err(PlanError::Infeasible { reason, .. }) => assert!(reason.contains("latency bounds"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // A fixed concurrency that misses a bound gives no plan either.
    req.workload.tpot_ms = Some(tpot_ms);
    req.workload.ttft_ms = None;
    req.workload.concurrent_seqs = Some(s.concurrency);
    assert!(plan_request(&req).is_err());
}

#[test]
fn weight_only_fp8_on_a100() {
    let mut req = serve("llama3-70b", "a100-80g", 2);
    req.workload.precision = Precision::Fp8;
    let p = best(&req);
    assert!(p.serving.as_ref().unwrap().weight_only_fp8);
    assert!(p.notes.iter().any(|n| n.contains("weight-only FP8")), "{:?}", p.notes);
    // One byte per weight: a 70B model fits one 80 GB A100 per replica... with little room, so TP 2 here.
    req.workload.precision = Precision::Bf16;
    let bf16 = best(&req);
    req.workload.precision = Precision::Fp8;
    req.pins.tp = Some(bf16.tp);
    let fp8 = best(&req);
    assert!((fp8.memory.weights as f64 / bf16.memory.weights as f64 - 0.5).abs() < 1e-6);
    // Training still needs FP8 tensor cores.
    let mut train = serve("llama3-8b", "a100-80g", 8);
    train.workload =
        WorkloadFields { precision: Precision::Fp8, ..WorkloadFields::bf16(WorkloadKind::Train, 4096, 64) };
    assert!(matches!(train.resolve(), Err(PlanError::Invalid { field, .. }) if field == "workload.precision"));
}

#[test]
fn diffusion_steps_resolution_and_batch_scale_the_time() {
    let run = |steps: Option<u32>, resolution: Option<u32>, batch: Option<u32>| {
        let mut req = serve("sdxl", "h100", 1);
        req.workload.steps = steps;
        req.workload.resolution = resolution;
        req.workload.image_batch = batch;
        let p = plan(&req.resolve().unwrap()).unwrap().plans.remove(0);
        (p.step_time_s, p.images_per_s.unwrap(), p.memory_per_gpu_bytes)
    };
    let (t30, i30, m30) = run(None, None, None);
    let (t60, _, _) = run(Some(60), None, None);
    assert!((t60 / t30 - 2.0).abs() < 1e-9);
    // Twice the side: four times the pixels, and attention grows faster still.
    let (t2k, _, m2k) = run(None, Some(2048), None);
    assert!(t2k / t30 > 4.0 && t2k / t30 < 8.0, "{}", t2k / t30);
    assert!(m2k > m30);
    // A batch of 4 takes longer but makes more images per second.
    let (t4, i4, m4) = run(None, None, Some(4));
    assert!(t4 > t30 && t4 < 4.0 * t30 && i4 > i30 && m4 > m30);
    // Diffusion knobs are refused for a language model.
    let mut req = serve("llama3-8b", "h100", 1);
    req.workload.steps = Some(30);
    assert!(matches!(req.resolve(), Err(PlanError::Invalid { field, .. }) if field == "workload.steps"));
}
