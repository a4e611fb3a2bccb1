//! Tests of the mixed-GPU planner.

use super::cost;
use super::mixed::{MixedInput, MixedPlanRequest, assign_layers, best_mix};
use super::*;
use proptest::prelude::*;

fn part(gpu: &str, gpus: u32, gpn: u32) -> ClusterFields {
    ClusterFields::catalog(gpu, gpus, gpn, 400.0)
}

fn mixed_request(preset: &str, kind: WorkloadKind, parts: Vec<ClusterFields>) -> MixedPlanRequest {
    MixedPlanRequest {
        model: ModelRef::preset(preset),
        workload: WorkloadFields::bf16(kind, 4096, 512),
        parts,
        top_n: None,
    }
}

/// The worked example of `docs/planner-mixed.md`: one node of 8 x A100 80GB and two nodes of
/// 4 x RTX 4090, Llama 2 13B.
fn worked_example() -> MixedPlanRequest {
    mixed_request("llama2-13b", WorkloadKind::Train, vec![part("a100-80g", 8, 8), part("rtx4090", 8, 4)])
}

fn req_layers(preset_name: &str) -> u32 {
    preset(preset_name).map_or(0, |a| a.layers)
}

#[test]
fn faster_larger_gpus_get_more_layers() {
    for preset in ["llama2-7b", "llama2-13b"] {
        let mut req = worked_example();
        req.model.preset = Some(preset.to_string());
        req.top_n = Some(50);
        let r = plan_mixed_request(&req).unwrap();
        let mixes: Vec<&MixedPlan> = r.plans.iter().filter(|p| p.parts_used == 2).collect();
        assert!(!mixes.is_empty(), "{preset}: no mix among {} plans", r.plans.len());
        for p in mixes {
            // Per GPU of a stage (a stage of TP t has t GPUs), every A100 stage holds more layers
            // than any RTX 4090 stage, and the A100s hold more of the model.
            let per_gpu = |part: u32| {
                p.stages.iter().filter(move |s| s.part == part).map(|s| f64::from(s.layers) / f64::from(s.tp))
            };
            let least_a100 = per_gpu(0).fold(f64::INFINITY, f64::min);
            let most_rtx = per_gpu(1).fold(0.0, f64::max);
            assert!(least_a100 > most_rtx, "{preset}: {}", p.explanation);
            let share = |u: &MixedPartUse| f64::from(u.layers_per_replica) / f64::from(u.gpus_used);
            assert!(share(&p.parts[0]) > share(&p.parts[1]), "{preset}: {}", p.explanation);
            assert_eq!(p.stages.iter().map(|s| s.layers).sum::<u32>(), req_layers(preset));
            // TP stays inside a node of one GPU type.
            for s in &p.stages {
                let gpn = if s.part == 0 { 8 } else { 4 };
                assert_eq!(gpn % s.tp, 0);
                assert_eq!(s.gpu_key, if s.part == 0 { "a100-80g" } else { "rtx4090" });
            }
        }
    }
}

/// `best_mix` (the advice's search) is the best plan on two parts or more that `plan_mixed`
/// ranks, and none when only a part alone fits.
#[test]
fn best_mix_is_the_best_plan_using_every_part() {
    let mut three = mixed_request(
        "llama3-70b",
        WorkloadKind::Train,
        vec![part("h100", 32, 8), part("a100-80g", 16, 8), part("rtx4090", 16, 8)],
    );
    for req in [worked_example(), three.clone()] {
        let input = req.resolve().unwrap();
        let best = best_mix(&input).unwrap().expect("a mix fits");
        let ranked = plan_mixed(&MixedInput { top_n: 1000, ..input }).unwrap();
        let first = ranked.plans.iter().find(|p| p.parts_used >= 2).unwrap();
        assert_eq!(best, *first);
    }
    // No mix fits (nor any part alone, see `infeasible_mix_says_why`): none, not an error.
    three.parts = vec![part("a10", 2, 2), part("rtx4090", 2, 2)];
    let input = three.resolve().unwrap();
    assert_eq!(best_mix(&input).unwrap(), None);
    assert!(plan_mixed(&input).is_err());
}

