//! Re-planning from measurements (pure): how a running job's measured step time corrects the planner, and
//! whether another plan for the same GPUs is worth a replan.
//!
//! The planner predicts a step as compute plus overhead: overhead is the exposed communication and the
//! pipeline bubble (`comm_fraction + bubble_fraction` of the step), compute the rest. One measurement (the
//! running plan's median step `M` against its prediction `T`) cannot say which part the model got wrong, so
//! the rule is fixed and stated:
//! - **Slower than predicted** (`M > T`): the excess is charged to overhead, the part the model knows least (a
//!   congested or slower network, a slow rank that every collective waits for, contention with neighbours):
//!   overhead is scaled by `1 + (M - T) / overhead(T)`, compute stays. A plan with no overhead puts it on
//!   compute instead (`M / T`).
//! - **Faster or as predicted** (`M <= T`): both parts are scaled by `M / T`.
//!
//! Every candidate plan's prediction is corrected the same way (`compute * compute_scale + overhead *
//! overhead_scale`), and by construction the running plan's corrected prediction is what it measured. The
//! best corrected candidate is proposed when it is faster than the measured step by at least the job's
//! minimum gain.

use serde::{Deserialize, Serialize};

use crate::planner::Plan;

/// The running generation must have measured at least this many steps past its warm-up before it is judged.
pub const MIN_MEASURED_STEPS: i64 = 5;

/// How the planner's predictions are corrected by a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Correction {
    /// Measured over predicted step time of the running plan.
    pub measured_vs_predicted: f64,
    pub compute_scale: f64,
    pub overhead_scale: f64,
}

/// The predicted step split into (compute, overhead) seconds.
fn split(plan: &Plan) -> (f64, f64) {
    let overhead_share = (plan.comm_fraction + plan.bubble_fraction).clamp(0.0, 1.0);
    let overhead = plan.step_time_s * overhead_share;
    (plan.step_time_s - overhead, overhead)
}

/// The correction that makes the running plan's prediction equal `measured_step_s`.
pub fn correction(running: &Plan, measured_step_s: f64) -> Option<Correction> {
    if !(running.step_time_s > 0.0 && measured_step_s > 0.0 && measured_step_s.is_finite()) {
        return None;
    }
    let ratio = measured_step_s / running.step_time_s;
    let (_, overhead) = split(running);
    let (compute_scale, overhead_scale) = if ratio <= 1.0 {
        (ratio, ratio)
    } else if overhead > 0.0 {
        (1.0, 1.0 + (measured_step_s - running.step_time_s) / overhead)
    } else {
        (ratio, 1.0)
    };
    Some(Correction { measured_vs_predicted: ratio, compute_scale, overhead_scale })
}

/// A plan's predicted step time, corrected.
pub fn corrected_step_s(plan: &Plan, c: &Correction) -> f64 {
    let (compute, overhead) = split(plan);
    compute * c.compute_scale + overhead * c.overhead_scale
}

/// What distinguishes one split from another (what a replan changes, and what pins reproduce).
pub fn plan_shape(plan: &Plan) -> serde_json::Value {
    serde_json::json!({
        "tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep, "vp": plan.vp,
        "micro_batch": plan.micro_batch, "zero_stage": plan.zero_stage, "recompute": plan.recompute,
        "sequence_parallel": plan.sequence_parallel, "offload": plan.offload,
    })
}

/// The pins that make the planner give exactly this split.
pub fn pins_of(plan: &Plan) -> crate::planner::Pins {
    crate::planner::Pins {
        tp: Some(plan.tp),
        pp: Some(plan.pp),
        dp: Some(plan.dp),
        vp: Some(plan.vp),
        micro_batch: Some(plan.micro_batch),
        zero_stage: Some(plan.zero_stage),
        recompute: Some(plan.recompute),
        sequence_parallel: Some(plan.sequence_parallel),
        cp: Some(plan.cp),
        ep: Some(plan.ep),
        etp: Some(plan.etp.unwrap_or(plan.tp)),
        offload: Some(plan.offload),
    }
}

