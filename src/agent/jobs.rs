//! Running the node's job assignments.
//!
//! The heartbeat loop calls [`JobRunner::sync`] when the service hints that there is work (and every few
//! heartbeats as a backstop, and every heartbeat while something runs): it fetches the assignments, starts new
//! ones, stops cancelled ones and ones that disappeared (their lease ended), and delivers state reports.
//!
//! A process is started with exactly the rendered argv and environment: no shell, the environment cleared except
//! PATH and HOME, in its own working directory `<state-dir>/jobs/<job_node_id>/` where the spec's files are
//! written first, and in its own process group so that stopping it (SIGTERM through `kill`, SIGKILL after a grace
//! period) reaches everything it started.
//!
//! Every start is recorded in `<state-dir>/jobs.json` before the process is spawned. A restarted agent therefore
//! never starts an assignment twice: one that was running when the agent died is stopped (its process group is
//! killed if it survived) and reported `failed` with the reason "agent restarted".

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::client::{CallError, ServiceClient};
use crate::jobs::protocol::{AssignmentStatus, OUTPUT_LINE_CHARS, OUTPUT_TAIL_LINES, ReportedState};
use crate::jobs::{Desired, LaunchSpec};

/// How long a stopped process gets between SIGTERM and SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// What `jobs.json` remembers of an assignment this agent started.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Started {
    job_id: Uuid,
    /// The process (and process group) id; absent if the agent died between recording and spawning.
    pid: Option<u32>,
    /// The process ended and its final state was decided.
    finished: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct JobsFile {
    jobs: BTreeMap<Uuid, Started>,
}

/// The last lines of a process's output.
#[derive(Default)]
struct Tail {
    lines: VecDeque<String>,
    /// Bumped on every line, so a changed tail can be reported while the process runs.
    version: u64,
}

type SharedTail = Arc<Mutex<Tail>>;

fn push_line(tail: &SharedTail, line: &str) {
    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    if tail.lines.len() == OUTPUT_TAIL_LINES {
        tail.lines.pop_front();
    }
    tail.lines.push_back(line.chars().take(OUTPUT_LINE_CHARS).collect());
    tail.version += 1;
}

fn snapshot(tail: &SharedTail) -> (Vec<String>, u64) {
    let tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    (tail.lines.iter().cloned().collect(), tail.version)
}

/// Why the agent stopped a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Cancelled,
    /// The assignment is no longer listed (its lease ended).
    Gone,
    AgentShutdown,
}

struct Running {
    pid: u32,
    tail: SharedTail,
    reported_version: u64,
    stopping: Option<StopReason>,
}

/// A process ended.
pub struct Exited {
    job_node_id: Uuid,
    /// Exit code, or 128 + signal.
    code: Option<i32>,
    tail: Vec<String>,
}

pub struct JobRunner {
    state_dir: PathBuf,
    file: JobsFile,
    running: HashMap<Uuid, Running>,
    exits_tx: mpsc::UnboundedSender<Exited>,
    exits_rx: mpsc::UnboundedReceiver<Exited>,
    /// Reports not yet delivered, oldest first.
    outbox: Vec<(Uuid, AssignmentStatus)>,
    grace: Duration,
}

impl JobRunner {
    /// Load `jobs.json`. Assignments that were running when the previous agent died are stopped for good (their
    /// process group is killed if it survived) and reported failed: they are never started again.
    pub fn open(state_dir: &Path) -> anyhow::Result<Self> {
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
        for (job_node_id, started) in file.jobs.iter_mut().filter(|(_, s)| !s.finished) {
            if let Some(pid) = started.pid {
                signal_group(pid, "KILL");
            }
            started.finished = true;
            tracing::warn!(job_node.id = %job_node_id, "the job was running when the agent stopped: reporting it failed");
            outbox.push((
                *job_node_id,
                AssignmentStatus {
                    state: ReportedState::Failed,
                    exit_code: None,
                    output_tail: Vec::new(),
                    reason: Some("agent restarted".into()),
                },
            ));
        }
        let runner = Self {
            state_dir: state_dir.to_owned(),
            file,
            running: HashMap::new(),
            exits_tx,
            exits_rx,
            outbox,
            grace: STOP_GRACE,
        };
        runner.persist()?;
        Ok(runner)
    }

