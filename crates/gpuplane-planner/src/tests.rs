use super::cost::{self, zero_states};
use super::validate;
use super::*;
use proptest::prelude::*;

fn train_request(preset: &str, gpu: &str, gpus: u32, gpn: u32) -> PlanRequest {
    PlanRequest {
        model: ModelRef::preset(preset),
        workload: WorkloadFields::bf16(WorkloadKind::Train, 4096, 512),
        cluster: ClusterFields::catalog(gpu, gpus, gpn, 3200.0),
        pins: Pins::default(),
        top_n: None,
    }
}

#[test]
fn zero_worked_example() {
    let p = 7.5e9;
    let total = |z| {
        let (w, g, o) = zero_states(p, 64.0, z);
        (w + g + o) / 1e9
    };
    for (z, want) in [(0u8, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)] {
        assert!((total(z) - want).abs() <= 0.1, "ZeRO-{z}: {} vs {want}", total(z));
    }
}

#[test]
fn preset_parameter_counts() {
    let published = [
        ("llama2-7b", 6.74e9),
        ("llama2-13b", 13.0e9),
        ("llama2-70b", 69.0e9),
        ("llama3-8b", 8.03e9),
        ("llama3-70b", 70.6e9),
        ("llama3.1-405b", 405.0e9),
        ("qwen2.5-7b", 7.61e9),
        ("qwen2.5-14b", 14.7e9),
        ("qwen2.5-32b", 32.5e9),
        ("qwen2.5-72b", 72.7e9),
        ("mistral-7b-v0.3", 7.25e9),
        ("gpt3-175b", 175.0e9),
        ("gpt-1t", 1.0e12),
        ("mixtral-8x7b", 46.7e9),
        ("sdxl", 3.4e9),
        ("mixtral-8x22b", 140.6e9),
        ("deepseek-v3", 671.0e9),
        ("qwen2-57b-a14b", 57.4e9),
        ("qwen1.5-moe-a2.7b", 14.3e9),
        ("qwen3-30b-a3b", 30.5e9),
        ("qwen3-235b-a22b", 235.1e9),
        ("gpt-oss-120b", 116.8e9),
    ];
    for (name, want) in published {
        let got = preset(name).expect(name).param_count() as f64;
        let err = (got - want).abs() / want;
        assert!(err < 0.03, "{name}: {got:.3e} vs {want:.3e}");
    }
    assert_eq!(published.len(), preset_names().len());
    let l7 = preset("llama2-7b").unwrap().param_count() as f64;
    assert!((l7 / 1e9 - 6.74).abs() < 0.01);
    let l70 = preset("llama3-70b").unwrap().param_count() as f64;
    assert!((l70 / 1e9 - 70.55).abs() < 0.05);
    // Active parameters of the MoE presets (published: 12.9B, 39B, 37B, 14B, 2.7B).
    for (name, want) in [
        ("mixtral-8x7b", 12.9e9),
        ("mixtral-8x22b", 39.1e9),
        ("deepseek-v3", 37.0e9),
        ("qwen2-57b-a14b", 14.2e9),
        ("qwen1.5-moe-a2.7b", 2.7e9),
        ("qwen3-30b-a3b", 3.3e9),
        ("qwen3-235b-a22b", 22.1e9),
        ("gpt-oss-120b", 5.7e9),
    ] {
        let got = preset(name).unwrap().active_param_count() as f64;
        assert!((got - want).abs() / want < 0.1, "{name} active: {got:.3e} vs {want:.3e}");
    }
    // Presets are case-insensitive.
    assert_eq!(preset("Llama3-70B"), preset("llama3-70b"));
}

#[test]
fn catalog_has_seven_gpus() {
    let keys: Vec<String> = builtin_gpus().into_iter().map(|g| g.key).collect();
    assert_eq!(keys, ["rtx4090", "a10", "a100-40g", "a100-80g", "h100", "h200", "b200"]);
    assert_eq!(gpu_by_key("h200").unwrap().memory_bytes, 141_000_000_000);
    assert_eq!(gpu_by_key("b200").unwrap().memory_bytes, 180_000_000_000);
    assert_eq!(gpu_by_key("a10").unwrap().link, LinkKind::Pcie);
    assert!(gpu_by_key("v100").is_none());
}

#[test]
fn llama2_7b_on_8_a100_plans() {
    let input = train_request("llama2-7b", "a100-80g", 8, 8).resolve().unwrap();
    let r = plan(&input).unwrap();
    assert_eq!(r.plans.len(), 10);
    assert!(r.feasible >= 10 && r.evaluated >= r.feasible);
    let best = &r.plans[0];
    assert!(best.mfu > 0.3 && best.mfu < 0.75, "mfu {}", best.mfu);
    for w in r.plans.windows(2) {
        assert!(w[0].tokens_per_s >= w[1].tokens_per_s);
    }
    let table = render_table(&r);
    assert!(table.contains("rank") && table.contains("Best, in the planner's terms: "));
    // Plain words first: what runs where, a step's time, the memory; no parallelism vocabulary.
    let plain = table.lines().next().unwrap();
    assert!(plain.starts_with("Best plan, in plain words: "), "{table}");
    for word in ["GPU", "node", "One step trains on", "tokens/s", "GB of each GPU"] {
        assert!(plain.contains(word), "{word}: {plain}");
    }
    for jargon in ["TP ", "PP ", "DP ", "ZeRO", "1F1B", "virtual stage"] {
        assert!(!plain.contains(jargon), "{jargon}: {plain}");
    }
    assert!(best.explanation.contains("fits in"), "{}", best.explanation);
}

#[test]
fn infeasible_llama3_70b_on_four_4090() {
    let input = train_request("llama3-70b", "rtx4090", 4, 4).resolve().unwrap();
    match plan(&input) {
        Err(PlanError::Infeasible { reason, needed_bytes_min, available_bytes, smallest_fit, .. }) => {
            let fit = smallest_fit.expect("some rtx4090 cluster fits");
            assert!(fit.gpu_count > 4);
            assert_eq!(fit.gpus_per_node, 4);
            assert!(needed_bytes_min > available_bytes);
            assert_eq!(available_bytes, 22_500_000_000);
            assert!(
                reason.starts_with(&format!(
                    "llama3-70b full fine-tune needs at least {} x GeForce RTX 4090",
                    fit.gpu_count
                )),
                "{reason}"
            );
            assert!(reason.contains("4 x GeForce RTX 4090 hold 96 GB"), "{reason}");
            // The smallest fit really fits.
            let mut bigger = input.clone();
            bigger.cluster.nodes = fit.nodes;
            let r = plan(&bigger).expect("smallest fit is feasible");
            assert!(!r.plans[0].calibrated);
            assert!(r.plans[0].explanation.contains("Uncalibrated"));
        }
        other => panic!("expected infeasible, got {other:?}"),
    }
}

#[test]
fn inference_picks_smallest_tp_that_fits() {
    let mut req = train_request("llama3-70b", "h100", 8, 8);
    req.workload.kind = WorkloadKind::Inference;
    req.workload.context_len = Some(4096);
    req.workload.concurrent_seqs = Some(16);
    let input = req.resolve().unwrap();
    let r = plan(&input).unwrap();
    let best = &r.plans[0];
    let arch = preset("llama3-70b").unwrap();
    let usable = cost::usable_bytes(80_000_000_000);
    let fits = |tp: u32| {
        let w = arch.param_count() as f64 * 2.0 / f64::from(tp);
        let kv = arch.kv_bytes_per_token() as f64 * 4096.0 * 16.0 / f64::from(tp.min(8));
        (w + kv) * 1.05 + 1e9 < usable
    };
    let smallest = [1, 2, 4, 8].into_iter().find(|&t| fits(t)).unwrap();
    assert_eq!(best.tp, smallest, "{}", best.explanation);
    assert_eq!(best.pp, 1);
    assert_eq!(best.replicas, 8 / best.tp);
    assert!(r.plans.iter().filter(|p| p.pp == 1).all(|p| p.tp >= best.tp));
    assert!(best.tokens_per_s > 0.0 && best.prefill_tokens_per_s.unwrap() > 0.0);
    assert!(best.memory.kv_cache > 0);
}

