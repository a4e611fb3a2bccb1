//! Registration and the heartbeat loop: sample on schedule, deliver the buffer, back off while the service is away.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use gpuplane_protocol::agent::{DesiredState, HeartbeatRequest, NodeFacts, RegisterRequest};
use gpuplane_protocol::jobs::MAX_STEPS_PER_HEARTBEAT;

use super::backoff::{Backoff, next_probe};
use super::buffer::SampleBuffer;
use super::client::{CallError, ServiceClient};
use super::credential::{Credential, CredentialStore};
use super::gpu_source::GpuSource;
use super::jobs::JobRunner;
use super::sample_time;

/// At most this many samples per heartbeat; a backlog goes out in several requests, oldest first.
pub const MAX_SAMPLES_PER_HEARTBEAT: usize = 4096;
/// Fetch assignments at least every this many heartbeats, whatever the hint says.
const ASSIGNMENT_BACKSTOP_HEARTBEATS: u64 = 5;
/// Until the service states its interval (attaching with a saved credential: the first heartbeat answer).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// How often the agent looks for launchers again (software installed or removed while it runs); a change goes
/// to the service with the next heartbeat.
const LAUNCHER_RECHECK: Duration = Duration::from_secs(600);

/// How often the agent lists its model cache again (an operator fills it while the agent runs); a change goes
/// to the service with the next heartbeat.
const MODEL_CACHE_RESCAN: Duration = Duration::from_secs(60);
/// How long the first heartbeat waits for the first listing of the model cache (a slow shared filesystem): the
/// list then goes with a later one.
const MODEL_CACHE_FIRST_WAIT: Duration = Duration::from_secs(5);

/// How often running jobs' steps files are read between heartbeats. Steps found go out at once, in a heartbeat
/// ahead of schedule, so a step reaches the API about a second after it ends rather than with the next scheduled
/// heartbeat (10 s by default); a job that steps faster still sends at most one early heartbeat per look.
const STEPS_LOOK: Duration = Duration::from_secs(1);

/// When the next heartbeat goes after one was settled: at once while samples or steps wait (a backlog goes out
/// in several requests), else on schedule.
fn next_send_after_delivery(sampler: &Sampler, jobs: &JobRunner, schedule: &Schedule) -> Instant {
    if sampler.buffer.is_empty() && jobs.steps.is_empty() { schedule.next() } else { Instant::now() }
}

/// The GPUs and the samples not yet delivered.
pub struct Sampler {
    source: Box<dyn GpuSource>,
    buffer: SampleBuffer,
    latest: Option<super::exporter::LatestSamples>,
}

impl Sampler {
    pub fn new(source: Box<dyn GpuSource>, max_buffered_samples: usize) -> Self {
        Self { source, buffer: SampleBuffer::new(max_buffered_samples), latest: None }
    }

    /// Also keep the latest sample of every GPU in `latest` (for `--metrics-listen`).
    pub fn with_latest(mut self, latest: super::exporter::LatestSamples) -> Self {
        self.latest = Some(latest);
        self
    }

    fn take_sample(&mut self, busy_gpus: &[i32]) {
        self.source.set_busy(busy_gpus);
        let samples = self.source.sample(sample_time());
        if let Some(latest) = &self.latest {
            latest.set(&samples);
        }
        let dropped = self.buffer.push_all(samples);
        if dropped > 0 {
            tracing::warn!(
                dropped,
                dropped_total = self.buffer.dropped_total(),
                buffered = self.buffer.len(),
                "sample buffer full: dropped the oldest samples"
            );
        }
    }
}

/// When the next sample is due, on a fixed schedule that a slow request does not shift.
struct Schedule {
    last: Instant,
    interval: Duration,
}

impl Schedule {
    fn next(&self) -> Instant {
        self.last + self.interval
    }

