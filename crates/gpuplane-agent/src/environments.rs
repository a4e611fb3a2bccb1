//! Interactive environments: an SSH server (Debian's `sshd`, unprivileged) in a lease's sandbox, on a port from
//! `--env-ports`, logging in only the lease's user with the tenant's current keys, never by password.
//!
//! It is the same sandbox as the lease's jobs, kept open: the same user, `/lease/home`, only the lease's GPUs.
//! Its files live in the lease's root-owned `/lease/.env/` (the tenant can read but not change them):
//! `sshd_config`, `authorized_keys` (rewritten atomically when the keys change; sshd reads it at every login, so
//! a removed key is refused from the next heartbeat on) and a host key made for this lease, whose fingerprint
//! the service shows the tenant before the first connection.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::args::PortRange;
use super::client::{CallError, ServiceClient};
use super::launch::{InLease, JobHost, LEASE_ENV_DIR, MODEL_CACHE_ENV, ProcessKind, lease_variables};
use super::process::{Exited, Owner, spawn_process};
use super::sandbox::LEASE_MOUNT;
use gpuplane_protocol::environments::{EnvironmentSpec, EnvironmentState, EnvironmentStatus};
use gpuplane_protocol::jobs::NodeLease;
use gpuplane_protocol::ssh_keys::parse_public_key;

const HOST_KEY: &str = "ssh_host_ed25519_key";

struct EnvProcess {
    pid: u32,
    port: u16,
    /// Where the SSH server listens: the lease's address (the agent forwards the host's `port` to it), or the
    /// host's loopback when jobs share the host's network (`--insecure-unsandboxed-jobs`).
    inside: std::net::SocketAddr,
    /// Stops the host-side forwarder, when there is one.
    forwarder: Option<tokio_util::sync::CancellationToken>,
    kind: ProcessKind,
    keys: Vec<String>,
    fingerprints: Vec<String>,
    ready: bool,
    stopping: bool,
}

/// The environments this agent runs, and their reports not yet delivered.
pub struct Environments {
    running: HashMap<Uuid, EnvProcess>,
    ports: PortRange,
    sshd: PathBuf,
    pending: BTreeMap<Uuid, EnvironmentStatus>,
    /// When an environment last failed here: it is started again only after [`RETRY_FAILED`].
    failed: HashMap<Uuid, std::time::Instant>,
    grace: Duration,
}

/// How long a failed environment waits before the agent starts it again.
const RETRY_FAILED: Duration = Duration::from_secs(60);

impl Environments {
    pub fn new(ports: PortRange, sshd: PathBuf, grace: Duration) -> Self {
        Self { running: HashMap::new(), ports, sshd, pending: BTreeMap::new(), failed: HashMap::new(), grace }
    }

    /// Something runs or waits to be reported.
    pub fn busy(&self) -> bool {
        !self.running.is_empty() || !self.pending.is_empty()
    }

    pub fn runs_for(&self, lease_id: Uuid) -> bool {
        self.running.contains_key(&lease_id)
    }

