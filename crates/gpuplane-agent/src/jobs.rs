//! Running the node's job assignments.
//!
//! The heartbeat loop calls [`JobRunner::sync`] when the service hints that there is work (and every few
//! heartbeats as a backstop, and every heartbeat while something runs): it fetches the assignments, starts new
//! ones, stops cancelled ones and ones that disappeared (their lease ended), and delivers state reports.
//!
//! A process is started with exactly the rendered argv and environment (no shell), through [`JobHost`]: in the
//! sandbox as its lease's own user, seeing only its lease's GPUs and files ([`super::sandbox`]), or in a
//! container when it names an image. Stopping it signals every process it started (SIGTERM, SIGKILL after a
//! grace period).
//!
//! Every start is recorded in `<state-dir>/jobs.json` before the process is spawned. A restarted agent therefore
//! never starts an assignment twice: one that was running when the agent died is stopped (its sandbox and every
//! process of its lease's user are killed) and reported `failed` with the reason "agent restarted".
//! `jobs.json` also holds which uid each lease on this host runs as.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::buffer::Bounded;
use super::client::{CallError, ServiceClient};
use super::environments::Environments;
use super::launch::{JobHost, ProcessKind, STOP_GRACE, container_name};
use super::process::{Exited, Owner, SharedTail, end_output, shipped, snapshot, spawn_process, unshipped};
use super::sandbox::{processes_of_uid, signal_processes};
use gpuplane_protocol::jobs::{Assignment, AssignmentStatus, NodeLease, ReportedState};
use gpuplane_protocol::jobs::{Desired, JobStep, StopNotice, StopNoticeFile};
use gpuplane_protocol::logs::{LogReport, MAX_LOG_LINES_PER_REPORT};

/// What `jobs.json` remembers of an assignment this agent started.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Started {
    job_id: Uuid,
    /// The process (and process group) id; absent if the agent died between recording and spawning.
    pid: Option<u32>,
    /// The process ended and its final state was decided.
    finished: bool,
    /// It ran in a container (named after the assignment), which outlives the agent unless removed.
    #[serde(default)]
    container: bool,
}

/// A lease with files or processes on this host.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct LeaseSlot {
    /// The uid and gid its processes run as.
    uid: u32,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct JobsFile {
    jobs: BTreeMap<Uuid, Started>,
    #[serde(default)]
    leases: BTreeMap<Uuid, LeaseSlot>,
}

/// Why the agent stopped a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Cancelled,
    /// The assignment is no longer listed (its lease ended).
    Gone,
    AgentShutdown,
    /// Its stop notice's grace ran out before it exited.
    NoticeExpired,
}

/// A stop notice passed on to a running process.
struct Noticed {
    reason: String,
    grace_s: u32,
    /// When its grace runs out (checked at every sync, which runs every heartbeat while a job runs).
    deadline: tokio::time::Instant,
}

struct Running {
    pid: u32,
    lease_id: Uuid,
    /// Where reading its runtime's steps file stands.
    steps: super::steps::StepsTail,
    kind: ProcessKind,
    tail: SharedTail,
    reported_version: u64,
    stopping: Option<StopReason>,
    noticed: Option<Noticed>,
    /// What its progress file said at the last look.
    progress: Option<gpuplane_protocol::jobs::Progress>,
}

struct JobExit {
    job_node_id: Uuid,
    code: Option<i32>,
    tail: Vec<String>,
    first_error: Option<String>,
}

/// The signal a stop notice sends to the processes that catch it.
const SIGUSR1: u32 = 10;

/// Steps kept while the service is away (the oldest go first past this).
pub const MAX_BUFFERED_STEPS: usize = 100_000;

pub struct JobRunner {
    state_dir: PathBuf,
    host: Arc<JobHost>,
    file: JobsFile,
    running: HashMap<Uuid, Running>,
    exits_tx: mpsc::UnboundedSender<Exited>,
    exits_rx: mpsc::UnboundedReceiver<Exited>,
    /// Reports not yet delivered, oldest first.
    outbox: Vec<(Uuid, AssignmentStatus)>,
    environments: Environments,
    grace: Duration,
    /// The leases on this node as the last successful sync listed them (with their other nodes, for probes).
    leases: Vec<NodeLease>,
    /// Steps the jobs' runtimes measured, not yet delivered.
    pub steps: Bounded<JobStep>,
    /// The forwarders and probes of the parts that serve.
    pub serving: super::serving::ServingReplicas,
    /// A running part's progress changed since the last look (a heartbeat goes out early).
    progress_changed: bool,
    /// The output of every part started here that is not all shipped yet (kept past the process's end until its
    /// last line is delivered).
    logs: BTreeMap<Uuid, SharedTail>,
    /// Working directories being fetched, by digest: a large one downloads beside the heartbeats, and the parts
    /// that name it start at a sync after it arrived.
    fetching: HashMap<String, tokio::task::JoinHandle<Result<(), Option<String>>>>,
}

