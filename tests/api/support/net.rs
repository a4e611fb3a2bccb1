//! Test hosts in network namespaces of their own on a bridge (so traffic between them really crosses a
//! network), and files every sandboxed job can read.

use std::process::Command;

/// Test hosts: network namespaces on a bridge of the test's own, removed when dropped.
pub struct TestNet {
    bridge: String,
    hosts: Vec<String>,
    /// The third octet of the test's subnet, 10.210.<segment>.0/24: one per test, so tests run side by side.
    segment: u8,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip (iproute2)");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl TestNet {
    /// `hosts` hosts on 10.210.<segment>.0/24, the bridge (the machine itself) at .254.
    pub fn new(segment: u8, hosts: usize) -> Self {
        let id = std::process::id() % 10_000;
        let bridge = format!("gptb{id}s{segment}");
        let _ = Command::new("ip").args(["link", "del", &bridge]).status();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&["addr", "add", &format!("{}/24", Self::bridge_address(segment)), "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        let mut net = Self { bridge, hosts: Vec::new(), segment };
        for n in 1..=hosts {
            let ns = format!("gpt-{id}-s{segment}h{n}");
            let veth = format!("gpt{id}s{segment}h{n}");
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
            ip(&["netns", "add", &ns]);
            net.hosts.push(ns.clone());
            ip(&["link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns]);
            ip(&["link", "set", &veth, "master", &net.bridge, "up"]);
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", net.address(n - 1)), "dev", "eth0"]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&["-n", &ns, "route", "add", "default", "via", &Self::bridge_address(segment)]);
        }
        net
    }

    /// Where the machine itself (the control plane) is reached from the hosts.
    pub fn bridge_address(segment: u8) -> String {
        format!("10.210.{segment}.254")
    }

    /// Hosts at .41 and up: their agents derive lease subnets (100.64.41.0/24 on segment 0, 100.65.41.0/24 on
    /// segment 1, ...) no other test's agents use.
    pub fn address(&self, host: usize) -> String {
        format!("10.210.{}.{}", self.segment, host + 41)
    }

    /// `cmd`, run inside host `host`'s namespace.
    pub fn on(&self, host: usize, cmd: &Command) -> Command {
        let mut inside = Command::new("ip");
        inside.args(["netns", "exec", &self.hosts[host]]).arg(cmd.get_program()).args(cmd.get_args());
        for (key, value) in cmd.get_envs() {
            if let Some(value) = value {
                inside.env(key, value);
            }
        }
        inside
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        for ns in &self.hosts {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).status();
    }
}

/// The probe every check runs: `name=host:port` arguments, one `name open|closed` line each.
/// A directory of files every job can read (the host's /var is in every sandbox, read-only), removed by the
/// caller: a job's arguments may not hold newlines, so scripts travel as files. Each call makes a directory of
/// its own, so a test that removes its copy never takes the files from under another test running beside it.
pub fn shared_with_jobs(name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicU32, Ordering};
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir = std::path::PathBuf::from(format!("/var/tmp/gpuplane-{name}-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    dir
}