#[test]
fn worked_example_figures() {
    let r = plan_mixed_request(&worked_example()).unwrap();
    let best = &r.plans[0];
    // The mix beats both parts alone (the docs page quotes these figures).
    let alone = |i: usize| {
        let input = worked_example().resolve().unwrap().part_input(i);
        plan(&input).map(|r| r.plans[0].tokens_per_s).unwrap_or(0.0)
    };
    let (a100, rtx) = (alone(0), alone(1));
    assert_eq!(best.parts_used, 2, "{}", best.explanation);
    assert!(best.tokens_per_s > a100 && a100 > rtx, "mix {} A100 {a100} 4090 {rtx}", best.tokens_per_s);
    // The figures docs/planner-mixed.md walks through.
    let layout: Vec<(&str, u32, u32)> = best.stages.iter().map(|s| (s.gpu_key.as_str(), s.tp, s.layers)).collect();
    assert_eq!(layout, [("rtx4090", 2, 6), ("rtx4090", 2, 6), ("a100-80g", 2, 14), ("a100-80g", 2, 14)]);
    assert_eq!((best.dp, best.micro_batch, best.grad_accum), (2, 1, 256));
    assert!((best.tokens_per_s - 21_120.0).abs() < 50.0, "{}", best.tokens_per_s);
    assert!((a100 - 15_433.0).abs() < 50.0 && (rtx - 6_185.0).abs() < 50.0, "{a100} {rtx}");
    let slowest = best.stages.iter().map(|s| s.time_per_micro_batch_s).fold(0.0, f64::max);
    // The per-part busy fractions are relative to the slowest stage; one part sets the pace.
    assert!(best.parts.iter().any(|p| (p.busy_fraction - 1.0).abs() < 1e-9));
    assert!(slowest > 0.0 && best.step_time_s > slowest * f64::from(best.grad_accum));
    let json = serde_json::to_string(best).unwrap();
    let back: MixedPlan = serde_json::from_str(&json).unwrap();
    // serde_json parses floats to within an ulp.
    assert_eq!(
        back.stages.iter().map(|s| (s.part, s.tp, s.layers, s.memory)).collect::<Vec<_>>(),
        best.stages.iter().map(|s| (s.part, s.tp, s.layers, s.memory)).collect::<Vec<_>>()
    );
    assert_eq!(
        (back.dp, back.pp, back.micro_batch, &back.parts.len(), &back.explanation),
        (best.dp, best.pp, best.micro_batch, &best.parts.len(), &best.explanation)
    );
    assert!((back.tokens_per_s - best.tokens_per_s).abs() <= 1e-9 * best.tokens_per_s);
}