/// How long a sync waits for a working directory's download before it lets it go on in the background: a small
/// one arrives within it, and its part starts in the same sync.
const FETCH_INLINE_WAIT: Duration = Duration::from_secs(2);

/// Where a part's working directory is.
enum Workdir {
    /// On this host (or the part has none): the part can start.
    Ready,
    /// Still downloading, or to be tried again at the next sync.
    Pending,
    /// The part cannot start.
    Refused(String),
}

impl JobRunner {
    /// Load `jobs.json`. Assignments that were running when the previous agent died are stopped for good (their
    /// sandbox or container and every process of their lease's user are killed) and reported failed: they are
    /// never started again.
    pub fn open(state_dir: &Path, host: JobHost) -> anyhow::Result<Self> {
        let path = state_dir.join("jobs.json");
        let mut file: JobsFile = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|err| {
                tracing::warn!(path = %path.display(), %err, "jobs.json is unreadable; starting with no jobs");
                JobsFile::default()
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => JobsFile::default(),
            Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
        };
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        let mut outbox = Vec::new();
        let mut logs = BTreeMap::new();
        for (job_node_id, started) in file.jobs.iter_mut().filter(|(_, s)| !s.finished) {
            if let Some(pid) = started.pid {
                let kind = if started.container {
                    ProcessKind::Container(container_name(*job_node_id))
                } else {
                    ProcessKind::Plain
                };
                host.kill(pid, &kind);
            }
            started.finished = true;
            // What it printed since the last shipment died with the previous agent: its log is closed as it is.
            logs.insert(*job_node_id, ended_output());
            tracing::warn!(job_node.id = %job_node_id, "the job was running when the agent stopped: reporting it failed");
            outbox.push((
                *job_node_id,
                AssignmentStatus {
                    state: ReportedState::Failed,
                    exit_code: None,
                    output_tail: Vec::new(),
                    reason: Some("agent restarted".into()),
                    progress: None,
                },
            ));
        }
        // Nothing of a lease runs while the agent is down: whatever is left is an orphan.
        if host.sandboxed() {
            for slot in file.leases.values().filter(|slot| host.uids.contains(slot.uid)) {
                signal_processes(&processes_of_uid(slot.uid), "KILL");
            }
        }
        let environments = Environments::new(host.env_ports, host.sshd.clone(), STOP_GRACE);
        let host_serve_ports = host.serve_ports;
        let runner = Self {
            state_dir: state_dir.to_owned(),
            environments,
            host: Arc::new(host),
            file,
            running: HashMap::new(),
            exits_tx,
            exits_rx,
            outbox,
            grace: STOP_GRACE,
            leases: Vec::new(),
            steps: Bounded::new(MAX_BUFFERED_STEPS),
            serving: super::serving::ServingReplicas::new(host_serve_ports),
            progress_changed: false,
            logs,
            fetching: HashMap::new(),
        };
        runner.persist()?;
        Ok(runner)
    }

    /// The GPU indices of the leases a job's process runs for here.
    pub fn busy_gpus(&self) -> Vec<i32> {
        self.leases
            .iter()
            .filter(|l| self.running.values().any(|r| r.lease_id == l.lease_id))
            .flat_map(|l| l.gpu_indices.iter().copied())
            .collect()
    }

    /// Some job's process runs here (its steps are worth looking for).
    pub fn runs_jobs(&self) -> bool {
        !self.running.is_empty()
    }

    /// Whether to talk to the service every heartbeat: a process runs or reports wait.
    pub fn busy(&self) -> bool {
        !self.running.is_empty()
            || !self.outbox.is_empty()
            || !self.logs.is_empty()
            || !self.fetching.is_empty()
            || self.environments.busy()
    }

    /// The next process exit.
    pub async fn next_exit(&mut self) -> Option<Exited> {
        self.exits_rx.recv().await
    }

