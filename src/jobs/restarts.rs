//! Restart policies, pure: what a job asks of restarts ([`RestartRequest`]) and the policy it runs with
//! ([`RestartPolicy`]), whether a failure restarts it ([`decide`]), when a running job is stalled ([`stalled`]),
//! and the rendezvous port of each generation ([`restart_port`]). The use cases are `lifecycle::on_failure` (a
//! failure opens a restart) and [`super::recovery`] (the worker that detects stalls and starts restarts).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::templates::Builtin;
use crate::error::{ApiError, ApiResult, FieldError};
pub use gpuplane_store::jobs::FailureCause;

/// Restarts a job may have at most.
pub const MAX_RESTARTS: i32 = 20;
/// Restarts a runtime job that checkpoints gets when it does not say.
pub const DEFAULT_RESTARTS: i32 = 3;
/// The longest wait before a restart, however many came before it.
pub const MAX_BACKOFF_S: i64 = 3600;

fn default_backoff_s() -> i32 {
    10
}
fn default_causes() -> Vec<FailureCause> {
    FailureCause::ALL.to_vec()
}
fn default_stall_factor() -> i32 {
    10
}
fn default_stall_min_s() -> i32 {
    600
}
fn default_first_step_within_s() -> i32 {
    1800
}

/// What a job asks of restarts (`restart` on create); every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartRequest {
    /// Restarts at most, 0 to 20 (0: never restart: a failure fails the job). Default: 3 for a
    /// `gpuplane-runtime` job with a model whose checkpoints outlive a node (`GPUPLANE_CHECKPOINT_DIR` set, by a
    /// read-write volume of the lease or in `env`), and for a job that serves; else 0. A service's replica that
    /// fails while others serve runs again on its node on its own, after the backoff; this bounds the attempts
    /// in a row that fail before answering their health probe.
    #[schema(minimum = 0, maximum = 20)]
    pub max_restarts: Option<i32>,
    /// Seconds before the first restart, doubled for each one after it (at most 3600); 0 to 3600, default 10.
    #[schema(minimum = 0, maximum = 3600)]
    pub backoff_s: Option<i32>,
    /// The causes that restart the job (default: all four); a failure of another cause fails it.
    pub on: Option<Vec<FailureCause>>,
    /// Restart a job that names no checkpoint directory: it begins again at step 0. Without it, such a job with
    /// `max_restarts` above 0 is refused (a job that serves has nothing to resume and needs none).
    pub from_scratch: Option<bool>,
    /// Watch the running runtime job's steps and stop it when they stall (below): restarted when the policy
    /// restarts on `stalled`, else failed with the reason. Default: on when the job restarts on `stalled`; off
    /// otherwise, so a job that pauses on purpose (a long evaluation) is never stopped unasked.
    pub detect_stalls: Option<bool>,
    /// A running runtime job is stalled when no step arrives for this many times its median step time (2 to
    /// 1000, default 10), and at least `stall_min_s` seconds (10 to 86400, default 600).
    #[schema(minimum = 2, maximum = 1000)]
    pub stall_factor: Option<i32>,
    #[schema(minimum = 10, maximum = 86400)]
    pub stall_min_s: Option<i32>,
    /// ...or when its first step does not come within this many seconds of its generation's start (0: never;
    /// else 10 to 86400; default 1800: loading a large checkpoint takes minutes).
    #[schema(minimum = 0, maximum = 86400)]
    pub first_step_within_s: Option<i32>,
}

/// A job's restart policy, as the service resolved it at create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RestartPolicy {
    pub max_restarts: i32,
    #[serde(default = "default_backoff_s")]
    pub backoff_s: i32,
    #[serde(default = "default_causes")]
    pub on: Vec<FailureCause>,
    #[serde(default)]
    pub from_scratch: bool,
    #[serde(default)]
    pub detect_stalls: bool,
    #[serde(default = "default_stall_factor")]
    pub stall_factor: i32,
    #[serde(default = "default_stall_min_s")]
    pub stall_min_s: i32,
    #[serde(default = "default_first_step_within_s")]
    pub first_step_within_s: i32,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_restarts: 0,
            backoff_s: default_backoff_s(),
            on: default_causes(),
            from_scratch: false,
            detect_stalls: false,
            stall_factor: default_stall_factor(),
            stall_min_s: default_stall_min_s(),
            first_step_within_s: default_first_step_within_s(),
        }
    }
}