#[test]
fn sdxl_inference_on_one_4090() {
    let mut req = train_request("sdxl", "rtx4090", 1, 1);
    req.workload.kind = WorkloadKind::Inference;
    let r = plan(&req.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert!(p.images_per_s.unwrap() > 0.05);
    assert!(p.memory_per_gpu_bytes < 24_000_000_000);
    req.workload.kind = WorkloadKind::Train;
    assert!(matches!(req.resolve(), Err(PlanError::Invalid { .. })));
}

#[test]
fn lora_fits_where_full_training_does_not() {
    let mut req = train_request("llama2-7b", "rtx4090", 1, 1);
    req.workload.global_batch = Some(8);
    req.workload.seq_len = Some(1024);
    assert!(matches!(plan(&req.resolve().unwrap()), Err(PlanError::Infeasible { .. })));
    req.workload.kind = WorkloadKind::Lora;
    let r = plan(&req.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_eq!(p.workload, WorkloadKind::Lora);
    assert!(p.memory.optimizer < 1_000_000_000);
}

#[test]
fn fully_pinned_evaluates_one_plan() {
    let mut req = train_request("llama2-7b", "h100", 8, 8);
    req.pins = Pins {
        tp: Some(2),
        pp: Some(2),
        dp: Some(2),
        vp: Some(2),
        micro_batch: Some(2),
        zero_stage: Some(1),
        recompute: Some(Recompute::Selective),
        sequence_parallel: Some(true),
        cp: Some(1),
        ep: Some(1),
        etp: Some(2),
        offload: Some(Offload::None),
    };
    let r = plan(&req.resolve().unwrap()).unwrap();
    assert_eq!(r.evaluated, 1);
    assert_eq!(r.plans.len(), 1);
    let p = &r.plans[0];
    assert_eq!((p.tp, p.pp, p.dp, p.vp, p.micro_batch), (2, 2, 2, 2, 2));
    assert_eq!(p.grad_accum, 128);

    req.pins.tp = Some(3);
    req.pins.dp = None;
    match plan(&req.resolve().unwrap()) {
        Err(PlanError::Infeasible { reason, .. }) => {
            assert!(reason.contains("the pinned tp 3 does not divide the 32 attention heads"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // A pin the query heads take but the key/value heads do not: said as that rule, not "no cluster size works".
    req.model = ModelRef::preset("llama3-70b");
    req.pins = Pins { tp: Some(16), ..Pins::default() };
    match plan(&req.resolve().unwrap()) {
        Err(PlanError::Infeasible { reason, .. }) => {
            assert!(reason.contains("the pinned tp 16 does not divide the 8 key/value heads"), "{reason}");
            assert!(!reason.contains("no cluster size"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn invalid_inputs_name_the_field() {
    let field_of = |req: PlanRequest| match req.resolve() {
        Err(PlanError::Invalid { field, .. }) => field,
        other => panic!("expected invalid, got {other:?}"),
    };
    let mut r = train_request("llama2-7b", "h100", 0, 8);
    assert_eq!(field_of(r.clone()), "cluster.gpus");
    r.cluster.gpus = 12;
    assert_eq!(field_of(r.clone()), "cluster.gpus");
    r.cluster.gpus = 8;
    r.model.preset = Some("gpt-5".into());
    assert_eq!(field_of(r.clone()), "model.preset");
    r.model.preset = Some("llama2-7b".into());
    r.workload.seq_len = Some(0);
    assert_eq!(field_of(r.clone()), "workload.seq_len");
    r.workload.seq_len = Some(4096);
    r.workload.precision = Precision::Fp8;
    r.cluster.gpu = Some("a100-80g".into());
    assert_eq!(field_of(r.clone()), "workload.precision");
    r.workload.precision = Precision::Bf16;
    r.pins.zero_stage = Some(4);
    assert_eq!(field_of(r.clone()), "pins.zero_stage");
    r.pins.zero_stage = None;
    r.cluster.gpu = Some("tpu".into());
    assert_eq!(field_of(r.clone()), "cluster.gpu");
    r.cluster.gpu = Some("h100".into());
    r.cluster.inter_node_gbps = Some(f64::NAN);
    assert_eq!(field_of(r.clone()), "cluster.inter_node_gbps");
}

#[test]
fn request_json_is_snake_case_with_lowercase_enums() {
    let json = r#"{
        "model": {"preset": "llama3-8b"},
        "workload": {"kind": "train", "precision": "fp8", "seq_len": 8192, "global_batch": 128},
        "cluster": {"gpu": "h100", "gpus": 16, "gpus_per_node": 8, "inter_node_gbps": 3200, "rdma": true},
        "pins": {"recompute": "selective", "sequence_parallel": false},
        "top_n": 3
    }"#;
    let req: PlanRequest = serde_json::from_str(json).unwrap();
    let r = plan(&req.resolve().unwrap()).unwrap();
    assert_eq!(r.plans.len(), 3);
    let out = serde_json::to_value(&r.plans[0]).unwrap();
    assert_eq!(out["recompute"], "selective");
    assert_eq!(out["workload"], "train");
    assert!(out["memory"]["optimizer"].is_u64());
    let err = PlanError::invalid("cluster.gpus", "x");
    assert_eq!(serde_json::to_value(&err).unwrap()["kind"], "invalid");
}

fn pool(id: &str, key: &str, price: i64) -> PoolOffer {
    let gpu = gpu_by_key(key).unwrap();
    PoolOffer {
        pool_id: id.to_string(),
        gpu,
        price_per_gpu_hour_minor: price,
        currency: "USD".into(),
        free_gpus: 64,
        gpus_per_node: 8,
        inter_node_gbps: 400.0,
        rdma: true,
    }
}

pub(super) fn seven_pools() -> Vec<PoolOffer> {
    [
        ("p-4090", "rtx4090", 40),
        ("p-a10", "a10", 60),
        ("p-a100-40", "a100-40g", 120),
        ("p-a100-80", "a100-80g", 160),
        ("p-h100", "h100", 250),
        ("p-h200", "h200", 350),
        ("p-b200", "b200", 550),
    ]
    .into_iter()
    .map(|(id, k, p)| pool(id, k, p))
    .collect()
}

pub(super) fn advice_request_70b() -> AdviceRequest {
    AdviceRequest {
        model: ModelRef { preset: Some("llama3-70b".into()), architecture: None, hf_config: None },
        workload: WorkloadFields {
            kind: WorkloadKind::Train,
            precision: Precision::Bf16,
            seq_len: Some(4096),
            global_batch: Some(256),
            lora_rank: None,
            context_len: None,
            concurrent_seqs: None,
            input_len: None,
            output_len: None,
            ttft_ms: None,
            tpot_ms: None,
            kv_cache_precision: None,
            steps: None,
            resolution: None,
            image_batch: None,
        },
        target: AdviceTarget { training_tokens: Some(2_000_000_000), ..AdviceTarget::default() },
        deadline_hours: Some(72.0),
        budget_minor: Some(5_000_000),
        pools: seven_pools(),
    }
}

#[test]
fn advice_ranks_pools() {
    let res = advice(&advice_request_70b()).unwrap();
    assert!(!res.options.is_empty());
    assert_eq!(res.options.iter().filter(|o| o.cheapest).count(), 1);
    assert_eq!(res.options.iter().filter(|o| o.fastest).count(), 1);
    let first = &res.options[0];
    assert!(first.meets_deadline && first.meets_budget, "{first:?}");
    for o in &res.options {
        let expect = (f64::from(o.gpu_count) * o.hours * 1.0).max(0.0);
        assert!(o.cost_minor as f64 >= expect.floor());
        assert!(o.hours > 0.0);
    }
    // Serving advice: meet a load.
    let mut req = advice_request_70b();
    req.workload.kind = WorkloadKind::Inference;
    req.target = AdviceTarget { serving_tokens_per_s: Some(2000.0), ..AdviceTarget::default() };
    let res = advice(&req).unwrap();
    assert!(res.options.iter().any(|o| o.meets_load));
}

#[test]
fn advice_cost_rounds_up() {
    let mut req = advice_request_70b();
    req.model.preset = Some("llama2-7b".into());
    req.pools = vec![pool("p", "h100", 333)];
    let res = advice(&req).unwrap();
    let o = &res.options[0];
    let exact = f64::from(o.gpu_count) * o.hours * 333.0;
    assert_eq!(o.cost_minor, exact.ceil() as i64);
}

const SMALL_PRESETS: [&str; 5] = ["llama2-7b", "llama3-8b", "qwen2.5-7b", "llama2-13b", "mixtral-8x7b"];

fn arb_train_input() -> impl Strategy<Value = PlanInput> {
    (
        0usize..SMALL_PRESETS.len(),
        0usize..7,
        prop::sample::select(vec![1u32, 2, 4, 8, 16, 32]),
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::sample::select(vec![256u32, 1024, 2048, 4096]),
        prop::sample::select(vec![1u32, 8, 12, 32, 64, 96, 256]),
        any::<bool>(),
    )
        .prop_map(|(m, g, nodes, gpn, seq, gbs, lora)| {
            let model = preset(SMALL_PRESETS[m]).unwrap();
            let gpu = builtin_gpus()[g].clone();
            let spec = TrainSpec { seq_len: seq, global_batch: gbs, precision: Precision::Bf16, lora_rank: 16 };
            PlanInput {
                model_name: SMALL_PRESETS[m].to_string(),
                model,
                workload: if lora { Workload::Lora(spec) } else { Workload::Train(spec) },
                cluster: Cluster {
                    gpu,
                    gpus_per_node: gpn,
                    nodes,
                    inter_node_gbps: 400.0,
                    rdma: true,
                    host_memory_bytes: 1e12,
                },
                pins: Pins::default(),
                top_n: 20,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn plans_respect_invariants(input in arb_train_input()) {
        let Ok(r) = plan(&input) else { return Ok(()); };
        let m = &input.model;
        let gbs = match input.workload { Workload::Train(t) | Workload::Lora(t) => t.global_batch, _ => 0 };
        let usable = cost::usable_bytes(input.cluster.gpu.memory_bytes) as u64;
        for p in &r.plans {
            prop_assert_eq!(p.tp * p.cp * p.pp * p.dp + p.idle_gpus, input.cluster.total_gpus());
            prop_assert_eq!(p.layers_per_stage.len() as u32, p.pp);
            prop_assert_eq!(p.layers_per_stage.iter().sum::<u32>(), m.layers);
            prop_assert!(p.layers_per_stage.iter().all(|&l| l >= 1));
            prop_assert!(split_of(p).megatron_accepts(m.layers, p.pp, p.vp), "{:?}", p);
            prop_assert_eq!(m.heads % p.tp, 0);
            prop_assert_eq!(p.global_batch % (p.micro_batch * p.dp), 0);
            prop_assert_eq!(p.grad_accum * p.micro_batch * p.dp, p.global_batch);
            // The batch is only changed when it does not divide, and then to a neighbour.
            if gbs % p.dp == 0 {
                prop_assert_eq!(p.global_batch, gbs);
            } else {
                prop_assert!(p.global_batch.abs_diff(gbs) <= p.dp / 2 + p.dp % 2 || gbs < p.dp);
                prop_assert!(!p.notes.is_empty());
            }
            if let Some(moe) = m.moe {
                prop_assert_eq!(moe.experts % p.ep, 0);
                let etp = p.etp.unwrap_or(p.tp);
                prop_assert!(etp == p.tp || (etp == 1 && p.ep > 1), "{:?}", p);
                prop_assert_eq!((p.tp * p.dp * p.cp) % (etp * p.ep), 0);
            } else {
                prop_assert_eq!(p.ep, 1);
            }
            prop_assert!(p.memory_per_gpu_bytes <= usable);
            prop_assert!(p.step_time_s.is_finite() && p.step_time_s > 0.0);
            prop_assert!(p.mfu > 0.0 && p.mfu < 1.0);
            prop_assert!(!p.sequence_parallel || p.tp > 1);
        }
    }

    #[test]
    fn more_memory_never_hurts(input in arb_train_input(), extra in 1u64..200) {
        let before = plan(&input).is_ok();
        let mut bigger = input.clone();
        bigger.cluster.gpu.memory_bytes += extra * 1_000_000_000;
        let after = plan(&bigger).is_ok();
        prop_assert!(!before || after);
    }

    #[test]
    fn arbitrary_requests_never_panic(
        layers in 0u32..300, hidden in 0u32..20000, heads in 0u32..200, kv in 0u32..200,
        ffn in 0u32..80000, vocab in 0u32..300000, gpus in 0u32..5000, gpn in 0u32..20,
        seq in 0u32..70000, gbs in 0u32..5000, kind in 0usize..3, mem in 0u64..300,
    ) {
        let req = PlanRequest {
            model: ModelRef { preset: None, hf_config: None, architecture: Some(ModelArch {
                layers, hidden, heads, kv_heads: kv, ffn, vocab, head_dim: None, moe: None, diffusion: None,
                tied_embeddings: false, model_type: None, gated_mlp: None,
            }) },
            workload: WorkloadFields {
                kind: [WorkloadKind::Train, WorkloadKind::Lora, WorkloadKind::Inference][kind],
                precision: Precision::Bf16,
                seq_len: Some(seq),
                global_batch: Some(gbs),
                lora_rank: None,
                context_len: None,
                concurrent_seqs: None,
                input_len: None,
                output_len: None,
                ttft_ms: None,
                tpot_ms: None,
                kv_cache_precision: None,
                steps: None,
                resolution: None,
                image_batch: None,
            },
            cluster: ClusterFields {
                gpu: None,
                gpu_spec: Some(GpuSpec { memory_bytes: mem * 1_000_000_000, ..gpu_by_key("h100").unwrap() }),
                gpus,
                gpus_per_node: Some(gpn),
                inter_node_gbps: Some(100.0),
                rdma: Some(false),
                host_memory_gb: None,
            },
            pins: Pins::default(),
            top_n: Some(3),
        };
        if let Ok(input) = req.resolve() {
            let _ = plan(&input);
        }
    }
}

#[test]
fn openapi_schemas_build() {
    #[derive(utoipa::OpenApi)]
    #[openapi(components(schemas(PlanRequest, PlanResult, PlanError, AdviceRequest, AdviceResult, GpuSpec)))]
    struct Doc;
    let json = <Doc as utoipa::OpenApi>::openapi().to_json().unwrap();
    assert!(json.contains("PlanRequest") && json.contains("\"selective\""));
}

#[test]
fn advice_survives_huge_pools() {
    let mut req = advice_request_70b();
    req.model.preset = Some("llama2-7b".into());
    let mut p = pool("huge", "h100", 100);
    p.free_gpus = u32::MAX;
    p.gpus_per_node = 1;
    req.pools = vec![p];
    let start = std::time::Instant::now();
    let res = advice(&req).unwrap();
    assert!(!res.options.is_empty() && res.options.iter().all(|o| o.pool_id == "huge"));
    assert_labels_and_frontier(&res);
    assert!(start.elapsed().as_secs() < 30);
}

fn with_pins(mut req: PlanRequest, pins: Pins) -> PlanRequest {
    req.pins = pins;
    req
}

#[test]
fn llama3_405b_published_split_is_uneven() {
    // Llama 3 paper: 126 layers on PP 16, first and last stages one layer short.
    let mut req = train_request("llama3.1-405b", "h100", 16384, 8);
    req.workload.seq_len = Some(8192);
    req.workload.global_batch = Some(2048);
    let req = with_pins(req, Pins { tp: Some(8), pp: Some(16), cp: Some(1), ..Pins::default() });
    let r = plan(&req.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_eq!(p.stage_split, StageSplit::EmbeddingAndLoss);
    let mut want = vec![7u32];
    want.extend([8u32; 14]);
    want.push(7);
    assert_eq!(p.layers_per_stage, want);
    assert_eq!(p.dp, 128);
    assert!(p.explanation.contains("first and last stages 7 layers"), "{}", p.explanation);
}

#[test]
fn stage_split_options() {
    let mut v = Vec::new();
    // Even when it divides, plus the embedding/loss split when l + 2 divides too.
    cost::Split::options(32, 4, 1, &mut v);
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].first, v[0].mid, v[0].last), (8, 8, 8));
    cost::Split::options(126, 8, 8, &mut v);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].kind, StageSplit::EmbeddingAndLoss);
    assert_eq!(v[0].layers_per_stage(8).iter().sum::<u32>(), 126);
    // Neither: uneven first/last, the last (LM head) no larger than the first.
    for (l, pp) in [(32u32, 7u32), (61, 16), (80, 3), (33, 2), (100, 9)] {
        cost::Split::options(l, pp, 1, &mut v);
        assert_eq!(v.len(), 1, "{l} on {pp}");
        let s = v[0];
        let stages = s.layers_per_stage(pp);
        assert_eq!(stages.iter().sum::<u32>(), l, "{l} on {pp}: {stages:?}");
        assert!(stages.iter().all(|&x| x >= 1) && s.last <= s.first && s.first <= s.mid.max(s.first));
        assert!(s.max_layers(pp) <= l.div_ceil(pp));
    }
    // More stages than layers: nothing.
    cost::Split::options(4, 8, 1, &mut v);
    assert!(v.is_empty());
}

#[test]
fn uneven_stages_cost_the_largest_stage() {
    // 32 layers on PP 3 (11/11/10) cannot be faster than on 3 stages of 11 would allow, and
    // the pipeline bubble is costed with the largest stage.
    let base = with_pins(
        train_request("llama2-7b", "h100", 3, 3),
        Pins { tp: Some(1), pp: Some(3), vp: Some(1), micro_batch: Some(1), ..Pins::default() },
    );
    let r = plan(&base.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_eq!(p.layers_per_stage, vec![11, 11, 10]);
    let per_mb = p.bubble_fraction * p.step_time_s / 2.0;
    // (m + p - 1) micro-batch slots of the slowest stage dominate the step.
    assert!(per_mb * f64::from(p.grad_accum + 2) <= p.step_time_s * 1.0001);
}

#[test]
fn context_parallel_splits_activations() {
    let mut req = train_request("llama3-70b", "h100", 64, 8);
    req.workload.seq_len = Some(8192);
    req.workload.global_batch = Some(128);
    req.workload.precision = Precision::Fp8;
    let pinned = |cp: u32, rc: Recompute| {
        let r = with_pins(
            req.clone(),
            Pins {
                tp: Some(4),
                pp: Some(4),
                vp: Some(5),
                cp: Some(cp),
                micro_batch: Some(1),
                recompute: Some(rc),
                sequence_parallel: Some(true),
                zero_stage: Some(1),
                ..Pins::default()
            },
        );
        plan(&r.resolve().unwrap())
    };
    let cp1 = pinned(1, Recompute::Full).unwrap();
    let cp2 = pinned(2, Recompute::Full).unwrap();
    assert_eq!((cp2.plans[0].cp, cp2.plans[0].dp), (2, 2));
    let a1 = cp1.plans[0].memory.activations as f64;
    let a2 = cp2.plans[0].memory.activations as f64;
    assert!((a2 / a1 - 0.5).abs() < 0.05, "CP 2 halves activations: {a1} -> {a2}");
    // NeMo's published configuration: CP 2 without recomputation.
    let fast = pinned(2, Recompute::None).unwrap();
    assert!(fast.plans[0].tokens_per_s > cp1.plans[0].tokens_per_s);
    assert!(fast.plans[0].explanation.contains("CP 2"), "{}", fast.plans[0].explanation);
}

#[test]
fn expert_parallelism_shards_experts_and_costs_all_to_all() {
    let req = train_request("mixtral-8x7b", "h100", 64, 8);
    let pinned = |ep: u32, gpn: u32| {
        let mut r = with_pins(
            req.clone(),
            Pins {
                tp: Some(1),
                pp: Some(4),
                vp: Some(1),
                ep: Some(ep),
                micro_batch: Some(1),
                zero_stage: Some(1),
                recompute: Some(Recompute::Full),
                ..Pins::default()
            },
        );
        r.cluster.gpus_per_node = Some(gpn);
        r.cluster.inter_node_gbps = Some(400.0);
        plan(&r.resolve().unwrap()).unwrap().plans.remove(0)
    };
    let ep1 = pinned(1, 8);
    let ep8 = pinned(8, 8);
    assert_eq!(ep8.ep, 8);
    assert!(ep8.explanation.contains("1 of 8 experts per GPU"), "{}", ep8.explanation);
    // Expert weights are split 8 ways; attention and embeddings are not.
    assert!(ep8.memory.weights * 3 < ep1.memory.weights, "{} vs {}", ep8.memory.weights, ep1.memory.weights);
    assert!(ep8.explanation.contains("all-to-all") && !ep1.explanation.contains("all-to-all"));
    // The same EP group spread over 2-GPU nodes runs its all-to-all over the node network.
    let spread = pinned(8, 2);
    assert!(spread.comm_fraction > ep8.comm_fraction, "{} vs {}", spread.comm_fraction, ep8.comm_fraction);
    // EP never applies to dense models.
    let dense = with_pins(train_request("llama2-7b", "h100", 8, 8), Pins { ep: Some(2), ..Pins::default() });
    assert!(plan(&dense.resolve().unwrap()).is_err());
}

#[test]
fn any_cluster_size_plans() {
    // 13 GPUs: the batch of 512 does not divide by DP 13; the nearest multiple runs, flagged.
    let r = plan(&train_request("llama2-7b", "h100", 13, 13).resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_eq!(p.tp * p.cp * p.pp * p.dp + p.idle_gpus, 13);
    if p.dp == 13 {
        assert_eq!(p.global_batch, 507);
        assert!(p.notes[0].contains("507"), "{:?}", p.notes);
    }
    // Plans running the requested batch rank before adjusted ones.
    let r = plan(&train_request("llama2-7b", "h100", 6, 6).resolve().unwrap()).unwrap();
    assert_eq!(r.plans[0].global_batch, 512);
    assert!(r.plans.windows(2).all(|w| w[0].global_batch == 512 || w[1].global_batch != 512));
    // A pinned split that cannot use all 12 GPUs leaves 4 idle instead of failing.
    let req =
        with_pins(train_request("llama2-7b", "h100", 12, 12), Pins { tp: Some(4), pp: Some(2), ..Pins::default() });
    let r = plan(&req.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_eq!((p.dp, p.idle_gpus), (1, 4));
    assert!(p.notes.iter().any(|n| n.contains("4 idle")), "{:?}", p.notes);
    assert_eq!(trainbatch(p), 512);
}

fn trainbatch(p: &Plan) -> u32 {
    p.micro_batch * p.grad_accum * p.dp
}

#[test]
fn cpu_offload_fits_7b_full_fine_tune_on_four_4090() {
    let req = train_request("llama2-7b", "rtx4090", 4, 4);
    let r = plan(&req.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_ne!(p.offload, Offload::None, "{}", p.explanation);
    assert!(p.host_memory_per_node_bytes > 50_000_000_000);
    assert!(p.memory.optimizer < 1_000_000_000);
    assert!(p.explanation.contains("CPU offload"), "{}", p.explanation);
    // Pinning no offload brings back "needs more GPUs".
    let none = with_pins(req.clone(), Pins { offload: Some(Offload::None), ..Pins::default() });
    assert!(matches!(plan(&none.resolve().unwrap()), Err(PlanError::Infeasible { .. })));
    // Too little host memory: infeasible, and the reason says so.
    let mut small = req.clone();
    small.cluster.host_memory_gb = Some(32.0);
    match plan(&small.resolve().unwrap()) {
        Err(PlanError::Infeasible { reason, .. }) => assert!(reason.contains("host memory"), "{reason}"),
        other => panic!("{other:?}"),
    }
    small.cluster.host_memory_gb = Some(-1.0);
    assert!(matches!(small.resolve(), Err(PlanError::Invalid { field, .. }) if field == "cluster.host_memory_gb"));
}

#[test]
fn hints_name_the_default_that_fails() {
    let mut req = train_request("llama2-7b", "rtx4090", 1, 1);
    req.workload.kind = WorkloadKind::Inference;
    req.workload.seq_len = None;
    // A searched concurrency plans at what fits (a few sequences of 4096 tokens on 24 GB).
    let r = plan_request(&req).unwrap();
    assert!((1..=4).contains(&r.plans[0].micro_batch), "{}", r.plans[0].micro_batch);
    // A concurrency the user fixed that does not fit gets a hint with one that does.
    req.workload.concurrent_seqs = Some(64);
    let hint = match plan_request(&req) {
        Err(PlanError::Infeasible { hints, .. }) => {
            hints.into_iter().find(|h| h.contains("--concurrent")).expect("a concurrency hint")
        }
        other => panic!("{other:?}"),
    };
    // The hint is right: with that concurrency it plans.
    let c: u32 = hint.split("--concurrent ").nth(1).unwrap().split(';').next().unwrap().trim().parse().unwrap();
    req.workload.concurrent_seqs = Some(c);
    assert!(plan_request(&req).is_ok(), "{hint}");
    // A LoRA with the default global batch on one 4090 says its step crawls.
    let mut lora = train_request("llama2-7b", "rtx4090", 1, 1);
    lora.workload.kind = WorkloadKind::Lora;
    let r = plan_request(&lora).unwrap();
    assert!(r.plans[0].notes.iter().any(|n| n.contains("min at a global batch of 512")), "{:?}", r.plans[0].notes);
}

#[test]
fn names_are_case_insensitive_with_suggestions() {
    assert_eq!(gpu_by_key("H100").unwrap().key, "h100");
    assert_eq!(gpu_by_key(" A100-80G ").unwrap().key, "a100-80g");
    let mut req = train_request("llama2-7b", "a100", 8, 8);
    match req.resolve() {
        Err(PlanError::Invalid { field, message }) => {
            assert_eq!(field, "cluster.gpu");
            assert!(message.contains("did you mean") && message.contains("a100-80g"), "{message}");
            assert!(message.contains("known: rtx4090"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    req.cluster.gpu = Some("H100".into());
    req.model.preset = Some("LLAMA2-7B".into());
    let input = req.resolve().unwrap();
    assert_eq!(input.model_name, "llama2-7b");
    assert_eq!(suggestions("mixtral", preset_names()), vec!["mixtral-8x7b", "mixtral-8x22b"]);
    assert_eq!(suggestions("lama3-70b", preset_names()), vec!["llama3-70b"]);
    // A hostile name is cut short, not echoed or compared whole.
    let long = "x\u{0}".repeat(100_000);
    let message = unknown_name_message("GPU", &long, ["h100"]);
    assert!(message.len() < 200 && message.ends_with("known: h100"), "{}", message.len());
}

#[test]
fn render_columns_follow_the_model() {
    let mut req = train_request("sdxl", "rtx4090", 2, 2);
    req.workload.kind = WorkloadKind::Inference;
    let table = render_table(&plan(&req.resolve().unwrap()).unwrap());
    assert!(table.contains("images/s") && !table.contains("prefill") && !table.contains("decode"), "{table}");
    assert!(table.contains("1 configuration evaluated, 1 fits"), "{table}");
    let table = render_table(&plan(&train_request("llama2-7b", "h100", 8, 8).resolve().unwrap()).unwrap());
    assert!(table.contains(" cp ") && table.contains(" ep ") && table.contains("layers"), "{table}");
}

#[test]
fn moe_validation_and_overflow() {
    let mut arch = preset("deepseek-v3").unwrap();
    arch.moe.as_mut().unwrap().capacity_factor = Some(f64::NAN);
    let field = |a: &ModelArch| match validate::validate_arch(a, "model.architecture") {
        Err(PlanError::Invalid { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(field(&arch), "model.architecture.moe.capacity_factor");
    arch.moe.as_mut().unwrap().capacity_factor = None;
    arch.moe.as_mut().unwrap().dense_layers = 61;
    assert_eq!(field(&arch), "model.architecture.moe.dense_layers");
    // The largest valid architecture does not overflow.
    let huge = ModelArch {
        layers: 4096,
        hidden: 1 << 20,
        heads: 1 << 10,
        kv_heads: 1 << 10,
        ffn: (1 << 23) - 1,
        vocab: 1 << 24,
        head_dim: Some(4096),
        moe: Some(MoeSpec {
            experts: 1024,
            experts_per_token: 1024,
            shared_experts: 1024,
            dense_layers: 0,
            dense_ffn: None,
            capacity_factor: Some(64.0),
        }),
        diffusion: None,
        tied_embeddings: false,
        model_type: None,
        gated_mlp: None,
    };
    validate::validate_arch(&huge, "a").unwrap();
    assert!(huge.param_count() > 0 && huge.active_param_count() > 0);
    let pins = Pins { cp: Some(0), ..Pins::default() };
    assert!(matches!(validate::validate_pins(&pins), Err(PlanError::Invalid { field, .. }) if field == "pins.cp"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn moe_requests_never_panic_and_respect_ep(
        experts in 1u32..300, k in 1u32..10, shared in 0u32..4, dense in 0u32..4, gpus in 1u32..70,
        gpn in prop::sample::select(vec![1u32, 2, 4, 8]), seq in prop::sample::select(vec![1024u32, 8192, 16384]),
        gbs in 1u32..600, kind in 0usize..3,
    ) {
        let gpus = gpus.div_ceil(gpn) * gpn;
        let req = PlanRequest {
            model: ModelRef { preset: None, hf_config: None, architecture: Some(ModelArch {
                layers: 8, hidden: 1024, heads: 8, kv_heads: 2, ffn: 512, vocab: 32000, head_dim: None,
                moe: Some(MoeSpec { experts, experts_per_token: k.min(experts), shared_experts: shared,
                    dense_layers: dense, dense_ffn: Some(2048), capacity_factor: None }),
                diffusion: None,
                tied_embeddings: false,
                model_type: None,
                gated_mlp: None,
            }) },
            workload: WorkloadFields {
                kind: [WorkloadKind::Train, WorkloadKind::Lora, WorkloadKind::Inference][kind],
                precision: Precision::Bf16,
                seq_len: Some(seq),
                global_batch: Some(gbs),
                lora_rank: None,
                context_len: None,
                concurrent_seqs: None,
                input_len: None,
                output_len: None,
                ttft_ms: None,
                tpot_ms: None,
                kv_cache_precision: None,
                steps: None,
                resolution: None,
                image_batch: None,
            },
            cluster: ClusterFields {
                gpu: Some("a100-40g".into()), gpu_spec: None, gpus, gpus_per_node: Some(gpn),
                inter_node_gbps: Some(200.0), rdma: Some(true), host_memory_gb: None,
            },
            pins: Pins::default(),
            top_n: Some(5),
        };
        let input = req.resolve().unwrap();
        if let Ok(r) = plan(&input) {
            for p in &r.plans {
                prop_assert_eq!(experts % p.ep, 0);
                // EP carved out of dp x cp (expert TP = TP), or of tp x dp x cp (expert TP 1).
                let etp = p.etp.unwrap_or(p.tp);
                prop_assert!(etp == p.tp || (etp == 1 && p.ep > 1), "{:?}", p);
                prop_assert_eq!((p.tp * p.dp * p.cp) % (etp * p.ep), 0);
                prop_assert!(p.step_time_s.is_finite() && p.step_time_s > 0.0);
                prop_assert!(p.memory_per_gpu_bytes <= p.memory.usable);
            }
        }
    }
}

#[test]
fn serving_splits_layers_unevenly_too() {
    let mut req = train_request("llama2-7b", "a10", 3, 3);
    req.workload.kind = WorkloadKind::Inference;
    req.workload.concurrent_seqs = Some(4);
    req.pins = Pins { tp: Some(1), pp: Some(3), ..Pins::default() };
    let r = plan(&req.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_eq!(p.layers_per_stage.iter().sum::<u32>(), 32);
    assert_eq!(p.layers_per_stage.len(), 3);
    // The largest stage's share of the weights sits on one GPU.
    let weights = preset("llama2-7b").unwrap().param_count() as f64 * 2.0;
    let largest = f64::from(*p.layers_per_stage.iter().max().unwrap()) / 32.0;
    assert!((p.memory.weights as f64 / (weights * largest) - 1.0).abs() < 0.01);
}

/// The demo's four pools (src/demo.rs) as offers.
fn demo_pools() -> Vec<PoolOffer> {
    [
        ("rtx4090", 69, 16, 8, 100.0, false),
        ("a100-80g", 179, 16, 8, 400.0, true),
        ("a10", 45, 4, 4, 100.0, false),
        ("b200", 599, 8, 8, 400.0, true),
    ]
    .into_iter()
    .map(|(key, price, free, gpn, gbps, rdma)| PoolOffer {
        free_gpus: free,
        gpus_per_node: gpn,
        inter_node_gbps: gbps,
        rdma,
        ..pool(&format!("p-{key}"), key, price)
    })
    .collect()
}

/// The demo's own query: LoRA of llama2-7b on 1B tokens.
fn demo_lora_request() -> AdviceRequest {
    AdviceRequest {
        model: ModelRef { preset: Some("llama2-7b".into()), architecture: None, hf_config: None },
        workload: WorkloadFields {
            kind: WorkloadKind::Lora,
            precision: Precision::Bf16,
            seq_len: Some(4096),
            global_batch: Some(64),
            lora_rank: None,
            context_len: None,
            concurrent_seqs: None,
            input_len: None,
            output_len: None,
            ttft_ms: None,
            tpot_ms: None,
            kv_cache_precision: None,
            steps: None,
            resolution: None,
            image_batch: None,
        },
        target: AdviceTarget { training_tokens: Some(1_000_000_000), ..AdviceTarget::default() },
        deadline_hours: None,
        budget_minor: None,
        pools: demo_pools(),
    }
}

/// Every label is true over what is shown, and the options form a frontier with no ties.
fn assert_labels_and_frontier(res: &AdviceResult) {
    let o = &res.options;
    assert!(!o.is_empty());
    assert_eq!(res.cost_tie_bps, advice::COST_TIE_BPS as u32);
    let fastest: Vec<&AdviceOption> = o.iter().filter(|x| x.fastest).collect();
    assert_eq!(fastest.len(), 1, "{o:#?}");
    assert!(o.iter().all(|x| x.hours >= fastest[0].hours), "fastest is the least time shown");
    let cheapest: Vec<&AdviceOption> = o.iter().filter(|x| x.cheapest).collect();
    assert_eq!(cheapest.len(), 1);
    assert!(o.iter().all(|x| x.cost_minor >= cheapest[0].cost_minor), "cheapest is the least cost shown");
    for a in o {
        for b in o {
            if std::ptr::eq(a, b) {
                continue;
            }
            let dominates = a.cost_minor <= b.cost_minor && a.hours <= b.hours;
            assert!(!dominates, "{}x{} dominates {}x{}", a.gpu_count, a.gpu_key, b.gpu_count, b.gpu_key);
            let all = |o: &AdviceOption| o.meets_deadline && o.meets_budget && o.meets_load;
            let alike = all(a) == all(b);
            assert!(!(alike && advice::costs_tie(a.cost_minor, b.cost_minor)), "a cost tie is shown: {a:?} {b:?}");
        }
    }
}

#[test]
fn the_demo_lora_advice_is_not_decided_by_a_cent() {
    let res = advice(&demo_lora_request()).unwrap();
    assert_labels_and_frontier(&res);
    let shown: Vec<(String, u32, f64, i64)> =
        res.options.iter().map(|o| (o.gpu_key.clone(), o.gpu_count, o.hours, o.cost_minor)).collect();
    // 1 x B200 costs within a cent of 8 x B200 and takes 8 times as long: only the 8 are shown.
    let b200 = |n: u32| res.options.iter().find(|o| o.gpu_key == "b200" && o.gpu_count == n);
    assert!(b200(1).is_none(), "{shown:?}");
    let eight = b200(8).unwrap_or_else(|| panic!("{shown:?}"));
    assert!(eight.fastest, "{shown:?}");
    // Every option shown is cheaper than the fastest, or it would be dominated.
    for o in &res.options {
        assert!(o.meets_deadline && o.meets_budget && o.meets_load);
    }
    // A pool with nothing on the frontier says which option beats it.
    for s in &res.skipped {
        assert!(!res.options.iter().any(|o| o.pool_id == s.pool_id), "{s:?}");
        assert!(s.reason.contains("frontier") || s.reason.contains("does not fit"), "{s:?}");
    }
}

#[test]
fn a_deadline_and_a_budget_keep_their_options_first() {
    let mut req = demo_lora_request();
    req.deadline_hours = Some(4.0);
    let res = advice(&req).unwrap();
    assert_labels_and_frontier(&res);
    let first = &res.options[0];
    assert!(first.meets_deadline && first.hours <= 4.0, "{first:?}");
    let met: Vec<bool> = res.options.iter().map(|o| o.meets_deadline && o.meets_budget).collect();
    assert!(met.windows(2).all(|w| w[0] >= w[1]), "options meeting every constraint first: {met:?}");
    // A budget below every option: nothing meets it, the frontier is still shown.
    req.budget_minor = Some(1);
    let res = advice(&req).unwrap();
    assert!(res.options.iter().all(|o| !o.meets_budget));
    assert_labels_and_frontier(&res);
}

/// The mixed-GPU worked example as advice: llama2-13b on one node of 8 x A100 80GB and two nodes of
/// 4 x RTX 4090, each a pool of its own.
fn mix_request(a100_currency: &str) -> AdviceRequest {
    let a100 = PoolOffer { free_gpus: 8, currency: a100_currency.into(), ..pool("p-a100", "a100-80g", 179) };
    let rtx = PoolOffer { free_gpus: 8, gpus_per_node: 4, ..pool("p-4090", "rtx4090", 69) };
    AdviceRequest {
        model: ModelRef { preset: Some("llama2-13b".into()), architecture: None, hf_config: None },
        workload: WorkloadFields {
            kind: WorkloadKind::Train,
            precision: Precision::Bf16,
            seq_len: Some(4096),
            global_batch: Some(512),
            lora_rank: None,
            context_len: None,
            concurrent_seqs: None,
            input_len: None,
            output_len: None,
            ttft_ms: None,
            tpot_ms: None,
            kv_cache_precision: None,
            steps: None,
            resolution: None,
            image_batch: None,
        },
        target: AdviceTarget { training_tokens: Some(1_000_000_000), ..AdviceTarget::default() },
        deadline_hours: None,
        budget_minor: None,
        pools: vec![a100, rtx],
    }
}

#[test]
fn advice_proposes_a_mix_faster_than_any_one_pool_priced_per_pool() {
    let res = advice(&mix_request("USD")).unwrap();
    assert_eq!(res.mixes.len(), 1, "{:#?}", res.mixes);
    let mix = &res.mixes[0];
    assert_eq!(mix.plan.parts_used, 2);
    assert!(mix.faster, "21,120 tokens/s against 15,433 on the A100s alone");
    assert!(res.options.iter().all(|o| mix.hours < o.hours), "faster than every option");
    assert_eq!(mix.currency, "USD");
    assert_eq!(mix.parts.iter().map(|p| p.pool_id.as_str()).collect::<Vec<_>>(), ["p-a100", "p-4090"]);
    assert!((mix.hours - 1e9 / mix.plan.tokens_per_s / 3600.0).abs() < 1e-9);
    let mut sum = 0;
    for (part, used) in mix.parts.iter().zip(&mix.plan.parts) {
        assert_eq!(part.gpu_count, used.gpus_used, "only the GPUs used are rented");
        assert_eq!(part.gpu_count, 8);
        let cost = (f64::from(part.gpu_count) * mix.hours * part.price_per_gpu_hour_minor as f64).ceil() as i64;
        assert_eq!(part.cost_minor, cost, "ceil per part");
        sum += cost;
    }
    assert_eq!(mix.cost_minor, sum);
    assert!(mix.meets_deadline && mix.meets_budget);
    // The options are what they were without mixes: single pools only.
    assert_labels_and_frontier(&res);
    assert!(res.options.iter().all(|o| o.pool_id == "p-a100" || o.pool_id == "p-4090"));
    let text = render_advice(&res, &|id: &str| id.to_string());
    assert!(text.contains("Mix: 8 x a100-80g in p-a100"), "{text}");
}

#[test]
fn pools_of_different_currencies_do_not_mix_nor_does_serving() {
    let res = advice(&mix_request("EUR")).unwrap();
    assert!(res.mixes.is_empty(), "{:#?}", res.mixes);
    assert!(!res.options.is_empty());
    let mut serve = mix_request("USD");
    serve.workload = WorkloadFields { kind: WorkloadKind::Inference, ..serve.workload };
    serve.target = AdviceTarget { serving_tokens_per_s: Some(1000.0), ..AdviceTarget::default() };
    assert!(advice(&serve).unwrap().mixes.is_empty(), "mixed plans cover training only");
}

#[test]
fn a_mix_can_run_what_no_single_pool_can() {
    // Llama 3 70B needs 16 x A100 80GB alone; one node of A100s and one of H100s hold it together.
    let mut req = advice_request_70b();
    req.pools = vec![
        PoolOffer { free_gpus: 8, ..pool("p-a100", "a100-80g", 160) },
        PoolOffer { free_gpus: 8, ..pool("p-h100", "h100", 250) },
    ];
    let res = advice(&req).unwrap();
    assert!(res.options.is_empty(), "{:#?}", res.options);
    assert_eq!(res.skipped.len(), 2);
    assert_eq!(res.mixes.len(), 1);
    let mix = &res.mixes[0];
    assert!(mix.cheaper && mix.faster, "nothing to beat");
    assert_eq!(mix.parts.iter().map(|p| p.gpu_count).sum::<u32>(), 16);
    let text = render_advice(&res, &|id: &str| id.to_string());
    assert!(text.starts_with("No single pool can run this.") && text.contains("Mix: "), "{text}");
}

#[test]
fn mixes_are_bounded_and_each_beats_every_single_pool_option() {
    // Seven pools of one currency: only the MIX_POOLS with the most free GPUs pair up.
    let mut req = advice_request_70b();
    req.pools[6].free_gpus = 8; // p-b200: the fewest free GPUs, so left out of the mixes
    let res = advice(&req).unwrap();
    let pairs = advice::MIX_POOLS * (advice::MIX_POOLS - 1) / 2;
    assert!(res.mixes.len() <= pairs);
    for m in &res.mixes {
        assert_eq!(m.parts.len(), 2);
        assert!(m.parts.iter().all(|p| p.pool_id != "p-b200"), "{:?}", m.parts);
        assert!(m.cheaper || m.faster);
        // Beating every option tried beats every option shown.
        assert!(!m.cheaper || res.options.iter().all(|o| m.cost_minor < o.cost_minor));
        assert!(!m.faster || res.options.iter().all(|o| m.hours < o.hours));
        assert_eq!(m.cost_minor, m.parts.iter().map(|p| p.cost_minor).sum::<i64>());
    }
    for a in &res.mixes {
        for b in &res.mixes {
            if !std::ptr::eq(a, b) {
                assert!(!(a.cost_minor <= b.cost_minor && a.hours <= b.hours), "a mix shown is dominated");
            }
        }
    }
}

#[test]
fn costs_tie_within_the_stated_tolerance_only() {
    assert_eq!(advice::COST_TIE_BPS, 100);
    assert!(advice::costs_tie(4500, 4501));
    assert!(advice::costs_tie(10_000, 10_100));
    assert!(!advice::costs_tie(10_000, 10_101));
    assert!(advice::costs_tie(0, 0) && !advice::costs_tie(0, 1));
    assert!(advice::costs_tie(i64::MAX, i64::MAX));
    use advice::{Point, frontier};
    let p = |cost_minor, speed| Point { cost_minor, speed, meets_all: true };
    // The cent that bought 7 hours of waiting: the faster option is shown alone.
    assert_eq!(frontier(&[p(4500, 1.0 / 7.51), p(4501, 1.0 / 0.94)]), vec![1]);
    // Beyond the tolerance both are shown, cheapest first.
    assert_eq!(frontier(&[p(5000, 2.0), p(4500, 1.0)]), vec![1, 0]);
    // Dominated: dearer and slower.
    assert_eq!(frontier(&[p(4500, 2.0), p(6000, 1.0)]), vec![0]);
    // A tie never hides an option that meets every constraint behind one that does not.
    let over = Point { cost_minor: 4501, speed: 9.0, meets_all: false };
    assert_eq!(frontier(&[p(4500, 1.0), over]), vec![0, 1]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The frontier's promises over random options: nothing shown is dominated or tied by
    /// another shown option; everything left out has a shown option at least as fast, costing at
    /// most the tolerance more, that meets every constraint it meets.
    #[test]
    fn the_frontier_keeps_its_promises(
        raw in proptest::collection::vec((0i64..20_000, 1u32..1000, any::<bool>()), 0..40)
    ) {
        use advice::{Point, costs_tie, frontier};
        let points: Vec<Point> = raw.iter().map(|&(c, s, ok)| Point { cost_minor: c, speed: f64::from(s), meets_all: ok }).collect();
        let shown = frontier(&points);
        prop_assert_eq!(shown.is_empty(), points.is_empty());
        prop_assert!(shown.windows(2).all(|w| points[w[0]].cost_minor <= points[w[1]].cost_minor), "cheapest first");
        for class in [true, false] {
            let part: Vec<Point> = shown.iter().map(|&i| points[i]).filter(|p| p.meets_all == class).collect();
            for w in part.windows(2) {
                prop_assert!(w[0].cost_minor < w[1].cost_minor && w[0].speed < w[1].speed, "cost rises, speed rises: {:?}", w);
                prop_assert!(!costs_tie(w[0].cost_minor, w[1].cost_minor), "a tie is shown: {:?}", w);
            }
        }
        for &i in &shown {
            for &j in &shown {
                let (a, b) = (points[i], points[j]);
                let dominates = i != j && (a.meets_all || !b.meets_all) && a.cost_minor <= b.cost_minor && a.speed >= b.speed;
                prop_assert!(!dominates, "{:?} dominates {:?}", a, b);
            }
        }
        for (i, p) in points.iter().enumerate() {
            if shown.contains(&i) {
                continue;
            }
            let covered = shown.iter().any(|&k| {
                let s = points[k];
                s.speed >= p.speed
                    && (s.cost_minor <= p.cost_minor || costs_tie(s.cost_minor, p.cost_minor))
                    && (s.meets_all || !p.meets_all)
            });
            prop_assert!(covered, "{:?} left out with nothing better shown", p);
        }
    }
}

#[test]
fn a_plan_near_the_memory_limit_says_so() {
    let mem = |total: u64| MemoryBreakdown { total, usable: 78_500_000_000, ..MemoryBreakdown::default() };
    assert_eq!(cost::MEMORY_HEADROOM_MARGIN, 0.05);
    let note = cost::headroom_note(&mem(78_100_000_000)).unwrap();
    assert!(note.contains("78.1 of 78.5 GB") && note.contains("5% margin"), "{note}");
    assert!(cost::headroom_note(&mem(74_000_000_000)).is_none(), "6% left is enough");
    // Every plan carries the note exactly when its memory is within the margin, and the table
    // marks it.
    let mut req = train_request("mixtral-8x7b", "h100", 16, 8);
    req.top_n = Some(20);
    let res = plan_request(&req).unwrap();
    let mut any = false;
    for p in &res.plans {
        let tight = p.memory.total as f64 >= p.memory.usable as f64 * 0.95;
        any |= tight;
        assert_eq!(p.notes.iter().any(|n| n.contains("little memory headroom")), tight, "{:?}", p.notes);
        assert_eq!(p.explanation.contains("little memory headroom"), tight);
    }
    let table = render_table(&res);
    assert_eq!(table.contains("! memory within 5%"), any, "{table}");
}

#[test]
fn two_stages_have_no_middle_ones_to_name() {
    let mut req = train_request("llama2-7b", "a100-80g", 8, 8);
    req.pins.pp = Some(2);
    req.top_n = Some(200);
    let res = plan_request(&req).unwrap();
    let split = res.plans.iter().find(|p| p.stage_split == StageSplit::EmbeddingAndLoss).expect("an emb+loss plan");
    assert!(split.explanation.contains("16 layers on each of the two stages"), "{}", split.explanation);
    for p in &res.plans {
        assert!(!p.explanation.contains("the others"), "{}", p.explanation);
    }
    // qwen2.5-7b: 28 layers + 2 over 3 stages.
    let mut req = train_request("qwen2.5-7b", "h100", 6, 6);
    req.pins.pp = Some(3);
    req.top_n = Some(200);
    let res = plan_request(&req).unwrap();
    let split = res.plans.iter().find(|p| p.stage_split == StageSplit::EmbeddingAndLoss).expect("an emb+loss plan");
    assert!(split.explanation.contains("first and last stages 9 layers, the middle one 10"), "{}", split.explanation);
}

#[test]
fn the_table_has_a_legend_and_shows_what_tells_rows_apart() {
    let mut req = train_request("llama2-7b", "a100-80g", 8, 8);
    req.pins.pp = Some(2);
    req.top_n = Some(200);
    let res = plan_request(&req).unwrap();
    let table = render_table(&res);
    for needle in
        ["split", "Columns: tp tensor-parallel", "accum", "gradient-accumulation steps", "ZeRO stage", "emb+loss"]
    {
        assert!(table.contains(needle), "missing {needle}:\n{table}");
    }
    // Rows that still render alike name the field that differs.
    let lines: Vec<&str> = table.lines().filter(|l| l.starts_with(' ') && !l.contains("rank")).collect();
    let bodies: Vec<String> =
        lines.iter().map(|l| l.split_whitespace().skip(1).take(15).collect::<Vec<_>>().join(" ")).collect();
    for (i, b) in bodies.iter().enumerate() {
        if bodies[..i].contains(b) {
            assert!(table.contains(&format!("and {} show the same columns", i + 1)), "{table}");
        }
    }
}

#[test]
fn did_you_mean_prefers_the_family_and_never_offers_a_far_name() {
    assert_eq!(suggestions("mistral-7b", preset_names()), vec!["mistral-7b-v0.3"]);
    assert!(preset("mistral-7b-v0.3").is_some());
    let without_mistral: Vec<&str> = preset_names().into_iter().filter(|n| !n.starts_with("mistral")).collect();
    assert!(suggestions("mistral-7b", without_mistral.clone()).is_empty(), "mixtral-8x7b is another model");
    let message = unknown_name_message("model preset", "mistral-7b", without_mistral.iter().copied());
    assert!(!message.contains("did you mean"), "{message}");
    assert_eq!(suggestions("llama-7b", preset_names()), vec!["llama2-7b"]);
    assert_eq!(suggestions("lama3-70b", preset_names()), vec!["llama3-70b"]);
    assert_eq!(suggestions("mixtrl-8x7b", preset_names()), vec!["mixtral-8x7b"]);
    assert_eq!(suggestions("qwen2.5-8b", preset_names()), vec!["qwen2.5-7b"]);
    let keys = gpu_keys();
    assert_eq!(suggestions("a100", keys.iter().map(String::as_str)), vec!["a100-40g", "a100-80g"]);
    assert_eq!(suggestions("4090", keys.iter().map(String::as_str)), vec!["rtx4090"]);
    assert!(suggestions("40", keys.iter().map(String::as_str)).is_empty(), "too short to name a card");
}

#[test]
fn serving_advice_shows_the_cheapest_option_that_sustains_the_load() {
    let mut req = advice_request_70b();
    req.workload.kind = WorkloadKind::Inference;
    req.target = AdviceTarget { serving_tokens_per_s: Some(2000.0), ..AdviceTarget::default() };
    let res = advice(&req).unwrap();
    // Throughput beyond the load buys nothing: one option meets it, first, and the rest are cheaper
    // ones that fall short (shown so the price of the load is visible).
    let meeting: Vec<&AdviceOption> = res.options.iter().filter(|o| o.meets_load).collect();
    assert_eq!(
        meeting.len(),
        1,
        "{:?}",
        res.options.iter().map(|o| (o.gpu_count, &o.gpu_key, o.cost_minor)).collect::<Vec<_>>()
    );
    assert!(res.options[0].meets_load);
    for o in &res.options[1..] {
        assert!(!o.meets_load && o.cost_minor < meeting[0].cost_minor, "{o:?}");
    }
    let fastest = res.options.iter().find(|o| o.fastest).unwrap();
    assert!(res.options.iter().all(|o| o.plan.tokens_per_s <= fastest.plan.tokens_per_s));
}

/// The split a plan says it runs, rebuilt from its JSON fields.
fn split_of(p: &Plan) -> cost::Split {
    let s = &p.layers_per_stage;
    let mid = if s.len() > 2 { s[1] } else { s[0] };
    cost::Split { kind: p.stage_split, first: s[0], mid, last: s[s.len() - 1] }
}

/// Megatron-LM's layer placement, re-derived independently of `Split::megatron_accepts` as an
/// oracle: for each pipeline rank and virtual stage, the first global layer and the count it
/// builds (`get_transformer_layer_offset` in megatron/core/transformer/transformer_layer.py,
/// `get_num_layers_to_build` in megatron/core/transformer/transformer_block.py), after the
/// checks of `TransformerConfig.__post_init__`; `None` where Megatron refuses the arguments.
fn megatron_placement(layers: u32, pp: u32, vp: u32, s: &cost::Split) -> Option<Vec<Vec<(u32, u32)>>> {
    let (l, p, v) = (layers as i64, pp as i64, vp as i64);
    if p == 1 {
        return (v == 1 && s.kind == StageSplit::Even && s.first == layers).then(|| vec![vec![(0, layers)]]);
    }
    let mut out = vec![vec![(0u32, 0u32); vp as usize]; pp as usize];
    match s.kind {
        StageSplit::Layout => {
            // What Megatron parses from the string the planner renders, and places.
            let stages = megatron_parse_layout(&s.pipeline_layout(pp, vp));
            if stages.len() as i64 != p * v {
                return None;
            }
            let flat: Vec<char> = stages.iter().flatten().copied().collect();
            let count = |ch: char| flat.iter().filter(|&&x| x == ch).count();
            if flat.first() != Some(&'E') || flat.last() != Some(&'L') || count('E') != 1 || count('L') != 1 {
                return None;
            }
            if count('t') as i64 != l || flat.iter().any(|c| !"ELt".contains(*c)) {
                return None;
            }
            // `get_layer_offset`: the layers of every earlier virtual stage in model order.
            let mut offset = 0u32;
            for vs in 0..vp {
                for r in 0..pp {
                    let n = stages[(vs * pp + r) as usize].iter().filter(|&&x| x == 't').count() as u32;
                    out[r as usize][vs as usize] = (offset, n);
                    offset += n;
                }
            }
        }
        StageSplit::Uneven => {
            let (f, la) = (s.first as i64, s.last as i64);
            if f <= 0 || la <= 0 || f % v != 0 || la % v != 0 {
                return None;
            }
            let middle = l - f - la;
            let middle_stages = p - 2;
            if middle < 0 || (middle != 0) != (middle_stages != 0) {
                return None;
            }
            if middle_stages > 0 && (middle % middle_stages != 0 || (middle / middle_stages) % v != 0) {
                return None;
            }
            let per_middle_rank = if middle_stages > 0 { middle / middle_stages } else { 0 };
            let (fc, mc, lc) = (f / v, middle / v, la / v);
            let total_chunks = fc + mc + lc;
            for r in 0..p {
                for vs in 0..v {
                    let count = if r == 0 {
                        fc
                    } else if r == p - 1 {
                        lc
                    } else {
                        per_middle_rank / v
                    };
                    let offset = if r == 0 {
                        vs * total_chunks
                    } else {
                        vs * total_chunks + fc + (r - 1) * (mc / middle_stages.max(1))
                    };
                    out[r as usize][vs as usize] = (offset as u32, count as u32);
                }
            }
        }
        StageSplit::Even | StageSplit::EmbeddingAndLoss => {
            let el = s.kind == StageSplit::EmbeddingAndLoss;
            let n = if el { l + 2 } else { l };
            if n % p != 0 || (n / p) % v != 0 {
                return None;
            }
            let per_chunk = n / p / v;
            for r in 0..p {
                for vs in 0..v {
                    let mut count = per_chunk;
                    let mut offset = vs * (n / v) + r * per_chunk;
                    if el {
                        if r == 0 && vs == 0 {
                            count -= 1;
                        } else {
                            offset -= 1;
                        }
                        if r == p - 1 && vs == v - 1 {
                            count -= 1;
                        }
                    }
                    out[r as usize][vs as usize] = (offset as u32, count as u32);
                }
            }
        }
    }
    // The split's own numbers must be what Megatron builds.
    let stages = s.layers_per_stage(pp);
    for (r, chunks) in out.iter().enumerate() {
        if chunks.iter().map(|c| c.1).sum::<u32>() != stages[r] {
            return None;
        }
    }
    Some(out)
}

/// `PipelineParallelLayerLayout.parse_str_to_list` (megatron/core/transformer/
/// pipeline_parallel_layer_layout.py), written out independently of the renderer: commas dropped,
/// `(x)*n` then `c*n` unrolled (each pattern in one left-to-right pass, as `re.sub` does), then one
/// list of layer characters per `|`-separated virtual stage.
fn megatron_parse_layout(layout: &str) -> Vec<Vec<char>> {
    let mut s: Vec<char> = layout.chars().filter(|&c| c != ',').collect();
    let digits_after = |s: &[char], at: usize| -> Option<(usize, usize)> {
        if s.get(at) != Some(&'*') {
            return None;
        }
        let end = (at + 1..=s.len()).take_while(|&j| j < s.len() && s[j].is_ascii_digit()).last()? + 1;
        let n: usize = s[at + 1..end].iter().collect::<String>().parse().ok()?;
        Some((n, end))
    };
    // `\(([^)]+)\)\*(\d+)`
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if s[i] == '('
            && let Some(close) = s[i + 1..].iter().position(|&c| c == ')').map(|k| i + 1 + k)
            && close > i + 1
            && let Some((n, end)) = digits_after(&s, close + 1)
        {
            for _ in 0..n {
                out.extend_from_slice(&s[i + 1..close]);
            }
            i = end;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    s = out;
    // `(.)\*(\d+)`
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if let Some((n, end)) = digits_after(&s, i + 1) {
            out.extend(std::iter::repeat_n(s[i], n));
            i = end;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out.split(|&c| c == '|').map(|stage| stage.to_vec()).collect()
}

#[test]
fn the_layout_parser_unrolls_as_megatron_does() {
    // The example in Megatron's docstring and the DeepSeek-V3 layout of its recipes.
    let parsed = megatron_parse_layout("Ettt|(tt|)*29,m|L");
    assert_eq!(parsed.len(), 32);
    assert_eq!(parsed[0], vec!['E', 't', 't', 't']);
    assert!(parsed[1..30].iter().all(|s| s == &vec!['t', 't']));
    assert_eq!((parsed[30].clone(), parsed[31].clone()), (vec!['m'], vec!['L']));
    let recipe = megatron_parse_layout("Et*3|(tt|)*29,m|L");
    assert_eq!(recipe, parsed);
    assert_eq!(megatron_parse_layout("(t*4|)*2tL"), vec![vec!['t'; 4], vec!['t'; 4], vec!['t', 'L']]);
}

/// Every layer built exactly once, in model order: the chunks tile `0..layers`.
fn tiles(layers: u32, placement: &[Vec<(u32, u32)>]) -> bool {
    let mut seen = vec![0u8; layers as usize];
    for &(offset, count) in placement.iter().flatten() {
        for i in offset..offset + count {
            match seen.get_mut(i as usize) {
                Some(x) => *x += 1,
                None => return false,
            }
        }
    }
    seen.iter().all(|&x| x == 1)
}

#[test]
fn megatron_rule_matches_the_oracle() {
    // Every (first, last) Megatron's checks accept is a split whose chunks tile the layers, and
    // `Split::megatron_accepts` says yes exactly where the oracle does.
    for layers in 1..=70u32 {
        for pp in 2..=9u32 {
            for vp in 1..=4u32 {
                for first in 0..=layers {
                    for last in 0..=layers - first {
                        let middle_stages = pp - 2;
                        let middle = layers - first - last;
                        let mid = middle.checked_div(middle_stages).unwrap_or(first);
                        let s = cost::Split { kind: StageSplit::Uneven, first, mid, last };
                        let oracle = megatron_placement(layers, pp, vp, &s);
                        assert_eq!(
                            s.megatron_accepts(layers, pp, vp),
                            oracle.is_some(),
                            "{layers} on {pp} x {vp}: {s:?}"
                        );
                        if let Some(pl) = oracle {
                            assert!(tiles(layers, &pl), "{layers} on {pp} x {vp}: {s:?} -> {pl:?}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn every_split_option_is_one_megatron_accepts() {
    let mut v = Vec::new();
    for layers in 1..=130u32 {
        for pp in 1..=16u32 {
            for vp in 1..=8u32 {
                cost::Split::options(layers, pp, vp, &mut v);
                for s in &v {
                    let at = format!("{layers} on {pp} x {vp}: {s:?}");
                    assert!(s.megatron_accepts(layers, pp, vp), "{at}");
                    let stages = s.layers_per_stage(pp);
                    assert_eq!(stages.len() as u32, pp, "{at}");
                    assert_eq!(stages.iter().sum::<u32>(), layers, "{at}");
                    assert!(stages.iter().all(|&x| x >= 1), "{at}");
                    let chunks = s.layers_per_chunk(pp, vp);
                    assert_eq!(chunks.iter().flatten().sum::<u32>(), layers, "{at}");
                    let placement =
                        megatron_placement(layers, pp, vp, s).unwrap_or_else(|| panic!("oracle refuses {at}"));
                    assert!(tiles(layers, &placement), "{at}: {placement:?}");
                    let counts: Vec<Vec<u32>> = placement.iter().map(|r| r.iter().map(|c| c.1).collect()).collect();
                    assert_eq!(chunks, counts, "{at}");
                    if s.kind == StageSplit::Uneven {
                        assert!(s.last <= s.first && (pp == 2 || s.first <= s.mid), "{at}");
                    }
                }
                // A layout only with virtual stages where neither even nor embedding-and-loss
                // divides; no virtual stage holds more than the balanced share of the layers, the
                // embedding and the loss, and each holds one of them at least.
                let divides = v.iter().any(|s| matches!(s.kind, StageSplit::Even | StageSplit::EmbeddingAndLoss));
                if let Some(s) = v.iter().find(|s| s.kind == StageSplit::Layout) {
                    let at = format!("{layers} on {pp} x {vp}: {v:?}");
                    assert!(vp > 1 && pp > 1 && !divides, "{at}");
                    let mut units = s.layers_per_chunk(pp, vp);
                    units[0][0] += 1;
                    units[pp as usize - 1][vp as usize - 1] += 1;
                    let units: Vec<u32> = units.into_iter().flatten().collect();
                    assert_eq!(units.iter().max().copied(), Some((layers + 2).div_ceil(pp * vp)), "{at}");
                    assert!(units.iter().all(|&u| u >= 1), "{at}");
                }
                v.retain(|s| s.kind != StageSplit::Layout);
                // Uneven only where nothing else divides; then the closed form finds the most
                // balanced first/last Megatron accepts (last <= first <= middle), if any.
                let others = v.iter().any(|s| s.kind != StageSplit::Uneven);
                let uneven = v.iter().find(|s| s.kind == StageSplit::Uneven);
                if others || pp == 1 {
                    assert!(uneven.is_none(), "{layers} on {pp} x {vp}: {v:?}");
                    continue;
                }
                let mut best: Option<u32> = None;
                for first in (vp..=layers).step_by(vp as usize) {
                    for last in (vp..=first).step_by(vp as usize) {
                        if first + last > layers {
                            break;
                        }
                        let middle_stages = pp - 2;
                        let mid = (layers - first - last).checked_div(middle_stages).unwrap_or(first);
                        let s = cost::Split { kind: StageSplit::Uneven, first, mid, last };
                        if (pp == 2 || first <= mid) && megatron_placement(layers, pp, vp, &s).is_some() {
                            let m = s.max_layers(pp);
                            best = Some(best.map_or(m, |b| b.min(m)));
                        }
                    }
                }
                assert_eq!(uneven.map(|s| s.max_layers(pp)), best, "{layers} on {pp} x {vp}: {v:?}");
            }
        }
    }
}

#[test]
fn uneven_stages_combine_with_virtual_stages() {
    let mut v = Vec::new();
    // 80 layers on PP 6 x VP 2: neither 80 nor 82 divides by 12; in units of 2 layers (one per
    // chunk) 40 = 6 + 4 x 7 + 6, so stages of 12/14/14/14/14/12 layers, 6/7/6 per chunk.
    cost::Split::options(80, 6, 2, &mut v);
    assert_eq!(v, vec![cost::Split { kind: StageSplit::Uneven, first: 12, mid: 14, last: 12 }]);
    assert_eq!(
        v[0].layers_per_chunk(6, 2),
        vec![vec![6, 6], vec![7, 7], vec![7, 7], vec![7, 7], vec![7, 7], vec![6, 6]]
    );
    // 60 layers on PP 8 x VP 2: 6/8/6, 3/4/3 per chunk.
    cost::Split::options(60, 8, 2, &mut v);
    assert_eq!(v, vec![cost::Split { kind: StageSplit::Uneven, first: 6, mid: 8, last: 6 }]);
    // 60 layers on PP 8 x VP 4 (the nearest 8 x 4 shape to DeepSeek-V3's 61 that Megatron's
    // first/last flags can express): 15 units of 4 = 2 + 6 x 2 + 1, so 8/8/4, 2/2/1 per chunk;
    // beside it the layout, 62 units over 32 virtual stages: 6/8/6, the embedding and the loss
    // each alone with a layer.
    cost::Split::options(60, 8, 4, &mut v);
    assert_eq!(
        v,
        vec![
            cost::Split { kind: StageSplit::Uneven, first: 8, mid: 8, last: 4 },
            cost::Split { kind: StageSplit::Layout, first: 6, mid: 8, last: 6 }
        ]
    );
    assert_eq!(v[1].pipeline_layout(8, 4), "Et|(tt|)*23t|(tt|)*6L");
    v.truncate(1);
    let chunks = v[0].layers_per_chunk(8, 4);
    assert_eq!(chunks[0], vec![2; 4]);
    assert!(chunks[1..7].iter().all(|c| c == &vec![2; 4]));
    assert_eq!(chunks[7], vec![1; 4]);
    assert_eq!(chunks.iter().flatten().sum::<u32>(), 60);
    // 126 layers on PP 4 x VP 3: neither 126 nor 128 divides by 12; 42 units of 3 layers =
    // 10 + 11 + 11 + 10, so 30/33/33/30.
    // The layout balances it better: 128 units, 32 a stage, so 31/32/32/31 layers.
    cost::Split::options(126, 4, 3, &mut v);
    assert_eq!(
        v,
        vec![
            cost::Split { kind: StageSplit::Uneven, first: 30, mid: 33, last: 30 },
            cost::Split { kind: StageSplit::Layout, first: 31, mid: 32, last: 31 }
        ]
    );
    // Where the layout has the uneven split's stages, only the uneven one (80 on 6 x 2 above: 82
    // units, 13/14/13).
    // Two stages: the first takes the larger half, in units of `vp` layers.
    cost::Split::options(33, 2, 3, &mut v);
    assert_eq!(v[0], cost::Split { kind: StageSplit::Uneven, first: 18, mid: 18, last: 15 });
    assert_eq!(v[0].layers_per_chunk(2, 3), vec![vec![6, 6, 6], vec![5, 5, 5]]);
    // ... and the layout: 35 units, 18 + 17: 17/16 layers, 6 units a chunk but the loss's 5.
    assert_eq!(v[1], cost::Split { kind: StageSplit::Layout, first: 17, mid: 17, last: 16 });
    assert_eq!(v[1].layers_per_chunk(2, 3), vec![vec![5, 6, 6], vec![6, 6, 4]]);
    assert_eq!(v[1].pipeline_layout(2, 3), "Et*5|(t*6|)*4t*4L");
    // The existing splits keep their place: even first, then embedding-and-loss, and uneven
    // only when neither exists.
    cost::Split::options(64, 8, 2, &mut v);
    assert_eq!(v.iter().map(|s| s.kind).collect::<Vec<_>>(), vec![StageSplit::Even]);
    cost::Split::options(126, 8, 8, &mut v);
    assert_eq!(v.iter().map(|s| s.kind).collect::<Vec<_>>(), vec![StageSplit::EmbeddingAndLoss]);
}

#[test]
fn deepseek_v3_61_layers_over_8x4_take_a_pipeline_layout() {
    // DeepSeek-V3's 61 layers on PP 8 x VP 4: with --decoder-first/last-pipeline-num-layers every
    // part (first, last, each middle stage) must divide by VP 4, so the layers must too; 61 does
    // not, and 63 (embedding and loss as layers) does not divide by 32. Megatron runs this shape
    // with --pipeline-model-parallel-layout, as its DeepSeek-V3 recipe on H100 does.
    let mut v = Vec::new();
    for first in 0..=61u32 {
        for last in 0..=61 - first {
            let mid = (61 - first - last) / 6;
            let s = cost::Split { kind: StageSplit::Uneven, first, mid, last };
            assert!(!s.megatron_accepts(61, 8, 4), "{s:?}");
            assert!(megatron_placement(61, 8, 4, &s).is_none(), "{s:?}");
        }
    }
    // The layout: 63 units over 32 virtual stages, two each but the loss alone; stages of 7/8/6
    // layers (the embedding on the first, the loss on the last counted as one).
    cost::Split::options(61, 8, 4, &mut v);
    assert_eq!(v, vec![cost::Split { kind: StageSplit::Layout, first: 7, mid: 8, last: 6 }]);
    let chunks = v[0].layers_per_chunk(8, 4);
    assert_eq!(chunks[0], vec![1, 2, 2, 2]);
    assert!(chunks[1..7].iter().all(|c| c == &vec![2; 4]));
    assert_eq!(chunks[7], vec![2, 2, 2, 0]);
    // The string Megatron-Bridge's DeepSeek-V3 H100 recipe passes, "Et|(tt|)*30mL", less the
    // multi-token-prediction layer the planner does not model.
    let layout = v[0].pipeline_layout(8, 4);
    assert_eq!(layout, "Et|(tt|)*30L");
    let placement = megatron_placement(61, 8, 4, &v[0]).expect("Megatron places the layout");
    assert!(tiles(61, &placement));
    // Without interleaving it stays the uneven 7/8/6 split.
    cost::Split::options(61, 8, 1, &mut v);
    assert_eq!(v, vec![cost::Split { kind: StageSplit::Uneven, first: 7, mid: 8, last: 6 }]);
    // Plans pinned to PP 8 x VP 4 now run it, and say so.
    let req =
        with_pins(train_request("deepseek-v3", "h100", 1024, 8), Pins { pp: Some(8), vp: Some(4), ..Pins::default() });
    let r = plan(&req.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_eq!((p.pp, p.vp, p.stage_split), (8, 4, StageSplit::Layout));
    assert_eq!(p.layers_per_stage, vec![7, 8, 8, 8, 8, 8, 8, 6]);
    assert!(split_of(p).megatron_accepts(61, 8, 4));
    assert!(p.explanation.contains("pipeline layout Et|(tt|)*30L"), "{}", p.explanation);
    let args = render::megatron_pipeline_args(p, 61);
    assert_eq!(args, vec![("pipeline-model-parallel-layout", Some("Et|(tt|)*30L".to_string()))]);
    // 8 x 4 is a tight layout (one virtual stage of 32 short), which the unpinned search tries;
    // 8 x 3 (9 of 24 short) is not, but a pinned VP 3 still gets it.
    assert!(cost::Split::layout_is_tight(61, 8, 4) && !cost::Split::layout_is_tight(61, 8, 3));
    let req =
        with_pins(train_request("deepseek-v3", "h100", 1024, 8), Pins { pp: Some(8), vp: Some(3), ..Pins::default() });
    let p = plan(&req.resolve().unwrap()).unwrap().plans.remove(0);
    assert_eq!((p.vp, p.stage_split), (3, StageSplit::Layout));
}

/// The Megatron flags a plan renders, as `--name value` strings.
fn rendered(p: &Plan, layers: u32) -> Vec<String> {
    render::megatron_pipeline_args(p, layers)
        .into_iter()
        .chain(render::megatron_expert_args(p))
        .flat_map(|(name, value)| std::iter::once(format!("--{name}")).chain(value))
        .collect()
}

#[test]
fn published_moe_splits_are_planned_as_published() {
    // Megatron-Bridge's H100 recipes (scripts/performance/configs): DeepSeek-V3 on 1,024 GPUs and
    // Qwen3-235B-A22B on 256, both TP 2, PP 8, VP 4, expert TP 1; EP 64 and 32. Pinned as
    // published but for the expert TP, which the search must find itself.
    let published = |model: &str, gpus: u32, gbs: u32, ep: u32| {
        let mut req = train_request(model, "h100", gpus, 8);
        req.workload.global_batch = Some(gbs);
        req.workload.seq_len = Some(4096);
        req.workload.precision = Precision::Fp8;
        let pins =
            Pins { tp: Some(2), pp: Some(8), vp: Some(4), ep: Some(ep), micro_batch: Some(1), ..Pins::default() };
        plan(&with_pins(req, pins).resolve().unwrap()).unwrap().plans.remove(0)
    };

    // DeepSeek-V3: 61 layers through the layout; EP 64 also divides DP 64, so both expert TP
    // degrees are open (the faster one is kept).
    let ds = published("deepseek-v3", 1024, 8192, 64);
    assert_eq!((ds.tp, ds.pp, ds.vp, ds.ep, ds.dp), (2, 8, 4, 64, 64));
    assert_eq!(ds.stage_split, StageSplit::Layout);
    assert_eq!(ds.layers_per_stage, vec![7, 8, 8, 8, 8, 8, 8, 6]);
    let args = rendered(&ds, 61);
    let at = args.iter().position(|a| a == "--pipeline-model-parallel-layout").expect("layout flag");
    let layout = &args[at + 1];
    let stages = megatron_parse_layout(layout);
    assert_eq!(stages.len(), 32);
    assert_eq!(stages.iter().flatten().filter(|&&c| c == 't').count(), 61);
    assert_eq!((stages[0][0], *stages[31].last().unwrap()), ('E', 'L'));
    // The layout replaces every other virtual-stage and split flag.
    for refused in [
        "--num-layers-per-virtual-pipeline-stage",
        "--num-virtual-stages-per-pipeline-rank",
        "--decoder-first-pipeline-num-layers",
        "--account-for-embedding-in-pipeline-split",
    ] {
        assert!(!args.iter().any(|a| a == refused), "{args:?}");
    }
    let pinned = |p: &Plan, etp: u32| {
        let mut req = train_request("deepseek-v3", "h100", 1024, 8);
        req.workload.global_batch = Some(8192);
        req.workload.seq_len = Some(4096);
        req.workload.precision = Precision::Fp8;
        let pins = Pins { etp: Some(etp), ..knobs_of(p) };
        plan(&with_pins(req, pins).resolve().unwrap()).unwrap().plans.remove(0)
    };
    // Expert TP 1 as the recipe pins it: experts whole, rendered as such.
    let whole = pinned(&ds, 1);
    assert_eq!(whole.etp, Some(1));
    let args = rendered(&whole, 61);
    let value = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
    assert_eq!(value("--expert-model-parallel-size").as_deref(), Some("64"));
    assert_eq!(value("--expert-tensor-parallel-size").as_deref(), Some("1"));
    assert_eq!(value("--pipeline-model-parallel-layout").as_deref(), Some("Et|(tt|)*30L"));
    assert!(
        whole.explanation.contains("experts whole (expert TP 1), EP over the 128 TP x DP ranks"),
        "{}",
        whole.explanation
    );
    // Experts split like the dense layers hold half the expert weights of whole ones.
    let split = pinned(&ds, 2);
    assert_eq!(split.etp, None);
    assert!(!rendered(&split, 61).iter().any(|a| a == "--expert-tensor-parallel-size"));
    assert!(split.memory.weights < whole.memory.weights, "{} vs {}", split.memory.weights, whole.memory.weights);

    // Qwen3-235B: 94 + 2 = 96 units over 32 virtual stages (embedding and loss); EP 32 does not
    // divide DP 16, so only expert TP 1 runs it: EP over the 32 TP x DP ranks.
    let qw = published("qwen3-235b-a22b", 256, 2048, 32);
    assert_eq!((qw.tp, qw.pp, qw.vp, qw.ep, qw.dp, qw.etp), (2, 8, 4, 32, 16, Some(1)));
    assert_eq!(qw.stage_split, StageSplit::EmbeddingAndLoss);
    let args = rendered(&qw, 94);
    let value = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
    assert!(args.iter().any(|a| a == "--account-for-embedding-in-pipeline-split"), "{args:?}");
    assert!(args.iter().any(|a| a == "--account-for-loss-in-pipeline-split"), "{args:?}");
    assert_eq!(value("--num-layers-per-virtual-pipeline-stage").as_deref(), Some("3"));
    assert_eq!(value("--expert-model-parallel-size").as_deref(), Some("32"));
    assert_eq!(value("--expert-tensor-parallel-size").as_deref(), Some("1"));
    // Pinning Megatron's default expert TP (2) there is refused: 2 x 32 does not divide 32.
    let mut req = train_request("qwen3-235b-a22b", "h100", 256, 8);
    req.workload.global_batch = Some(2048);
    let pins = Pins { etp: Some(2), ..knobs_of(&qw) };
    assert!(plan(&with_pins(req, pins).resolve().unwrap()).is_err());
}

/// Pins that fix a plan's knobs (as the server's retune does), leaving the expert TP open.
fn knobs_of(p: &Plan) -> Pins {
    Pins {
        tp: Some(p.tp),
        pp: Some(p.pp),
        dp: Some(p.dp),
        vp: Some(p.vp),
        micro_batch: Some(p.micro_batch),
        zero_stage: Some(p.zero_stage),
        recompute: Some(p.recompute),
        sequence_parallel: Some(p.sequence_parallel),
        cp: Some(p.cp),
        ep: Some(p.ep),
        etp: None,
        offload: Some(p.offload),
    }
}

#[test]
fn qwen3_235b_on_pp8_vp4_counts_embedding_and_loss() {
    // 94 layers on PP 8 x VP 4: 94 does not divide by 4 (so no first/last split either), but
    // 94 + 2 = 96 = 8 x 4 x 3: the embedding-and-loss split, 3 layers a chunk, the embedding in
    // the first chunk of the first stage and the loss in the last chunk of the last.
    let req = with_pins(
        train_request("qwen3-235b-a22b", "h100", 1024, 8),
        Pins { pp: Some(8), vp: Some(4), ..Pins::default() },
    );
    let r = plan(&req.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_eq!((p.pp, p.vp, p.stage_split), (8, 4, StageSplit::EmbeddingAndLoss));
    assert_eq!(p.layers_per_stage, vec![11, 12, 12, 12, 12, 12, 12, 11]);
    let s = split_of(p);
    assert!(s.megatron_accepts(94, 8, 4));
    let chunks = s.layers_per_chunk(8, 4);
    assert_eq!(chunks[0], vec![2, 3, 3, 3]);
    assert!(chunks[1..7].iter().all(|c| c == &vec![3, 3, 3, 3]));
    assert_eq!(chunks[7], vec![3, 3, 3, 2]);
    assert_eq!(chunks.iter().flatten().sum::<u32>(), 94);
    assert!(tiles(94, &megatron_placement(94, 8, 4, &s).unwrap()));
}

#[test]
fn uneven_interleaved_plan_is_feasible_and_explained() {
    // Llama 3 70B (80 layers) pinned to TP 8, PP 6, VP 2: feasible only with uneven stages
    // combined with interleaving (before, only `vp == 1` had uneven stages).
    let mut req = train_request("llama3-70b", "h100", 96, 8);
    req.workload.global_batch = Some(384);
    let req = with_pins(req, Pins { tp: Some(8), pp: Some(6), vp: Some(2), ..Pins::default() });
    let r = plan(&req.resolve().unwrap()).unwrap();
    let p = &r.plans[0];
    assert_eq!((p.pp, p.vp, p.stage_split), (6, 2, StageSplit::Uneven));
    assert_eq!(p.layers_per_stage, vec![12, 14, 14, 14, 14, 12]);
    assert!(split_of(p).megatron_accepts(80, 6, 2));
    assert_eq!(p.grad_accum % p.pp, 0);
    assert!(
        p.explanation
            .contains("uneven stages: first 12, last 12, the 4 middle ones 14 layers; 6/7/6 per virtual stage"),
        "{}",
        p.explanation
    );
}

fn hf(json: &str) -> HfConfig {
    serde_json::from_str(json).unwrap()
}

#[test]
fn a_checkpoints_config_json_gives_the_architecture() {
    // Llama 3.2 1B's config.json (abridged: the other keys are ignored).
    let llama = hf(r#"{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
        "intermediate_size": 8192, "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
        "vocab_size": 128256, "tie_word_embeddings": true, "rope_scaling": {"factor": 32.0}, "head_dim": 64}"#);
    let (name, arch) = validate::resolve_hf_config(&llama).unwrap();
    assert_eq!(name, "hf:llama");
    assert_eq!(
        (arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.ffn, arch.vocab),
        (16, 2048, 32, 8, 8192, 128256)
    );
    assert!(arch.tied_embeddings && arch.model_type.as_deref() == Some("llama"));
    // Tied: one embedding matrix, 1.24B parameters as the model card says (1.50B if it were untied).
    assert_eq!(arch.param_count(), 1_235_814_400);
    // Gemma ties by default, as its transformers config does; a multimodal config's text_config is read.
    let gemma = hf(r#"{"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 1152,
        "intermediate_size": 6912, "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
        "head_dim": 256, "vocab_size": 262144}}"#);
    let (name, arch) = validate::resolve_hf_config(&gemma).unwrap();
    assert_eq!((name.as_str(), arch.tied_embeddings, arch.head_dim), ("hf:gemma3_text", true, Some(256)));
    // Mixtral's experts; DeepSeek's shared experts and first dense layers.
    let mixtral = hf(r#"{"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
        "num_local_experts": 8, "num_experts_per_tok": 2}"#);
    let (_, arch) = validate::resolve_hf_config(&mixtral).unwrap();
    assert_eq!(arch.param_count(), preset("mixtral-8x7b").unwrap().param_count());
    let deepseek = hf(r#"{"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "num_attention_heads": 128, "num_hidden_layers": 61, "num_key_value_heads": 128,
        "vocab_size": 129280, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "first_k_dense_replace": 3, "tie_word_embeddings": false}"#);
    let (_, arch) = validate::resolve_hf_config(&deepseek).unwrap();
    let moe = arch.moe.unwrap();
    assert_eq!((moe.experts, moe.experts_per_token, moe.shared_experts, moe.dense_layers), (256, 8, 1, 3));
    assert_eq!((arch.ffn, moe.dense_ffn), (2048, Some(18432)));
}

#[test]
fn a_config_json_missing_a_field_names_its_own_key() {
    let err = validate::resolve_hf_config(&hf(r#"{"model_type": "llama", "hidden_size": 64}"#)).unwrap_err();
    assert!(err.to_string().contains("model.hf_config.num_hidden_layers"), "{err}");
    let err = validate::resolve_hf_config(&hf(
        r#"{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 0, "vocab_size": 100}"#,
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("model.hf_config.intermediate_size") && err.to_string().contains("got 0"),
        "{err}"
    );
    let both = ModelRef { preset: Some("llama3-8b".into()), architecture: None, hf_config: Some(HfConfig::default()) };
    assert!(
        validate::resolve_model(&both).unwrap_err().to_string().contains("one of preset, architecture and hf_config")
    );
}

#[test]
fn what_a_pipeline_stage_holds_is_what_the_schedule_runs() {
    // 1F1B: stage s of p holds min(p - s, m) micro-batches.
    assert_eq!([0, 1, 2, 3].map(|s| cost::in_flight(4, 1, s, 8)), [4.0, 3.0, 2.0, 1.0]);
    assert_eq!(cost::in_flight(4, 1, 0, 2), 2.0);
    // Interleaved (Megatron's order): warm-up 2 (p - s - 1) + (v - 1) p chunk forwards, plus the one
    // in progress, each chunk 1/v of the stage: stage 0 holds p + (p - 1)/v, the last p - (p - 1)/v.
    assert_eq!(cost::in_flight(4, 2, 0, 8), 5.5);
    assert_eq!(cost::in_flight(4, 2, 3, 8), 2.5);
    assert_eq!(cost::in_flight(2, 2, 0, 4), 2.5);
    // ... never more than every micro-batch of every chunk.
    assert_eq!(cost::in_flight(4, 2, 0, 1), 1.0);
    assert_eq!(cost::in_flight(1, 1, 0, 16), 1.0);
}

#[test]
fn a_tied_head_is_one_matrix_on_one_stage_and_a_copy_on_each_end_of_a_pipeline() {
    let mut tied = train_request("llama3-8b", "h100", 8, 8);
    let mut arch = preset("llama3-8b").unwrap();
    arch.tied_embeddings = true;
    tied.model = ModelRef { preset: None, architecture: Some(arch.clone()), hf_config: None };
    let untied = ModelRef { preset: None, architecture: Some(preset("llama3-8b").unwrap()), hf_config: None };
    let mut plain = tied.clone();
    plain.model = untied;
    let pins = Pins { tp: Some(8), pp: Some(1), dp: Some(1), zero_stage: Some(0), ..Pins::default() };
    let a = plan(&with_pins(tied.clone(), pins.clone()).resolve().unwrap()).unwrap();
    let b = plan(&with_pins(plain.clone(), pins).resolve().unwrap()).unwrap();
    let vh = f64::from(arch.vocab) * f64::from(arch.hidden) / 8.0;
    // Weights, gradients and optimizer states of one V*h matrix fewer (sharded over TP 8).
    let saved = b.plans[0].memory.weights as f64 - a.plans[0].memory.weights as f64;
    assert!((saved - 2.0 * vh).abs() / (2.0 * vh) < 0.01, "{saved} vs {}", 2.0 * vh);
    let pp = Pins { tp: Some(4), pp: Some(2), dp: Some(1), zero_stage: Some(0), ..Pins::default() };
    let a = plan(&with_pins(tied, pp.clone()).resolve().unwrap()).unwrap();
    let b = plan(&with_pins(plain, pp).resolve().unwrap()).unwrap();
    assert_eq!(a.plans[0].memory.weights, b.plans[0].memory.weights);
}
