//! The job sandbox: what a tenant's process on a GPU host can reach, and the one place that decides it.
//!
//! A job without an image runs inside bubblewrap (`bwrap`, Debian's `bubblewrap`), started by the agent as root:
//!
//! - **its own user**: a uid/gid of the lease's own from the agent's range (`--job-uids`), never root and never
//!   the agent's user; `setpriv` drops every capability, clears supplementary groups and sets `no_new_privs`, so
//!   no setuid program can give root back;
//! - **its own PID, IPC and mount namespaces**: it sees only its own processes (it cannot list, signal or ptrace
//!   the agent or another job), has its own System V / POSIX IPC and its own `/dev/shm`;
//! - **its own file view**: the host's top-level directories read-only, a fresh `/tmp`, `/proc` of its PID
//!   namespace, and tmpfs over the agent's state directory and over every lease's files; only its own lease's
//!   directory is mounted (at `/lease`), writable where the lease's user owns it; the host's model cache
//!   (`--model-cache`), if any, read-only at `/models`;
//! - **only its GPUs as devices**: a private `/dev` (null, zero, random, tty, ...) holding just the leased GPUs'
//!   device files and the control devices CUDA needs. `CUDA_VISIBLE_DEVICES` is still set (to `0..n-1`, as CUDA
//!   numbers what it can open), but it is a convenience, no longer the boundary;
//! - **a process limit** (`RLIMIT_NPROC` per uid through `prlimit`: each lease has its own uid);
//! - **no host path on a command line it can read**: bwrap's init is process 1 of the job's PID namespace, and
//!   its `/proc/1/cmdline` is bwrap's argv, readable by every process inside (`ps`). So bwrap's options (the
//!   lease's directory, the agent's state and jobs directories, the passwd files) reach it on a pipe
//!   ([`OPTIONS_FD`], `--args`), which it reads and closes before the job starts; the command line keeps only
//!   the programs and the job's own argv.
//!
//! The network is the lease's own: the agent starts bwrap inside the lease's network namespace
//! ([`super::lease_net`]), which reaches the lease's other nodes and nothing of the host's.
//!
//! Why bubblewrap: it is small, audited (Flatpak's sandbox), packaged everywhere, and does exactly the namespace
//! and bind-mount work that would otherwise be unsafe code here (`unsafe_code` is forbidden in this crate).
//! `setpriv` and `prlimit` (util-linux) are on every Linux host.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::Context;
use command_fds::CommandFdExt;

/// How a started process is stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessKind {
    /// bwrap: the job is every process in its PID namespace.
    Sandbox,
    /// A container of this name, stopped through the runtime.
    Container(String),
    /// `--insecure-unsandboxed-jobs`: its process group.
    Plain,
}

/// The programs the sandbox runs through, found on PATH at start-up.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub bwrap: PathBuf,
    pub prlimit: PathBuf,
    pub setpriv: PathBuf,
    /// The host's top-level directories and links (without /proc, /dev, /tmp), read at start-up.
    pub root: Vec<RootEntry>,
    /// Host paths covered by an empty tmpfs in every sandbox: the agent's state and the jobs directory.
    pub hidden: Vec<PathBuf>,
    /// Extra host paths an operator shares read-only with every job (`--job-ro-bind`: datasets, toolchains).
    pub shared_read_only: Vec<PathBuf>,
    /// The host's model cache (`--model-cache`), bound read-only at [`gpuplane_protocol::model_cache::MOUNT`].
    pub model_cache: Option<PathBuf>,
    /// Most processes (and threads) the lease's user may have.
    pub max_processes: u32,
}

/// One entry of the host's `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootEntry {
    Dir(String),
    Link { name: String, target: String },
}

/// Where the lease's directory appears inside the sandbox.
pub const LEASE_MOUNT: &str = "/lease";

/// The descriptor bwrap reads its options from (`--args`); it closes it before the job starts.
pub const OPTIONS_FD: i32 = 3;

/// A sandboxed process: the command line, and bwrap's options to hand it on [`OPTIONS_FD`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxCommand {
    pub argv: Vec<String>,
    pub options: Vec<String>,
}