    /// Start what is listed and not running, update keys, report readiness, stop what is no longer listed.
    pub fn sync(
        &mut self,
        host: &Arc<JobHost>,
        specs: &[EnvironmentSpec],
        leases: &[NodeLease],
        uids: &BTreeMap<Uuid, u32>,
        exits: &mpsc::UnboundedSender<Exited>,
    ) {
        let gone: Vec<Uuid> =
            self.running.keys().filter(|l| !specs.iter().any(|s| s.lease_id == **l)).copied().collect();
        for lease_id in gone {
            self.stop(host, lease_id);
        }
        self.failed.retain(|lease_id, _| specs.iter().any(|s| s.lease_id == *lease_id));
        for spec in specs {
            if let Some(env) = self.running.get_mut(&spec.lease_id) {
                if env.stopping {
                    continue;
                }
                if env.keys != spec.authorized_keys {
                    let dir = host.lease_dir(spec.lease_id).join(LEASE_ENV_DIR);
                    let removed = env.keys.iter().any(|k| !spec.authorized_keys.contains(k));
                    match write_authorized_keys(&dir, &spec.authorized_keys) {
                        Ok(()) if removed && env.kind == ProcessKind::Sandbox => {
                            // A key taken away ends the sessions open now, not only the next login: every session
                            // goes (sshd does not say which key opened which), the tenant's other keys log in again.
                            let sessions = super::sandbox::processes_besides_first(env.pid);
                            tracing::info!(lease.id = %spec.lease_id, ?sessions, "a key was removed: ending the environment's sessions");
                            super::sandbox::signal_processes(&sessions, "KILL");
                            env.keys = spec.authorized_keys.clone();
                        }
                        Ok(()) => env.keys = spec.authorized_keys.clone(),
                        Err(err) => {
                            tracing::error!(lease.id = %spec.lease_id, err = format!("{err:#}"), "could not update authorized_keys")
                        }
                    }
                }
                if !env.ready && listening(env.inside) {
                    env.ready = true;
                    self.pending.insert(
                        spec.lease_id,
                        EnvironmentStatus {
                            state: EnvironmentState::Ready,
                            port: Some(env.port),
                            host_key_fingerprints: env.fingerprints.clone(),
                            reason: None,
                        },
                    );
                }
                continue;
            }
            let (Some(uid), Some(lease)) =
                (uids.get(&spec.lease_id), leases.iter().find(|l| l.lease_id == spec.lease_id))
            else {
                continue;
            };
            if let Err(err) = self.start(host, spec, lease, *uid, exits) {
                let reason = format!("could not start: {err:#}");
                tracing::warn!(lease.id = %spec.lease_id, %reason, "environment failed");
                self.failed.insert(spec.lease_id, std::time::Instant::now());
                self.pending.insert(spec.lease_id, failed(reason));
            }
        }
    }