    fn persist(&self) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.state_dir)?;
        let path = self.state_dir.join("jobs.json");
        let tmp = self.state_dir.join("jobs.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&self.file)?)?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
    }

    fn persist_or_warn(&self) {
        if let Err(err) = self.persist() {
            tracing::error!(%err, "could not save jobs.json");
        }
    }

    /// Decide the final state of a process that ended, record it, and queue its report.
    pub fn on_exit(&mut self, exit: Exited) {
        let job_node_id = match exit.owner {
            Owner::Job(id) => id,
            Owner::Environment(lease_id) => return self.environments.on_exit(lease_id, exit.code, exit.tail),
        };
        let exit = JobExit { job_node_id, code: exit.code, tail: exit.tail, first_error: exit.first_error };
        // Its last steps are read before it is forgotten.
        self.collect_steps_of(job_node_id);
        self.serving.stop(job_node_id);
        let (stopping, noticed, progress) = match self.running.remove(&exit.job_node_id) {
            Some(r) => (r.stopping, r.noticed, r.progress),
            None => (None, None, None),
        };
        if let Some(started) = self.file.jobs.get_mut(&exit.job_node_id) {
            started.finished = true;
        }
        self.persist_or_warn();
        let (state, reason) = exit_outcome(stopping, noticed.as_ref(), exit.code);
        // A failure's reason says what the job printed first as an error, not only how it exited.
        let reason = match (state, reason, exit.first_error) {
            (ReportedState::Failed, Some(reason), Some(error)) => Some(format!("{reason}: {error}")),
            (_, reason, _) => reason,
        };
        tracing::info!(job_node.id = %exit.job_node_id, ?state, code = ?exit.code, "job process ended");
        // Its last progress goes with its end (its file was read once more above).
        self.outbox.push((
            exit.job_node_id,
            AssignmentStatus { state, exit_code: exit.code, output_tail: exit.tail, reason, progress },
        ));
    }

    /// The progress of every running part that keeps a progress file.
    pub fn progress(&self) -> Vec<gpuplane_protocol::jobs::PartProgress> {
        let mut all: Vec<_> = self
            .running
            .iter()
            .filter_map(|(id, r)| {
                r.progress.map(|progress| gpuplane_protocol::jobs::PartProgress { job_node_id: *id, progress })
            })
            .collect();
        all.sort_by_key(|p| p.job_node_id);
        all
    }

    /// Whether a part's progress changed since the last call.
    pub fn take_progress_changed(&mut self) -> bool {
        std::mem::take(&mut self.progress_changed)
    }

    /// Read the steps every running job's runtime appended since the last look into the buffer.
    pub fn collect_steps(&mut self) {
        let ids: Vec<Uuid> = self.running.keys().copied().collect();
        for id in ids {
            self.collect_steps_of(id);
        }
    }

    fn collect_steps_of(&mut self, id: Uuid) {
        let Some(running) = self.running.get_mut(&id) else { return };
        let dir = self.host.lease_dir(running.lease_id).join("jobs").join(id.to_string());
        let found = running.steps.read_new(&dir, id);
        let progress = super::steps::read_progress(&dir);
        if progress.is_some() && progress != running.progress {
            running.progress = progress;
            self.progress_changed = true;
        }
        let dropped = self.steps.push_all(found);
        if dropped > 0 {
            tracing::warn!(dropped, "step buffer full: dropped the oldest steps");
        }
    }

    /// Ship every part's unshipped output, a report at a time, oldest first; a part whose last line is delivered
    /// is forgotten. Stops at the first transient failure (the rest waits for the next call); a part the service
    /// refuses (it no longer knows it) is dropped.
    pub async fn ship_logs(&mut self, client: &ServiceClient, token: &str) {
        let ids: Vec<Uuid> = self.logs.keys().copied().collect();
        for id in ids {
            let Some(tail) = self.logs.get(&id).cloned() else { continue };
            loop {
                let (lines, last) = unshipped(&tail, MAX_LOG_LINES_PER_REPORT);
                if lines.is_empty() && !last {
                    break;
                }
                let report = LogReport { lines, last };
                match client.report_logs(token, id, &report).await {
                    Ok(answer) => {
                        shipped(&tail, answer.acked_seq);
                        if last {
                            self.logs.remove(&id);
                            break;
                        }
                    }
                    Err(CallError::Rejected { status, problem }) => {
                        tracing::warn!(job_node.id = %id, status, %problem, "the service refused a part's output; dropping it");
                        self.logs.remove(&id);
                        break;
                    }
                    Err(err) => {
                        tracing::debug!(job_node.id = %id, %err, "output not shipped; retrying later");
                        return;
                    }
                }
            }
        }
    }

    /// Deliver queued reports (each part's output first, so a part's last lines are stored before its end);
    /// keep those that failed transiently.
    pub async fn flush(&mut self, client: &ServiceClient, token: &str) {
        self.ship_logs(client, token).await;
        let mut kept = Vec::new();
        for (job_node_id, status) in std::mem::take(&mut self.outbox) {
            match client.report_assignment(token, job_node_id, &status).await {
                Ok(_) => {}
                Err(CallError::Rejected { status: code, problem }) => {
                    tracing::warn!(job_node.id = %job_node_id, code, %problem, "the service refused a job report; dropping it");
                }
                Err(err) => {
                    tracing::debug!(job_node.id = %job_node_id, %err, "job report not delivered; retrying later");
                    kept.push((job_node_id, status));
                }
            }
        }
        // Anything queued meanwhile goes after the retried ones.
        kept.append(&mut self.outbox);
        self.outbox = kept;
    }

    /// Fetch the assignments and act on them: start new ones, stop cancelled and vanished ones, report.
    pub async fn sync(&mut self, client: &ServiceClient, token: &str) {
        self.flush(client, token).await;
        let (list, leases, environments) = match client.assignments(token).await {
            Ok(list) => (list.assignments, list.leases, list.environments),
            Err(err) => {
                tracing::debug!(%err, "fetching assignments failed; retrying at the next heartbeat");
                return;
            }
        };
        if let Some(network) = &self.host.network {
            // Before anything starts: a lease's processes run in its namespace, which must be there.
            let stopping: Vec<Uuid> = self.running.values().map(|r| r.lease_id).collect();
            network.sync(&leases, &stopping);
        }
        let listed: Vec<Uuid> = list.iter().map(|a| a.job_node_id).collect();
        let workdirs: Vec<PathBuf> =
            list.iter().filter_map(|a| a.spec.workdir.as_deref()).map(|d| self.host.workdir_archive(d)).collect();
        for assignment in list {
            let id = assignment.job_node_id;
            match assignment.desired {
                Desired::Run if self.running.contains_key(&id) => {
                    if let Some(serve) = &assignment.spec.serve {
                        self.serving.refresh_token(id, &serve.token);
                    }
                    if let Some(notice) = &assignment.notice {
                        self.notice(id, notice);
                    }
                }
                Desired::Run => match self.file.jobs.get(&id) {
                    None if assignment.notice.is_some() => {
                        // Noticed before it started here: it never starts.
                        let reason = assignment.notice.as_ref().map(|n| n.reason.clone()).unwrap_or_default();
                        self.end_unstarted(id, assignment.job_id, format!("stopped before it started: {reason}"));
                    }
                    None => match self.workdir(client, token, &assignment).await {
                        Workdir::Ready => self.start(&assignment, &leases),
                        Workdir::Pending => {}
                        Workdir::Refused(reason) => self.fail_unstarted(id, assignment.job_id, reason),
                    },
                    Some(started) if started.finished && !self.outbox.iter().any(|(o, _)| *o == id) => {
                        // Ended here, yet the service still lists it: the final report was lost.
                        self.outbox.push((
                            id,
                            AssignmentStatus {
                                state: ReportedState::Failed,
                                exit_code: None,
                                output_tail: Vec::new(),
                                reason: Some("agent restarted".into()),
                                progress: None,
                            },
                        ));
                    }
                    Some(_) => {}
                },
                Desired::Cancel if self.running.contains_key(&id) => self.stop(id, StopReason::Cancelled),
                Desired::Cancel => {
                    if !self.file.jobs.contains_key(&id) || !self.outbox.iter().any(|(o, _)| *o == id) {
                        self.end_unstarted(id, assignment.job_id, "cancelled before it started".into());
                    }
                }
            }
        }
        // Notices whose grace ran out.
        let now = tokio::time::Instant::now();
        let expired: Vec<Uuid> = self
            .running
            .iter()
            .filter(|(_, r)| r.stopping.is_none() && r.noticed.as_ref().is_some_and(|n| n.deadline <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            tracing::warn!(job_node.id = %id, "the job did not exit within its stop notice's grace: stopping it");
            self.stop(id, StopReason::NoticeExpired);
        }
        let vanished: Vec<Uuid> = self.running.keys().filter(|id| !listed.contains(id)).copied().collect();
        for id in vanished {
            tracing::info!(job_node.id = %id, "the assignment ended on the service (its lease ended?): stopping it");
            self.stop(id, StopReason::Gone);
        }
        // Output of running processes, when it changed.
        for (id, running) in &mut self.running {
            let (lines, version) = snapshot(&running.tail);
            if version != running.reported_version && running.stopping.is_none() {
                running.reported_version = version;
                self.outbox.push((
                    *id,
                    AssignmentStatus {
                        state: ReportedState::Running,
                        exit_code: None,
                        output_tail: lines,
                        reason: None,
                        progress: None,
                    },
                ));
            }
        }
        // Forget finished assignments the service no longer lists.
        let before = self.file.jobs.len();
        let outbox = &self.outbox;
        self.file.jobs.retain(|id, s| !s.finished || listed.contains(id) || outbox.iter().any(|(o, _)| o == id));
        if self.file.jobs.len() != before {
            self.persist_or_warn();
        }
        self.sync_environments(&environments, &leases);
        self.remove_ended_leases(&leases);
        // Downloads no listed part waits for any more are stopped.
        let host = self.host.clone();
        self.fetching.retain(|digest, fetch| {
            let wanted = workdirs.contains(&host.workdir_archive(digest));
            if !wanted {
                fetch.abort();
            }
            wanted
        });
        forget_workdirs(&self.state_dir.join("uploads"), &workdirs);
        self.host.volumes.release_unused(&leases);
        self.leases = leases;
        self.flush(client, token).await;
        self.environments.flush(client, token).await;
    }

    /// An assignment this agent never started is over: recorded as finished (a later listing does not start it)
    /// and reported `cancelled` with `reason`.
    fn end_unstarted(&mut self, id: Uuid, job_id: Uuid, reason: String) {
        self.file.jobs.entry(id).or_insert(Started { job_id, pid: None, finished: true, container: false });
        // It printed nothing: its log is closed at once.
        self.logs.entry(id).or_insert_with(ended_output);
        self.persist_or_warn();
        self.outbox.push((
            id,
            AssignmentStatus {
                state: ReportedState::Cancelled,
                exit_code: None,
                output_tail: Vec::new(),
                reason: Some(reason),
                progress: None,
            },
        ));
    }

    /// The leases on this node as last listed by the service.
    pub fn leases(&self) -> &[NodeLease] {
        &self.leases
    }

    fn sync_environments(&mut self, specs: &[gpuplane_protocol::environments::EnvironmentSpec], leases: &[NodeLease]) {
        let mut uids = BTreeMap::new();
        for spec in specs.iter().filter(|s| leases.iter().any(|l| l.lease_id == s.lease_id)) {
            match self.lease_uid(spec.lease_id) {
                Ok(uid) => {
                    uids.insert(spec.lease_id, uid);
                }
                Err(err) => {
                    tracing::error!(lease.id = %spec.lease_id, err = format!("{err:#}"), "no uid for the lease")
                }
            }
        }
        self.environments.sync(&self.host, specs, leases, &uids, &self.exits_tx);
    }

    /// A lease the service no longer lists on this node, with nothing of it still stopping: its processes are
    /// killed, its files removed, its uid freed.
    fn remove_ended_leases(&mut self, listed: &[NodeLease]) {
        let ended: Vec<(Uuid, LeaseSlot)> = self
            .file
            .leases
            .iter()
            .filter(|(id, _)| !listed.iter().any(|l| l.lease_id == **id))
            .filter(|(id, _)| !self.running.values().any(|r| r.lease_id == **id))
            .filter(|(id, _)| !self.environments.runs_for(**id))
            .map(|(id, slot)| (*id, *slot))
            .collect();
        for (lease_id, slot) in &ended {
            tracing::info!(lease.id = %lease_id, uid = slot.uid, "the lease ended here: removing its processes and files");
            self.host.remove_lease(*lease_id, slot.uid);
            self.file.leases.remove(lease_id);
        }
        if !ended.is_empty() {
            self.persist_or_warn();
        }
    }

    /// The lease's uid on this host, taken from the range on its first job.
    fn lease_uid(&mut self, lease_id: Uuid) -> anyhow::Result<u32> {
        if let Some(slot) = self.file.leases.get(&lease_id) {
            return Ok(slot.uid);
        }
        let uid = self.host.free_uid(self.file.leases.values().map(|s| s.uid))?;
        self.file.leases.insert(lease_id, LeaseSlot { uid });
        self.persist()?;
        Ok(uid)
    }

    /// Whether the part's uploaded working directory is on this host, fetching it (once per digest, kept for the
    /// other parts that name it) if not: inline when it comes within [`FETCH_INLINE_WAIT`], in the background
    /// otherwise, so a large download never holds the heartbeats up.
    async fn workdir(&mut self, client: &ServiceClient, token: &str, assignment: &Assignment) -> Workdir {
        let Some(digest) = &assignment.spec.workdir else { return Workdir::Ready };
        if !super::archive::is_digest(digest) {
            return Workdir::Refused(format!("the working directory `{digest}` is not a digest"));
        }
        let path = self.host.workdir_archive(digest);
        if path.is_file() {
            // Arrived (a download that ended between two syncs is done with).
            self.fetching.remove(digest);
            return Workdir::Ready;
        }
        let mut fetch = match self.fetching.remove(digest) {
            Some(fetch) => fetch,
            None => tokio::spawn(fetch_archive(client.clone(), token.to_string(), digest.clone(), path)),
        };
        match tokio::time::timeout(FETCH_INLINE_WAIT, &mut fetch).await {
            Err(_still_fetching) => {
                self.fetching.insert(digest.clone(), fetch);
                Workdir::Pending
            }
            Ok(Ok(Ok(()))) => Workdir::Ready,
            // Not this time: the next sync tries again.
            Ok(Ok(Err(None))) => Workdir::Pending,
            Ok(Ok(Err(Some(reason)))) => Workdir::Refused(reason),
            Ok(Err(panicked)) => {
                Workdir::Refused(format!("fetching the working directory {digest} failed: {panicked}"))
            }
        }
    }

    /// A part that cannot start here: recorded as finished, its log closed as it stands, and reported failed
    /// with `reason`.
    fn fail_unstarted(&mut self, id: Uuid, job_id: Uuid, reason: String) {
        tracing::warn!(job_node.id = %id, %reason, "job could not be started");
        self.logs.entry(id).or_insert_with(ended_output);
        self.file.jobs.entry(id).or_insert(Started { job_id, pid: None, finished: true, container: false }).finished =
            true;
        self.persist_or_warn();
        self.outbox.push((
            id,
            AssignmentStatus {
                state: ReportedState::Failed,
                exit_code: None,
                output_tail: vec![reason.clone()],
                reason: Some(format!("could not start: {reason}")),
                progress: None,
            },
        ));
    }

    fn start(&mut self, assignment: &Assignment, leases: &[NodeLease]) {
        let (id, job_id) = (assignment.job_node_id, assignment.job_id);
        // Recorded before the spawn: if the agent dies in between, the restart reports it instead of starting it.
        let container = assignment.spec.image.is_some();
        self.file.jobs.insert(id, Started { job_id, pid: None, finished: false, container });
        if let Err(err) = self.persist() {
            tracing::error!(%err, "could not record the job start; not starting it");
            self.file.jobs.remove(&id);
            return;
        }
        match self.spawn(assignment, leases) {
            Ok(pid) => {
                if let Some(started) = self.file.jobs.get_mut(&id) {
                    started.pid = Some(pid);
                }
                self.persist_or_warn();
                tracing::info!(job_node.id = %id, job.id = %job_id, pid, "job started");
                self.outbox.push((
                    id,
                    AssignmentStatus {
                        state: ReportedState::Running,
                        exit_code: None,
                        output_tail: Vec::new(),
                        reason: None,
                        progress: None,
                    },
                ));
            }
            Err(err) => self.fail_unstarted(id, job_id, format!("{err:#}")),
        }
    }

    fn spawn(&mut self, assignment: &Assignment, leases: &[NodeLease]) -> anyhow::Result<u32> {
        let id = assignment.job_node_id;
        let lease = leases
            .iter()
            .find(|l| l.lease_id == assignment.lease_id)
            .context("its lease holds no GPUs of this node")?;
        let lease = lease.clone();
        let uid = self.lease_uid(assignment.lease_id)?;
        let agent_path = std::env::var("PATH").ok();
        let prepared = self.host.prepare(id, &lease, uid, &assignment.spec, agent_path.as_deref())?;
        let (pid, tail) = spawn_process(&prepared, Owner::Job(id), &self.exits_tx)?;
        self.logs.insert(id, tail.clone());
        let lease_id = assignment.lease_id;
        if let Some(serve) = &assignment.spec.serve {
            // The server listens in the lease's namespace (on its address); unsandboxed, on the host's loopback.
            let address = match self.host.network.as_ref().and_then(|n| n.address(lease_id)) {
                Some(address) => std::net::IpAddr::V4(address),
                None => std::net::IpAddr::from([127, 0, 0, 1]),
            };
            if let Err(err) = self.serving.start(id, std::net::SocketAddr::from((address, serve.port)), serve) {
                // The process runs; without a forwarder it is never ready, which the service shows.
                tracing::warn!(job_node.id = %id, err = format!("{err:#}"), "could not open the replica's forwarder");
            }
        }
        self.running.insert(
            id,
            Running {
                pid,
                lease_id,
                steps: Default::default(),
                kind: prepared.kind,
                tail,
                reported_version: 0,
                stopping: None,
                noticed: None,
                progress: None,
            },
        );
        Ok(pid)
    }

    /// Pass a stop notice on to a running process, once: the notice file in its working directory, SIGUSR1 to
    /// those of its processes that catch it (the runtime's ranks; a launcher or a script without a handler would
    /// die of it), and a deadline after which it is stopped. A grace of 0 stops it at once.
    fn notice(&mut self, id: Uuid, notice: &StopNotice) {
        let Some(running) = self.running.get_mut(&id) else { return };
        if running.noticed.is_some() || running.stopping.is_some() {
            return;
        }
        let grace = Duration::from_secs(notice.grace_s.into());
        running.noticed = Some(Noticed {
            reason: notice.reason.clone(),
            grace_s: notice.grace_s,
            deadline: tokio::time::Instant::now() + grace,
        });
        let deadline = chrono::Utc::now() + grace;
        let file = StopNoticeFile {
            reason: notice.reason.clone(),
            grace_s: notice.grace_s,
            deadline: deadline.timestamp_millis() as f64 / 1000.0,
        };
        let dir = self.host.lease_dir(running.lease_id).join("jobs").join(id.to_string());
        if let Err(err) = super::launch::write_notice(&dir, &file) {
            tracing::warn!(job_node.id = %id, err = format!("{err:#}"), "could not write the stop notice file");
        }
        let (pid, kind) = (running.pid, running.kind.clone());
        let ranks = super::sandbox::processes_catching(pid, &kind, SIGUSR1);
        tracing::info!(job_node.id = %id, reason = %notice.reason, grace_s = notice.grace_s, ranks = ranks.len(), "stop notice given");
        signal_processes(&ranks, "USR1");
        if notice.grace_s == 0 {
            self.stop(id, StopReason::NoticeExpired);
        }
    }

    /// SIGTERM the process group now, SIGKILL it after the grace period unless it exited.
    fn stop(&mut self, id: Uuid, reason: StopReason) {
        let Some(running) = self.running.get_mut(&id) else { return };
        if running.stopping.is_some() {
            return;
        }
        running.stopping = Some(reason);
        let (pid, kind) = (running.pid, running.kind.clone());
        // A stopping replica takes no new connections (the gateway sends them to the others).
        self.serving.stop(id);
        tracing::info!(job_node.id = %id, pid, ?reason, "stopping job");
        self.host.stop_gracefully(pid, kind, self.grace);
    }

    /// The agent is stopping: stop every process, wait for them (at most the grace period and a little), report.
    pub async fn shutdown(&mut self, client: &ServiceClient, token: &str) {
        self.environments.kill_all(&self.host);
        self.serving.stop_all();
        let ids: Vec<Uuid> = self.running.keys().copied().collect();
        if !ids.is_empty() {
            for id in ids {
                self.stop(id, StopReason::AgentShutdown);
            }
            let deadline = tokio::time::Instant::now() + self.grace + Duration::from_secs(2);
            while !self.running.is_empty() {
                match tokio::time::timeout_at(deadline, self.exits_rx.recv()).await {
                    Ok(Some(exit)) => self.on_exit(exit),
                    _ => break,
                }
            }
            let _ = tokio::time::timeout(Duration::from_secs(5), self.flush(client, token)).await;
        }
        // Nothing of the leases runs any more: what the agent made for them on the host goes too.
        if let Some(network) = &self.host.network {
            network.tear_down();
        }
    }
}