impl RestartRequest {
    /// Every bad field, named (`restart.<field>`).
    pub fn validate(&self, errors: &mut Vec<FieldError>) {
        let mut range = |field: &str, value: Option<i32>, ok: &dyn Fn(i32) -> bool, rule: &str| {
            if value.is_some_and(|v| !ok(v)) {
                errors.push(FieldError::new(format!("restart.{field}"), rule.to_string()));
            }
        };
        range("max_restarts", self.max_restarts, &|v| (0..=MAX_RESTARTS).contains(&v), "0 to 20");
        range("backoff_s", self.backoff_s, &|v| (0..=3600).contains(&v), "0 to 3600 seconds");
        range("stall_factor", self.stall_factor, &|v| (2..=1000).contains(&v), "2 to 1000 (times the median step)");
        range("stall_min_s", self.stall_min_s, &|v| (10..=86_400).contains(&v), "10 to 86400 seconds");
        range(
            "first_step_within_s",
            self.first_step_within_s,
            &|v| v == 0 || (10..=86_400).contains(&v),
            "0 (never) or 10 to 86400 seconds",
        );
        if let Some(on) = &self.on {
            let mut seen = on.clone();
            seen.sort_by_key(|c| c.as_str());
            seen.dedup();
            if seen.len() != on.len() {
                errors.push(FieldError::new("restart.on", "each cause at most once"));
            }
        }
    }

    /// The policy the job runs with: what it asked, defaults for the rest. `checkpoints`: the job names a
    /// checkpoint directory (its lease's read-write volume, or `GPUPLANE_CHECKPOINT_DIR` in its `env`);
    /// `serves`: its parts are a service's replicas (they resume nothing: a server starts as it started).
    pub fn resolve(&self, template: &str, planned: bool, checkpoints: bool, serves: bool) -> ApiResult<RestartPolicy> {
        let runtime = planned && template == Builtin::Runtime.name();
        let from_scratch = self.from_scratch.unwrap_or(serves);
        let restarted = serves || (runtime && checkpoints);
        let max_restarts = self.max_restarts.unwrap_or(if restarted { DEFAULT_RESTARTS } else { 0 });
        if max_restarts > 0 && !checkpoints && !from_scratch {
            return Err(ApiError::field(
                "restart.from_scratch",
                "the job names no checkpoint directory (attach a read-write volume to the lease, or set \
                 GPUPLANE_CHECKPOINT_DIR in `env` to storage that outlives a node): a restart would begin again at \
                 step 0; set `from_scratch` to allow that",
            ));
        }
        let d = RestartPolicy::default();
        let on = self.on.clone().unwrap_or(d.on);
        // A server measures no steps: nothing to watch.
        let detect_stalls =
            self.detect_stalls.unwrap_or(!serves && max_restarts > 0 && on.contains(&FailureCause::Stalled));
        Ok(RestartPolicy {
            max_restarts,
            backoff_s: self.backoff_s.unwrap_or(d.backoff_s),
            on,
            from_scratch,
            detect_stalls,
            stall_factor: self.stall_factor.unwrap_or(d.stall_factor),
            stall_min_s: self.stall_min_s.unwrap_or(d.stall_min_s),
            first_step_within_s: self.first_step_within_s.unwrap_or(d.first_step_within_s),
        })
    }
}

/// What a failure does to a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Restart after this many seconds.
    Restart { backoff_s: i64 },
    /// The job fails: its policy allowed restarts and they are used up (this says so).
    LimitReached(String),
    /// The job fails as it always did: no restarts, or not for this cause.
    Fail,
}

/// Pure: whether a failure of `cause` restarts a job with `policy` that has had `restarts` restarts. The backoff
/// doubles with each restart: `backoff_s x 2^restarts`, at most an hour.
pub fn decide(policy: &RestartPolicy, restarts: i32, cause: FailureCause) -> Verdict {
    if policy.max_restarts == 0 || !policy.on.contains(&cause) {
        return Verdict::Fail;
    }
    if restarts >= policy.max_restarts {
        return Verdict::LimitReached(format!(
            "the restart limit is reached ({restarts} of {} restarts)",
            policy.max_restarts
        ));
    }
    let backoff_s = i64::from(policy.backoff_s).saturating_mul(1i64 << restarts.clamp(0, 20)).min(MAX_BACKOFF_S);
    Verdict::Restart { backoff_s }
}

