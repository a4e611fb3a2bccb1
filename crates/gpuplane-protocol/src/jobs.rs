//! The wire protocol between node agents and the service for running jobs. Shared by the server routes
//! (`agent_api::assignments`) and the agent program (`agent::jobs`).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use std::collections::BTreeMap;

/// Most output lines kept per node, and characters per line.
pub const OUTPUT_TAIL_LINES: usize = 50;
pub const OUTPUT_LINE_CHARS: usize = 1000;

/// A job's part that this node has to run (or stop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Assignment {
    /// Report its status at `POST /v1/agent/assignments/{job_node_id}/status`.
    pub job_node_id: Uuid,
    pub job_id: Uuid,
    /// The lease it runs on: its processes run as that lease's user, in that lease's directory.
    pub lease_id: Uuid,
    pub desired: Desired,
    /// The state the service last recorded.
    pub state: JobState,
    pub spec: LaunchSpec,
    /// The part is to stop: tell the process (the notice file, SIGUSR1 to its ranks) and give it the grace to
    /// checkpoint and exit before stopping it. Absent: no stop is foreseen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<StopNotice>,
}

/// A foreseeable stop of a job's part (a replan, its lease ending, a drain), announced before it happens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct StopNotice {
    /// Why, e.g. `replan to generation 2` or `lease released`.
    pub reason: String,
    /// Seconds the process has, from when its agent sees the notice, before it is stopped (SIGTERM, then
    /// SIGKILL). 0: stop at once.
    pub grace_s: u32,
}

/// What the agent writes into [`STOP_NOTICE_FILE`] when a notice arrives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopNoticeFile {
    pub reason: String,
    pub grace_s: u32,
    /// Unix seconds (the node's clock) after which the process is stopped.
    pub deadline: f64,
}

/// Name of the notice file in the job's working directory; the job finds its absolute path in
/// [`STOP_NOTICE_ENV`]. It appears (written whole, by a rename) when a stop notice arrives, and never otherwise.
pub const STOP_NOTICE_FILE: &str = "gpuplane_stop_notice.json";
/// The variable naming the notice file's path, in every job's environment.
pub const STOP_NOTICE_ENV: &str = "GPUPLANE_STOP_NOTICE_FILE";

/// The node's unfinished assignments. One that disappears from the list (its lease ended) must be stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AssignmentList {
    pub assignments: Vec<Assignment>,
    /// The leases that hold GPUs of this node now, with the GPUs they hold: a job gets exactly its lease's
    /// devices; a lease no longer listed has ended here, and its files and processes are removed.
    pub leases: Vec<NodeLease>,
    /// The interactive environments to run on this node now; one no longer listed is stopped.
    #[serde(default)]
    pub environments: Vec<crate::environments::EnvironmentSpec>,
}

/// A lease's part of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct NodeLease {
    pub lease_id: Uuid,
    /// The node's GPU indices the lease holds, ascending.
    pub gpu_indices: Vec<i32>,
    /// The lease's other nodes, whose round trips this node measures (empty for a single-node lease).
    #[serde(default)]
    pub peers: Vec<LeasePeer>,
    /// The tenant's volumes attached to the lease: every process of the lease on this node sees each at
    /// `/volumes/<mount>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<crate::volumes::LeaseVolume>,
}

/// Another node of the same lease, and where its agent answers echo probes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct LeasePeer {
    pub node_id: Uuid,
    pub address: String,
    /// UDP echo port; absent when that node's agent runs no echo listener.
    pub echo_port: Option<i32>,
    /// The lease's own address on that node (its network namespace there), routed through `address`; absent
    /// when that node runs jobs on its own network.
    #[serde(default)]
    pub lease_address: Option<String>,
}

/// A state an agent reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReportedState {
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl From<ReportedState> for JobState {
    fn from(s: ReportedState) -> Self {
        match s {
            ReportedState::Running => JobState::Running,
            ReportedState::Succeeded => JobState::Succeeded,
            ReportedState::Failed => JobState::Failed,
            ReportedState::Cancelled => JobState::Cancelled,
        }
    }
}