/// Fetch the upload `digest` into `path`, checked against its digest. `Err(None)`: the service did not answer
/// (try again); `Err(Some(reason))`: the part cannot start.
async fn fetch_archive(
    client: ServiceClient,
    token: String,
    digest: String,
    path: PathBuf,
) -> Result<(), Option<String>> {
    let bytes = match client.upload(&token, &digest).await {
        Ok(bytes) => bytes,
        Err(CallError::Rejected { status, problem }) => {
            return Err(Some(format!(
                "the working directory {digest} could not be fetched: HTTP {status} ({problem})"
            )));
        }
        Err(err) => {
            tracing::debug!(%err, "fetching a working directory failed; retrying at the next sync");
            return Err(None);
        }
    };
    let got = super::archive::digest_of(&bytes);
    if got != digest {
        return Err(Some(format!("the working directory {digest} arrived with another digest ({got})")));
    }
    // Written whole under a temporary name, then renamed: a cut-off download is never taken for the archive.
    let written = tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(path.parent().context("no parent")?)?;
        let tmp = download_path(&path);
        std::fs::write(&tmp, &bytes)?;
        std::fs::rename(&tmp, &path)?;
        anyhow::Ok(())
    })
    .await
    .map_err(anyhow::Error::from)
    .and_then(|written| written);
    written.map_err(|err| Some(format!("the working directory {digest} could not be kept on this host: {err:#}")))
}

