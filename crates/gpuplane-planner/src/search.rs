//! The planning entry point: dispatch by workload, rank, and explain infeasibility.

use super::cost::{self, TrainCtx};
use super::inference;
use super::train::{self, Pass};
use super::types::{
    Cluster, LinkKind, PlanError, PlanInput, PlanRequest, PlanResult, SmallestFit, Workload, WorkloadKind, count,
};

/// Largest cluster the smallest-fit search tries.
pub const SMALLEST_FIT_MAX_GPUS: u32 = 16384;

/// Plans `input`: the best `top_n` plans, best first (tokens/s, then less memory).
///
/// Errors with [`PlanError::Infeasible`] when nothing divides or fits, naming the smallest
/// cluster of the same GPU model that would work.
pub fn plan(input: &PlanInput) -> Result<PlanResult, PlanError> {
    let out = run(input, input.top_n, false);
    if !out.result.plans.is_empty() {
        return Ok(out.result);
    }
    Err(infeasible(input, &out))
}

/// What one search found, and what the infeasibility message needs.
struct Searched {
    result: PlanResult,
    /// Smallest per-GPU memory any configuration needs.
    min_needed: f64,
    any_divisible: bool,
    /// Smallest host memory per node of an offload that fits the GPUs but not the host.
    min_host: f64,
    /// Serving: plans fit but none met the latency bounds, and why.
    unmet_bounds: Option<String>,
}

/// Runs one search; every plan found carries the headroom warning where it applies.
fn run(input: &PlanInput, top_n: usize, first_only: bool) -> Searched {
    let mut out = search_plans(input, top_n, first_only);
    for plan in &mut out.result.plans {
        if let Some(note) = cost::headroom_note(&plan.memory) {
            plan.explanation.push_str(&format!(" Note: {note}."));
            plan.notes.push(note);
        }
    }
    out
}

fn search_plans(input: &PlanInput, top_n: usize, first_only: bool) -> Searched {
    let gpu = &input.cluster.gpu;
    match input.workload {
        Workload::Train(t) | Workload::Lora(t) => {
            let lora = matches!(input.workload, Workload::Lora(_));
            let ctx = TrainCtx::new(
                &input.model,
                &input.cluster,
                t.seq_len,
                t.global_batch,
                t.precision,
                lora.then_some(t.lora_rank),
            );
            let mut out = train::search(&ctx, &input.pins, top_n, first_only, Pass::AllGpus);
            if out.feasible == 0 && !first_only {
                // No split over every GPU fits: plans that leave some idle.
                let idle = train::search(&ctx, &input.pins, top_n, first_only, Pass::Idle);
                out.evaluated += idle.evaluated;
                out.feasible += idle.feasible;
                out.min_needed = out.min_needed.min(idle.min_needed);
                out.min_host_needed = out.min_host_needed.min(idle.min_host_needed);
                out.any_divisible |= idle.any_divisible;
                out.top = idle.top;
            }
            let kind = if lora { WorkloadKind::Lora } else { WorkloadKind::Train };
            let link = match gpu.link {
                LinkKind::Nvlink => "NVLink",
                LinkKind::Pcie => "PCIe",
            };
            let plans = if first_only {
                Vec::new()
            } else {
                out.top.items.iter().map(|c| train::to_plan(&ctx, c, kind, &gpu.name, link)).collect()
            };
            let result = PlanResult { plans, evaluated: out.evaluated, feasible: out.feasible };
            Searched {
                result,
                min_needed: out.min_needed,
                any_divisible: out.any_divisible,
                min_host: out.min_host_needed,
                unmet_bounds: None,
            }
        }
        Workload::Inference(spec) => {
            let out = inference::search(&input.model, &input.cluster, &spec, &input.pins, top_n);
            Searched {
                result: PlanResult { plans: out.plans, evaluated: out.evaluated, feasible: out.feasible },
                min_needed: out.min_needed,
                any_divisible: out.any_divisible,
                min_host: f64::INFINITY,
                unmet_bounds: out.unmet_bounds,
            }
        }
    }
}

/// Whether some plan fits on `cluster` (same request otherwise).
pub fn fits(input: &PlanInput, cluster: Cluster) -> bool {
    let mut probe = input.clone();
    probe.cluster = cluster;
    // A pinned DP degree cannot survive a change of cluster size.
    probe.pins.dp = None;
    run(&probe, 1, true).result.feasible > 0
}