impl SandboxCommand {
    /// The options as bwrap reads them: each followed by a NUL.
    pub fn options_data(&self) -> Vec<u8> {
        let mut data = Vec::with_capacity(self.options.iter().map(|o| o.len() + 1).sum());
        for option in &self.options {
            data.extend_from_slice(option.as_bytes());
            data.push(0);
        }
        data
    }

    /// A pipe holding the options, its read end to become the child's [`OPTIONS_FD`]. The write end is filled
    /// and closed by a thread of its own (bwrap reads to the end; a pipe's buffer may be smaller than the
    /// options). Both ends are close-on-exec here: only the child given the mapping gets the read end.
    pub fn options_pipe(&self) -> anyhow::Result<command_fds::FdMapping> {
        use std::io::Write;
        let (reader, mut writer) = std::io::pipe().context("creating the sandbox options pipe")?;
        let data = self.options_data();
        std::thread::Builder::new()
            .name("sandbox-options".into())
            .spawn(move || {
                // A child that died before reading them makes this fail (EPIPE): its exit is reported anyway.
                let _ = writer.write_all(&data);
            })
            .context("starting the sandbox options writer")?;
        Ok(command_fds::FdMapping { parent_fd: reader.into(), child_fd: OPTIONS_FD })
    }

    /// A `std` command that runs it with the options on their pipe (the start-up probe and the benchmark; jobs
    /// start through `jobs::spawn_process`, behind the lease network's prefix). Start it once.
    pub fn std_command(&self) -> anyhow::Result<std::process::Command> {
        let mut command = std::process::Command::new(&self.argv[0]);
        command.args(&self.argv[1..]).fd_mappings(vec![self.options_pipe()?])?;
        Ok(command)
    }
}

/// A device file to put into the sandbox's `/dev`: host path, and its path relative to `/dev` inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFile {
    pub host: PathBuf,
    pub name: String,
}

/// A host's GPU device files by GPU index, and the control devices every CUDA process needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceFiles {
    pub gpus: std::collections::BTreeMap<i32, DeviceFile>,
    pub control: Vec<DeviceFile>,
}

impl DeviceFiles {
    /// What a process holding these GPUs gets: their device files and the control devices. An index the host
    /// does not have is an error: a lease never names one, so the assignment is not to be trusted.
    pub fn for_gpus(&self, indices: &[i32]) -> anyhow::Result<Vec<DeviceFile>> {
        let mut files = Vec::with_capacity(indices.len() + self.control.len());
        for index in indices {
            let file = self.gpus.get(index).with_context(|| format!("this host has no GPU {index}"))?;
            files.push(file.clone());
        }
        files.extend(self.control.iter().cloned());
        Ok(files)
    }
}

/// One process to start in a sandbox.
#[derive(Debug)]
pub struct Launch<'a> {
    pub uid: u32,
    /// The lease's directory on the host, mounted at [`LEASE_MOUNT`].
    pub lease_dir: &'a Path,
    /// `/etc/passwd` and `/etc/group` inside (they name the lease's user, so tools that look it up work).
    pub passwd: &'a Path,
    pub group: &'a Path,
    /// Working directory inside the sandbox.
    pub cwd: &'a str,
    pub devices: &'a [DeviceFile],
    pub argv: &'a [String],
    /// The lease's volumes, mounted at `/volumes/<mount>` (read-only ones read-only).
    pub volumes: &'a [super::volume_keeper::VolumeBind],
}

impl Sandbox {
    /// Find the programs and read the host's root. Fails with what is missing.
    pub fn discover(hidden: Vec<PathBuf>, shared_read_only: Vec<PathBuf>, max_processes: u32) -> anyhow::Result<Self> {
        for path in &shared_read_only {
            if let Some(why) = unreadable_by_jobs(path) {
                eprintln!("gpuplane agent: WARNING: --job-ro-bind {}: {why}", path.display());
                tracing::warn!(path = %path.display(), "--job-ro-bind: {why}");
            }
        }
        let find = |program: &str, package: &str| {
            find_on_path(program).with_context(|| format!("`{program}` is not installed (Debian package `{package}`)"))
        };
        Ok(Self {
            bwrap: find("bwrap", "bubblewrap")?,
            prlimit: find("prlimit", "util-linux")?,
            setpriv: find("setpriv", "util-linux")?,
            root: read_root(Path::new("/"))?,
            hidden,
            shared_read_only,
            model_cache: None,
            max_processes,
        })
    }

