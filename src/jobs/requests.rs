//! What the jobs API accepts: job and replan bodies and list parameters, each with the rules checked at the edge.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::launch_specs::RESERVED_ENV;
use super::problems::check_image;
use super::templates::check_args;
use crate::error::{ApiError, FieldError};
use crate::planner::{ModelRef, Pins, WorkloadFields};

/// A job to run on a lease's GPUs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"template": "auto", "model": {"preset": "llama3-70b"},
    "workload": {"kind": "train", "seq_len": 4096, "global_batch": 512}, "command": ["pretrain_gpt.py"],
    "args": ["--train-iters", "1000"], "env": {"WANDB_PROJECT": "llama"}}))]
pub struct CreateJobRequest {
    /// `auto` (the planner picks a built-in template), a built-in name, or a custom template's name.
    pub template: String,
    /// A custom template's version (default: the latest).
    #[serde(default)]
    pub template_version: Option<i32>,
    /// The model, as for the planner. Required for `auto` and built-in templates.
    #[serde(default)]
    pub model: Option<ModelRef>,
    /// Workload settings, as for the planner (with `model`).
    #[serde(default)]
    pub workload: Option<WorkloadFields>,
    /// Planner pins (e.g. `{"tp": 2}`).
    #[serde(default)]
    pub pins: Pins,
    /// Run in this container image (`docker run` with only the leased GPUs); otherwise directly on the host.
    #[serde(default)]
    pub image: Option<String>,
    /// The program: the training script for torchrun templates (e.g. `["train.py"]`), `{command}` of a custom one.
    #[serde(default)]
    pub command: Vec<String>,
    /// A shell script (`sh -e`: it stops at its first failing command, up to 64 KiB) run before the command on
    /// every node, each time a part starts (a restart included), in the part's working directory and with its
    /// environment: installs, downloads. Its output is the job's; if it fails, the part fails with its exit code
    /// and the command does not run. The job's image, if any, must have `/bin/sh`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 65536)]
    pub setup: Option<String>,
    /// Extra arguments, appended (or spliced at a custom template's `{args}`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment: names `[A-Z_][A-Z0-9_]*`, not the launch's own variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Secret environment (tokens, passwords), same name rules as `env`, values of 8 to 32768 bytes: never
    /// returned by any read of the API (to members and admins alike), never logged, replaced by `***` in output
    /// tails, and delivered only to the agents of the job's nodes.
    #[serde(default)]
    pub secret_env: BTreeMap<String, String>,
    /// Values of the template's parameters.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// Rendezvous port on the first node (default 29500).
    #[serde(default)]
    #[schema(maximum = 65535)]
    pub master_port: Option<u16>,
    /// What the service does with the job's measured steps (`gpuplane-runtime` jobs with a model).
    #[serde(default)]
    pub retune: super::Retune,
    /// Seconds a stop notice (a replan, the lease released or reaching its end, the balance running out) gives
    /// the job to checkpoint and exit; default 60, at most the service's `--max-stop-grace-secs` and the lease's
    /// remaining time.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 86400)]
    pub stop_grace_s: Option<i32>,
    /// What a failure does (a lost node, a failed GPU, a process that died, a stall): restart from the last
    /// complete checkpoint, within a limit. Default: on (3 restarts) for `gpuplane-runtime` jobs with a model that
    /// checkpoint to storage that outlives a node, off otherwise.
    #[serde(default)]
    pub restart: super::restarts::RestartRequest,
    /// The job serves on a port: each of its parts is a replica of a service that callers reach through the
    /// gateway with the service's keys (`GET /v1/services` lists it, with its URL). A part that fails leaves the
    /// others serving; the job ends when all have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<crate::services::requests::ServeRequest>,
    /// An upload of the tenant's (`POST /v1/uploads`), by its digest: every part starts in a working directory
    /// holding the archive's files (unpacked before the part's own files, which must not share a path with them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^sha256:[0-9a-f]{64}$")]
    pub workdir: Option<String>,
}

/// Most bytes of a setup script.
const MAX_SETUP: usize = 64 * 1024;
/// Most extra environment variables, and bytes per value.
const MAX_ENV: usize = 128;
const MAX_ENV_VALUE: usize = 32 * 1024;
/// Fewest bytes of a secret value: masking a very short value would garble unrelated output.
const MIN_SECRET_VALUE: usize = 8;