/// Candidate cluster shapes, ascending: a single node of 1, 2, 4, ... GPUs below
/// `gpus_per_node`, then whole nodes: 1, 2, 3, 4, 6, 8, 12, 16, ... of them.
pub fn candidate_shapes(gpus_per_node: u32, max_gpus: u32) -> Vec<SmallestFit> {
    let gpn = u64::from(gpus_per_node.max(1));
    let max = u64::from(max_gpus);
    let mut out = Vec::new();
    let mut c = 1u64;
    while c < gpn && c <= max {
        out.push(SmallestFit { gpu_count: c as u32, gpus_per_node: c as u32, nodes: 1 });
        c *= 2;
    }
    let mut k = 1u64;
    while k * gpn <= max {
        for nodes in [k, k * 3 / 2] {
            if nodes >= k && nodes * gpn <= max {
                out.push(SmallestFit {
                    gpu_count: (nodes * gpn) as u32,
                    gpus_per_node: gpn as u32,
                    nodes: nodes as u32,
                });
            }
        }
        k *= 2;
    }
    out.sort_by_key(|s| (s.gpu_count, s.nodes));
    out.dedup();
    out
}

/// The smallest cluster of the same GPU model (and node size) with a feasible plan.
pub fn smallest_fit(input: &PlanInput) -> Option<SmallestFit> {
    candidate_shapes(input.cluster.gpus_per_node, SMALLEST_FIT_MAX_GPUS).into_iter().find(|s| {
        let cluster = Cluster { gpus_per_node: s.gpus_per_node, nodes: s.nodes, ..input.cluster.clone() };
        fits(input, cluster)
    })
}

fn workload_label(w: &Workload) -> &'static str {
    match w {
        Workload::Train(_) => "full fine-tune",
        Workload::Lora(_) => "LoRA fine-tune",
        Workload::Inference(_) => "inference",
    }
}

/// A pin that no cluster size can satisfy because the model does not divide by it (training splits query groups,
/// never replicates them): said as the rule it breaks, e.g. "tp 4 does not divide the 2 key/value heads".
fn pinned_cause(input: &PlanInput) -> Option<String> {
    if matches!(input.workload, Workload::Inference(_)) {
        return None;
    }
    let m = &input.model;
    let tp = input.pins.tp.filter(|tp| *tp > 1)?;
    let (count, what) = train::tp_unsplittable(m.heads, m.kv_heads, m.hidden, tp)?;
    Some(format!("the pinned tp {tp} does not divide the {count} {what}"))
}

fn infeasible(input: &PlanInput, out: &Searched) -> PlanError {
    let (min_needed, any_divisible, min_host) = (out.min_needed, out.any_divisible, out.min_host);
    let c = &input.cluster;
    let n = c.total_gpus();
    let serving = matches!(input.workload, Workload::Inference(_));
    let usable = if serving { inference::usable_bytes(&c.gpu) } else { cost::usable_bytes(c.gpu.memory_bytes) };
    if let Some(why) = &out.unmet_bounds {
        return PlanError::Infeasible {
            reason: format!("{} {} on {n} x {}: {why}", input.model_name, workload_label(&input.workload), c.gpu.name),
            needed_bytes_min: out.min_needed as u64,
            available_bytes: usable as u64,
            smallest_fit: None,
            hints: Vec::new(),
        };
    }
    let name = &c.gpu.name;
    let label = workload_label(&input.workload);
    let hold = n as f64 * c.gpu.memory_bytes as f64 / 1e9;
    let fit = smallest_fit(input);
    let needed = if min_needed.is_finite() { min_needed } else { 0.0 };
    let pinned = pinned_cause(input);
    let reason = if let (false, Some(cause)) = (any_divisible, &pinned) {
        format!("{} {label}: {cause}; no number of GPUs changes that", input.model_name)
    } else if !any_divisible {
        format!(
            "{} {label}: no split of {n} x {name} satisfies the divisibility rules (heads {}, layers {}, global batch and pins); {}",
            input.model_name,
            input.model.heads,
            input.model.layers,
            match fit {
                Some(f) => format!("{} x {name} ({} per node) works", f.gpu_count, f.gpus_per_node),
                None => "no cluster size up to 16384 GPUs works".to_string(),
            }
        )
    } else {
        let at_least = match fit {
            Some(f) if f.nodes > 1 => format!(
                "needs at least {} x {name} ({} of {})",
                f.gpu_count,
                count(f.nodes, "node", "nodes"),
                count(f.gpus_per_node, "GPU", "GPUs")
            ),
            Some(f) => format!("needs at least {} x {name}", f.gpu_count),
            None => {
                format!("does not fit on any {name} cluster up to {SMALLEST_FIT_MAX_GPUS} GPUs")
            }
        };
        let leanest = if needed <= usable && min_host.is_finite() {
            format!(
                "the leanest plan fits in GPU memory only with CPU offload, which needs {:.0} GB of host memory per node ({:.0} GB available, 80% usable; set host_memory_gb, CLI --host-memory-gb)",
                min_host / 1e9,
                c.host_memory_bytes / 1e9
            )
        } else {
            format!("the leanest plan needs {:.1} GB per GPU, {:.1} GB usable", needed / 1e9, usable / 1e9)
        };
        format!("{} {label} {at_least}; {n} x {name} hold {hold:.0} GB ({leanest})", input.model_name)
    };
    PlanError::Infeasible {
        reason,
        needed_bytes_min: if any_divisible { needed as u64 } else { 0 },
        available_bytes: usable as u64,
        smallest_fit: fit,
        hints: Vec::new(),
    }
}

