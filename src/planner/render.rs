//! Plain-text table of a plan result, for the CLI.

use super::types::{PlanResult, WorkloadKind};
use std::fmt::Write;

fn gb(bytes: u64) -> f64 {
    bytes as f64 / 1e9
}

/// Renders the ranked plans as an aligned table followed by the best plan's explanation.
pub fn render_table(result: &PlanResult) -> String {
    let mut s = String::new();
    let inference = result.plans.first().is_some_and(|p| p.workload == WorkloadKind::Inference);
    if inference {
        let _ = writeln!(
            s,
            "{:>4} {:>4} {:>4} {:>8} {:>10} {:>14} {:>14} {:>10}",
            "rank", "tp", "pp", "replicas", "mem GB", "decode tok/s", "prefill tok/s", "step ms"
        );
        for (i, p) in result.plans.iter().enumerate() {
            let _ = writeln!(
                s,
                "{:>4} {:>4} {:>4} {:>8} {:>10.1} {:>14.0} {:>14.0} {:>10.2}",
                i + 1,
                p.tp,
                p.pp,
                p.replicas,
                gb(p.memory_per_gpu_bytes),
                p.images_per_s.unwrap_or(p.tokens_per_s),
                p.prefill_tokens_per_s.unwrap_or(0.0),
                p.step_time_s * 1e3,
            );
        }
    } else {
        let _ = writeln!(
            s,
            "{:>4} {:>3} {:>3} {:>5} {:>3} {:>3} {:>5} {:>4} {:>3} {:>9} {:>8} {:>9} {:>12} {:>8} {:>6} {:>7} {:>6}",
            "rank",
            "tp",
            "pp",
            "dp",
            "vp",
            "mb",
            "accum",
            "zero",
            "sp",
            "recompute",
            "mem GB",
            "step s",
            "tokens/s",
            "TFLOP/s",
            "MFU%",
            "bubble%",
            "comm%"
        );
        for (i, p) in result.plans.iter().enumerate() {
            let _ = writeln!(
                s,
                "{:>4} {:>3} {:>3} {:>5} {:>3} {:>3} {:>5} {:>4} {:>3} {:>9} {:>8.1} {:>9.3} {:>12.0} {:>8.1} {:>6.1} {:>7.1} {:>6.1}",
                i + 1,
                p.tp,
                p.pp,
                p.dp,
                p.vp,
                p.micro_batch,
                p.grad_accum,
                p.zero_stage,
                if p.sequence_parallel { "on" } else { "off" },
                p.recompute.as_str(),
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
    let _ = writeln!(s, "{} configurations evaluated, {} fit in memory.", result.evaluated, result.feasible);
    if let Some(best) = result.plans.first() {
        let _ = writeln!(s, "Best: {}", best.explanation);
    }
    s
}
