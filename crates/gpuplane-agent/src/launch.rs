//! How this host starts and stops a job's processes: in the sandbox ([`super::sandbox`]), in a container when the
//! job names an image, or (development only) directly. Also each lease's user and directory on the host.
//!
//! Layout, all created by the agent (root):
//!
//! ```text
//! <jobs-dir>/                          0700 root: no job ever sees it (tmpfs over it in every sandbox)
//!   <lease>/                           0755 root: mounted at /lease; the tenant cannot write here
//!     home/                            0700 the lease's user: HOME, the tenant's files for the lease
//!     jobs/                            0755 root
//!       <job_node_id>/                 made by the agent with the spec's files, then given to the lease's user:
//!                                      the job's working directory (/lease/jobs/<job_node_id>)
//! <state-dir>/leases/<lease>/passwd    /etc/passwd and /etc/group inside that lease's sandboxes
//! ```
//!
//! A lease's directory is removed (and every process of its user killed) once the service no longer lists the
//! lease on this node: files are not kept for the tenant's next lease.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use uuid::Uuid;

use super::args::{ContainerRuntime, UidRange};
use super::sandbox::{DeviceFiles, LEASE_MOUNT, Launch, Sandbox, group_file, passwd_file};
use gpuplane_protocol::jobs::{LaunchSpec, STOP_NOTICE_ENV, STOP_NOTICE_FILE, StopNoticeFile};

/// How jobs run on this host, decided once at start-up.
#[derive(Debug)]
pub enum Isolation {
    /// Every job without an image runs in the sandbox: the only mode for a host that serves tenants.
    Sandboxed(Sandbox),
    /// The host cannot sandbox (the reason): every job without an image fails with it.
    Unavailable(String),
    /// `--insecure-unsandboxed-jobs`: jobs run as the agent's user and see the whole host. Development only.
    Unsandboxed,
}

/// Everything the runner needs to start processes on this host.
#[derive(Debug)]
pub struct JobHost {
    pub isolation: Isolation,
    pub jobs_dir: PathBuf,
    pub state_dir: PathBuf,
    pub uids: UidRange,
    pub devices: DeviceFiles,
    pub runtime: ContainerRuntime,
    pub max_processes: u32,
    /// Ports for environments' SSH servers, and the server.
    pub env_ports: super::args::PortRange,
    /// Ports for the forwarders of parts that serve ([`super::serving`]).
    pub serve_ports: super::args::PortRange,
    pub sshd: PathBuf,
    /// Each lease's own network namespace: `Some` exactly when jobs run sandboxed.
    pub network: Option<super::lease_net::LeaseNetworks>,
    /// Mounts the leases' volumes.
    pub volumes: super::volume_keeper::VolumeMounts,
    /// The host's model cache (`--model-cache`, absolute): read-only at `/models` in every sandbox (the
    /// [`Sandbox`] binds it) and container, with `HF_HOME` there ([`JobHost::model_cache_home`]).
    pub model_cache: Option<PathBuf>,
}

pub use super::sandbox::ProcessKind;

/// A command ready to spawn.
#[derive(Debug)]
pub struct Prepared {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Host working directory of the spawned program (bwrap and the runtime take the job's own from argv).
    pub cwd: PathBuf,
    pub kind: ProcessKind,
    /// A sandbox's bwrap options, handed to it on a pipe (`sandbox::OPTIONS_FD`), not on `argv`.
    pub sandbox: Option<super::sandbox::SandboxCommand>,
}

/// The lease's environment's files, in the lease's directory (root-owned: the tenant reads, never writes).
pub const LEASE_ENV_DIR: &str = ".env";

/// Variables a sandboxed job gets besides the spec's (which cannot set them: the service refuses reserved names).
pub const HOST_GPUS_ENV: &str = "GPUPLANE_HOST_GPUS";

/// Where the Hugging Face libraries keep their files: the model cache, when the host has one, unless the job's
/// own environment names another.
pub const HF_HOME_ENV: &str = "HF_HOME";

/// The variables [`JobHost::model_cache_env`] sets: `HF_HOME`, and what keeps the libraries from writing into
/// the read-only cache (offline hub; datasets' and remote code's caches in the lease's home).
pub const MODEL_CACHE_ENV: [&str; 4] = [HF_HOME_ENV, "HF_HUB_OFFLINE", "HF_DATASETS_CACHE", "HF_MODULES_CACHE"];

/// One process to run in a lease's sandbox: a job's, or the lease's SSH server.
pub struct InLease<'a> {
    pub lease_id: Uuid,
    pub uid: u32,
    pub gpu_indices: &'a [i32],
    pub argv: &'a [String],
    /// Working directory inside, and the same on the host (used only unsandboxed).
    pub cwd: &'a str,
    pub host_cwd: &'a Path,
    pub image: Option<&'a str>,
    pub env: BTreeMap<String, String>,
    pub agent_path: Option<&'a str>,
    /// The container's name, with an image.
    pub container: &'a str,
    /// The tenant's volumes attached to the lease, mounted at `/volumes/<mount>`.
    pub volumes: &'a [gpuplane_protocol::volumes::LeaseVolume],
}