    /// Also bind the host's model cache (an absolute path) read-only at `/models` in every sandbox.
    pub fn with_model_cache(mut self, model_cache: Option<PathBuf>) -> Self {
        self.model_cache = model_cache;
        self
    }

    /// How to start the process: bwrap with its options on [`OPTIONS_FD`], then `prlimit` and `setpriv` inside,
    /// then the job's argv. Neither the options nor the environment are on the command line: bwrap's init is
    /// the PID namespace's process 1, whose `/proc/1/cmdline` every process in the sandbox reads, and the
    /// options name host paths (the lease's directory, the agent's state). The caller passes the environment
    /// to the process, and every program on the way keeps it.
    pub fn command_line(&self, launch: &Launch<'_>) -> SandboxCommand {
        let mut a: Vec<String> = Vec::new();
        let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
        push(&["--unshare-pid", "--unshare-ipc", "--unshare-cgroup-try", "--die-with-parent", "--new-session"]);
        for entry in &self.root {
            match entry {
                RootEntry::Dir(name) => {
                    let path = format!("/{name}");
                    push(&["--ro-bind", &path, &path]);
                }
                RootEntry::Link { name, target } => push(&["--symlink", target, &format!("/{name}")]),
            }
        }
        // bwrap makes a tmpfs root's and 0755: the lease's user could not write its own /tmp or /dev/shm (Python's
        // tempfile, shared memory between ranks). Sticky and world-writable, as on a host.
        push(&["--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm"]);
        for device in launch.devices {
            let inside = format!("/dev/{}", device.name);
            push(&["--dev-bind", &device.host.to_string_lossy(), &inside]);
        }
        push(&["--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]);
        for hidden in &self.hidden {
            push(&["--tmpfs", &hidden.to_string_lossy()]);
        }
        for shared in &self.shared_read_only {
            let path = shared.to_string_lossy();
            push(&["--ro-bind", &path, &path]);
        }
        if let Some(cache) = &self.model_cache {
            // Over a host directory of that name, if the root has one.
            push(&["--ro-bind", &cache.to_string_lossy(), gpuplane_protocol::model_cache::MOUNT]);
        }
        push(&["--bind", &launch.lease_dir.to_string_lossy(), LEASE_MOUNT]);
        if !launch.volumes.is_empty() {
            // bwrap makes missing parents 0700 (root's): the lease's user must be able to enter /volumes.
            push(&["--perms", "0755", "--dir", gpuplane_protocol::volumes::MOUNT_ROOT]);
        }
        for v in launch.volumes {
            push(&[if v.read_only { "--ro-bind" } else { "--bind" }, &v.host.to_string_lossy(), &v.inside]);
        }
        push(&["--ro-bind", &launch.passwd.to_string_lossy(), "/etc/passwd"]);
        push(&["--ro-bind", &launch.group.to_string_lossy(), "/etc/group"]);
        push(&["--remount-ro", "/", "--chdir", launch.cwd]);
        let options = a;
        let mut argv: Vec<String> = Vec::new();
        let mut push = |items: &[&str]| argv.extend(items.iter().map(|s| s.to_string()));
        push(&[&self.bwrap.to_string_lossy(), "--args", &OPTIONS_FD.to_string(), "--"]);
        let nproc = format!("--nproc={0}:{0}", self.max_processes);
        push(&[&self.prlimit.to_string_lossy(), &nproc, "--"]);
        let uid = launch.uid.to_string();
        push(&[
            &self.setpriv.to_string_lossy(),
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]);
        argv.extend(launch.argv.iter().cloned());
        SandboxCommand { argv, options }
    }

    /// Start `true` in a sandbox once: proves the host can run jobs sandboxed (root, namespaces, the programs).
    pub fn probe(&self, scratch: &Path, uid: u32) -> anyhow::Result<()> {
        let lease_dir = scratch.join("lease");
        std::fs::create_dir_all(&lease_dir).with_context(|| format!("creating {}", lease_dir.display()))?;
        let passwd = scratch.join("passwd");
        let group = scratch.join("group");
        std::fs::write(&passwd, passwd_file(uid))?;
        std::fs::write(&group, group_file(uid))?;
        let argv = vec!["true".to_string()];
        let sandboxed = self.command_line(&Launch {
            uid,
            lease_dir: &lease_dir,
            passwd: &passwd,
            group: &group,
            cwd: "/",
            devices: &[],
            argv: &argv,
            volumes: &[],
        });
        let output = sandboxed
            .std_command()?
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {}", sandboxed.argv[0]))?;
        let _ = std::fs::remove_dir_all(scratch);
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        anyhow::bail!(
            "a test sandbox failed ({}): {}; the agent must run as root on a kernel with PID, IPC and mount \
             namespaces",
            output.status,
            stderr.trim()
        )
    }
}

/// `/etc/passwd` inside a sandbox: root, nobody and the lease's user (`tenant`, home `/lease/home`).
pub fn passwd_file(uid: u32) -> String {
    format!(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
         tenant:x:{uid}:{uid}:gpuplane lease user:{LEASE_MOUNT}/home:/bin/bash\n"
    )
}

pub fn group_file(uid: u32) -> String {
    format!("root:x:0:\nnogroup:x:65534:\ntenant:x:{uid}:\n")
}

pub(crate) fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| candidate.is_file())
}