impl CreateJobRequest {
    pub fn validate(&self) -> Result<(), ApiError> {
        let mut errors = Vec::new();
        if self.workdir.as_deref().is_some_and(|d| !crate::uploads::is_digest(d)) {
            errors.push(FieldError::new("workdir", "an upload's digest: `sha256:` and 64 lowercase hex digits"));
        }
        check_args("command", &self.command, &mut errors);
        if let Some(setup) = &self.setup {
            if setup.trim().is_empty() {
                errors.push(FieldError::new("setup", "an empty script: leave `setup` out"));
            } else if setup.len() > MAX_SETUP {
                errors.push(FieldError::new("setup", format!("at most {MAX_SETUP} bytes")));
            }
        }
        check_args("args", &self.args, &mut errors);
        if self.env.len() + self.secret_env.len() > MAX_ENV {
            errors.push(FieldError::new("env", format!("at most {MAX_ENV} variables, secret ones included")));
        }
        for name in self.secret_env.keys().filter(|name| self.env.contains_key(*name)) {
            errors.push(FieldError::new(format!("secret_env.{name}"), "also given in `env`"));
        }
        for (name, value) in &self.secret_env {
            if value.len() < MIN_SECRET_VALUE {
                errors.push(FieldError::new(
                    format!("secret_env.{name}"),
                    format!("at least {MIN_SECRET_VALUE} bytes (a shorter value could not be masked in output)"),
                ));
            }
        }
        let all = self.env.iter().map(|e| ("env", e)).chain(self.secret_env.iter().map(|e| ("secret_env", e)));
        for (map, (name, value)) in all {
            let field = format!("{map}.{name}");
            let mut chars = name.chars();
            let well_formed = matches!(chars.next(), Some(c) if c.is_ascii_uppercase() || c == '_')
                && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                && name.len() <= 128;
            if !well_formed {
                errors.push(FieldError::new(field, "names are [A-Z_][A-Z0-9_]*, at most 128 characters"));
            } else if RESERVED_ENV.contains(&name.as_str()) {
                errors.push(FieldError::new(field, "set by the launch itself"));
            } else if value.contains('\0') {
                errors.push(FieldError::new(field, "must not contain NUL"));
            } else if value.len() > MAX_ENV_VALUE {
                errors.push(FieldError::new(field, format!("at most {MAX_ENV_VALUE} bytes")));
            }
        }
        if let Some(image) = &self.image {
            check_image(image, &mut errors);
        }
        if self.master_port.is_some_and(|p| p < 1024) {
            errors.push(FieldError::new("master_port", "1024-65535"));
        }
        if !(1..=90).contains(&self.retune.min_gain_pct) {
            errors.push(FieldError::new("retune.min_gain_pct", "1 to 90 (percent of the measured step time)"));
        }
        if self.model.is_some() != self.workload.is_some() {
            errors.push(FieldError::new("workload", "give a model and its workload together"));
        }
        self.restart.validate(&mut errors);
        if let Some(serve) = &self.serve {
            serve.validate(&mut errors);
        }
        if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
    }
}

/// A replan of a running job: the plan to move to.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"pins": {"dp": 4, "tp": 1, "pp": 1, "zero_stage": 3}, "reason": "more data parallel"}))]
pub struct ReplanRequest {
    /// Planner pins for the new plan; none: the planner's best for the lease's GPUs.
    #[serde(default)]
    pub pins: Pins,
    /// Why, kept in the job's history (at most 200 characters).
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobListParams {
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    pub after: Option<Uuid>,
}

/// Query of `GET /v1/jobs/{job_id}/steps`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StepListParams {
    /// Steps per page (default 500).
    #[param(minimum = 1, maximum = 5000)]
    pub limit: Option<i64>,
    /// Only steps after this one (the last `step` of the previous page).
    #[param(minimum = 0, maximum = 1000000000)]
    pub after: Option<i64>,
}

/// Query of `GET /v1/jobs/{job_id}/logs`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LogParams {
    /// Only lines after this one (the `next_after` of the previous page, or an event's `id` when following).
    /// Not with `tail`.
    #[param(minimum = 0)]
    pub after: Option<i64>,
    /// Only the last this many lines (of those `node` and `rank` keep). Not with `after`.
    #[param(minimum = 1, maximum = 10000)]
    pub tail: Option<i64>,
    /// Lines per page after `after` (default 1000). `tail` returns its lines whole; the text download and a
    /// follow are not paged.
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<i64>,
    /// Only this node's lines (its rank in the job, `nodes[].node_rank`).
    #[param(minimum = 0, maximum = 65535)]
    pub node: Option<i32>,
    /// Only this global rank's lines.
    #[param(minimum = 0, maximum = 1048575)]
    pub rank: Option<i32>,
    /// Keep the response open and send lines as they arrive (`text/event-stream`), until the job has ended and
    /// its last line is out.
    pub follow: Option<bool>,
    /// `json` (the default): a page. `text`: every line (after `after`, or the last `tail`) as a plain-text
    /// download, one `[node N rank R] text` line each.
    #[param(inline)]
    pub format: Option<LogFormat>,
}

/// How `GET /v1/jobs/{job_id}/logs` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Json,
    Text,
}

impl LogParams {
    /// Every bad field, named.
    pub fn check(&self) -> Result<(), ApiError> {
        let mut errors = Vec::new();
        if self.after.is_some_and(|a| a < 0) {
            errors.push(FieldError::new("after", "a line number, 0 or more"));
        }
        if self.tail.is_some_and(|t| !(1..=10_000).contains(&t)) {
            errors.push(FieldError::new("tail", "between 1 and 10000"));
        }
        if self.tail.is_some() && self.after.is_some() {
            errors.push(FieldError::new("tail", "either `tail` or `after`, not both"));
        }
        if self.limit.is_some_and(|l| !(1..=10_000).contains(&l)) {
            errors.push(FieldError::new("limit", "between 1 and 10000"));
        }
        if self.node.is_some_and(|n| !(0..=65_535).contains(&n)) {
            errors.push(FieldError::new("node", "a node rank, 0 to 65535"));
        }
        if self.rank.is_some_and(|r| !(0..=1_048_575).contains(&r)) {
            errors.push(FieldError::new("rank", "a rank, 0 to 1048575"));
        }
        if self.follow == Some(true) && self.format == Some(LogFormat::Text) {
            errors.push(FieldError::new("follow", "a follow is sent as events: not with `format=text`"));
        }
        if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
    }
}