/// What every process of a lease finds in its environment. Isolated (sandbox or container), CUDA numbers the
/// devices it can open from 0, so `CUDA_VISIBLE_DEVICES` is renumbered; unsandboxed, every GPU is there and
/// the spec's host indices stand.
pub fn lease_variables(gpu_indices: &[i32], isolated: bool) -> Vec<(String, String)> {
    if !isolated {
        return Vec::new();
    }
    let host: Vec<String> = gpu_indices.iter().map(i32::to_string).collect();
    let renumbered: Vec<String> = (0..gpu_indices.len()).map(|i| i.to_string()).collect();
    [
        ("HOME", format!("{LEASE_MOUNT}/home")),
        ("USER", "tenant".to_string()),
        ("LOGNAME", "tenant".to_string()),
        ("CUDA_VISIBLE_DEVICES", renumbered.join(",")),
        (HOST_GPUS_ENV, host.join(",")),
        // The lease's namespace has one interface: collectives advertise its address, the one peers route to.
        ("GLOO_SOCKET_IFNAME", "eth0".to_string()),
        ("NCCL_SOCKET_IFNAME", "eth0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl JobHost {
    pub fn sandboxed(&self) -> bool {
        matches!(self.isolation, Isolation::Sandboxed(_))
    }

    /// `HF_HOME` for a process of a lease when the host has a model cache: where the cache is mounted, `/models`
    /// in a sandbox or container; unsandboxed (development only), the cache's own path on the host.
    pub fn model_cache_home(&self, image: bool) -> Option<String> {
        let cache = self.model_cache.as_ref()?;
        Some(match self.sandboxed() || image {
            true => gpuplane_protocol::model_cache::MOUNT.to_owned(),
            false => cache.to_string_lossy().into_owned(),
        })
    }

    /// The variables of a lease's processes when the host has a model cache (none otherwise): `HF_HOME` at the
    /// cache, and, since the cache is read-only, the hub offline (a cached model loads by its id; any other fails
    /// at once with the library's message instead of a write error, and a job that downloads sets its own
    /// `HF_HOME`), with the datasets' and remote code's caches in the lease's home. A job that sets `HF_HOME`
    /// gets none of them.
    pub fn model_cache_env(&self, image: bool) -> Vec<(String, String)> {
        let Some(home) = self.model_cache_home(image) else { return Vec::new() };
        let mut env = vec![(HF_HOME_ENV.to_string(), home), (MODEL_CACHE_ENV[1].to_string(), "1".to_string())];
        if self.sandboxed() || image {
            let files = format!("{LEASE_MOUNT}/home/.cache/huggingface");
            env.push((MODEL_CACHE_ENV[2].to_string(), format!("{files}/datasets")));
            env.push((MODEL_CACHE_ENV[3].to_string(), format!("{files}/modules")));
        }
        env
    }

    /// The lowest uid of the range no lease holds.
    pub fn free_uid(&self, taken: impl Iterator<Item = u32> + Clone) -> anyhow::Result<u32> {
        (self.uids.first..=self.uids.last)
            .find(|uid| !taken.clone().any(|t| t == *uid))
            .context("every job uid of --job-uids is in use by a lease")
    }

    /// Where the agent keeps an uploaded working directory it fetched (`digest` checked by the caller: `sha256:`
    /// and hex), for every part that names it.
    pub fn workdir_archive(&self, digest: &str) -> PathBuf {
        self.state_dir.join("uploads").join(format!("{}.tar.gz", digest.trim_start_matches("sha256:")))
    }

    pub fn lease_dir(&self, lease_id: Uuid) -> PathBuf {
        self.jobs_dir.join(lease_id.to_string())
    }

    fn lease_etc(&self, lease_id: Uuid) -> PathBuf {
        self.state_dir.join("leases").join(lease_id.to_string())
    }

    /// Create the lease's directory, home and account files (idempotent). Returns the lease's directory.
    pub fn prepare_lease(&self, lease_id: Uuid, uid: u32) -> anyhow::Result<PathBuf> {
        let dir = self.lease_dir(lease_id);
        create_dir_with_mode(&dir, 0o755)?;
        create_dir_with_mode(&dir.join("jobs"), 0o755)?;
        let home = dir.join("home");
        if !home.is_dir() {
            create_dir_with_mode(&home, 0o700)?;
            if self.sandboxed() {
                std::os::unix::fs::lchown(&home, Some(uid), Some(uid))
                    .with_context(|| format!("giving {} to uid {uid}", home.display()))?;
            }
        }
        let etc = self.lease_etc(lease_id);
        std::fs::create_dir_all(&etc).with_context(|| format!("creating {}", etc.display()))?;
        std::fs::write(etc.join("passwd"), passwd_file(uid))?;
        std::fs::write(etc.join("group"), group_file(uid))?;
        Ok(dir)
    }

    /// Everything to start one assignment on `lease` (its GPUs and volumes here): the lease's directory and the
    /// job's own, its files, the command.
    pub fn prepare(
        &self,
        job_node_id: Uuid,
        lease: &gpuplane_protocol::jobs::NodeLease,
        uid: u32,
        spec: &LaunchSpec,
        agent_path: Option<&str>,
    ) -> anyhow::Result<Prepared> {
        let lease_id = lease.lease_id;
        self.refuse_unsandboxable(spec.image.as_deref())?;
        let lease_dir = self.prepare_lease(lease_id, uid)?;
        let archive = match &spec.workdir {
            Some(digest) => Some(
                std::fs::read(self.workdir_archive(digest))
                    .with_context(|| format!("the working directory {digest} is not on this host"))?,
            ),
            None => None,
        };
        let job_dir =
            write_job_dir(&lease_dir, job_node_id, spec, archive.as_deref(), self.sandboxed().then_some(uid))?;
        let cwd = format!("{LEASE_MOUNT}/jobs/{job_node_id}");
        let mut env = spec.env.clone();
        // Where a stop notice will appear, as the job sees its working directory.
        let notice = if self.sandboxed() || spec.image.is_some() {
            format!("{cwd}/{STOP_NOTICE_FILE}")
        } else {
            job_dir.join(STOP_NOTICE_FILE).to_string_lossy().into_owned()
        };
        env.insert(STOP_NOTICE_ENV.into(), notice);
        self.command(&InLease {
            lease_id,
            uid,
            gpu_indices: &lease.gpu_indices,
            argv: &spec.argv,
            cwd: &cwd,
            host_cwd: &job_dir,
            image: spec.image.as_deref(),
            env,
            agent_path,
            container: &container_name(job_node_id),
            volumes: &lease.volumes,
        })
    }

    /// A host that cannot sandbox runs nothing without an image.
    pub fn refuse_unsandboxable(&self, image: Option<&str>) -> anyhow::Result<()> {
        if let (Isolation::Unavailable(reason), None) = (&self.isolation, image) {
            anyhow::bail!("this host cannot run jobs sandboxed, so it runs none: {reason}");
        }
        Ok(())
    }

    /// The command that runs `argv` in the lease's sandbox (or container, with an image), with the variables
    /// every process of a lease gets.
    pub fn command(&self, p: &InLease<'_>) -> anyhow::Result<Prepared> {
        self.refuse_unsandboxable(p.image)?;
        let devices = self.devices.for_gpus(p.gpu_indices)?;
        let lease_dir = self.lease_dir(p.lease_id);
        let mut env = p.env.clone();
        env.entry("PATH".into()).or_insert_with(|| p.agent_path.unwrap_or("/usr/local/bin:/usr/bin:/bin").to_owned());
        env.extend(lease_variables(p.gpu_indices, self.sandboxed() || p.image.is_some()));
        if !env.contains_key(HF_HOME_ENV) {
            for (name, value) in self.model_cache_env(p.image.is_some()) {
                env.entry(name).or_insert(value);
            }
        }
        let etc = self.lease_etc(p.lease_id);
        if !p.volumes.is_empty() && !self.sandboxed() && p.image.is_none() {
            anyhow::bail!(
                "the lease's volumes are mounted only in a sandbox or container; this host runs jobs unsandboxed"
            );
        }
        let volumes = self.volumes.binds(p.volumes, p.uid)?;
        if let Some(image) = p.image {
            let argv = container_argv(&ContainerLaunch {
                runtime: self.runtime,
                name: p.container,
                uid: self.sandboxed().then_some(p.uid),
                gpu_indices: p.gpu_indices,
                env_names: env.keys().map(String::as_str).collect(),
                lease_dir: &lease_dir,
                accounts: Some((&etc.join("passwd"), &etc.join("group"))),
                cwd: p.cwd,
                max_processes: self.max_processes,
                network: self.network.as_ref().map(|n| n.namespace_path(p.lease_id)),
                image,
                argv: p.argv,
                volumes: &volumes,
                model_cache: self.model_cache.as_deref(),
            });
            return Ok(Prepared {
                argv,
                env,
                cwd: PathBuf::from("/"),
                kind: ProcessKind::Container(p.container.to_owned()),
                sandbox: None,
            });
        }
        match &self.isolation {
            Isolation::Sandboxed(sandbox) => {
                let network = self.network.as_ref().context("no lease network on a sandboxed host")?;
                let mut argv = network.enter(p.lease_id)?;
                let sandboxed = sandbox.command_line(&Launch {
                    uid: p.uid,
                    lease_dir: &lease_dir,
                    passwd: &etc.join("passwd"),
                    group: &etc.join("group"),
                    cwd: p.cwd,
                    devices: &devices,
                    argv: p.argv,
                    volumes: &volumes,
                });
                argv.extend(sandboxed.argv.iter().cloned());
                Ok(Prepared {
                    argv,
                    env,
                    cwd: PathBuf::from("/"),
                    kind: ProcessKind::Sandbox,
                    sandbox: Some(sandboxed),
                })
            }
            Isolation::Unsandboxed => {
                env.insert("HOME".into(), lease_dir.join("home").to_string_lossy().into_owned());
                Ok(Prepared {
                    argv: p.argv.to_vec(),
                    env,
                    cwd: p.host_cwd.to_owned(),
                    kind: ProcessKind::Plain,
                    sandbox: None,
                })
            }
            Isolation::Unavailable(_) => unreachable!("refused above"),
        }
    }

    /// The lease has ended on this node: kill whatever its user still runs, remove its files.
    pub fn remove_lease(&self, lease_id: Uuid, uid: u32) {
        if self.sandboxed() && self.uids.contains(uid) {
            super::sandbox::signal_processes(&super::sandbox::processes_of_uid(uid), "KILL");
        }
        if let Some(network) = &self.network {
            network.remove(lease_id);
        }
        for dir in [self.lease_dir(lease_id), self.lease_etc(lease_id)] {
            // std's remove_dir_all does not follow symbolic links the tenant may have left.
            if let Err(err) = std::fs::remove_dir_all(&dir)
                && err.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(dir = %dir.display(), %err, "could not remove a lease's files");
            }
        }
    }

    /// Ask a process to stop (SIGTERM or the runtime's equivalent).
    pub fn terminate(&self, pid: u32, kind: &ProcessKind) {
        match kind {
            ProcessKind::Sandbox => super::sandbox::signal_processes(&super::sandbox::sandbox_processes(pid), "TERM"),
            ProcessKind::Container(name) => self.run_runtime(&["kill", "--signal=TERM", name]),
            ProcessKind::Plain => signal_group(pid, "TERM"),
        }
    }

    /// SIGTERM now; after `grace`, if it still runs, stop it for good ([`Self::kill`]).
    pub fn stop_gracefully(self: &Arc<Self>, pid: u32, kind: ProcessKind, grace: Duration) {
        self.terminate(pid, &kind);
        let host = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if Path::new(&format!("/proc/{pid}")).exists() {
                host.kill(pid, &kind);
            }
        });
    }

    /// Stop it for good: the sandbox (and so its PID namespace), the container, or the process group.
    pub fn kill(&self, pid: u32, kind: &ProcessKind) {
        if let ProcessKind::Container(name) = kind {
            self.run_runtime(&["rm", "--force", name]);
        }
        signal_group(pid, "KILL");
    }

    fn run_runtime(&self, args: &[&str]) {
        let program = match self.runtime {
            ContainerRuntime::Docker => "docker",
            ContainerRuntime::Podman => "podman",
        };
        let result = std::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Err(err) = result {
            tracing::warn!(program, ?args, %err, "could not run the container runtime");
        }
    }
}