    fn start(
        &mut self,
        host: &Arc<JobHost>,
        spec: &EnvironmentSpec,
        lease: &NodeLease,
        uid: u32,
        exits: &mpsc::UnboundedSender<Exited>,
    ) -> anyhow::Result<()> {
        if self.failed.get(&spec.lease_id).is_some_and(|at| at.elapsed() < RETRY_FAILED) {
            return Ok(());
        }
        host.refuse_unsandboxable(spec.image.as_deref())?;
        let lease_dir = host.prepare_lease(spec.lease_id, uid)?;
        let dir = lease_dir.join(LEASE_ENV_DIR);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let fingerprint = host_key(&dir, host.sandboxed().then_some(uid))?;
        write_authorized_keys(&dir, &spec.authorized_keys)?;
        let port = self.free_port()?;
        let inside = match host.network.as_ref().and_then(|n| n.address(spec.lease_id)) {
            Some(address) => std::net::SocketAddr::from((address, port)),
            None => std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let mut variables = lease_variables(&lease.gpu_indices, true);
        // SSH sessions get the model cache's variables too (sshd passes them only what SetEnv names).
        variables.extend(host.model_cache_env(spec.image.is_some()));
        std::fs::write(dir.join("sshd_config"), sshd_config(port, &variables))?;
        let argv: Vec<String> = [self.sshd.to_string_lossy().as_ref(), "-D", "-e", "-f"]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("{LEASE_MOUNT}/{LEASE_ENV_DIR}/sshd_config")])
            .collect();
        let agent_path = std::env::var("PATH").ok();
        let prepared = host.command(&InLease {
            lease_id: spec.lease_id,
            uid,
            gpu_indices: &lease.gpu_indices,
            argv: &argv,
            cwd: &format!("{LEASE_MOUNT}/home"),
            host_cwd: &lease_dir.join("home"),
            image: spec.image.as_deref(),
            env: BTreeMap::new(),
            agent_path: agent_path.as_deref(),
            container: &format!("gpuplane-env-{}", spec.lease_id),
            volumes: &lease.volumes,
        })?;
        let forwarder = match inside.ip().is_loopback() {
            true => None,
            false => Some(forward(port, inside)?),
        };
        let (pid, _) = match spawn_process(&prepared, Owner::Environment(spec.lease_id), exits) {
            Ok(spawned) => spawned,
            Err(err) => {
                forwarder.inspect(|f| f.cancel());
                return Err(err);
            }
        };
        tracing::info!(lease.id = %spec.lease_id, port, %inside, pid, "environment started");
        self.running.insert(
            spec.lease_id,
            EnvProcess {
                pid,
                port,
                inside,
                forwarder,
                kind: prepared.kind,
                keys: spec.authorized_keys.clone(),
                fingerprints: vec![fingerprint],
                ready: false,
                stopping: false,
            },
        );
        self.pending.insert(
            spec.lease_id,
            EnvironmentStatus {
                state: EnvironmentState::Starting,
                port: Some(port),
                host_key_fingerprints: Vec::new(),
                reason: None,
            },
        );
        Ok(())
    }

    /// SIGTERM everything in it now, kill the sandbox after the grace period.
    fn stop(&mut self, host: &Arc<JobHost>, lease_id: Uuid) {
        let Some(env) = self.running.get_mut(&lease_id) else { return };
        if env.stopping {
            return;
        }
        env.stopping = true;
        if let Some(forwarder) = &env.forwarder {
            forwarder.cancel();
        }
        let (pid, kind) = (env.pid, env.kind.clone());
        tracing::info!(lease.id = %lease_id, pid, "stopping environment");
        host.stop_gracefully(pid, kind, self.grace);
    }

    /// The agent stops: every environment goes with it (a restarted agent starts them again).
    pub fn kill_all(&mut self, host: &JobHost) {
        for (_, env) in self.running.drain() {
            env.forwarder.inspect(|f| f.cancel());
            host.kill(env.pid, &env.kind);
        }
    }

    /// The SSH server ended: stopped if asked to, else failed with its last words.
    pub fn on_exit(&mut self, lease_id: Uuid, code: Option<i32>, tail: Vec<String>) {
        let Some(env) = self.running.remove(&lease_id) else { return };
        if let Some(forwarder) = &env.forwarder {
            forwarder.cancel();
        }
        let status = if env.stopping {
            EnvironmentStatus {
                state: EnvironmentState::Stopped,
                port: None,
                host_key_fingerprints: Vec::new(),
                reason: None,
            }
        } else {
            self.failed.insert(lease_id, std::time::Instant::now());
            let last = tail.iter().rev().take(3).rev().cloned().collect::<Vec<_>>().join(" | ");
            failed(format!("the SSH server exited ({}): {last}", code.map_or("signal".into(), |c| format!("code {c}"))))
        };
        tracing::info!(lease.id = %lease_id, ?status.state, "environment ended");
        self.pending.insert(lease_id, status);
    }

    /// Deliver reports; keep those that failed transiently. A report the service refuses (the environment or
    /// lease is gone) is dropped.
    pub async fn flush(&mut self, client: &ServiceClient, token: &str) {
        for (lease_id, status) in std::mem::take(&mut self.pending) {
            match client.report_environment(token, lease_id, &status).await {
                Ok(()) | Err(CallError::Rejected { .. }) => {}
                Err(err) => {
                    tracing::debug!(lease.id = %lease_id, %err, "environment report not delivered; retrying later");
                    self.pending.insert(lease_id, status);
                }
            }
        }
    }

    fn free_port(&self) -> anyhow::Result<u16> {
        self.ports.free(|port| self.running.values().any(|e| e.port == port), "--env-ports")
    }
}

fn failed(reason: String) -> EnvironmentStatus {
    EnvironmentStatus {
        state: EnvironmentState::Failed,
        port: None,
        host_key_fingerprints: Vec::new(),
        reason: Some(reason),
    }
}

fn listening(at: std::net::SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&at, Duration::from_millis(200)).is_ok()
}

/// Forward the host's `port` (what tenants connect to) to the SSH server in the lease's namespace, until
/// cancelled. Only this forwarder reaches into the namespace from the host; nothing inside reaches out to it.
fn forward(port: u16, inside: std::net::SocketAddr) -> anyhow::Result<tokio_util::sync::CancellationToken> {
    let listener = std::net::TcpListener::bind(("0.0.0.0", port)).with_context(|| format!("binding port {port}"))?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        loop {
            let (mut client, _) = tokio::select! {
                _ = stopped.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        tracing::warn!(port, %err, "environment forwarder: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let stopped = stopped.clone();
            tokio::spawn(async move {
                let Ok(mut server) = tokio::net::TcpStream::connect(inside).await else { return };
                tokio::select! {
                    _ = stopped.cancelled() => {}
                    _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                }
            });
        }
    });
    Ok(stop)
}