    /// Record a sample taken now: normally exactly one interval after the previous one; after a stall, now.
    fn advance(&mut self, now: Instant) {
        let due = self.next();
        self.last = if now.duration_since(due) < self.interval { due } else { now };
    }
}

pub struct Agent {
    pub client: ServiceClient,
    pub store: CredentialStore,
    /// Normalized base URL.
    pub server: String,
    pub join_token: Option<String>,
    pub facts: NodeFacts,
    /// How this host runs jobs; handed to the job runner once attached.
    pub job_host: Option<super::launch::JobHost>,
    /// Measures round trips to the other nodes of this node's leases.
    pub prober: super::echo::Prober,
    /// The container runtime's program, looked for with the launchers (`launchers::detect`).
    pub container_runtime: &'static str,
    /// The volume stores this host offers, and the volumes it holds.
    pub volumes: super::volume_keeper::VolumeKeeper,
    /// The host's model cache (`--model-cache`), whose models the heartbeat reports.
    pub model_cache: Option<PathBuf>,
}

/// The models of the host's cache as the heartbeat reports them (`cached_models`): listed off the async workers
/// at start and then every [`MODEL_CACHE_RESCAN`], and sent whole (`Some`) until a heartbeat carrying the list
/// now found is accepted: the first after the agent starts (or registers again), and after each change. `None`
/// otherwise, and always without a cache.
struct ModelCacheReport {
    dir: Option<PathBuf>,
    scan: Option<tokio::task::JoinHandle<Vec<String>>>,
    rescan_at: Instant,
    /// Whether the first listing was waited for.
    waited: bool,
    found: Option<Vec<String>>,
    /// The list the service accepted last.
    acknowledged: Option<Vec<String>>,
}

impl ModelCacheReport {
    /// Starts listing the cache now.
    fn new(dir: Option<PathBuf>) -> Self {
        let mut report =
            Self { dir, scan: None, rescan_at: Instant::now(), waited: false, found: None, acknowledged: None };
        report.start_scan();
        report
    }

    fn start_scan(&mut self) {
        if let Some(dir) = self.dir.clone()
            && self.scan.is_none()
        {
            self.scan = Some(tokio::task::spawn_blocking(move || super::model_cache::cached_models(&dir)));
            self.rescan_at = Instant::now() + MODEL_CACHE_RESCAN;
        }
    }

    /// Before a heartbeat: take a listing that finished (the first one waited for, a while), start the next one
    /// when due.
    async fn refresh(&mut self) {
        if let Some(scan) = self.scan.as_mut() {
            let finished = if !self.waited {
                self.waited = true;
                tokio::time::timeout(MODEL_CACHE_FIRST_WAIT, scan).await.ok()
            } else if scan.is_finished() {
                Some(scan.await)
            } else {
                None
            };
            if let Some(listed) = finished {
                self.scan = None;
                match listed {
                    Ok(models) => {
                        if self.found.as_ref() != Some(&models) {
                            tracing::info!(models = models.len(), "the model cache's models: {}", models.join(", "));
                        }
                        self.found = Some(models);
                    }
                    Err(err) => tracing::warn!(%err, "listing the model cache failed"),
                }
            }
        }
        if Instant::now() >= self.rescan_at {
            self.start_scan();
        }
    }

    /// What the next heartbeat carries.
    fn to_send(&self) -> Option<Vec<String>> {
        let found = self.found.as_ref()?;
        (self.acknowledged.as_ref() != Some(found)).then(|| found.clone())
    }

    /// A heartbeat carrying `sent` was accepted.
    fn accepted(&mut self, sent: Option<Vec<String>>) {
        if sent.is_some() {
            self.acknowledged = sent;
        }
    }

    /// Registered again (maybe as a new node): the next heartbeat carries the list again.
    fn forget(&mut self) {
        self.acknowledged = None;
    }
}