/// How long a stopped process gets between SIGTERM and SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

pub fn container_name(job_node_id: Uuid) -> String {
    format!("gpuplane-{job_node_id}")
}

/// Create a directory (and its parents) and set its mode; an existing one gets the mode too.
fn create_dir_with_mode(dir: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let meta = std::fs::symlink_metadata(dir)?;
    anyhow::ensure!(meta.is_dir(), "{} is not a directory", dir.display());
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Make the job's working directory afresh under the lease's root-owned `jobs/`, unpack the uploaded working
/// directory (`archive`) into it, write the spec's files, then give all of it to the lease's user (`owner`).
/// Nothing is written through a path the tenant controls: the directory is new and root's until the end.
fn write_job_dir(
    lease_dir: &Path,
    job_node_id: Uuid,
    spec: &LaunchSpec,
    archive: Option<&[u8]>,
    owner: Option<u32>,
) -> anyhow::Result<PathBuf> {
    use std::io::Write;
    let dir = lease_dir.join("jobs").join(job_node_id.to_string());
    if std::fs::symlink_metadata(&dir).is_ok() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing a stale {}", dir.display()))?;
    }
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut created = vec![dir.clone()];
    if let Some(archive) = archive {
        match super::archive::unpack(archive, &dir, super::archive::LIMITS) {
            Ok((_, unpacked)) => created.extend(unpacked),
            Err(refusal) => {
                let _ = std::fs::remove_dir_all(&dir);
                anyhow::bail!("the working directory's archive is refused: {refusal}");
            }
        }
    }
    for file in &spec.files {
        let relative = Path::new(&file.path);
        if file.path.is_empty() || !relative.components().all(|c| matches!(c, Component::Normal(_))) {
            anyhow::bail!("file path `{}` is not a plain relative path", file.path);
        }
        let mut parent = dir.clone();
        if let Some(dirs) = relative.parent() {
            for part in dirs.components() {
                parent.push(part);
                if std::fs::symlink_metadata(&parent).is_err() {
                    std::fs::create_dir(&parent).with_context(|| format!("creating {}", parent.display()))?;
                    created.push(parent.clone());
                }
            }
        }
        let path = dir.join(relative);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("writing {}", path.display()))?;
        out.write_all(file.content.as_bytes())?;
        created.push(path);
    }
    if let Some(uid) = owner {
        for path in &created {
            std::os::unix::fs::lchown(path, Some(uid), Some(uid))
                .with_context(|| format!("giving {} to uid {uid}", path.display()))?;
        }
    }
    Ok(dir)
}