/// A state transition of a job's process on this node. Idempotent; states only move forward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "server", schema(example = json!({"state": "succeeded", "exit_code": 0, "output_tail": ["step 100 loss 1.93", "done"]})))]
pub struct AssignmentStatus {
    pub state: ReportedState,
    /// The exit code; a process killed by signal N reports 128 + N.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The last lines of output (the service keeps at most 50, each cut to 1000 characters).
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(max_items = 1000))]
    pub output_tail: Vec<String>,
    /// Why, for `failed` and `cancelled` (e.g. `agent restarted`).
    #[serde(default)]
    pub reason: Option<String>,
    /// How far the part got, from its progress file (with its end: the heartbeat carries it while it runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
}

/// The node's part as the service now records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct AssignmentStatusResponse {
    pub state: JobState,
    pub desired: Desired,
}

/// Keep the last `OUTPUT_TAIL_LINES` lines, each cut to `OUTPUT_LINE_CHARS` characters.
pub fn clamp_tail(lines: &[String]) -> Vec<String> {
    let start = lines.len().saturating_sub(OUTPUT_TAIL_LINES);
    lines[start..].iter().map(|l| l.chars().take(OUTPUT_LINE_CHARS).collect()).collect()
}

/// State of a job, and of each of its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "server", derive(sqlx::Type))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "server", sqlx(type_name = "text", rename_all = "snake_case"))]
pub enum JobState {
    /// Rendered; no agent has fetched it yet.
    Pending,
    /// The agents fetched it.
    Assigned,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Assigned => "assigned",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Cancelled)
    }

    /// Position in the only order states move in: pending, assigned, running, then one terminal state.
    pub fn rank(self) -> u8 {
        match self {
            JobState::Pending => 0,
            JobState::Assigned => 1,
            JobState::Running => 2,
            _ => 3,
        }
    }
}

/// What the service wants a node to do with its part of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "server", derive(sqlx::Type))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "server", sqlx(type_name = "text", rename_all = "snake_case"))]
pub enum Desired {
    Run,
    /// Stop the process (SIGTERM, then SIGKILL after a grace period) and report `cancelled`.
    Cancel,
}

/// A config file written into the job's working directory before it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SpecFile {
    /// Relative path inside the job's working directory.
    pub path: String,
    pub content: String,
}

/// What one node runs: exactly this argv (no shell) with exactly this environment (plus PATH and HOME).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct LaunchSpec {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub files: Vec<SpecFile>,
    /// Run inside this container image (the agent wraps argv in `docker run` with only the leased GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The part serves on a port (a service's replica): the agent forwards the gateway to it and probes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<ServeSpec>,
    /// The uploaded archive (its digest, `GET /v1/agent/uploads/{digest}`) the agent unpacks into the working
    /// directory before the part starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
}

/// A replica's server as the agent sees it: where it listens in the lease's namespace, how it is probed, and the
/// token the gateway presents to reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ServeSpec {
    /// The port the job's server listens on (on every address of the lease's namespace, e.g. `0.0.0.0`).
    pub port: u16,
    /// Probed with `GET` every second; a 2xx answer makes the replica ready.
    pub health_path: String,
    /// What the gateway sends first on each connection to the agent's forwarder (`GPUPLANE-REPLICA <token>\n`).
    /// Given with each assignment fetch, never stored; empty in a stored spec.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
}

/// What the forwarder answers once the token matched and it reached the server: the request may be sent (a
/// replica that cannot be reached never gets it, so it can go to another).
pub const REPLICA_ACK: &[u8] = b"OK\n";

/// The first line the gateway writes on a connection to a replica's forwarder, before the HTTP request.
pub fn replica_preamble(token: &str) -> String {
    format!("GPUPLANE-REPLICA {token}\n")
}

/// A serving part's forwarder on this node, as the agent reports it with each heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ServingReport {
    pub job_node_id: Uuid,
    /// The host port the gateway connects to (on the node's address).
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 65535))]
    pub port: i32,
    /// The last health probe answered 2xx.
    pub ready: bool,
}