/// Why jobs (an unprivileged uid of the lease) could not read a `--job-ro-bind` path, if they could not: it is
/// missing, a directory on the way does not let others through, or the path does not let others read it (a
/// `mktemp -d` directory is 0700). The sandbox binds it as it is; this says so at start, not in a job's error.
pub fn unreadable_by_jobs(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) => {
            return Some(format!(
                "{err}: jobs see nothing there (with the systemd unit's PrivateTmp, the \
                                         host's /tmp and /var/tmp are not the agent's)"
            ));
        }
    };
    for ancestor in path.ancestors().skip(1) {
        let mode = std::fs::metadata(ancestor).map(|m| m.permissions().mode()).unwrap_or(0);
        if mode & 0o001 == 0 {
            return Some(format!(
                "{} (mode {:o}) does not let other users through: jobs cannot reach it",
                ancestor.display(),
                mode & 0o7777
            ));
        }
    }
    let mode = meta.permissions().mode();
    let needed = if meta.is_dir() { 0o005 } else { 0o004 };
    (mode & needed != needed).then(|| {
        format!(
            "mode {:o} does not let other users read it: jobs run as an unprivileged uid (chmod o+rX)",
            mode & 0o7777
        )
    })
}

/// The top-level entries of `root` that a sandbox re-creates: directories are bound read-only, links are
/// re-created as links. `/proc`, `/dev` and `/tmp` get fresh instances instead.
pub fn read_root(root: &Path) -> anyhow::Result<Vec<RootEntry>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(root).with_context(|| format!("reading {}", root.display()))? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        if matches!(name.as_str(), "proc" | "dev" | "tmp") {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            entries.push(RootEntry::Link { name, target: target.to_string_lossy().into_owned() });
        } else if kind.is_dir() {
            entries.push(RootEntry::Dir(name));
        }
    }
    entries.sort_by(|a, b| entry_name(a).cmp(entry_name(b)));
    Ok(entries)
}

fn entry_name(entry: &RootEntry) -> &str {
    match entry {
        RootEntry::Dir(name) | RootEntry::Link { name, .. } => name,
    }
}

/// The processes of a sandbox started as `outer_pid` (bwrap outside): every process in the PID namespace of
/// bwrap's child, except that namespace's init. Empty when the sandbox has ended.
pub fn sandbox_processes(outer_pid: u32) -> Vec<u32> {
    let processes = list_processes();
    let Some(init) = processes.iter().find(|p| p.ppid == outer_pid).map(|p| p.pid) else { return Vec::new() };
    let Some(namespace) = pid_namespace(init) else { return Vec::new() };
    processes
        .iter()
        .filter(|p| p.pid != init && pid_namespace(p.pid).as_deref() == Some(namespace.as_str()))
        .map(|p| p.pid)
        .collect()
}