impl Agent {
    /// Attach or register, then heartbeat until `shutdown`.
    pub async fn run(mut self, mut sampler: Sampler, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut rng = StdRng::from_os_rng();
        let saved = self.store.load_for(&self.server)?;
        // Registered, and no heartbeat has been accepted with the new credential yet.
        let mut unproven_registration = saved.is_none();
        let attached = match saved {
            Some(credential) => {
                tracing::info!(node.id = %credential.node_id, "attached with the saved credential");
                println!("gpuplane agent: node {} attached", credential.node_id);
                Some((credential, DEFAULT_INTERVAL))
            }
            None if self.join_token.is_none() => anyhow::bail!(
                "no saved credential for {} in {}; pass --join-token (or GPUPLANE_JOIN_TOKEN) to register this node",
                self.server,
                self.store.path().display()
            ),
            None => self.register(&shutdown, &mut rng).await?,
        };
        let Some((mut credential, interval)) = attached else { return Ok(()) };
        // Jobs this agent started before a restart are reported, never started again.
        let job_host = self.job_host.take().context("the agent runs once")?;
        let mut jobs = JobRunner::open(self.store.dir(), job_host)?;
        tokio::spawn(self.prober.clone().run(interval, shutdown.clone()));
        let mut heartbeats: u64 = 0;

        let now = Instant::now();
        // The first sample is due now: `last` is one interval ago.
        let mut schedule = Schedule { last: now.checked_sub(interval).unwrap_or(now), interval };
        let mut next_send = now;
        let mut backoff = Backoff::default();
        // While backing off: when to ask /readyz whether the service is back. A heartbeat that fails right
        // after a good probe (the service is up but refuses heartbeats) waits out plain backoff, so a
        // half-broken service is not retried every second.
        let mut probe_at: Option<Instant> = None;
        let mut probe_trusted = true;
        let mut desired_state = DesiredState::Active;
        // Launchers looked for again now and then, off the async workers; a change waits in `launchers_changed`
        // until a heartbeat carrying it is accepted.
        let mut launchers_recheck_at = now + LAUNCHER_RECHECK;
        let mut launchers_lookup: Option<tokio::task::JoinHandle<gpuplane_protocol::agent::Launchers>> = None;
        let mut launchers_changed: Option<gpuplane_protocol::agent::Launchers> = None;
        let mut steps_look_at = now + STEPS_LOOK;
        let mut models = ModelCacheReport::new(self.model_cache.clone());
        loop {
            let mut wake = probe_at.map_or(next_send, |p| p.min(next_send));
            if jobs.runs_jobs() {
                wake = wake.min(steps_look_at);
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = sleep_until(schedule.next().min(wake)) => {}
                Some(exit) = jobs.next_exit() => {
                    jobs.on_exit(exit);
                    jobs.flush(&self.client, &credential.agent_token).await;
                    continue;
                }
            }
            if Instant::now() >= schedule.next() {
                sampler.take_sample(&jobs.busy_gpus());
                schedule.advance(Instant::now());
            }
            if let Some(at) = probe_at
                && Instant::now() >= at
                && Instant::now() < next_send
            {
                if self.client.ready().await {
                    tracing::info!("the service answers /readyz again; retrying now");
                    next_send = Instant::now();
                    probe_at = None;
                    probe_trusted = false;
                } else {
                    probe_at = next_probe(next_send - Instant::now(), rng.random()).map(|d| Instant::now() + d);
                }
            }
            if Instant::now() >= steps_look_at {
                steps_look_at = Instant::now() + STEPS_LOOK;
                jobs.collect_steps();
                // Jobs' output goes out as it comes (about a second behind), but not while backing off.
                if backoff.failures() == 0 {
                    jobs.ship_logs(&self.client, &credential.agent_token).await;
                }
                // A replica that became ready or stopped answering is told at once (the gateway follows it).
                let serving_changed = jobs.serving.take_changed() | jobs.take_progress_changed();
                // Not while backing off: the service is not answering.
                if (!jobs.steps.is_empty() || serving_changed) && backoff.failures() == 0 {
                    next_send = next_send.min(Instant::now());
                }
            }
            if Instant::now() < next_send {
                continue;
            }
            probe_at = None;

            jobs.collect_steps();
            if launchers_lookup.is_none() && Instant::now() >= launchers_recheck_at {
                let runtime = self.container_runtime;
                launchers_lookup = Some(tokio::task::spawn_blocking(move || super::launchers::detect(runtime)));
                launchers_recheck_at = Instant::now() + LAUNCHER_RECHECK;
            }
            if launchers_lookup.as_ref().is_some_and(|lookup| lookup.is_finished())
                && let Some(Ok(found)) = match launchers_lookup.take() {
                    Some(lookup) => Some(lookup.await),
                    None => None,
                }
                && self.facts.launchers.as_ref() != Some(&found)
            {
                tracing::info!(launchers = %super::launchers::describe(Some(&found)), "the launchers on the PATH jobs see changed");
                launchers_changed = Some(found);
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = models.refresh() => {}
            }
            let request = HeartbeatRequest {
                samples: sampler.buffer.oldest(MAX_SAMPLES_PER_HEARTBEAT),
                driver_version: self.facts.driver_version.clone(),
                cuda_version: self.facts.cuda_version.clone(),
                latency: self.prober.take_report(),
                steps: jobs.steps.oldest(MAX_STEPS_PER_HEARTBEAT),
                launchers: launchers_changed.clone(),
                echo_port: self.facts.echo_port.filter(|_| heartbeats == 0),
                volume_stores: self.volumes.stores(),
                volumes: self.volumes.reports(),
                cached_models: models.to_send(),
                serving: jobs.serving.reports(),
                progress: jobs.progress(),
            };
            let models_sent = request.cached_models.clone();
            let sent = request.samples.len();
            let dropped_before = sampler.buffer.dropped_total();
            // Nothing collects steps while the request is in flight, so the batch is still the buffer's front.
            let steps_sent = request.steps.len();
            // Keep sampling on schedule while the request is in flight (it may take up to the client timeout).
            let outcome = {
                let call = self.client.heartbeat(&credential.agent_token, &request);
                tokio::pin!(call);
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => break None,
                        outcome = &mut call => break Some(outcome),
                        _ = sleep_until(schedule.next()) => {
                            sampler.take_sample(&jobs.busy_gpus());
                            schedule.advance(Instant::now());
                        }
                    }
                }
            };
            let Some(outcome) = outcome else { break };
            // Samples the bound dropped meanwhile were the oldest, i.e. the front of this batch.
            let dropped_meanwhile = (sampler.buffer.dropped_total() - dropped_before) as usize;
            let settled = sent.saturating_sub(dropped_meanwhile);