/// Where `archive` is written while it downloads: `<archive>.tmp-<random>` with the archive's last extension
/// replaced, beside it ([`is_download_of`] recognises it).
fn download_path(archive: &Path) -> PathBuf {
    archive.with_extension(format!("tmp-{}", Uuid::new_v4()))
}

/// Whether `path` is a download of `archive` in progress (or cut off), as [`download_path`] names it.
fn is_download_of(path: &Path, archive: &Path) -> bool {
    let tmp = path.extension().is_some_and(|extension| extension.to_string_lossy().starts_with("tmp-"));
    tmp && path.file_stem() == archive.file_stem() && path.parent() == archive.parent()
}

/// Remove the fetched working directories no listed part names any more, and cut-off downloads of those: the
/// service lists every part that has not ended, so nothing removed here is still to be unpacked. A download of a
/// named one (`<name>.tmp-…` beside it) is left to finish.
fn forget_workdirs(dir: &Path, named: &[PathBuf]) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let downloading = |path: &Path| named.iter().any(|archive| is_download_of(path, archive));
    for entry in entries.flatten() {
        let path = entry.path();
        if !named.contains(&path)
            && !downloading(&path)
            && let Err(err) = std::fs::remove_file(&path)
        {
            tracing::warn!(path = %path.display(), %err, "could not remove a working directory's archive");
        }
    }
}