#[test]
fn infeasible_mix_says_why() {
    let req = mixed_request("llama3-70b", WorkloadKind::Train, vec![part("a10", 2, 2), part("rtx4090", 2, 2)]);
    match plan_mixed_request(&req) {
        Err(PlanError::Infeasible { reason, available_bytes, .. }) => {
            assert!(reason.contains("no mix of 2 x A10 + 2 x GeForce RTX 4090 fits"), "{reason}");
            assert!(reason.contains("part 0 alone") && reason.contains("part 1 alone"), "{reason}");
            assert_eq!(available_bytes, cost::usable_bytes(24_000_000_000) as u64);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn invalid_requests_name_the_field() {
    let field = |req: &MixedPlanRequest| match req.resolve() {
        Err(PlanError::Invalid { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let mut req = worked_example();
    req.parts[1].gpu = Some("rtx5090x".to_string());
    assert_eq!(field(&req), "parts[1].gpu");
    let mut req = worked_example();
    req.parts[0].gpus = 7;
    assert_eq!(field(&req), "parts[0].gpus");
    let mut req = worked_example();
    req.parts.clear();
    assert_eq!(field(&req), "parts");
    let mut req = worked_example();
    req.workload.kind = WorkloadKind::Inference;
    assert_eq!(field(&req), "workload.kind");
    let mut req = worked_example();
    req.workload.precision = Precision::Fp8;
    match req.resolve() {
        Err(PlanError::Invalid { field, message }) => {
            assert_eq!(field, "workload.precision");
            assert!(message.starts_with("parts[0]"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn one_part_is_the_homogeneous_plan() {
    let req = mixed_request("llama2-7b", WorkloadKind::Lora, vec![part("h100", 8, 8)]);
    let r = plan_mixed_request(&req).unwrap();
    let input = req.resolve().unwrap().part_input(0);
    let homogeneous = plan(&input).unwrap();
    assert_eq!(r.plans.len(), homogeneous.plans.len());
    for (m, h) in r.plans.iter().zip(&homogeneous.plans) {
        assert_eq!(m.single_part.as_ref(), Some(h));
        assert_eq!(m.tokens_per_s, h.tokens_per_s);
        assert_eq!(m.stages.len() as u32, h.pp);
        assert_eq!(m.stages.iter().map(|s| s.memory.total).max(), Some(h.memory_per_gpu_bytes));
    }
}

#[test]
fn layer_assignment_examples() {
    // Equal stages: even.
    assert_eq!(assign_layers(8, &[1.0, 1.0], &[0.0, 0.0], &[8, 8]), Some(vec![4, 4]));
    // A stage three times as fast takes three times the layers.
    assert_eq!(assign_layers(8, &[3.0, 1.0], &[0.0, 0.0], &[8, 8]), Some(vec![2, 6]));
    // The LM head on the last stage costs it a layer.
    assert_eq!(assign_layers(8, &[1.0, 1.0], &[0.0, 2.0], &[8, 8]), Some(vec![5, 3]));
    // Memory caps win over speed.
    assert_eq!(assign_layers(8, &[3.0, 1.0], &[0.0, 0.0], &[8, 5]), Some(vec![3, 5]));
    // Not enough room, a stage that holds no layer, more stages than layers.
    assert_eq!(assign_layers(8, &[1.0, 1.0], &[0.0, 0.0], &[3, 4]), None);
    assert_eq!(assign_layers(8, &[1.0, 1.0], &[0.0, 0.0], &[0, 8]), None);
    assert_eq!(assign_layers(1, &[1.0, 1.0], &[0.0, 0.0], &[8, 8]), None);
}

/// The slowest stage of an assignment.
fn slowest(split: &[u32], per_layer: &[f64], fixed: &[f64]) -> f64 {
    split.iter().zip(per_layer).zip(fixed).map(|((&l, &t), &f)| f64::from(l) * t + f).fold(0.0, f64::max)
}

/// Every split of `layers` over `n` stages with at least one layer each.
fn all_splits(layers: u32, n: usize, out: &mut Vec<Vec<u32>>, cur: &mut Vec<u32>) {
    if cur.len() + 1 == n {
        if layers >= 1 {
            cur.push(layers);
            out.push(cur.clone());
            cur.pop();
        }
        return;
    }
    for l in 1..layers {
        cur.push(l);
        all_splits(layers - l, n, out, cur);
        cur.pop();
    }
}

const GPUS: [&str; 7] = ["rtx4090", "a10", "a100-40g", "a100-80g", "h100", "h200", "b200"];

prop_compose! {
    /// 2 or 3 distinct catalog GPU types, 1 or 2 nodes of 1 to 8 GPUs each.
    fn arb_mix()(
        kinds in prop::sample::subsequence(GPUS.to_vec(), 2..=3),
        shapes in prop::collection::vec((prop::sample::select(vec![1u32, 2, 4, 8]), 1u32..=2), 3),
        preset in prop::sample::select(vec!["llama2-7b", "llama2-13b", "qwen2.5-7b", "mistral-7b-v0.3"]),
        kind in prop::sample::select(vec![WorkloadKind::Train, WorkloadKind::Lora]),
        seq in prop::sample::select(vec![1024u32, 2048, 4096]),
        batch in prop::sample::select(vec![64u32, 96, 256, 512]),
    ) -> MixedPlanRequest {
        let parts = kinds.iter().zip(&shapes).map(|(g, &(gpn, nodes))| part(g, gpn * nodes, gpn)).collect();
        let mut req = mixed_request(preset, kind, parts);
        req.workload.seq_len = Some(seq);
        req.workload.global_batch = Some(batch);
        req.top_n = Some(5);
        req
    }
}

/// (tier, tokens/s) of a plan as both planners rank it: the requested batch on every GPU of the
/// parts used first.
fn tier(p: &MixedPlan, requested: u32) -> u8 {
    if p.single_part.as_ref().is_some_and(|s| s.idle_gpus > 0) { 2 } else { u8::from(p.global_batch != requested) }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn mixes_are_never_slower_than_the_fastest_part_and_always_fit(req in arb_mix()) {
        let input = req.resolve().unwrap();
        let requested = req.workload.global_batch.unwrap();
        // The best plan of every part alone, as the homogeneous planner ranks them.
        let mut best_alone: Option<(u8, f64)> = None;
        for i in 0..input.parts.len() {
            if let Ok(r) = plan(&input.part_input(i)) {
                let p = &r.plans[0];
                let t = if p.idle_gpus > 0 { 2 } else { u8::from(p.global_batch != requested) };
                if best_alone.is_none_or(|(bt, bs)| t < bt || (t == bt && p.tokens_per_s > bs)) {
                    best_alone = Some((t, p.tokens_per_s));
                }
            }
        }
        let result = plan_mixed(&input);
        let Ok(r) = result else {
            prop_assert!(best_alone.is_none(), "a part fits alone but the mix search failed: {:?}", result);
            return Ok(());
        };
        let best = &r.plans[0];
        if let Some((t, tokens)) = best_alone {
            let mine = tier(best, requested);
            prop_assert!(mine < t || (mine == t && best.tokens_per_s >= tokens), "{} vs {tokens} (tier {t}): {}", best.tokens_per_s, best.explanation);
        }
        for p in &r.plans {
            prop_assert_eq!(p.stages.iter().map(|s| s.layers).sum::<u32>(), input.model.layers);
            prop_assert_eq!(p.stages.len() as u32, p.pp);
            prop_assert_eq!(p.global_batch % (p.dp * p.micro_batch), 0);
            for s in &p.stages {
                let part = &input.parts[s.part as usize];
                prop_assert!(s.layers >= 1);
                prop_assert_eq!(&s.gpu_key, &part.gpu.key);
                prop_assert_eq!(part.gpus_per_node % s.tp, 0);
                prop_assert_eq!(s.memory.usable, cost::usable_bytes(part.gpu.memory_bytes) as u64);
                prop_assert!(s.memory.total <= s.memory.usable, "{} over {} on {}: {}", s.memory.total, s.memory.usable, s.gpu_key, p.explanation);
            }
            for u in &p.parts {
                prop_assert_eq!(u.gpus_used + u.idle_gpus, u.gpus);
                prop_assert!(u.memory_per_gpu_bytes <= u.usable_bytes);
            }
        }
    }

    #[test]
    fn layer_assignment_minimises_the_slowest_stage(
        stages in prop::collection::vec((1u32..20, 0u32..3, 1u32..12), 2..=4),
        layers in 2u32..14,
    ) {
        let per_layer: Vec<f64> = stages.iter().map(|s| f64::from(s.0)).collect();
        let fixed: Vec<f64> = stages.iter().map(|s| f64::from(s.1)).collect();
        let caps: Vec<u32> = stages.iter().map(|s| s.2).collect();
        let mut splits = Vec::new();
        all_splits(layers, stages.len(), &mut splits, &mut Vec::new());
        let best = splits.iter().filter(|s| s.iter().zip(&caps).all(|(l, c)| l <= c)).map(|s| slowest(s, &per_layer, &fixed)).fold(f64::INFINITY, f64::min);
        match assign_layers(layers, &per_layer, &fixed, &caps) {
            Some(split) => {
                prop_assert_eq!(split.iter().sum::<u32>(), layers);
                prop_assert!(split.iter().zip(&caps).all(|(l, c)| *l >= 1 && l <= c));
                prop_assert_eq!(slowest(&split, &per_layer, &fixed), best);
            }
            None => prop_assert!(best.is_infinite()),
        }
    }
}

#[test]
fn three_types_mix_beats_every_part_alone() {
    let req = mixed_request(
        "llama3-70b",
        WorkloadKind::Train,
        vec![part("h100", 32, 8), part("a100-80g", 16, 8), part("rtx4090", 16, 8)],
    );
    let input = req.resolve().unwrap();
    let r = plan_mixed(&input).unwrap();
    let best = &r.plans[0];
    assert_eq!(best.parts_used, 3, "{}", best.explanation);
    assert_eq!(best.parts.iter().map(|u| u.gpus_used).sum::<u32>(), 64);
    let fastest_alone =
        (0..3).filter_map(|i| plan(&input.part_input(i)).ok()).map(|r| r.plans[0].tokens_per_s).fold(0.0, f64::max);
    assert!(best.tokens_per_s > fastest_alone, "{} vs {fastest_alone}", best.tokens_per_s);
    // The H100s hold the most layers per GPU, the RTX 4090s the fewest.
    let per_gpu = |i: usize| {
        f64::from(best.parts[i].layers_per_replica) * f64::from(best.dp) / f64::from(best.parts[i].gpus_used)
    };
    assert!(per_gpu(0) > per_gpu(1) && per_gpu(1) > per_gpu(2), "{}", best.explanation);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn mixed_requests_never_panic(
        layers in 1u32..12, heads in prop::sample::select(vec![1u32, 2, 3, 4, 8]), kv_div in prop::sample::select(vec![1u32, 2]),
        experts in prop::option::of(2u32..16), vocab in 1u32..70000,
        kinds in prop::sample::subsequence(GPUS.to_vec(), 1..=4),
        shapes in prop::collection::vec((prop::sample::select(vec![1u32, 2, 3, 4]), 1u32..=2), 4),
        lora in any::<bool>(), batch in 1u32..300, seq in prop::sample::select(vec![128u32, 1000, 4096]),
    ) {
        let kv = if heads % kv_div == 0 { heads / kv_div } else { heads };
        let arch = ModelArch {
            layers, hidden: heads * 64, heads, kv_heads: kv, ffn: heads * 64 * 3, vocab, head_dim: None,
            moe: experts.map(|e| MoeSpec { experts: e, experts_per_token: 2.min(e), shared_experts: 0, dense_layers: 0, dense_ffn: None, capacity_factor: None }),
            diffusion: None,
            tied_embeddings: false,
            model_type: None,
            gated_mlp: None,
        };
        let parts = kinds.iter().zip(&shapes).map(|(g, &(gpn, nodes))| part(g, gpn * nodes, gpn)).collect();
        let mut req = mixed_request("llama2-7b", if lora { WorkloadKind::Lora } else { WorkloadKind::Train }, parts);
        req.model = ModelRef { preset: None, architecture: Some(arch), hf_config: None };
        req.workload.global_batch = Some(batch);
        req.workload.seq_len = Some(seq);
        req.top_n = Some(3);
        let input = req.resolve().unwrap();
        match plan_mixed(&input) {
            Ok(r) => {
                prop_assert!(!r.plans.is_empty());
                for p in &r.plans {
                    prop_assert_eq!(p.stages.iter().map(|s| s.layers).sum::<u32>(), layers);
                    prop_assert!(p.stages.iter().all(|s| s.memory.total <= s.memory.usable));
                    prop_assert!(p.step_time_s.is_finite() && p.step_time_s > 0.0 && p.tokens_per_s > 0.0);
                }
            }
            Err(PlanError::Infeasible { reason, .. }) => prop_assert!(reason.contains("no mix") || input.parts.len() == 1, "{reason}"),
            Err(e) => prop_assert!(false, "{e:?}"),
        }
    }
}

#[test]
fn pruning_keeps_the_best_plans() {
    // With a short list kept, candidates that cannot beat its last are dropped early; the best
    // plans are those of a search that keeps (almost) everything.
    for req in [
        worked_example(),
        mixed_request(
            "llama2-7b",
            WorkloadKind::Lora,
            vec![part("h100", 8, 8), part("a10", 8, 4), part("rtx4090", 4, 4)],
        ),
    ] {
        let mut input = req.resolve().unwrap();
        input.top_n = 1000;
        let all = plan_mixed(&input).unwrap();
        input.top_n = 3;
        let short = plan_mixed(&input).unwrap();
        assert_eq!(short.plans[..], all.plans[..3]);
        assert!(short.feasible < all.feasible, "{} vs {}", short.feasible, all.feasible);
    }
}

#[test]
fn a_mix_with_one_tp_degree_becomes_one_uneven_pipeline() {
    // Two 2-GPU parts of unlike GPUs, a small model: the best mix that uses every GPU with one TP degree.
    let mut req = mixed_request("llama2-7b", WorkloadKind::Train, vec![part("a100-80g", 2, 2), part("rtx4090", 2, 2)]);
    req.workload = WorkloadFields::bf16(WorkloadKind::Train, 1024, 16);
    req.top_n = Some(200);
    let r = plan_mixed_request(&req).unwrap();
    let (mix, plan) = r.plans.iter().find_map(|m| m.as_uniform_plan().ok().map(|p| (m, p))).expect("a runnable mix");
    assert_eq!(plan.layers_per_stage, mix.stages.iter().map(|s| s.layers).collect::<Vec<_>>());
    assert_eq!(plan.layers_per_stage.iter().sum::<u32>(), 32);
    assert_eq!(plan.tp * plan.pp * plan.dp, 4, "every GPU of both parts");
    assert_eq!((plan.step_time_s, plan.tokens_per_s), (mix.step_time_s, mix.tokens_per_s));
    assert_eq!(plan.stage_split, StageSplit::Uneven);
    let order = mix.part_order();
    assert_eq!(order.len(), 2);
    // The A100 stages hold more layers than the RTX 4090 ones.
    let layers_of = |part: u32| mix.stages.iter().filter(|s| s.part == part).map(|s| s.layers).max().unwrap();
    assert!(layers_of(0) > layers_of(1), "{}", mix.explanation);
    // A single-part plan, or one that idles GPUs, is refused with its reason.
    for other in &r.plans {
        if other.single_part.is_some() {
            assert!(other.as_uniform_plan().unwrap_err().contains("one part alone"));
        }
    }
}