            match outcome {
                Ok(answer) => {
                    sampler.buffer.remove_oldest(settled);
                    if let Some(found) = launchers_changed.take() {
                        self.facts.launchers = Some(found);
                    }
                    models.accepted(models_sent);
                    jobs.steps.remove_oldest(steps_sent);
                    unproven_registration = false;
                    probe_trusted = true;
                    if backoff.failures() > 0 {
                        tracing::info!(failures = backoff.failures(), "the service is reachable again");
                    }
                    backoff.reset();
                    tracing::debug!(
                        sent,
                        accepted = answer.accepted_samples,
                        buffered = sampler.buffer.len(),
                        "heartbeat"
                    );
                    if answer.desired_state != desired_state {
                        tracing::info!(?answer.desired_state, "the service changed this node's desired state");
                        desired_state = answer.desired_state;
                    }
                    heartbeats += 1;
                    self.volumes.on_orders(answer.volumes);
                    if answer.assignments_pending || jobs.busy() || heartbeats % ASSIGNMENT_BACKSTOP_HEARTBEATS == 1 {
                        jobs.sync(&self.client, &credential.agent_token).await;
                        self.prober.set_leases(jobs.leases());
                    }
                    schedule.interval = Duration::from_secs(u64::from(answer.heartbeat_interval_s.max(1)));
                    self.prober.set_heartbeat_interval(schedule.interval);
                    next_send = next_send_after_delivery(&sampler, &jobs, &schedule);
                }
                Err(CallError::Transient(reason)) => {
                    let delay = backoff.next_delay(&mut rng);
                    tracing::warn!(%reason, buffered = sampler.buffer.len(), retry_in_ms = delay.as_millis() as u64,
                        "heartbeat failed; keeping the samples");
                    next_send = Instant::now() + delay;
                    probe_at = next_probe(delay, rng.random()).filter(|_| probe_trusted).map(|d| Instant::now() + d);
                }
                Err(CallError::Rejected { status, problem }) => {
                    tracing::warn!(status, %problem, dropped = settled, "the service rejected a heartbeat; dropping its samples");
                    sampler.buffer.remove_oldest(settled);
                    jobs.steps.remove_oldest(steps_sent);
                    backoff.reset();
                    next_send = next_send_after_delivery(&sampler, &jobs, &schedule);
                }
                Err(CallError::Unauthorized(problem)) => {
                    if self.join_token.is_none() {
                        anyhow::bail!(
                            "the service no longer accepts this node's credential ({problem}): the host may have been \
                             registered again elsewhere or removed; pass --join-token to register it again"
                        );
                    }
                    if unproven_registration {
                        // A credential fresh from registration was refused too: do not loop on the service.
                        let delay = backoff.next_delay(&mut rng);
                        tracing::warn!(%problem, retry_in_ms = delay.as_millis() as u64,
                            "a newly issued credential was refused; registering again after a pause");
                        tokio::select! {
                            _ = shutdown.cancelled() => break,
                            _ = sleep(delay) => {}
                        }
                    } else {
                        tracing::warn!(%problem, "the credential was refused; registering again");
                    }
                    let Some((renewed, interval)) = self.register(&shutdown, &mut rng).await? else { break };
                    credential = renewed;
                    unproven_registration = true;
                    models.forget();
                    schedule.interval = interval;
                    next_send = Instant::now();
                }
            }
        }
        jobs.shutdown(&self.client, &credential.agent_token).await;
        tracing::info!(undelivered = sampler.buffer.len(), "agent stopped");
        Ok(())
    }

    /// Register with the join token, retrying while the service is unreachable; save and announce the credential.
    /// `None` when shut down first.
    async fn register(
        &self,
        shutdown: &CancellationToken,
        rng: &mut StdRng,
    ) -> anyhow::Result<Option<(Credential, Duration)>> {
        let join_token = self.join_token.clone().context("registering needs --join-token")?;
        let request = RegisterRequest { join_token, node: self.facts.clone() };
        let mut backoff = Backoff::default();
        loop {
            let outcome = tokio::select! {
                _ = shutdown.cancelled() => return Ok(None),
                outcome = self.client.register(&request, None) => outcome,
            };
            match outcome {
                Ok(answer) => {
                    let credential = Credential {
                        server: self.server.clone(),
                        node_id: answer.node_id,
                        pool_id: answer.pool_id,
                        agent_token: answer.agent_token,
                    };
                    self.store.save(&credential).context("saving the agent credential")?;
                    tracing::info!(node.id = %credential.node_id, pool.id = %credential.pool_id, "registered");
                    println!("gpuplane agent: node {} registered", credential.node_id);
                    let interval = Duration::from_secs(u64::from(answer.heartbeat_interval_s.max(1)));
                    return Ok(Some((credential, interval)));
                }
                Err(CallError::Unauthorized(problem)) => {
                    anyhow::bail!("the service refused the join token ({problem}); ask an operator for a new one")
                }
                Err(CallError::Rejected { status, problem }) if problem.code == "node_identity_required" => {
                    anyhow::bail!(
                        "the service refused to register this node: HTTP {status} ({problem}). This host name is \
                         registered already and this agent cannot prove it is that node (its saved credential is \
                         gone or no longer valid); an operator must allow a new registration: \
                         POST /v1/admin/nodes/{{id}}/allow-reregistration"
                    )
                }
                Err(CallError::Rejected { status, problem }) => {
                    anyhow::bail!("the service refused to register this node: HTTP {status} ({problem})")
                }
                Err(CallError::Transient(reason)) => {
                    let delay = backoff.next_delay(rng);
                    tracing::warn!(%reason, retry_in_ms = delay.as_millis() as u64, "registration failed; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(None),
                        _ = wait_for_service(&self.client, delay, rng) => {}
                    }
                }
            }
        }
    }
}