/// Write a stop notice into a job's working directory as one whole file: written under a fresh name the tenant
/// cannot have prepared (`create_new` refuses an existing file or link), then renamed over the notice's name
/// (a rename replaces a link the tenant may have put there; it never follows one). The directory itself is
/// the agent's to name: its parent belongs to root.
pub fn write_notice(job_dir: &Path, notice: &StopNoticeFile) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = job_dir.join(format!(".gpuplane-notice-{}", Uuid::new_v4()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    out.write_all(&serde_json::to_vec(notice)?)?;
    drop(out);
    std::fs::rename(&tmp, job_dir.join(STOP_NOTICE_FILE)).with_context(|| format!("renaming {}", tmp.display()))
}

/// A job with an image, as the container runtime runs it.
pub struct ContainerLaunch<'a> {
    pub runtime: ContainerRuntime,
    pub name: &'a str,
    /// The lease's user; `None` only with `--insecure-unsandboxed-jobs`.
    pub uid: Option<u32>,
    pub gpu_indices: &'a [i32],
    /// Passed as `-e NAME`: the values come from the runtime's environment, never its argv.
    pub env_names: Vec<&'a str>,
    pub lease_dir: &'a Path,
    /// The lease's `/etc/passwd` and `/etc/group`, so the image knows the lease's user.
    pub accounts: Option<(&'a Path, &'a Path)>,
    pub cwd: &'a str,
    pub max_processes: u32,
    /// The lease's network namespace; `None` only with `--insecure-unsandboxed-jobs` (the host's network).
    pub network: Option<PathBuf>,
    pub image: &'a str,
    pub argv: &'a [String],
    /// The lease's volumes.
    pub volumes: &'a [super::volume_keeper::VolumeBind],
    /// The host's model cache, mounted read-only at `/models`.
    pub model_cache: Option<&'a Path>,
}

