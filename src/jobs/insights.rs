//! Utilization insight: compare what a running job's GPUs measure with what its plan predicted, and say what to
//! change. Pure rules; the handler (`routes::get_lease_insights`) gathers the numbers
//! (`leases::insights::measure_lease`). The utilization rule ([`under_threshold`]) is also what judges a lease
//! idle ([`idle`], applied by `leases::idle`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::steps::MeasuredSteps;
use crate::planner::Plan;

/// Below this mean GPU utilization over the window the GPUs are considered underused.
pub const LOW_UTIL_PERCENT: f64 = 70.0;
/// The window the utilization is averaged over, and how long a job must have run before it is judged.
pub const WINDOW_S: i64 = 300;
/// A plan that spends more than this share of a step communicating is communication-bound.
pub const COMM_BOUND_FRACTION: f64 = 0.3;
/// Measured steps this much slower than the plan predicted are reported.
pub const SLOW_STEP_RATIO: f64 = 1.5;
/// Steps measured before the step time is judged.
pub const MIN_JUDGED_STEPS: i64 = 5;

/// What was measured on a lease's GPUs over a window (for a job: since the job started).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Measured {
    /// Mean DCGM_FI_DEV_GPU_UTIL over the window, percent (absent without samples).
    pub avg_gpu_util: Option<f64>,
    /// Samples behind the mean.
    pub samples: i64,
    /// The window actually covered: the last 5 minutes, or since the job started if that is later.
    pub window_s: i64,
    /// How long the job has been running.
    pub running_for_s: i64,
    /// The busiest GPU's mean utilization over the window, percent (absent without samples).
    pub busiest_gpu_util: Option<f64>,
    /// The lease's GPUs with samples in the window.
    pub gpus_reporting: i64,
    /// The lease's GPUs.
    pub gpus: i64,
}

/// The utilization rule: `util`, a mean over the last `window_s`, is under `threshold_percent`, judged only with
/// samples and once the subject (a job, a lease) has run for the whole window. Returns the utilization when it
/// holds. `low_utilization` applies it to the mean of a running job's GPUs, [`idle`] to a lease's busiest GPU.
pub fn under_threshold(util: Option<f64>, m: &Measured, window_s: i64, threshold_percent: f64) -> Option<f64> {
    let util = util?;
    (m.samples > 0 && m.running_for_s >= window_s && util < threshold_percent).then_some(util)
}

/// A lease is idle over the window when every one of its GPUs reported in it and even the busiest one's mean is
/// under the threshold ([`under_threshold`]; `running_for_s` is then how long the lease has been active). A GPU
/// without samples (an external node has no agent to send any) is not known to be idle, so neither is its lease.
/// Returns the busiest GPU's utilization when the lease is idle.
pub fn idle(m: &Measured, window_s: i64, threshold_percent: f64) -> Option<f64> {
    if m.gpus == 0 || m.gpus_reporting < m.gpus {
        return None;
    }
    under_threshold(m.busiest_gpu_util, m, window_s, threshold_percent)
}

/// The facts the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct InsightInput<'a> {
    pub plan: Option<&'a Plan>,
    pub measured: Measured,
    /// The GPUs talk over PCIe only (no NVLink on the model, or a node reports PCIe).
    pub pcie_only: bool,
    /// The fewest leased GPUs on one node (a tensor-parallel group larger than this crosses nodes).
    pub min_gpus_per_node: u32,
    /// The steps the gpuplane runtime measured (absent when the job reports none).
    pub steps: Option<&'a MeasuredSteps>,
    /// Retune `suggest`'s proposal for the running generation (`reason`, `correction` with the split `to`).
    pub replan_suggestion: Option<&'a serde_json::Value>,
}

/// One finding, with the change suggested and the numbers behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Insight {
    /// `low_utilization`, `slower_than_plan`, `communication_bound`, `tensor_parallel_over_pcie`,
    /// `tensor_parallel_across_nodes` or `replan_suggested`.
    pub kind: String,
    pub message: String,
    pub suggestion: String,
    /// The figures behind it (measured utilization, samples, window, plan figures).
    #[schema(value_type = Object)]
    pub figures: serde_json::Value,
}

fn plan_figures(plan: &Plan) -> serde_json::Value {
    serde_json::json!({
        "tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "micro_batch": plan.micro_batch, "grad_accum": plan.grad_accum,
        "zero_stage": plan.zero_stage, "comm_fraction": plan.comm_fraction, "mfu": plan.mfu,
        "memory_per_gpu_bytes": plan.memory_per_gpu_bytes, "usable_bytes": plan.memory.usable,
    })
}