/// Name of the file, in a job's working directory, where the gpuplane runtime (global rank 0) appends one JSON
/// line per optimizer step ([`StepLine`]); the launch names it in `GPUPLANE_METRICS_FILE`.
pub const STEPS_FILE: &str = "gpuplane_steps.jsonl";
/// Name of the plan file among a planned job's launch files; the launch names it in `GPUPLANE_PLAN_FILE`.
pub const PLAN_FILE: &str = "gpuplane_plan.json";
/// Name of the file, in a job's working directory, where a job states how far it is (`{"done": n, "total": m}`,
/// replaced whole: the runtime's batch generation writes it); the launch names it in `GPUPLANE_PROGRESS_FILE`.
pub const PROGRESS_FILE: &str = "gpuplane_progress.json";

/// How far a job's part is through its work, as it says in [`PROGRESS_FILE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Progress {
    #[cfg_attr(feature = "server", schema(minimum = 0))]
    pub done: i64,
    #[cfg_attr(feature = "server", schema(minimum = 0))]
    pub total: i64,
}

impl Progress {
    /// Within bounds: 0 <= done <= total.
    pub fn valid(&self) -> bool {
        0 <= self.done && self.done <= self.total
    }
}

/// A part's progress as its agent reports it with the heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PartProgress {
    pub job_node_id: Uuid,
    pub progress: Progress,
}

/// Most steps per heartbeat.
pub const MAX_STEPS_PER_HEARTBEAT: usize = 1024;

/// One line of [`STEPS_FILE`] as the runtime writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLine {
    pub step: i64,
    pub step_time_s: f64,
    pub tokens: i64,
    pub loss: f64,
    pub peak_memory_bytes: i64,
    /// Unix seconds when the step ended.
    pub time: f64,
}

/// One measured optimizer step of a job, as an agent reports it with its heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JobStep {
    /// The assignment on this node whose process measured it.
    pub job_node_id: Uuid,
    /// Optimizer step, from 1.
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 1000000000))]
    pub step: i64,
    /// Wall time of the step, seconds.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 86400))]
    pub step_time_s: f64,
    /// Tokens the whole job processed in the step.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 1000000000000_i64))]
    pub tokens: i64,
    /// The step's training loss (finite).
    pub loss: f64,
    /// Peak accelerator memory of the reporting rank in the step, bytes (host memory on CPU).
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 100000000000000_i64))]
    pub peak_memory_bytes: i64,
    pub at: chrono::DateTime<chrono::Utc>,
}

impl JobStep {
    /// A runtime's line as a report, or why it is not one.
    pub fn from_line(job_node_id: Uuid, line: &StepLine) -> Result<JobStep, String> {
        let at = chrono::DateTime::from_timestamp_millis((line.time * 1000.0) as i64)
            .filter(|_| line.time.is_finite() && line.time > 0.0)
            .ok_or_else(|| format!("time {} is not a timestamp", line.time))?;
        let step = JobStep {
            job_node_id,
            step: line.step,
            step_time_s: line.step_time_s,
            tokens: line.tokens,
            loss: line.loss,
            peak_memory_bytes: line.peak_memory_bytes,
            at,
        };
        step.check().map_err(|(field, message)| format!("{field}: {message}"))?;
        Ok(step)
    }

    /// The bounds the service enforces (and the schema states): the offending field and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(1..=1_000_000_000).contains(&self.step) {
            return Err(("step", format!("{} is not within 1..=1000000000", self.step)));
        }
        if !(self.step_time_s.is_finite() && (0.0..=86_400.0).contains(&self.step_time_s)) {
            return Err(("step_time_s", format!("{} is not within 0..=86400", self.step_time_s)));
        }
        if !(0..=1_000_000_000_000).contains(&self.tokens) {
            return Err(("tokens", format!("{} is not within 0..=1000000000000", self.tokens)));
        }
        if !(0..=100_000_000_000_000).contains(&self.peak_memory_bytes) {
            return Err(("peak_memory_bytes", format!("{} is not within 0..=100000000000000", self.peak_memory_bytes)));
        }
        if !self.loss.is_finite() {
            return Err(("loss", format!("{} is not a finite number", self.loss)));
        }
        Ok(())
    }
}