/// Pure: why a running generation is stalled at `now`, if it is. With no step yet, the first must come within
/// `first_step_within_s` of the generation's start; after one, the next within `stall_factor` times the median
/// step time (the first step's time while there is no median), and never sooner than `stall_min_s`.
pub fn stalled(
    policy: &RestartPolicy,
    now: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    last_step_at: Option<DateTime<Utc>>,
    median_step_s: Option<f64>,
) -> Option<String> {
    match last_step_at {
        None => {
            let started_at = started_at?;
            let waited = (now - started_at).num_seconds();
            (policy.first_step_within_s > 0 && waited > i64::from(policy.first_step_within_s)).then(|| {
                format!("stalled: no first step within {} s of the start ({waited} s)", policy.first_step_within_s)
            })
        }
        Some(last) => {
            let bound = match median_step_s.filter(|m| *m > 0.0) {
                Some(median) => (f64::from(policy.stall_factor) * median).max(f64::from(policy.stall_min_s)),
                None => f64::from(policy.stall_min_s),
            };
            let silent = (now - last).num_milliseconds() as f64 / 1000.0;
            (silent > bound).then(|| match median_step_s {
                Some(median) => format!(
                    "stalled: no step for {silent:.0} s (the bound: {} x the median step of {median:.2} s, at least {} s)",
                    policy.stall_factor, policy.stall_min_s
                ),
                None => format!("stalled: no step for {silent:.0} s (the bound: {} s)", policy.stall_min_s),
            })
        }
    }
}