/// Validates and plans a request; when nothing fits, adds hints: which defaulted fields
/// (serving concurrency and context, sequence length) or which workload would fit on the same
/// cluster.
pub fn plan_request(req: &PlanRequest) -> Result<PlanResult, PlanError> {
    let input = req.resolve()?;
    plan(&input).map_err(|mut err| {
        if let PlanError::Infeasible { hints: h, .. } = &mut err {
            *h = hints(req);
        }
        err
    })
}

fn fits_as_is(input: &PlanInput) -> bool {
    fits(input, input.cluster.clone())
}

fn with(req: &PlanRequest, change: impl FnOnce(&mut PlanRequest)) -> Option<PlanInput> {
    let mut r = req.clone();
    change(&mut r);
    r.resolve().ok()
}

/// Hints for an infeasible request (see [`plan_request`]).
pub fn hints(req: &PlanRequest) -> Vec<String> {
    let mut out = Vec::new();
    let w = &req.workload;
    match w.kind {
        WorkloadKind::Inference => {
            // A searched concurrency already tries one sequence; a fixed one may be what does not fit.
            if let Some(given) = w.concurrent_seqs
                && let Some(c) = [64u32, 32, 16, 8, 4, 2, 1]
                    .into_iter()
                    .filter(|&c| c < given)
                    .find(|&c| with(req, |r| r.workload.concurrent_seqs = Some(c)).is_some_and(|i| fits_as_is(&i)))
            {
                out.push(format!(
                    "fits with {c} concurrent sequence{} per replica instead of {given} (concurrent_seqs, CLI --concurrent {c}; leave it out to search it)",
                    if c == 1 { "" } else { "s" }
                ));
            }
            if out.is_empty()
                && w.context_len.is_none()
                && w.seq_len.is_none()
                && w.input_len.is_none()
                && w.output_len.is_none()
                && let Some(ctx) = [2048u32, 1024, 512]
                    .into_iter()
                    .find(|&ctx| with(req, |r| r.workload.context_len = Some(ctx)).is_some_and(|i| fits_as_is(&i)))
            {
                out.push(format!("fits with a context of {ctx} tokens (context_len, CLI --context {ctx})"));
            }
        }
        WorkloadKind::Train | WorkloadKind::Lora => {
            if w.kind == WorkloadKind::Train
                && with(req, |r| r.workload.kind = WorkloadKind::Lora).is_some_and(|i| fits_as_is(&i))
            {
                out.push("a LoRA fine-tune fits on these GPUs (workload kind lora, CLI --workload lora)".to_string());
            }
            if w.seq_len.is_none()
                && let Some(s) = [2048u32, 1024, 512]
                    .into_iter()
                    .find(|&s| with(req, |r| r.workload.seq_len = Some(s)).is_some_and(|i| fits_as_is(&i)))
            {
                out.push(format!(
                    "fits with sequences of {s} tokens instead of the default 4096 (seq_len, CLI --seq {s})"
                ));
            }
        }
    }
    out
}

/// The best `top_n` plans and the search counts, without the infeasibility analysis: no plans
/// when nothing fits (for the mixed planner, which tries every part alone).
pub fn plans_only(input: &PlanInput) -> PlanResult {
    run(input, input.top_n, false).result
}

/// The best plan only, without the infeasibility analysis (for advice).
pub fn best_plan(input: &PlanInput) -> Option<super::types::Plan> {
    run(input, 1, false).result.plans.into_iter().next()
}