/// The change most likely to raise utilization for this plan.
fn suggestion_for(plan: &Plan, pcie_only: bool) -> String {
    let usable = plan.memory.usable.max(1) as f64;
    let headroom = plan.memory_per_gpu_bytes as f64 / usable;
    if plan.tp > 1 && (pcie_only || plan.comm_fraction > COMM_BOUND_FRACTION) {
        format!(
            "less tensor parallelism: tp {} -> {} (pin `tp`), trading all-reduces per layer for data parallelism",
            plan.tp,
            (plan.tp / 2).max(1)
        )
    } else if plan.zero_stage == 3 && plan.comm_fraction > COMM_BOUND_FRACTION {
        "ZeRO stage 2 instead of 3 (pin `zero_stage`): stage 3 gathers every layer's weights in each step".to_string()
    } else if headroom < 0.75 && doubled_micro_batch_fits(plan) {
        format!(
            "a larger micro-batch: {} -> {} (pin `micro_batch`); the plan uses {:.0}% of GPU memory, so there is room",
            plan.micro_batch,
            plan.micro_batch * 2,
            headroom * 100.0
        )
    } else if plan.zero_stage > 0 && plan.zero_stage < 3 {
        format!("ZeRO stage {} to free memory for a larger micro-batch than {}", plan.zero_stage + 1, plan.micro_batch)
    } else {
        "check the input pipeline (data loading, preprocessing): the GPUs wait for work".to_string()
    }
}

/// Whether the plan can take twice its micro-batch as it is: the global batch still divides (half the
/// accumulation steps, a whole number), the micro-batch stays within the planner's 64, and a pipeline keeps at
/// least as many micro-batches in flight as it has stages.
fn doubled_micro_batch_fits(plan: &Plan) -> bool {
    plan.grad_accum.is_multiple_of(2) && plan.micro_batch * 2 <= 64 && plan.grad_accum / 2 >= plan.pp
}