/// The runtime's argv: only the leased GPUs (the NVIDIA Container Toolkit numbers them from 0 inside), no
/// capabilities, no privilege escalation, the lease's user, a process limit, a private IPC namespace with room
/// for NCCL's shared memory, and the lease's network namespace: podman joins it (`--network=ns:PATH`); docker
/// cannot join a namespace it did not make, so a docker container of an isolated lease gets no network at all
/// (`--network=none`; multi-node images need `--container-runtime podman`).
pub fn container_argv(c: &ContainerLaunch<'_>) -> Vec<String> {
    let program = match c.runtime {
        ContainerRuntime::Docker => "docker",
        ContainerRuntime::Podman => "podman",
    };
    let mut argv: Vec<String> = vec![program.into(), "run".into(), "--rm".into(), format!("--name={}", c.name)];
    argv.push(match (&c.network, c.runtime) {
        (None, _) => "--network=host".into(),
        (Some(ns), ContainerRuntime::Podman) => format!("--network=ns:{}", ns.display()),
        (Some(_), ContainerRuntime::Docker) => "--network=none".into(),
    });
    argv.extend(
        ["--cap-drop=ALL", "--security-opt=no-new-privileges", "--ipc=private", "--shm-size=16g", "--init"]
            .map(String::from),
    );
    argv.push(format!("--pids-limit={}", c.max_processes));
    if let Some(uid) = c.uid {
        argv.push(format!("--user={uid}:{uid}"));
    }
    let devices: Vec<String> = c.gpu_indices.iter().map(i32::to_string).collect();
    match c.runtime {
        ContainerRuntime::Docker => argv.extend(["--gpus".into(), format!("\"device={}\"", devices.join(","))]),
        ContainerRuntime::Podman => {
            argv.extend(devices.iter().map(|d| format!("--device=nvidia.com/gpu={d}")));
        }
    }
    for name in &c.env_names {
        argv.extend(["-e".into(), (*name).to_owned()]);
    }
    argv.push(format!("--volume={}:{LEASE_MOUNT}", c.lease_dir.display()));
    if let Some((passwd, group)) = c.accounts {
        argv.push(format!("--volume={}:/etc/passwd:ro", passwd.display()));
        argv.push(format!("--volume={}:/etc/group:ro", group.display()));
    }
    for v in c.volumes {
        argv.push(format!("--volume={}:{}{}", v.host.display(), v.inside, if v.read_only { ":ro" } else { "" }));
    }
    if let Some(cache) = c.model_cache {
        argv.push(format!("--volume={}:{}:ro", cache.display(), gpuplane_protocol::model_cache::MOUNT));
    }
    argv.push(format!("--workdir={}", c.cwd));
    argv.push(c.image.to_owned());
    argv.extend(c.argv.iter().cloned());
    argv
}