/// Wait `delay`, cut short as soon as the service answers `/readyz` (probed about every second).
async fn wait_for_service(client: &ServiceClient, delay: Duration, rng: &mut StdRng) {
    let until = Instant::now() + delay;
    while let Some(probe) = next_probe(until.saturating_duration_since(Instant::now()), rng.random()) {
        sleep(probe).await;
        if client.ready().await {
            return;
        }
    }
    sleep_until(until).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_keeps_a_fixed_cadence_and_recovers_from_stalls() {
        let start = Instant::now();
        let interval = Duration::from_secs(10);
        let mut schedule = Schedule { last: start, interval };
        // Sampled a little late: the next one is still due on the original grid.
        schedule.advance(start + Duration::from_millis(10_300));
        assert_eq!(schedule.next(), start + Duration::from_secs(20));
        // Stalled past a whole interval: restart the grid from now instead of sampling in a burst.
        schedule.advance(start + Duration::from_secs(45));
        assert_eq!(schedule.next(), start + Duration::from_secs(55));
    }

    #[tokio::test]
    async fn the_model_cache_goes_out_first_and_after_each_change_until_accepted() {
        let root = std::env::temp_dir().join(format!("gpuplane-heartbeat-models-{}", uuid::Uuid::new_v4()));
        let (from, cache) = (root.join("saved"), root.join("cache"));
        std::fs::create_dir_all(&from).unwrap();
        std::fs::write(from.join("config.json"), "{}").unwrap();
        crate::model_cache::fill(&cache, "org/a", &from).unwrap();

        let mut models = ModelCacheReport::new(Some(cache.clone()));
        models.refresh().await;
        let first = models.to_send();
        assert_eq!(first, Some(vec!["org/a".to_string()]), "the first heartbeat carries it");
        // That heartbeat failed: the next one carries it again.
        models.refresh().await;
        assert_eq!(models.to_send(), first);
        models.accepted(first);
        models.refresh().await;
        assert_eq!(models.to_send(), None, "unchanged since accepted");

        crate::model_cache::fill(&cache, "org/b", &from).unwrap();
        models.refresh().await;
        assert_eq!(models.to_send(), None, "not listed again before the rescan is due");
        models.rescan_at = Instant::now();
        let mut sent = None;
        for _ in 0..500 {
            models.refresh().await;
            sent = models.to_send();
            if sent.is_some() {
                break;
            }
            sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(sent, Some(vec!["org/a".to_string(), "org/b".to_string()]), "a change goes out");
        models.accepted(sent.clone());
        assert_eq!(models.to_send(), None);
        models.accepted(None);
        assert_eq!(models.to_send(), None, "a heartbeat without the list changes nothing");
        models.forget();
        assert_eq!(models.to_send(), sent, "registered again: sent again");

        let mut none = ModelCacheReport::new(None);
        none.refresh().await;
        assert_eq!(none.to_send(), None, "no cache, no list");
        std::fs::remove_dir_all(root).unwrap();
    }
}