/// A better plan than the running one, by the corrected prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// Index into the candidates.
    pub index: usize,
    pub measured_step_s: f64,
    pub predicted_step_s: f64,
    /// `1 - predicted / measured`, percent.
    pub gain_pct: f64,
    pub correction: Correction,
}

/// The best candidate (all for the same GPUs; plans that leave GPUs idle are skipped) when its corrected step
/// beats the measured one by at least `min_gain_pct` and it is another split than the running one.
pub fn propose(running: &Plan, measured_step_s: f64, candidates: &[Plan], min_gain_pct: i32) -> Option<Proposal> {
    let c = correction(running, measured_step_s)?;
    let running_shape = plan_shape(running);
    let (index, predicted) = candidates
        .iter()
        .enumerate()
        .filter(|(_, p)| p.idle_gpus == 0 && plan_shape(p) != running_shape)
        .map(|(i, p)| (i, corrected_step_s(p, &c)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let gain_pct = (1.0 - predicted / measured_step_s) * 100.0;
    (gain_pct >= f64::from(min_gain_pct)).then_some(Proposal {
        index,
        measured_step_s,
        predicted_step_s: predicted,
        gain_pct,
        correction: c,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(tp: u32, dp: u32, step: f64, comm: f64) -> Plan {
        Plan {
            tp,
            dp,
            step_time_s: step,
            comm_fraction: comm,
            bubble_fraction: 0.0,
            ..crate::jobs::insights::tests::plan(1, 0, 0.1, 0.5)
        }
    }

    #[test]
    fn the_running_plan_is_corrected_onto_its_measurement() {
        let running = plan(2, 2, 1.0, 0.4);
        for measured in [0.5, 1.0, 1.7, 30.0] {
            let c = correction(&running, measured).unwrap();
            assert!((corrected_step_s(&running, &c) - measured).abs() < 1e-9, "{measured}: {c:?}");
        }
        let slow = correction(&running, 1.6).unwrap();
        assert_eq!(slow.compute_scale, 1.0, "the excess goes to overhead");
        assert!((slow.overhead_scale - 2.5).abs() < 1e-9, "0.4 s of overhead became 1.0 s: {slow:?}");
        let fast = correction(&running, 0.5).unwrap();
        assert_eq!((fast.compute_scale, fast.overhead_scale), (0.5, 0.5));
        let no_overhead = correction(&plan(1, 4, 1.0, 0.0), 2.0).unwrap();
        assert_eq!((no_overhead.compute_scale, no_overhead.overhead_scale), (2.0, 1.0));
        assert_eq!(correction(&running, 0.0), None);
        assert_eq!(correction(&running, f64::NAN), None);
    }

    #[test]
    fn a_slow_network_favours_the_plan_with_less_communication_only_past_the_minimum_gain() {
        // Predicted: tp2 x dp2 at 1.0 s (40% overhead), dp4 at 1.1 s (10% overhead): tp2 x dp2 is the planner's pick.
        let running = plan(2, 2, 1.0, 0.4);
        let candidates = [plan(2, 2, 1.0, 0.4), plan(1, 4, 1.1, 0.1)];
        // Measured as predicted: nothing better.
        assert_eq!(propose(&running, 1.0, &candidates, 5), None);
        // Measured 2.2 s: overhead x4 (0.4 -> 1.6 s); dp4 becomes 0.99 + 0.11 * 4 = 1.43 s, a 35% gain.
        let p = propose(&running, 2.2, &candidates, 20).unwrap();
        assert_eq!(p.index, 1);
        assert!((p.predicted_step_s - 1.43).abs() < 1e-9, "{p:?}");
        assert!((p.gain_pct - 35.0).abs() < 1e-6, "{p:?}");
        // The same measurement with a minimum gain above 35% proposes nothing.
        assert_eq!(propose(&running, 2.2, &candidates, 40), None);
        // Plans that idle GPUs are never proposed.
        let idle = [Plan { idle_gpus: 1, ..plan(1, 4, 0.1, 0.0) }];
        assert_eq!(propose(&running, 2.2, &idle, 1), None);
    }
}