/// The processes of a sandbox besides the program it was started for (the oldest child of the namespace's
/// init): for an environment, every SSH session and whatever it left running, not the SSH server itself.
pub fn processes_besides_first(outer_pid: u32) -> Vec<u32> {
    let processes = list_processes();
    let Some(init) = processes.iter().find(|p| p.ppid == outer_pid).map(|p| p.pid) else { return Vec::new() };
    let first = processes.iter().filter(|p| p.ppid == init).min_by_key(|p| start_time(p.pid)).map(|p| p.pid);
    sandbox_processes(outer_pid).into_iter().filter(|pid| Some(*pid) != first).collect()
}

/// When a process started (clock ticks since boot: /proc/PID/stat's 22nd field).
fn start_time(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(19)?.parse().ok()))
        .unwrap_or(u64::MAX)
}

/// The processes of a job that catch `signal` (their `SigCgt` mask in `/proc/PID/status`): the ones that asked
/// to be told, such as the gpuplane runtime's ranks for SIGUSR1. A process that does not catch it (a launcher
/// such as torchrun, a script without a handler) would die of it, so it is never sent there. Those of its
/// sandbox, or, unsandboxed, of its process group; a container's are not reached.
pub fn processes_catching(pid: u32, kind: &ProcessKind, signal: u32) -> Vec<u32> {
    let candidates: Vec<u32> = match kind {
        ProcessKind::Sandbox => sandbox_processes(pid),
        ProcessKind::Plain => {
            list_processes().iter().filter(|p| process_group(p.pid) == Some(pid)).map(|p| p.pid).collect()
        }
        ProcessKind::Container(_) => Vec::new(),
    };
    candidates.into_iter().filter(|p| catches(*p, signal)).collect()
}

fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(2)?.parse().ok()
}

/// Whether the process has a handler for `signal` (bit `signal - 1` of `SigCgt`).
fn catches(pid: u32, signal: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| (1..=64).contains(&signal) && mask & (1 << (signal - 1)) != 0)
}

/// Every process running as `uid` (real uid).
pub fn processes_of_uid(uid: u32) -> Vec<u32> {
    list_processes().into_iter().filter(|p| p.uid == Some(uid)).map(|p| p.pid).collect()
}

#[derive(Debug)]
struct ProcessInfo {
    pid: u32,
    ppid: u32,
    uid: Option<u32>,
}

fn list_processes() -> Vec<ProcessInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let field = |name: &str| {
                status.lines().find_map(|line| line.strip_prefix(name)).and_then(|rest| rest.split_whitespace().next())
            };
            let ppid = field("PPid:")?.parse().ok()?;
            let uid = field("Uid:").and_then(|u| u.parse().ok());
            Some(ProcessInfo { pid, ppid, uid })
        })
        .collect()
}

fn pid_namespace(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok().map(|p| p.to_string_lossy().into_owned())
}

/// Send `signal` (a name: TERM, KILL) to these processes through the `kill` program (no unsafe code here).
pub fn signal_processes(pids: &[u32], signal: &str) {
    if !pids.is_empty() {
        run_kill(signal, &pids.iter().map(u32::to_string).collect::<Vec<_>>());
    }
}

