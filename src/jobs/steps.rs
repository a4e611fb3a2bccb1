//! Measured optimizer steps: the gpuplane runtime in a job writes one line per step, the node's agent ships them
//! with its heartbeats, and they are kept per job ([`record`]) and set against the plan's prediction
//! ([`summarize`], pure).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::FieldError;
use crate::planner::Plan;
use gpuplane_protocol::jobs::{JobStep, MAX_STEPS_PER_HEARTBEAT};

/// Check a heartbeat's steps; every bad field is named.
pub fn validate(steps: &[JobStep], errors: &mut Vec<FieldError>) {
    if steps.len() > MAX_STEPS_PER_HEARTBEAT {
        errors.push(FieldError::new("steps", format!("at most {MAX_STEPS_PER_HEARTBEAT} steps per heartbeat")));
        return;
    }
    for (i, step) in steps.iter().enumerate() {
        if let Err((field, message)) = step.check() {
            errors.push(FieldError::new(format!("steps[{i}].{field}"), message));
        }
    }
}

pub use gpuplane_store::jobs::steps::{StepTotals, StepView, WARMUP_STEPS, list, record, totals};

/// A job's measured steps against its plan's prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MeasuredSteps {
    /// Steps reported.
    pub steps: i64,
    pub last_step: i64,
    pub first_loss: f64,
    pub last_loss: f64,
    /// Median wall time of a step, seconds (past the first, warm-up step once there are more).
    pub median_step_time_s: f64,
    /// Tokens per second at the median step.
    pub tokens_per_s: f64,
    /// The highest peak memory any reported step saw on the reporting rank, bytes.
    pub peak_memory_bytes: i64,
    /// The plan's predicted step time and throughput (absent without a plan).
    pub predicted_step_time_s: Option<f64>,
    pub predicted_tokens_per_s: Option<f64>,
    /// Measured over predicted step time (above 1: slower than planned).
    pub step_time_vs_plan: Option<f64>,
    pub predicted_memory_per_gpu_bytes: Option<i64>,
    pub last_at: DateTime<Utc>,
}

/// Pure: the totals set against the plan.
pub fn summarize(totals: &StepTotals, plan: Option<&Plan>) -> MeasuredSteps {
    let tokens_per_s =
        if totals.median_step_time_s > 0.0 { totals.median_tokens / totals.median_step_time_s } else { 0.0 };
    let predicted = plan.filter(|p| p.step_time_s > 0.0);
    MeasuredSteps {
        steps: totals.steps,
        last_step: totals.last_step,
        first_loss: totals.first_loss,
        last_loss: totals.last_loss,
        median_step_time_s: totals.median_step_time_s,
        tokens_per_s,
        peak_memory_bytes: totals.peak_memory_bytes,
        predicted_step_time_s: predicted.map(|p| p.step_time_s),
        predicted_tokens_per_s: predicted.map(|p| p.tokens_per_s),
        step_time_vs_plan: predicted.map(|p| totals.median_step_time_s / p.step_time_s),
        predicted_memory_per_gpu_bytes: plan.map(|p| i64::try_from(p.memory_per_gpu_bytes).unwrap_or(i64::MAX)),
        last_at: totals.last_at,
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use gpuplane_protocol::jobs::JobStep;
    use uuid::Uuid;

    use crate::jobs::steps::validate;

    #[test]
    fn bad_steps_are_named_by_field() {
        let good = JobStep {
            job_node_id: Uuid::nil(),
            step: 1,
            step_time_s: 0.5,
            tokens: 10,
            loss: 1.0,
            peak_memory_bytes: 0,
            at: DateTime::UNIX_EPOCH,
        };
        let mut errors = Vec::new();
        validate(std::slice::from_ref(&good), &mut errors);
        assert!(errors.is_empty());
        let bad = [
            JobStep { step: 0, ..good.clone() },
            JobStep { loss: f64::NAN, ..good.clone() },
            JobStep { step_time_s: -1.0, ..good.clone() },
            JobStep { tokens: -5, ..good.clone() },
        ];
        validate(&bad, &mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["steps[0].step", "steps[1].loss", "steps[2].step_time_s", "steps[3].tokens"]);
    }
}
