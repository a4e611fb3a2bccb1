//! Plain-text table of a plan result, for the CLI.

use super::types::{Offload, Plan, PlanResult, WorkloadKind, count};
use std::fmt::Write;

fn gb(bytes: u64) -> f64 {
    bytes as f64 / 1e9
}

/// "8" when every stage holds 8 layers, else "first/middle/last", e.g. "7/8/7".
pub fn stages_label(p: &Plan) -> String {
    match p.layers_per_stage.as_slice() {
        [] => "-".to_string(),
        [one] => one.to_string(),
        all => {
            let first = all[0];
            let last = all[all.len() - 1];
            let mid = if all.len() > 2 { all[1] } else { first };
            if first == mid && mid == last {
                first.to_string()
            } else if all.len() == 2 {
                format!("{first}/{last}")
            } else {
                format!("{first}/{mid}/{last}")
            }
        }
    }
}

fn render_diffusion(s: &mut String, plans: &[Plan]) {
    let _ = writeln!(s, "{:>4} {:>8} {:>10} {:>10} {:>12}", "rank", "replicas", "mem GB", "images/s", "s per image");
    for (i, p) in plans.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:>4} {:>8} {:>10.1} {:>10.2} {:>12.1}",
            i + 1,
            p.replicas,
            gb(p.memory_per_gpu_bytes),
            p.images_per_s.unwrap_or(0.0),
            p.step_time_s,
        );
    }
}

fn render_inference(s: &mut String, plans: &[Plan]) {
    let _ = writeln!(
        s,
        "{:>4} {:>4} {:>4} {:>8} {:>10} {:>14} {:>14} {:>10}",
        "rank", "tp", "pp", "replicas", "mem GB", "decode tok/s", "prefill tok/s", "step ms"
    );
    for (i, p) in plans.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:>4} {:>4} {:>4} {:>8} {:>10.1} {:>14.0} {:>14.0} {:>10.2}",
            i + 1,
            p.tp,
            p.pp,
            p.replicas,
            gb(p.memory_per_gpu_bytes),
            p.tokens_per_s,
            p.prefill_tokens_per_s.unwrap_or(0.0),
            p.step_time_s * 1e3,
        );
    }
}

fn render_training(s: &mut String, plans: &[Plan]) {
    let offload = plans.iter().any(|p| p.offload != Offload::None);
    let _ = write!(
        s,
        "{:>4} {:>3} {:>3} {:>3} {:>3} {:>5} {:>9} {:>3} {:>3} {:>5} {:>5} {:>4} {:>3} {:>9}",
        "rank", "tp", "cp", "ep", "pp", "dp", "layers", "vp", "mb", "accum", "gbs", "zero", "sp", "recompute"
    );
    if offload {
        let _ = write!(s, " {:>9}", "offload");
    }
    let _ = writeln!(
        s,
        " {:>8} {:>9} {:>12} {:>8} {:>6} {:>7} {:>6}",
        "mem GB", "step s", "tokens/s", "TFLOP/s", "MFU%", "bubble%", "comm%"
    );
    for (i, p) in plans.iter().enumerate() {
        let _ = write!(
            s,
            "{:>4} {:>3} {:>3} {:>3} {:>3} {:>5} {:>9} {:>3} {:>3} {:>5} {:>5} {:>4} {:>3} {:>9}",
            i + 1,
            p.tp,
            p.cp,
            p.ep,
            p.pp,
            p.dp,
            stages_label(p),
            p.vp,
            p.micro_batch,
            p.grad_accum,
            p.global_batch,
            p.zero_stage,
            if p.sequence_parallel { "on" } else { "off" },
            p.recompute.as_str(),
        );
        if offload {
            let label = match p.offload {
                Offload::None => "none",
                Offload::Optimizer => "optim",
                Offload::OptimizerAndParams => "optim+par",
            };
            let _ = write!(s, " {label:>9}");
        }
        let _ = writeln!(
            s,
            " {:>8.1} {:>9.3} {:>12.0} {:>8.1} {:>6.1} {:>7.1} {:>6.1}",
            gb(p.memory_per_gpu_bytes),
            p.step_time_s,
            p.tokens_per_s,
            p.tflops_per_gpu,
            p.mfu * 100.0,
            p.bubble_fraction * 100.0,
            p.comm_fraction * 100.0,
        );
    }
}

/// Renders the ranked plans as an aligned table (columns by kind of model and workload)
/// followed by the best plan's explanation and notes.
pub fn render_table(result: &PlanResult) -> String {
    let mut s = String::new();
    match result.plans.first() {
        Some(p) if p.images_per_s.is_some() => render_diffusion(&mut s, &result.plans),
        Some(p) if p.workload == WorkloadKind::Inference => render_inference(&mut s, &result.plans),
        Some(_) => render_training(&mut s, &result.plans),
        None => {}
    }
    let _ = writeln!(
        s,
        "{} evaluated, {} in memory.",
        count(result.evaluated, "configuration", "configurations"),
        if result.feasible == 1 { "1 fits".to_string() } else { format!("{} fit", result.feasible) }
    );
    if let Some(best) = result.plans.first() {
        let _ = writeln!(s, "Best: {}", best.explanation);
    }
    s
}