    /// Whether to talk to the service every heartbeat: a process runs or reports wait.
    pub fn busy(&self) -> bool {
        !self.running.is_empty() || !self.outbox.is_empty()
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
        let stopping = self.running.remove(&exit.job_node_id).and_then(|r| r.stopping);
        if let Some(started) = self.file.jobs.get_mut(&exit.job_node_id) {
            started.finished = true;
        }
        self.persist_or_warn();
        let (state, reason) = match (stopping, exit.code) {
            (Some(StopReason::Cancelled), _) => (ReportedState::Cancelled, Some("cancelled".to_string())),
            (Some(StopReason::Gone), _) => (ReportedState::Cancelled, Some("the assignment ended".to_string())),
            (Some(StopReason::AgentShutdown), _) => (ReportedState::Failed, Some("agent shut down".to_string())),
            (None, Some(0)) => (ReportedState::Succeeded, None),
            (None, Some(code)) => (ReportedState::Failed, Some(format!("exit code {code}"))),
            (None, None) => (ReportedState::Failed, Some("the process could not be waited for".to_string())),
        };
        tracing::info!(job_node.id = %exit.job_node_id, ?state, code = ?exit.code, "job process ended");
        self.outbox
            .push((exit.job_node_id, AssignmentStatus { state, exit_code: exit.code, output_tail: exit.tail, reason }));
    }