/// The lease's host key (made once per lease), readable by the lease's user only; returns its fingerprint.
fn host_key(dir: &Path, owner: Option<u32>) -> anyhow::Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let key = dir.join(HOST_KEY);
    if !key.exists() {
        let status = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
            .arg(&key)
            .stdin(std::process::Stdio::null())
            .status()
            .context("running ssh-keygen (Debian package openssh-client)")?;
        anyhow::ensure!(status.success(), "ssh-keygen failed: {status}");
    }
    if let Some(uid) = owner {
        std::os::unix::fs::lchown(&key, Some(uid), Some(uid))?;
    }
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))?;
    let public = std::fs::read_to_string(dir.join(format!("{HOST_KEY}.pub")))?;
    Ok(parse_public_key(public.trim()).map_err(anyhow::Error::msg)?.fingerprint)
}

/// Replace `authorized_keys` at once (a temporary file renamed over it): sshd never reads half a file.
fn write_authorized_keys(dir: &Path, keys: &[String]) -> anyhow::Result<()> {
    let tmp = dir.join("authorized_keys.tmp");
    let mut text = keys.join("\n");
    text.push('\n');
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join("authorized_keys"))?;
    Ok(())
}

/// The SSH server's configuration: public keys of the tenant only, no passwords, no root, the lease's variables
/// in every session (its GPUs, and the model cache's variables when the host has one).
pub fn sshd_config(port: u16, variables: &[(String, String)]) -> String {
    let env_dir = format!("{LEASE_MOUNT}/{LEASE_ENV_DIR}");
    let set_env: Vec<String> = variables
        .iter()
        .filter(|(k, _)| {
            k == "CUDA_VISIBLE_DEVICES" || k == super::launch::HOST_GPUS_ENV || MODEL_CACHE_ENV.contains(&k.as_str())
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(
        "Port {port}\nListenAddress 0.0.0.0\nHostKey {env_dir}/{HOST_KEY}\nAuthorizedKeysFile {env_dir}/authorized_keys\n\
         PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitEmptyPasswords no\n\
         PermitRootLogin no\nAllowUsers tenant\nUsePAM no\nStrictModes yes\nPidFile none\nPrintMotd no\n\
         PermitUserEnvironment no\nX11Forwarding no\nDisableForwarding yes\nAllowTcpForwarding no\n\
         AllowStreamLocalForwarding no\nAllowAgentForwarding no\nGatewayPorts no\nPermitTunnel no\nPermitOpen none\n\
         PermitListen none\nSetEnv {}\n",
        set_env.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssh_server_takes_keys_only_and_sets_the_lease_gpus() {
        let config = sshd_config(20007, &lease_variables(&[2, 3], true));
        for line in [
            "Port 20007",
            "AuthorizedKeysFile /lease/.env/authorized_keys",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin no",
            "AllowUsers tenant",
            "DisableForwarding yes",
            "AllowTcpForwarding no",
            "AllowStreamLocalForwarding no",
            "PermitTunnel no",
            "PermitOpen none",
            "PermitListen none",
            "SetEnv CUDA_VISIBLE_DEVICES=0,1 GPUPLANE_HOST_GPUS=2,3",
        ] {
            assert!(config.lines().any(|l| l == line), "{line} in\n{config}");
        }
        let mut variables = lease_variables(&[2, 3], true);
        variables.push(("HF_HOME".to_string(), "/models".to_string()));
        variables.push(("HF_HUB_OFFLINE".to_string(), "1".to_string()));
        let config = sshd_config(20007, &variables);
        let line = "SetEnv CUDA_VISIBLE_DEVICES=0,1 GPUPLANE_HOST_GPUS=2,3 HF_HOME=/models HF_HUB_OFFLINE=1";
        assert!(config.lines().any(|l| l == line), "{line} in\n{config}");
    }

    #[test]
    fn keys_are_replaced_whole() {
        let dir = std::env::temp_dir().join(format!("gpuplane-env-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        write_authorized_keys(&dir, &["ssh-ed25519 AAAA1".into(), "ssh-ed25519 AAAA2".into()]).unwrap();
        write_authorized_keys(&dir, &["ssh-ed25519 AAAA2".into()]).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("authorized_keys")).unwrap(), "ssh-ed25519 AAAA2\n");
        assert!(!dir.join("authorized_keys.tmp").exists());
        let fingerprint = host_key(&dir, None).unwrap();
        assert!(fingerprint.starts_with("SHA256:"), "{fingerprint}");
        assert_eq!(host_key(&dir, None).unwrap(), fingerprint, "made once, kept");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