/// The output of a part that prints nothing more.
fn ended_output() -> SharedTail {
    let tail = SharedTail::default();
    end_output(&tail);
    tail
}

/// The state and reason a process's end is reported with: why it was stopped, the notice it had, its exit code.
/// After a notice, a clean exit (0) is `cancelled` (it stopped as asked), anything else `failed`.
fn exit_outcome(
    stopping: Option<StopReason>,
    noticed: Option<&Noticed>,
    code: Option<i32>,
) -> (ReportedState, Option<String>) {
    match (stopping, noticed, code) {
        (Some(StopReason::Cancelled), _, _) => (ReportedState::Cancelled, Some("cancelled".to_string())),
        (Some(StopReason::Gone), _, _) => (ReportedState::Cancelled, Some("the assignment ended".to_string())),
        (Some(StopReason::AgentShutdown), _, _) => (ReportedState::Failed, Some("agent shut down".to_string())),
        (Some(StopReason::NoticeExpired), n, _) => (
            ReportedState::Failed,
            Some(match n {
                Some(n) if n.grace_s > 0 => {
                    format!("did not exit within the {} s grace of its stop notice ({})", n.grace_s, n.reason)
                }
                Some(n) => format!("stopped at once on its stop notice ({})", n.reason),
                None => "stopped".to_string(),
            }),
        ),
        (None, Some(n), Some(0)) => {
            (ReportedState::Cancelled, Some(format!("stopped on its stop notice ({})", n.reason)))
        }
        (None, Some(n), Some(code)) => {
            (ReportedState::Failed, Some(format!("exit code {code} after its stop notice ({})", n.reason)))
        }
        (None, None, Some(0)) => (ReportedState::Succeeded, None),
        (None, _, Some(code)) => (ReportedState::Failed, Some(format!("exit code {code}"))),
        (None, _, None) => (ReportedState::Failed, Some("the process could not be waited for".to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unsandboxed_host(dir: &Path) -> JobHost {
        JobHost {
            isolation: super::super::launch::Isolation::Unsandboxed,
            jobs_dir: dir.join("jobs"),
            state_dir: dir.to_owned(),
            uids: super::super::args::UidRange { first: 300000, last: 300009 },
            devices: Default::default(),
            runtime: super::super::args::ContainerRuntime::Docker,
            max_processes: 64,
            env_ports: super::super::args::PortRange { first: 20000, last: 20009 },
            serve_ports: super::super::args::PortRange { first: 21000, last: 21009 },
            sshd: "/usr/sbin/sshd".into(),
            network: None,
            volumes: Default::default(),
            model_cache: None,
        }
    }

    #[test]
    fn fetched_working_directories_no_part_names_are_removed() {
        let dir = std::env::temp_dir().join(format!("gpuplane-uploads-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let (kept, gone, cut) = (dir.join("aa.tar.gz"), dir.join("bb.tar.gz"), dir.join("cc.tar.tmp-1"));
        let downloading = download_path(&kept);
        for path in [&kept, &gone, &cut, &downloading] {
            std::fs::write(path, b"x").unwrap();
        }
        forget_workdirs(&dir, std::slice::from_ref(&kept));
        assert!(kept.exists() && !gone.exists() && !cut.exists());
        assert!(downloading.exists(), "a named archive's download in progress is left to finish");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A download slower than the inline wait goes on beside the syncs: the part is pending (the sync does not wait
    /// for it, and the runner stays busy so syncs keep coming), then ready once the archive arrived.
    #[tokio::test]
    async fn a_slow_working_directory_download_goes_on_in_the_background() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let archive = b"the archive's bytes".to_vec();
        let digest = super::super::archive::digest_of(&archive);
        // A service that answers the download after 4 s.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let body = archive.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    tokio::time::sleep(Duration::from_secs(4)).await;
                    let head =
                        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(&body).await;
                });
            }
        });
        let dir = std::env::temp_dir().join(format!("gpuplane-jobs-test-{}", Uuid::now_v7()));
        let mut runner = JobRunner::open(&dir, unsandboxed_host(&dir)).unwrap();
        let client = ServiceClient::new(&format!("http://{addr}"), None).unwrap();
        let spec = gpuplane_protocol::jobs::LaunchSpec {
            argv: vec!["true".into()],
            env: BTreeMap::new(),
            files: Vec::new(),
            image: None,
            serve: None,
            workdir: Some(digest.clone()),
        };
        let assignment = Assignment {
            job_node_id: Uuid::now_v7(),
            job_id: Uuid::now_v7(),
            lease_id: Uuid::now_v7(),
            desired: Desired::Run,
            state: gpuplane_protocol::jobs::JobState::Assigned,
            spec,
            notice: None,
        };
        let asked = std::time::Instant::now();
        assert!(matches!(runner.workdir(&client, "token", &assignment).await, Workdir::Pending));
        assert!(asked.elapsed() < Duration::from_secs(4), "the sync went on before the download ended");
        assert!(runner.busy(), "a download in flight keeps the syncs coming");
        let mut ready = false;
        while !ready && asked.elapsed() < Duration::from_secs(30) {
            ready = matches!(runner.workdir(&client, "token", &assignment).await, Workdir::Ready);
        }
        assert!(ready && runner.host.workdir_archive(&digest).is_file());
        assert!(runner.fetching.is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_restarted_runner_reports_what_was_running_as_failed_and_never_restarts_it() {
        let dir = std::env::temp_dir().join(format!("gpuplane-jobs-test-{}", Uuid::now_v7()));
        let id = Uuid::now_v7();
        {
            let mut runner = JobRunner::open(&dir, unsandboxed_host(&dir)).unwrap();
            runner.file.jobs.insert(id, Started { job_id: Uuid::nil(), pid: None, finished: false, container: false });
            runner.persist().unwrap();
        }
        let runner = JobRunner::open(&dir, unsandboxed_host(&dir)).unwrap();
        assert_eq!(runner.outbox.len(), 1);
        assert_eq!(runner.outbox[0].0, id);
        assert_eq!(runner.outbox[0].1.state, ReportedState::Failed);
        assert_eq!(runner.outbox[0].1.reason.as_deref(), Some("agent restarted"));
        assert!(runner.file.jobs[&id].finished, "recorded as finished: a later listing does not start it");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