    /// Deliver queued reports; keep those that failed transiently.
    pub async fn flush(&mut self, client: &ServiceClient, token: &str) {
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
        let list = match client.assignments(token).await {
            Ok(list) => list.assignments,
            Err(err) => {
                tracing::debug!(%err, "fetching assignments failed; retrying at the next heartbeat");
                return;
            }
        };
        let listed: Vec<Uuid> = list.iter().map(|a| a.job_node_id).collect();
        for assignment in list {
            let id = assignment.job_node_id;
            match assignment.desired {
                Desired::Run if self.running.contains_key(&id) => {}
                Desired::Run => match self.file.jobs.get(&id) {
                    None => self.start(id, assignment.job_id, &assignment.spec),
                    Some(started) if started.finished && !self.outbox.iter().any(|(o, _)| *o == id) => {
                        // Ended here, yet the service still lists it: the final report was lost.
                        self.outbox.push((
                            id,
                            AssignmentStatus {
                                state: ReportedState::Failed,
                                exit_code: None,
                                output_tail: Vec::new(),
                                reason: Some("agent restarted".into()),
                            },
                        ));
                    }
                    Some(_) => {}
                },
                Desired::Cancel if self.running.contains_key(&id) => self.stop(id, StopReason::Cancelled),
                Desired::Cancel => {
                    if !self.file.jobs.contains_key(&id) || !self.outbox.iter().any(|(o, _)| *o == id) {
                        self.file.jobs.entry(id).or_insert(Started {
                            job_id: assignment.job_id,
                            pid: None,
                            finished: true,
                        });
                        self.outbox.push((
                            id,
                            AssignmentStatus {
                                state: ReportedState::Cancelled,
                                exit_code: None,
                                output_tail: Vec::new(),
                                reason: Some("cancelled before it started".into()),
                            },
                        ));
                    }
                }
            }
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
        self.flush(client, token).await;
    }

    fn start(&mut self, id: Uuid, job_id: Uuid, spec: &LaunchSpec) {
        // Recorded before the spawn: if the agent dies in between, the restart reports it instead of starting it.
        self.file.jobs.insert(id, Started { job_id, pid: None, finished: false });
        if let Err(err) = self.persist() {
            tracing::error!(%err, "could not record the job start; not starting it");
            self.file.jobs.remove(&id);
            return;
        }
        match self.spawn(id, spec) {
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
                    },
                ));
            }
            Err(err) => {
                tracing::warn!(job_node.id = %id, err = format!("{err:#}"), "job could not be started");
                if let Some(started) = self.file.jobs.get_mut(&id) {
                    started.finished = true;
                }
                self.persist_or_warn();
                self.outbox.push((
                    id,
                    AssignmentStatus {
                        state: ReportedState::Failed,
                        exit_code: None,
                        output_tail: vec![format!("{err:#}")],
                        reason: Some(format!("could not start: {err:#}")),
                    },
                ));
            }
        }
    }

    fn spawn(&mut self, id: Uuid, spec: &LaunchSpec) -> anyhow::Result<u32> {
        let workdir = self.state_dir.join("jobs").join(id.to_string());
        std::fs::create_dir_all(&workdir).with_context(|| format!("creating {}", workdir.display()))?;
        for file in &spec.files {
            let relative = Path::new(&file.path);
            if file.path.is_empty() || !relative.components().all(|c| matches!(c, Component::Normal(_))) {
                anyhow::bail!("file path `{}` is not a plain relative path", file.path);
            }
            let path = workdir.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, &file.content).with_context(|| format!("writing {}", path.display()))?;
        }
        let argv = launch_argv(spec, &workdir);
        let (program, args) = argv.split_first().context("empty argv")?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .env_clear()
            .current_dir(&workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: stopping the job signals everything it started.
            .process_group(0);
        for key in ["PATH", "HOME"] {
            if let Some(value) = std::env::var_os(key) {
                command.env(key, value);
            }
        }
        command.envs(&spec.env);
        let mut child = command.spawn().with_context(|| format!("starting `{program}`"))?;
        let pid = child.id().context("the process exited at once")?;
        let tail: SharedTail = Arc::default();
        let readers: Vec<_> = [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        .map(|stream| tokio::spawn(read_lines(stream, tail.clone())))
        .collect();
        let exits = self.exits_tx.clone();
        let watched = tail.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            // A process that left children holding its output open must not keep the report back.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                for reader in readers {
                    let _ = reader.await;
                }
            })
            .await;
            let code = status.ok().and_then(|s| {
                use std::os::unix::process::ExitStatusExt;
                s.code().or_else(|| s.signal().map(|sig| 128 + sig))
            });
            let _ = exits.send(Exited { job_node_id: id, code, tail: snapshot(&watched).0 });
        });
        self.running.insert(id, Running { pid, tail, reported_version: 0, stopping: None });
        Ok(pid)
    }

    /// SIGTERM the process group now, SIGKILL it after the grace period unless it exited.
    fn stop(&mut self, id: Uuid, reason: StopReason) {
        let Some(running) = self.running.get_mut(&id) else { return };
        if running.stopping.is_some() {
            return;
        }
        running.stopping = Some(reason);
        let pid = running.pid;
        tracing::info!(job_node.id = %id, pid, ?reason, "stopping job");
        signal_group(pid, "TERM");
        let grace = self.grace;
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if Path::new(&format!("/proc/{pid}")).exists() {
                signal_group(pid, "KILL");
            }
        });
    }

    /// The agent is stopping: stop every process, wait for them (at most the grace period and a little), report.
    pub async fn shutdown(&mut self, client: &ServiceClient, token: &str) {
        let ids: Vec<Uuid> = self.running.keys().copied().collect();
        if ids.is_empty() {
            return;
        }
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
}

/// Signal a process group through the `kill` program (no unsafe code here).
fn signal_group(pgid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{signal}"), "--".into(), format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(err) = status {
        tracing::warn!(pgid, %err, "could not run kill");
    }
}

async fn read_lines(stream: Box<dyn AsyncRead + Send + Unpin>, tail: SharedTail) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                push_line(&tail, line.trim_end_matches(['\n', '\r']));
            }
        }
    }
}