/// The rendezvous port of generation `generation` of a job that asked for `base`: `base` for the first, then one
/// more per generation within a window of 100 above it (wrapping under 65535).
pub fn restart_port(base: u16, generation: i32) -> u16 {
    let offset = u16::try_from((generation - 1).rem_euclid(100)).unwrap_or(0);
    let port = u32::from(base) + u32::from(offset);
    if port > 65_535 { base.saturating_sub(100 - offset) } else { port as u16 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max: i32) -> RestartPolicy {
        RestartPolicy { max_restarts: max, ..RestartPolicy::default() }
    }

    #[test]
    fn a_failure_restarts_within_the_limit_with_a_doubling_backoff_and_only_for_its_causes() {
        assert_eq!(decide(&policy(0), 0, FailureCause::NodeLost), Verdict::Fail, "off");
        assert_eq!(decide(&policy(3), 0, FailureCause::NodeLost), Verdict::Restart { backoff_s: 10 });
        assert_eq!(decide(&policy(3), 1, FailureCause::ProcessDied), Verdict::Restart { backoff_s: 20 });
        assert_eq!(decide(&policy(3), 2, FailureCause::Stalled), Verdict::Restart { backoff_s: 40 });
        assert_eq!(
            decide(&policy(3), 3, FailureCause::NodeLost),
            Verdict::LimitReached("the restart limit is reached (3 of 3 restarts)".into())
        );
        let long = RestartPolicy { backoff_s: 3600, ..policy(20) };
        assert_eq!(decide(&long, 19, FailureCause::GpuFailed), Verdict::Restart { backoff_s: MAX_BACKOFF_S });
        let nodes_only = RestartPolicy { on: vec![FailureCause::NodeLost], ..policy(3) };
        assert_eq!(decide(&nodes_only, 0, FailureCause::ProcessDied), Verdict::Fail);
        assert_eq!(decide(&nodes_only, 0, FailureCause::NodeLost), Verdict::Restart { backoff_s: 10 });
    }

    #[test]
    fn a_stall_is_a_silence_past_k_median_steps_and_the_floor_or_a_first_step_that_never_came() {
        let p = RestartPolicy { stall_factor: 10, stall_min_s: 30, first_step_within_s: 120, ..policy(3) };
        let t0 = DateTime::parse_from_rfc3339("2026-12-05T12:00:00Z").unwrap().with_timezone(&Utc);
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        // No step yet: within the bound, then past it; never before the generation started.
        assert_eq!(stalled(&p, at(100), Some(t0), None, None), None);
        let why = stalled(&p, at(121), Some(t0), None, None).unwrap();
        assert_eq!(why, "stalled: no first step within 120 s of the start (121 s)");
        assert_eq!(stalled(&p, at(500), None, None, None), None);
        let off = RestartPolicy { first_step_within_s: 0, ..p.clone() };
        assert_eq!(stalled(&off, at(100_000), Some(t0), None, None), None);
        // Steps of 5 s: 10 x 5 = 50 s of silence is the bound.
        assert_eq!(stalled(&p, at(49), Some(t0), Some(t0), Some(5.0)), None);
        assert!(stalled(&p, at(51), Some(t0), Some(t0), Some(5.0)).unwrap().starts_with("stalled: no step for 51 s"));
        // Fast steps: the floor holds.
        assert_eq!(stalled(&p, at(29), Some(t0), Some(t0), Some(0.1)), None);
        assert!(stalled(&p, at(31), Some(t0), Some(t0), Some(0.1)).is_some());
        // One step, no median yet: the floor.
        assert!(stalled(&p, at(31), Some(t0), Some(t0), None).is_some());
    }

    #[test]
    fn the_policy_defaults_on_for_services_and_runtime_jobs_that_checkpoint_and_refuses_restarts_from_scratch_unasked()
    {
        let asked = RestartRequest::default();
        assert_eq!(asked.resolve("gpuplane-runtime", true, true, false).unwrap().max_restarts, DEFAULT_RESTARTS);
        assert_eq!(asked.resolve("gpuplane-runtime", true, false, false).unwrap().max_restarts, 0);
        assert_eq!(asked.resolve("torchrun-ddp", true, true, false).unwrap().max_restarts, 0);
        let two = RestartRequest { max_restarts: Some(2), ..Default::default() };
        assert!(two.resolve("torchrun-ddp", true, false, false).is_err(), "from step 0 only if asked");
        let scratch = RestartRequest { from_scratch: Some(true), ..two.clone() };
        assert_eq!(scratch.resolve("torchrun-ddp", true, false, false).unwrap().max_restarts, 2);
        let off = RestartRequest { max_restarts: Some(0), ..Default::default() };
        let resolved = off.resolve("gpuplane-runtime", true, true, false).unwrap();
        assert_eq!((resolved.max_restarts, resolved.detect_stalls), (0, false), "no stall watch unasked");
        assert!(
            asked.resolve("gpuplane-runtime", true, true, false).unwrap().detect_stalls,
            "on with restarts on stalls"
        );
        let nodes_only = RestartRequest { on: Some(vec![FailureCause::NodeLost]), ..Default::default() };
        assert!(!nodes_only.resolve("gpuplane-runtime", true, true, false).unwrap().detect_stalls);
        let served = asked.resolve("vllm", true, false, true).unwrap();
        assert_eq!((served.max_restarts, served.from_scratch, served.detect_stalls), (DEFAULT_RESTARTS, true, false));
        let watch = RestartRequest { detect_stalls: Some(true), ..off.clone() };
        assert!(watch.resolve("gpuplane-runtime", true, true, false).unwrap().detect_stalls, "asked: a stall fails it");
        let mut errors = Vec::new();
        RestartRequest {
            max_restarts: Some(21),
            backoff_s: Some(-1),
            on: Some(vec![FailureCause::Stalled, FailureCause::Stalled]),
            stall_factor: Some(1),
            stall_min_s: Some(5),
            first_step_within_s: Some(5),
            ..Default::default()
        }
        .validate(&mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "restart.max_restarts",
                "restart.backoff_s",
                "restart.stall_factor",
                "restart.stall_min_s",
                "restart.first_step_within_s",
                "restart.on"
            ]
        );
    }

    #[test]
    fn each_generation_rendezvouses_on_a_port_of_its_own() {
        assert_eq!(restart_port(29500, 1), 29500);
        assert_eq!(restart_port(29500, 2), 29501);
        assert_eq!(restart_port(29500, 101), 29500);
        assert_eq!(restart_port(65535, 3), 65435 + 2);
    }
}