/// A duration as people read it: `1.25 s`, `3.4 ms`, `420 µs` (a plan's step on an H100 can be under 1 ms).
fn seconds_text(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// Apply the rules.
pub fn assess(input: &InsightInput<'_>) -> Vec<Insight> {
    let mut out = Vec::new();
    if let Some(suggested) = input.replan_suggestion {
        let to = &suggested["correction"]["to"];
        out.push(Insight {
            kind: "replan_suggested".into(),
            message: format!("retune: {}", suggested["reason"].as_str().unwrap_or("a better split was found")),
            suggestion: format!("replan with these pins: POST /v1/jobs/{{job_id}}/replan {{\"pins\": {to}}}"),
            figures: suggested["correction"].clone(),
        });
    }
    let m = input.measured;
    let measured_json = serde_json::json!({
        "avg_gpu_util": m.avg_gpu_util, "samples": m.samples, "window_s": m.window_s, "running_for_s": m.running_for_s,
        "threshold_percent": LOW_UTIL_PERCENT,
    });
    if let Some(util) = under_threshold(m.avg_gpu_util, &m, WINDOW_S, LOW_UTIL_PERCENT) {
        let suggestion = match input.plan {
            Some(plan) => suggestion_for(plan, input.pcie_only),
            None => "check the input pipeline (data loading, preprocessing): the GPUs wait for work".to_string(),
        };
        out.push(Insight {
            kind: "low_utilization".into(),
            message: format!(
                "GPU utilization averaged {util:.0}% over the last {} s ({} samples), under {LOW_UTIL_PERCENT:.0}%",
                m.window_s, m.samples
            ),
            suggestion,
            figures: serde_json::json!({ "measured": measured_json, "plan": input.plan.map(plan_figures) }),
        });
    }
    let Some(plan) = input.plan else { return out };
    if let Some(steps) = input.steps
        && steps.steps >= MIN_JUDGED_STEPS
        && let Some(ratio) = steps.step_time_vs_plan
        && ratio > SLOW_STEP_RATIO
    {
        out.push(Insight {
            kind: "slower_than_plan".into(),
            message: format!(
                "the median step took {} over {} steps, {ratio:.1}x the {} the plan predicted",
                seconds_text(steps.median_step_time_s),
                steps.steps,
                seconds_text(plan.step_time_s)
            ),
            suggestion: suggestion_for(plan, input.pcie_only),
            figures: serde_json::json!({ "steps": steps, "plan": plan_figures(plan), "threshold_ratio": SLOW_STEP_RATIO }),
        });
    }
    if plan.comm_fraction > COMM_BOUND_FRACTION {
        let suggestion = if plan.tp > 1 {
            format!("less tensor parallelism: tp {} -> {} (pin `tp`)", plan.tp, (plan.tp / 2).max(1))
        } else if plan.zero_stage == 3 {
            "ZeRO stage 2 or 1 (pin `zero_stage`): fewer collectives per step".to_string()
        } else {
            format!(
                "a larger micro-batch than {} or more gradient accumulation than {}: fewer gradient reductions per \
                 token",
                plan.micro_batch, plan.grad_accum
            )
        };
        out.push(Insight {
            kind: "communication_bound".into(),
            message: format!(
                "the plan spends {:.0}% of each step communicating (over {:.0}%)",
                plan.comm_fraction * 100.0,
                COMM_BOUND_FRACTION * 100.0
            ),
            suggestion,
            figures: serde_json::json!({ "measured": measured_json, "plan": plan_figures(plan) }),
        });
    }
    if plan.tp > 1 && input.pcie_only {
        out.push(Insight {
            kind: "tensor_parallel_over_pcie".into(),
            message: format!("tensor parallelism of {} runs over PCIe, which all-reduces every layer", plan.tp),
            suggestion: "tp 1 with ZeRO-3/FSDP, or pipeline parallelism, which sends far less over the link".into(),
            figures: serde_json::json!({ "measured": measured_json, "plan": plan_figures(plan) }),
        });
    }
    if plan.tp > input.min_gpus_per_node.max(1) {
        out.push(Insight {
            kind: "tensor_parallel_across_nodes".into(),
            message: format!(
                "tensor parallelism of {} is larger than the {} leased GPUs on a node: it crosses the network",
                plan.tp, input.min_gpus_per_node
            ),
            suggestion: format!(
                "tp {} or less (pin `tp`) with pipeline parallelism across nodes, or lease whole nodes",
                input.min_gpus_per_node
            ),
            figures: serde_json::json!({ "measured": measured_json, "plan": plan_figures(plan) }),
        });
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use chrono::DateTime;
    use uuid::Uuid;

    use crate::jobs::steps::{StepTotals, summarize};
    use crate::planner::{MemoryBreakdown, Recompute, WorkloadKind};

    pub(crate) fn plan(tp: u32, zero: u8, comm: f64, memory_fraction: f64) -> Plan {
        let usable = 80_000_000_000u64;
        Plan {
            workload: WorkloadKind::Train,
            tp,
            pp: 1,
            dp: 8 / tp,
            cp: 1,
            ep: 1,
            etp: None,
            layers_per_stage: vec![32],
            stage_split: Default::default(),
            offload: Default::default(),
            host_memory_per_node_bytes: 0,
            global_batch: 64,
            idle_gpus: 0,
            notes: Vec::new(),
            vp: 1,
            micro_batch: 2,
            grad_accum: 4,
            zero_stage: zero,
            sequence_parallel: false,
            recompute: Recompute::None,
            replicas: 8 / tp,
            memory_per_gpu_bytes: (usable as f64 * memory_fraction) as u64,
            memory: MemoryBreakdown { usable, ..MemoryBreakdown::default() },
            step_time_s: 1.0,
            tokens_per_s: 1.0,
            prefill_tokens_per_s: None,
            images_per_s: None,
            serving: None,
            tflops_per_gpu: 1.0,
            hardware_tflops_per_gpu: 1.0,
            mfu: 0.4,
            bubble_fraction: 0.0,
            comm_fraction: comm,
            calibrated: true,
            summary: String::new(),
            explanation: String::new(),
        }
    }

    fn measured(util: f64, running_for_s: i64) -> Measured {
        Measured {
            avg_gpu_util: Some(util),
            samples: 1200,
            window_s: WINDOW_S.min(running_for_s),
            running_for_s,
            busiest_gpu_util: Some(util),
            gpus_reporting: 8,
            gpus: 8,
        }
    }

    fn kinds(found: &[Insight]) -> Vec<&str> {
        found.iter().map(|i| i.kind.as_str()).collect()
    }

    #[test]
    fn busy_gpus_with_a_lean_plan_say_nothing() {
        let p = plan(1, 0, 0.1, 0.5);
        let input = InsightInput {
            plan: Some(&p),
            measured: measured(93.0, 900),
            pcie_only: false,
            min_gpus_per_node: 8,
            steps: None,
            replan_suggestion: None,
        };
        assert!(assess(&input).is_empty());
    }

    #[test]
    fn low_utilization_after_five_minutes_suggests_a_larger_micro_batch_when_memory_allows() {
        let p = plan(1, 0, 0.1, 0.5);
        let input = InsightInput {
            plan: Some(&p),
            measured: measured(41.0, 600),
            pcie_only: false,
            min_gpus_per_node: 8,
            steps: None,
            replan_suggestion: None,
        };
        let found = assess(&input);
        assert_eq!(kinds(&found), ["low_utilization"]);
        assert!(found[0].suggestion.contains("micro-batch: 2 -> 4"), "{}", found[0].suggestion);
        // Never a micro-batch the plan cannot take: an odd accumulation count does not halve.
        let odd = Plan { grad_accum: 3, global_batch: 48, ..p.clone() };
        let found_odd = assess(&InsightInput { plan: Some(&odd), ..input });
        assert!(!found_odd[0].suggestion.contains("micro-batch"), "{}", found_odd[0].suggestion);
        assert!(found[0].message.contains("41%"));
        assert_eq!(found[0].figures["measured"]["samples"], 1200);
        assert_eq!(found[0].figures["plan"]["micro_batch"], 2);
        // Too early to judge.
        let early = InsightInput { measured: measured(41.0, 120), ..input };
        assert!(assess(&early).is_empty());
        // No samples, no verdict.
        let none = InsightInput {
            measured: Measured {
                avg_gpu_util: None,
                samples: 0,
                window_s: 300,
                running_for_s: 900,
                busiest_gpu_util: None,
                gpus_reporting: 0,
                gpus: 8,
            },
            ..input
        };
        assert!(assess(&none).is_empty());
    }

    #[test]
    fn a_lease_is_idle_only_when_every_gpu_reported_and_the_busiest_is_under_the_threshold() {
        let window = 1800;
        let m = |busiest: Option<f64>, reporting: i64, running_for_s: i64| Measured {
            avg_gpu_util: busiest.map(|b| b / 8.0),
            samples: if reporting > 0 { 180 * reporting } else { 0 },
            window_s: window,
            running_for_s,
            busiest_gpu_util: busiest,
            gpus_reporting: reporting,
            gpus: 8,
        };
        assert_eq!(idle(&m(Some(3.0), 8, 7200), window, 5.0), Some(3.0));
        // One GPU busy keeps the lease busy, even when the mean of all is under the threshold.
        assert_eq!(idle(&m(Some(30.0), 8, 7200), window, 5.0), None);
        assert_eq!(idle(&m(Some(5.0), 8, 7200), window, 5.0), None, "under, not at");
        // Not judged before the lease has been active for the whole window.
        assert_eq!(idle(&m(Some(0.0), 8, 1799), window, 5.0), None);
        // A GPU without samples (no agent, or one that stopped reporting): not known to be idle.
        assert_eq!(idle(&m(Some(0.0), 7, 7200), window, 5.0), None);
        assert_eq!(idle(&m(None, 0, 7200), window, 5.0), None, "no samples at all: never idle");
        let no_gpus = Measured { gpus: 0, gpus_reporting: 0, ..m(None, 0, 7200) };
        assert_eq!(idle(&no_gpus, window, 5.0), None);
    }

    #[test]
    fn steps_much_slower_than_planned_are_reported_once_enough_were_measured() {
        let p = plan(1, 0, 0.1, 0.5);
        let steps = |count: i64, median: f64| MeasuredSteps {
            steps: count,
            last_step: count,
            first_loss: 10.0,
            last_loss: 8.0,
            median_step_time_s: median,
            tokens_per_s: 1.0,
            peak_memory_bytes: 0,
            predicted_step_time_s: Some(p.step_time_s),
            predicted_tokens_per_s: Some(p.tokens_per_s),
            step_time_vs_plan: Some(median / p.step_time_s),
            predicted_memory_per_gpu_bytes: None,
            last_at: chrono::DateTime::UNIX_EPOCH,
        };
        let judge = |s: &MeasuredSteps| {
            kinds(&assess(&InsightInput {
                plan: Some(&p),
                measured: measured(93.0, 900),
                pcie_only: false,
                min_gpus_per_node: 8,
                steps: Some(s),
                replan_suggestion: None,
            }))
            .join(",")
        };
        assert_eq!(judge(&steps(20, 2.0)), "slower_than_plan");
        let said = assess(&InsightInput {
            plan: Some(&Plan { step_time_s: 0.000_35, ..p.clone() }),
            measured: measured(93.0, 900),
            pcie_only: false,
            min_gpus_per_node: 8,
            steps: Some(&MeasuredSteps { step_time_vs_plan: Some(2390.3), ..steps(20, 0.836) }),
            replan_suggestion: None,
        });
        assert!(
            said[0].message.contains("took 836.0 ms") && said[0].message.contains("the 350 µs the plan"),
            "{said:?}"
        );
        assert_eq!(judge(&steps(20, 1.4)), "", "within the tolerance");
        assert_eq!(judge(&steps(3, 5.0)), "", "too few steps to judge");
    }

    #[test]
    fn communication_bound_plans_suggest_less_tensor_parallelism_or_another_zero_stage() {
        let p = plan(4, 0, 0.45, 0.9);
        let input = InsightInput {
            plan: Some(&p),
            measured: measured(55.0, 600),
            pcie_only: true,
            min_gpus_per_node: 2,
            steps: None,
            replan_suggestion: None,
        };
        let found = assess(&input);
        assert_eq!(
            kinds(&found),
            ["low_utilization", "communication_bound", "tensor_parallel_over_pcie", "tensor_parallel_across_nodes"]
        );
        assert!(found[0].suggestion.contains("tp 4 -> 2"), "{}", found[0].suggestion);
        assert!(found[1].suggestion.contains("tp 4 -> 2"));
        let z3 = plan(1, 3, 0.4, 0.9);
        let input = InsightInput {
            plan: Some(&z3),
            measured: measured(90.0, 600),
            pcie_only: false,
            min_gpus_per_node: 8,
            steps: None,
            replan_suggestion: None,
        };
        let found = assess(&input);
        assert_eq!(kinds(&found), ["communication_bound"]);
        assert!(found[0].suggestion.contains("ZeRO stage 2"));
        assert!(found[0].message.contains("45%") || found[0].message.contains("40%"));
    }

    #[test]
    fn a_retune_suggestion_is_an_insight_with_the_pins_to_use() {
        let plan = plan(2, 0, 0.1, 0.5);
        let suggestion = serde_json::json!({
            "reason": "measured 1.200 s/step (3.00x the prediction); ...",
            "correction": { "gain_pct": 35.0, "to": { "tp": 1, "dp": 8 } },
        });
        let found = assess(&InsightInput {
            plan: Some(&plan),
            measured: measured(95.0, 600),
            pcie_only: false,
            min_gpus_per_node: 8,
            steps: None,
            replan_suggestion: Some(&suggestion),
        });
        let insight = found.iter().find(|i| i.kind == "replan_suggested").expect("the suggestion is shown");
        assert!(insight.message.starts_with("retune: measured 1.200 s/step"), "{insight:?}");
        assert!(insight.suggestion.contains(r#"{"pins": {"dp":8,"tp":1}}"#), "{insight:?}");
        assert_eq!(insight.figures["gain_pct"], 35.0);
    }

    // The measured steps against the plan (`steps::summarize`), with this module's plans.
    fn totals(median_step_time_s: f64) -> StepTotals {
        StepTotals {
            job_id: Uuid::nil(),
            steps: 10,
            last_step: 10,
            first_loss: 10.5,
            last_loss: 6.0,
            median_step_time_s,
            median_tokens: 4096.0,
            peak_memory_bytes: 1 << 30,
            last_at: DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn measured_steps_are_set_against_the_plan() {
        let no_plan = summarize(&totals(0.5), None);
        assert_eq!(no_plan.tokens_per_s, 8192.0);
        assert_eq!((no_plan.predicted_step_time_s, no_plan.step_time_vs_plan), (None, None));
        let plan = Plan { step_time_s: 0.25, tokens_per_s: 16384.0, ..plan(1, 0, 0.1, 0.5) };
        let vs = summarize(&totals(0.5), Some(&plan));
        assert_eq!(vs.step_time_vs_plan, Some(2.0));
        assert_eq!(vs.predicted_tokens_per_s, Some(16384.0));
        assert_eq!(summarize(&totals(0.0), Some(&plan)).tokens_per_s, 0.0, "no division by a zero step time");
    }
}