/// `kill -SIGNAL -- TARGETS...` (pids, or `-pgid` for a process group).
pub fn run_kill(signal: &str, targets: &[String]) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .args(targets)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(err) = status {
        tracing::warn!(?targets, %err, "could not run kill");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox() -> Sandbox {
        Sandbox {
            bwrap: "/usr/bin/bwrap".into(),
            prlimit: "/usr/bin/prlimit".into(),
            setpriv: "/usr/bin/setpriv".into(),
            root: vec![
                RootEntry::Link { name: "bin".into(), target: "usr/bin".into() },
                RootEntry::Dir("etc".into()),
                RootEntry::Dir("usr".into()),
                RootEntry::Dir("var".into()),
            ],
            hidden: vec!["/var/lib/gpuplane-agent".into(), "/var/lib/gpuplane-agent-jobs".into()],
            shared_read_only: vec!["/datasets".into()],
            model_cache: Some("/srv/gpuplane/models".into()),
            max_processes: 512,
        }
    }

    fn pair_follows(line: &[String], flag: &str, a: &str, b: &str) -> bool {
        line.windows(3).any(|w| w[0] == flag && w[1] == a && w[2] == b)
    }

    #[test]
    fn the_command_line_isolates_and_drops_privileges_before_the_job() {
        let devices = vec![
            DeviceFile { host: "/dev/nvidia3".into(), name: "nvidia3".into() },
            DeviceFile { host: "/dev/nvidiactl".into(), name: "nvidiactl".into() },
        ];
        let argv = vec!["python3".to_string(), "train.py".to_string()];
        let command = sandbox().command_line(&Launch {
            uid: 200007,
            lease_dir: Path::new("/var/lib/gpuplane-agent-jobs/L"),
            passwd: Path::new("/var/lib/gpuplane-agent/leases/L/passwd"),
            group: Path::new("/var/lib/gpuplane-agent/leases/L/group"),
            cwd: "/lease/jobs/J",
            devices: &devices,
            argv: &argv,
            volumes: &[
                crate::volume_keeper::VolumeBind {
                    host: "/m/1".into(),
                    inside: "/volumes/ckpt".into(),
                    read_only: false,
                },
                crate::volume_keeper::VolumeBind {
                    host: "/m/2".into(),
                    inside: "/volumes/data".into(),
                    read_only: true,
                },
            ],
        });
        let line = command.options.as_slice();
        for flag in ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"] {
            assert!(line.contains(&flag.to_string()), "{flag} in {line:?}");
        }
        assert!(!line.iter().any(|a| a == "--unshare-net"), "the lease's namespace, entered before bwrap");
        assert!(!pair_follows(line, "--ro-bind", "/", "/"), "the host root is never bound whole");
        assert!(pair_follows(line, "--ro-bind", "/usr", "/usr"));
        assert!(pair_follows(line, "--symlink", "usr/bin", "/bin"));
        assert!(pair_follows(line, "--dev-bind", "/dev/nvidia3", "/dev/nvidia3"));
        assert!(pair_follows(line, "--bind", "/var/lib/gpuplane-agent-jobs/L", "/lease"));
        assert!(pair_follows(line, "--perms", "0755", "--dir"), "/volumes is made enterable first");
        assert!(pair_follows(line, "--bind", "/m/1", "/volumes/ckpt"), "a read-write volume");
        assert!(pair_follows(line, "--ro-bind", "/m/2", "/volumes/data"), "a read-only volume");
        assert!(pair_follows(line, "--ro-bind", "/datasets", "/datasets"));
        // The model cache, read-only, after the host's directories (a host /models would be under it).
        assert!(pair_follows(line, "--ro-bind", "/srv/gpuplane/models", "/models"), "{line:?}");
        let models = line.iter().position(|a| a == "/models").unwrap();
        assert!(line.iter().position(|a| a == "/usr").unwrap() < models, "{line:?}");
        assert!(!line.windows(2).any(|w| w[0] == "--bind" && w[1] == "/srv/gpuplane/models"), "never writable");
        // The state and jobs directories are covered after /var is bound, so the tmpfs lands on top.
        let var = line.iter().position(|a| a == "/var").unwrap();
        let hidden = line.windows(2).position(|w| w == ["--tmpfs", "/var/lib/gpuplane-agent"]).unwrap();
        let lease = line.iter().position(|a| a == "/lease").unwrap();
        assert!(var < hidden && hidden < lease, "{line:?}");
        assert!(line.windows(2).any(|w| w == ["--tmpfs", "/var/lib/gpuplane-agent-jobs"]));
        assert!(line.windows(4).any(|w| w == ["--perms", "1777", "--tmpfs", "/tmp"]), "the lease's user writes /tmp");
        assert!(line.windows(4).any(|w| w == ["--perms", "1777", "--tmpfs", "/dev/shm"]), "and /dev/shm");
        assert_eq!(line[line.len() - 2..], ["--chdir", "/lease/jobs/J"]);
        // bwrap's options reach it on a pipe, not on the command line every process inside can read: the command
        // line names no host path but the programs'. Inside: the process limit, then the unprivileged user with
        // no way back, then the job itself.
        assert_eq!(
            command.argv,
            [
                "/usr/bin/bwrap",
                "--args",
                "3",
                "--",
                "/usr/bin/prlimit",
                "--nproc=512:512",
                "--",
                "/usr/bin/setpriv",
                "--reuid=200007",
                "--regid=200007",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
                "python3",
                "train.py"
            ]
        );
    }

    #[test]
    fn without_a_model_cache_nothing_is_at_models() {
        let sandbox = Sandbox { model_cache: None, ..sandbox() };
        let argv = vec!["true".to_string()];
        let command = sandbox.command_line(&Launch {
            uid: 200007,
            lease_dir: Path::new("/var/lib/gpuplane-agent-jobs/L"),
            passwd: Path::new("/p"),
            group: Path::new("/g"),
            cwd: "/lease",
            devices: &[],
            argv: &argv,
            volumes: &[],
        });
        assert!(!command.options.iter().any(|a| a == "/models"), "{:?}", command.options);
        assert!(!command.options.iter().any(|a| a == "/volumes"), "no volumes, no /volumes");
    }

    #[test]
    fn only_a_process_that_catches_a_signal_is_counted_as_catching_it() {
        // The test runner installs no handler for SIGUSR1 (10).
        let me = std::process::id();
        assert!(!catches(me, 10), "no SIGUSR1 handler here");
        assert!(!catches(me, 0) && !catches(me, 65), "out of range");
        assert!(!catches(u32::MAX, 10), "no such process");
    }

    #[test]
    fn the_options_are_nul_terminated_for_bwraps_args() {
        let command = SandboxCommand { argv: vec![], options: vec!["--bind".into(), "/a b".into(), "/lease".into()] };
        assert_eq!(command.options_data(), b"--bind\0/a b\0/lease\0");
    }

    #[test]
    fn a_shared_path_that_jobs_cannot_read_is_said() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("gpuplane-ro-bind-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("open")).unwrap();
        for (path, mode) in [(&dir, 0o755), (&dir.join("open"), 0o755)] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::write(dir.join("open/train.py"), "").unwrap();
        std::fs::set_permissions(dir.join("open/train.py"), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(unreadable_by_jobs(&dir.join("open")), None);
        assert_eq!(unreadable_by_jobs(&dir.join("open/train.py")), None);
        std::fs::set_permissions(dir.join("open/train.py"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(unreadable_by_jobs(&dir.join("open/train.py")).unwrap().contains("mode 600"));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let why = unreadable_by_jobs(&dir.join("open")).unwrap();
        assert!(why.contains("does not let other users through"), "{why}");
        assert!(unreadable_by_jobs(&dir.join("missing")).is_some());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_root_is_read_without_proc_dev_and_tmp() {
        let dir = std::env::temp_dir().join(format!("gpuplane-root-{}", uuid::Uuid::new_v4()));
        for name in ["usr", "proc", "dev", "tmp", "etc"] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
        }
        std::os::unix::fs::symlink("usr/lib", dir.join("lib")).unwrap();
        std::fs::write(dir.join("a-file"), "").unwrap();
        let entries = read_root(&dir).unwrap();
        assert_eq!(
            entries,
            [
                RootEntry::Dir("etc".into()),
                RootEntry::Link { name: "lib".into(), target: "usr/lib".into() },
                RootEntry::Dir("usr".into()),
            ]
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_lease_user_is_named_in_passwd_and_group() {
        assert!(passwd_file(200001).contains("tenant:x:200001:200001:gpuplane lease user:/lease/home:/bin/bash\n"));
        assert!(group_file(200001).ends_with("tenant:x:200001:\n"));
    }
}
