//! The planning entry point: dispatch by workload, rank, and explain infeasibility.

use super::cost::{self, TrainCtx};
use super::inference;
use super::train::{self, Pass};
use super::types::{Cluster, LinkKind, PlanError, PlanInput, PlanResult, SmallestFit, Workload, WorkloadKind};

/// Largest cluster the smallest-fit search tries.
pub const SMALLEST_FIT_MAX_GPUS: u32 = 16384;

/// Plans `input`: the best `top_n` plans, best first (tokens/s, then less memory).
///
/// Errors with [`PlanError::Infeasible`] when nothing divides or fits, naming the smallest
/// cluster of the same GPU model that would work.
pub fn plan(input: &PlanInput) -> Result<PlanResult, PlanError> {
    let (result, min_needed, any_divisible) = run(input, input.top_n, false);
    if !result.plans.is_empty() {
        return Ok(result);
    }
    Err(infeasible(input, min_needed, any_divisible))
}

/// Runs one search; returns the result, the smallest memory needed and whether anything
/// divided.
fn run(input: &PlanInput, top_n: usize, first_only: bool) -> (PlanResult, f64, bool) {
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
            (result, out.min_needed, out.any_divisible)
        }
        Workload::Inference(spec) => {
            let out = inference::search(&input.model, &input.cluster, &spec, &input.pins, top_n);
            (
                PlanResult { plans: out.plans, evaluated: out.evaluated, feasible: out.feasible },
                out.min_needed,
                out.any_divisible,
            )
        }
    }
}

/// Whether some plan fits on `cluster` (same request otherwise).
pub fn fits(input: &PlanInput, cluster: Cluster) -> bool {
    let mut probe = input.clone();
    probe.cluster = cluster;
    // A pinned DP degree cannot survive a change of cluster size.
    probe.pins.dp = None;
    run(&probe, 1, true).0.feasible > 0
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

fn infeasible(input: &PlanInput, min_needed: f64, any_divisible: bool) -> PlanError {
    let c = &input.cluster;
    let n = c.total_gpus();
    let usable = cost::usable_bytes(c.gpu.memory_bytes);
    let name = &c.gpu.name;
    let label = workload_label(&input.workload);
    let hold = n as f64 * c.gpu.memory_bytes as f64 / 1e9;
    let fit = smallest_fit(input);
    let needed = if min_needed.is_finite() { min_needed } else { 0.0 };
    let reason = if !any_divisible {
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
                "needs at least {} x {name} ({} nodes of {} GPU{})",
                f.gpu_count,
                f.nodes,
                f.gpus_per_node,
                if f.gpus_per_node == 1 { "" } else { "s" }
            ),
            Some(f) => format!("needs at least {} x {name}", f.gpu_count),
            None => {
                format!("does not fit on any {name} cluster up to {SMALLEST_FIT_MAX_GPUS} GPUs")
            }
        };
        format!(
            "{} {label} {at_least}; {n} x {name} hold {hold:.0} GB (the leanest plan needs {:.1} GB per GPU, {:.1} GB usable)",
            input.model_name,
            needed / 1e9,
            usable / 1e9,
        )
    };
    PlanError::Infeasible {
        reason,
        needed_bytes_min: if any_divisible { needed as u64 } else { 0 },
        available_bytes: usable as u64,
        smallest_fit: fit,
    }
}

/// The best plan only, without the infeasibility analysis (for advice).
pub fn best_plan(input: &PlanInput) -> Option<super::types::Plan> {
    run(input, 1, false).0.plans.into_iter().next()
}