/// The argv to execute: the spec's own, or, with an image, the spec run in a container that sees only the
/// leased GPUs (renumbered from 0 inside), with the spec's environment and the working directory at /workspace.
pub fn launch_argv(spec: &LaunchSpec, workdir: &Path) -> Vec<String> {
    let Some(image) = &spec.image else { return spec.argv.clone() };
    let devices = spec.env.get("CUDA_VISIBLE_DEVICES").cloned().unwrap_or_default();
    let count = devices.split(',').filter(|d| !d.is_empty()).count();
    let mut argv: Vec<String> =
        ["docker", "run", "--rm", "--network=host", "--ipc=host", "--gpus"].iter().map(|s| s.to_string()).collect();
    argv.push(format!("\"device={devices}\""));
    for key in spec.env.keys().filter(|k| *k != "CUDA_VISIBLE_DEVICES") {
        argv.extend(["-e".to_string(), key.clone()]);
    }
    let inside: Vec<String> = (0..count).map(|i| i.to_string()).collect();
    argv.extend(["-e".to_string(), format!("CUDA_VISIBLE_DEVICES={}", inside.join(","))]);
    argv.extend(["-v".to_string(), format!("{}:/workspace", workdir.display()), "-w".into(), "/workspace".into()]);
    argv.push(image.clone());
    argv.extend(spec.argv.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_cut_to_size() {
        let tail: SharedTail = Arc::default();
        for i in 0..120 {
            push_line(&tail, &format!("line {i}"));
        }
        push_line(&tail, &"x".repeat(5000));
        let (lines, version) = snapshot(&tail);
        assert_eq!(lines.len(), OUTPUT_TAIL_LINES);
        assert_eq!(lines[0], "line 71");
        assert_eq!(lines.last().unwrap().len(), OUTPUT_LINE_CHARS);
        assert_eq!(version, 121);
    }

    #[test]
    fn an_image_wraps_the_argv_in_docker_with_only_the_leased_gpus() {
        let mut env = BTreeMap::new();
        env.insert("CUDA_VISIBLE_DEVICES".to_string(), "4,5".to_string());
        env.insert("WORLD_SIZE".to_string(), "2".to_string());
        let spec = LaunchSpec {
            argv: vec!["python3".into(), "x.py".into()],
            env,
            files: Vec::new(),
            image: Some("img:1".into()),
        };
        let argv = launch_argv(&spec, Path::new("/w"));
        assert_eq!(argv[..7], ["docker", "run", "--rm", "--network=host", "--ipc=host", "--gpus", "\"device=4,5\""]);
        assert!(argv.windows(2).any(|w| w == ["-e", "WORLD_SIZE"]));
        assert!(argv.windows(2).any(|w| w == ["-e", "CUDA_VISIBLE_DEVICES=0,1"]));
        assert!(argv.ends_with(&["img:1".into(), "python3".into(), "x.py".into()]));
        let plain = LaunchSpec { image: None, ..spec };
        assert_eq!(launch_argv(&plain, Path::new("/w")), ["python3", "x.py"]);
    }

    #[tokio::test]
    async fn a_restarted_runner_reports_what_was_running_as_failed_and_never_restarts_it() {
        let dir = std::env::temp_dir().join(format!("gpuplane-jobs-test-{}", Uuid::now_v7()));
        let id = Uuid::now_v7();
        {
            let mut runner = JobRunner::open(&dir).unwrap();
            runner.file.jobs.insert(id, Started { job_id: Uuid::nil(), pid: None, finished: false });
            runner.persist().unwrap();
        }
        let runner = JobRunner::open(&dir).unwrap();
        assert_eq!(runner.outbox.len(), 1);
        assert_eq!(runner.outbox[0].0, id);
        assert_eq!(runner.outbox[0].1.state, ReportedState::Failed);
        assert_eq!(runner.outbox[0].1.reason.as_deref(), Some("agent restarted"));
        assert!(runner.file.jobs[&id].finished, "recorded as finished: a later listing does not start it");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