/// Signal a process group through the `kill` program (no unsafe code here).
pub fn signal_group(pgid: u32, signal: &str) {
    super::sandbox::run_kill(signal, &[format!("-{pgid}")]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volume_keeper::VolumeBind;
    use gpuplane_protocol::jobs::SpecFile;

    #[test]
    fn a_container_gets_only_the_leased_gpus_and_no_privileges() {
        let argv = vec!["python3".to_string(), "x.py".to_string()];
        let volumes = [
            VolumeBind { host: "/v/1".into(), inside: "/volumes/ckpt".into(), read_only: false },
            VolumeBind { host: "/v/2".into(), inside: "/volumes/data".into(), read_only: true },
        ];
        let launch = ContainerLaunch {
            runtime: ContainerRuntime::Docker,
            name: "gpuplane-j",
            uid: Some(200003),
            gpu_indices: &[4, 5],
            env_names: vec!["CUDA_VISIBLE_DEVICES", "HF_TOKEN"],
            lease_dir: Path::new("/jobs/L"),
            accounts: None,
            cwd: "/lease/jobs/J",
            max_processes: 4096,
            network: Some("/run/netns/gpuplane-0000-L".into()),
            image: "img:1",
            argv: &argv,
            volumes: &volumes,
            model_cache: Some(Path::new("/srv/gpuplane/models")),
        };
        let docker = container_argv(&launch);
        assert!(docker.contains(&"--volume=/srv/gpuplane/models:/models:ro".to_string()), "{docker:?}");
        assert!(docker.contains(&"--volume=/v/1:/volumes/ckpt".to_string()), "{docker:?}");
        assert!(docker.contains(&"--volume=/v/2:/volumes/data:ro".to_string()), "{docker:?}");
        assert!(docker.contains(&"--network=none".to_string()), "docker cannot join the lease's namespace");
        assert!(!docker.iter().any(|a| a == "--network=host"), "{docker:?}");
        assert_eq!(docker[..4], ["docker", "run", "--rm", "--name=gpuplane-j"]);
        for flag in ["--cap-drop=ALL", "--security-opt=no-new-privileges", "--user=200003:200003", "--pids-limit=4096"]
        {
            assert!(docker.contains(&flag.to_string()), "{flag}: {docker:?}");
        }
        assert!(!docker.iter().any(|a| a.contains("privileged") || a == "--ipc=host"), "{docker:?}");
        assert!(docker.windows(2).any(|w| w == ["--gpus", "\"device=4,5\""]));
        assert!(docker.windows(2).any(|w| w == ["-e", "HF_TOKEN"]), "names only: values never on the command line");
        assert!(docker.contains(&"--volume=/jobs/L:/lease".to_string()));
        assert!(docker.ends_with(&["img:1".into(), "python3".into(), "x.py".into()]));
        let podman =
            container_argv(&ContainerLaunch { runtime: ContainerRuntime::Podman, env_names: Vec::new(), ..launch });
        assert_eq!(podman[0], "podman");
        assert!(podman.contains(&"--device=nvidia.com/gpu=4".to_string()));
        assert!(podman.contains(&"--device=nvidia.com/gpu=5".to_string()));
        assert!(!podman.contains(&"--gpus".to_string()));
        assert!(podman.contains(&"--network=ns:/run/netns/gpuplane-0000-L".to_string()));
        let unsandboxed = container_argv(&ContainerLaunch { network: None, ..launch });
        assert!(unsandboxed.windows(2).any(|w| w == ["-e", "HF_TOKEN"]));
        assert!(unsandboxed.contains(&"--network=host".to_string()));
        let uncached =
            container_argv(&ContainerLaunch { model_cache: None, network: None, env_names: Vec::new(), ..launch });
        assert!(!uncached.iter().any(|a| a.contains("/models")), "{uncached:?}");
    }

    #[test]
    fn a_host_that_cannot_sandbox_runs_no_job_and_says_why() {
        let dir = std::env::temp_dir().join(format!("gpuplane-nosandbox-{}", Uuid::new_v4()));
        let host = JobHost {
            isolation: Isolation::Unavailable("`bwrap` is not installed (Debian package `bubblewrap`)".into()),
            jobs_dir: dir.join("jobs"),
            state_dir: dir.join("state"),
            uids: UidRange { first: 300000, last: 300009 },
            devices: DeviceFiles::default(),
            runtime: ContainerRuntime::Docker,
            max_processes: 64,
            env_ports: super::super::args::PortRange { first: 20000, last: 20009 },
            serve_ports: super::super::args::PortRange { first: 21000, last: 21009 },
            sshd: "/usr/sbin/sshd".into(),
            network: None,
            volumes: Default::default(),
            model_cache: None,
        };
        let spec = LaunchSpec {
            argv: vec!["true".into()],
            env: BTreeMap::new(),
            files: Vec::new(),
            image: None,
            serve: None,
            workdir: None,
        };
        let lease = gpuplane_protocol::jobs::NodeLease {
            lease_id: Uuid::new_v4(),
            gpu_indices: Vec::new(),
            peers: Vec::new(),
            volumes: Vec::new(),
        };
        let err = host.prepare(Uuid::new_v4(), &lease, 300000, &spec, None).unwrap_err().to_string();
        assert!(err.contains("cannot run jobs sandboxed") && err.contains("bubblewrap"), "{err}");
        assert!(!dir.exists(), "nothing was prepared for it");
        // With an image, the container runtime is the sandbox: that job may still run.
        let image = LaunchSpec { image: Some("img:1".into()), ..spec };
        assert!(host.refuse_unsandboxable(image.image.as_deref()).is_ok());
    }

    #[test]
    fn the_model_cache_is_hf_home_unless_the_job_names_its_own() {
        let host = |isolation| JobHost {
            isolation,
            jobs_dir: "/nonexistent/jobs".into(),
            state_dir: "/nonexistent/state".into(),
            uids: UidRange { first: 300000, last: 300009 },
            devices: DeviceFiles::default(),
            runtime: ContainerRuntime::Podman,
            max_processes: 64,
            env_ports: super::super::args::PortRange { first: 20000, last: 20009 },
            serve_ports: super::super::args::PortRange { first: 21000, last: 21009 },
            sshd: "/usr/sbin/sshd".into(),
            network: None,
            volumes: Default::default(),
            model_cache: Some("/srv/gpuplane/models".into()),
        };
        let argv = vec!["python3".to_string(), "train.py".to_string()];
        let in_lease = |image, env| InLease {
            lease_id: Uuid::nil(),
            uid: 300001,
            gpu_indices: &[],
            argv: &argv,
            cwd: "/lease/jobs/J",
            host_cwd: Path::new("/nonexistent/jobs/J"),
            image,
            env,
            agent_path: None,
            container: "gpuplane-j",
            volumes: &[],
        };
        // An image job (this host cannot sandbox, so it runs only those): the cache at /models, HF_HOME there.
        let cannot_sandbox = host(Isolation::Unavailable("no bwrap".into()));
        let prepared = cannot_sandbox.command(&in_lease(Some("img:1"), BTreeMap::new())).unwrap();
        assert_eq!(prepared.env.get("HF_HOME").map(String::as_str), Some("/models"));
        assert_eq!(prepared.env["HF_HUB_OFFLINE"], "1");
        assert_eq!(prepared.env["HF_DATASETS_CACHE"], "/lease/home/.cache/huggingface/datasets");
        assert_eq!(prepared.env["HF_MODULES_CACHE"], "/lease/home/.cache/huggingface/modules");
        assert!(prepared.argv.contains(&"--volume=/srv/gpuplane/models:/models:ro".to_string()), "{:?}", prepared.argv);
        assert!(prepared.argv.windows(2).any(|w| w == ["-e", "HF_HOME"]), "{:?}", prepared.argv);
        // The job's own HF_HOME wins; the cache is still mounted.
        let own = BTreeMap::from([("HF_HOME".to_string(), "/lease/home/hf".to_string())]);
        let prepared = cannot_sandbox.command(&in_lease(Some("img:1"), own)).unwrap();
        assert_eq!(prepared.env["HF_HOME"], "/lease/home/hf");
        assert!(!prepared.env.contains_key("HF_HUB_OFFLINE"), "a job with its own HF_HOME may download");
        // A job that only says it wants the hub online keeps that.
        let online = BTreeMap::from([("HF_HUB_OFFLINE".to_string(), "0".to_string())]);
        assert_eq!(cannot_sandbox.command(&in_lease(Some("img:1"), online)).unwrap().env["HF_HUB_OFFLINE"], "0");
        assert!(prepared.argv.contains(&"--volume=/srv/gpuplane/models:/models:ro".to_string()));
        // Unsandboxed (development): the host's files, so the cache's own path.
        let unsandboxed = host(Isolation::Unsandboxed);
        let prepared = unsandboxed.command(&in_lease(None, BTreeMap::new())).unwrap();
        assert_eq!(prepared.env["HF_HOME"], "/srv/gpuplane/models");
        assert_eq!(unsandboxed.model_cache_home(true).as_deref(), Some("/models"));
        // No cache: nothing set.
        let uncached = JobHost { model_cache: None, ..host(Isolation::Unsandboxed) };
        assert!(!uncached.command(&in_lease(None, BTreeMap::new())).unwrap().env.contains_key("HF_HOME"));
        assert_eq!(uncached.model_cache_home(true), None);
    }

    #[test]
    fn job_files_land_in_a_fresh_directory_and_paths_cannot_escape() {
        let lease = std::env::temp_dir().join(format!("gpuplane-lease-{}", Uuid::new_v4()));
        std::fs::create_dir_all(lease.join("jobs")).unwrap();
        let id = Uuid::new_v4();
        let file = |path: &str| SpecFile { path: path.into(), content: "{}".into() };
        let spec = |files| LaunchSpec {
            argv: vec!["true".into()],
            env: BTreeMap::new(),
            files,
            image: None,
            serve: None,
            workdir: None,
        };
        // A stale directory from an interrupted attempt (with a planted link) is replaced, not written through.
        std::fs::create_dir_all(lease.join("jobs").join(id.to_string())).unwrap();
        std::os::unix::fs::symlink("/etc", lease.join("jobs").join(id.to_string()).join("conf")).unwrap();
        let dir = write_job_dir(&lease, id, &spec(vec![file("conf/ds.json"), file("a.json")]), None, None).unwrap();
        assert!(std::fs::symlink_metadata(dir.join("conf")).unwrap().is_dir());
        assert_eq!(std::fs::read_to_string(dir.join("conf/ds.json")).unwrap(), "{}");
        for bad in ["../x.json", "/etc/x", "a/../../x", ""] {
            let err = write_job_dir(&lease, Uuid::new_v4(), &spec(vec![file(bad)]), None, None).unwrap_err();
            assert!(err.to_string().contains("plain relative path"), "{bad}: {err}");
        }
        std::fs::remove_dir_all(lease).unwrap();
    }
}
