//! Each lease's own network on this host: what a tenant's process can reach, decided here and nowhere else.
//!
//! Every lease gets a network namespace of its own on each of its nodes (`ip netns`), joined to the host by a
//! veth pair, with one address from this node's lease subnet (`gpuplane_protocol::lease_network`: the service
//! derives the same address for `MASTER_ADDR`). The host routes between leases and the outside; an nftables
//! table of this agent's own decides what crosses:
//!
//! - **the host itself** (its loopback services, the agent, anything bound to any host address): nothing. The
//!   namespace's `127.0.0.1` is its own; packets from a lease's veth to a host address are dropped (`input`),
//!   except replies to connections the host opened (the agent's SSH proxy into an environment).
//! - **the lease's other nodes**: the pairs (this lease's address, its address on a peer node), both ways,
//!   routed to the peer node's address (`ip route ... via`), unchanged (no NAT): NCCL and gloo advertise the
//!   address they see, and the peer reaches exactly that.
//! - **other leases**, on this host or any other: nothing enters a lease's veth but its pairs' traffic and
//!   replies (`forward`).
//! - **elsewhere**: `--lease-egress public` (the default) lets leases open connections to public addresses,
//!   masqueraded behind the host's; private, loopback, link-local, shared (100.64/10) and multicast ranges are
//!   refused unless `--lease-egress-allow` names them (a dataset store, a package mirror). `none`: only the pairs.
//!
//! A lease's processes run unprivileged (no capability in any namespace), so they cannot change their address,
//! routes or these rules; the veth's source addresses are checked all the same.
//!
//! RDMA: InfiniBand verbs and RoCE bypass the kernel's IP stack, so these rules do not govern them; a host with
//! `--rdma` isolates leases' RDMA traffic with partition keys on the fabric (docs/security.md).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use anyhow::Context;
use gpuplane_protocol::jobs::NodeLease;
use gpuplane_protocol::lease_network::LeaseSubnet;
use uuid::Uuid;

/// `--lease-egress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Egress {
    /// Public addresses (masqueraded), plus `--lease-egress-allow`.
    Public,
    /// Only the lease's other nodes, plus `--lease-egress-allow`.
    None,
}

/// Ranges a lease never reaches outside its own pairs, unless the operator allows them.
const NON_PUBLIC: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/3",
];

/// Where network namespaces live (as `ip netns` makes them).
const NETNS_DIR: &str = "/run/netns";

/// One lease's network as set up here.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LeaseNet {
    address: Ipv4Addr,
    veth: String,
    /// (the lease's address on a peer node, that node's address)
    peers: Vec<(Ipv4Addr, IpAddr)>,
}

/// This host's leases' networks.
#[derive(Debug)]
pub struct LeaseNetworks {
    pub subnet: LeaseSubnet,
    /// Four hex digits naming this agent's table, namespaces and interfaces (agents of a test share a host).
    tag: String,
    egress: Egress,
    egress_allow: Vec<String>,
    ip: PathBuf,
    nft: PathBuf,
    nsenter: PathBuf,
    leases: Mutex<HashMap<Uuid, LeaseNet>>,
    /// The host routes to peer nodes this agent has made, written before each is added: a start after a crash
    /// removes them (nothing else marks a route as this agent's).
    routes_file: PathBuf,
}

impl LeaseNetworks {
    /// Find `ip`, `nft` and `nsenter`, enable forwarding and (re)create this agent's nftables table. Fails with
    /// what is missing: such a host cannot isolate leases, so it runs no job.
    pub fn start(
        subnet: LeaseSubnet,
        tag: &str,
        egress: Egress,
        egress_allow: Vec<String>,
        state_dir: &Path,
    ) -> anyhow::Result<Self> {
        let find = |program: &str, package: &str| {
            super::sandbox::find_on_path(program)
                .with_context(|| format!("`{program}` is not installed (Debian package `{package}`)"))
        };
        let networks = Self {
            subnet,
            tag: tag.to_owned(),
            egress,
            egress_allow,
            ip: find("ip", "iproute2")?,
            nft: find("nft", "nftables")?,
            nsenter: find("nsenter", "util-linux")?,
            leases: Mutex::new(HashMap::new()),
            routes_file: state_dir.join("lease-routes"),
        };
        let forwarding = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap_or_default();
        if forwarding.trim() != "1" {
            std::fs::write("/proc/sys/net/ipv4/ip_forward", "1").context("enabling IPv4 forwarding")?;
            tracing::info!(
                "turned IPv4 forwarding on (net.ipv4.ip_forward=1): lease namespaces route through the host"
            );
        }
        networks.remove_dead_agents_tables();
        networks.nft_script(&networks.table_script())?;
        networks.remove_stale();
        Ok(networks)
    }

    /// Namespaces, veths and peer routes this agent left behind (it died, or stopped while leases ran): nothing
    /// runs in them any more (every sandbox dies with the agent), and the first sync makes the listed leases' anew.
    fn remove_stale(&self) {
        self.remove_tagged(&self.tag);
        let routes = std::fs::read_to_string(&self.routes_file).unwrap_or_default();
        for (peer, via) in routes.lines().filter_map(|l| l.split_once(' ')) {
            // Gone already when the peer's lease ended first, or the host rebooted.
            let _ = self.ip(&["route", "del", &format!("{peer}/32"), "via", via]);
        }
        if !routes.is_empty() {
            self.persist_routes(&[]);
        }
    }

    /// The namespaces and veths of the agent tagged `tag` on this host.
    fn remove_tagged(&self, tag: &str) {
        for name in namespaces_with_prefix(&namespace_prefix(tag)) {
            if self.ip(&["netns", "del", &name]).is_err() {
                tracing::warn!(namespace = %name, "could not remove a stale lease namespace");
            }
        }
        let veths = veth_prefix(tag);
        for entry in std::fs::read_dir("/sys/class/net").into_iter().flatten().filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&veths) {
                let _ = self.ip(&["link", "del", &name]);
            }
        }
    }

    /// Tables of other gpuplane agents of this host whose process is gone (killed, or its host name changed, so
    /// no start of it will ever name them again), with their namespaces and veths. A table says its agent's pid
    /// and start time in its comment; a table without one (an older agent's) is left as it is.
    fn remove_dead_agents_tables(&self) {
        let Ok(listed) = Command::new(&self.nft).args(["list", "tables"]).stdin(Stdio::null()).output() else {
            return;
        };
        let own = self.table();
        for table in String::from_utf8_lossy(&listed.stdout).lines().filter_map(|l| l.strip_prefix("table inet ")) {
            let Some(tag) = table.strip_prefix("gpuplane_").filter(|_| table != own) else { continue };
            let Ok(shown) =
                Command::new(&self.nft).args(["list", "table", "inet", table]).stdin(Stdio::null()).output()
            else {
                continue;
            };
            let Some(owner) = table_owner(&String::from_utf8_lossy(&shown.stdout)) else { continue };
            if agent_alive(owner) {
                continue;
            }
            tracing::info!(table, pid = owner.0, "removing the network of an agent that is gone");
            self.remove_tagged(tag);
            if let Err(err) = self.nft_script(&format!("delete table inet {table}\n")) {
                tracing::warn!(table, err = format!("{err:#}"), "could not remove a dead agent's table");
            }
        }
    }

    /// Write every peer route of the known leases, and `adding`, before they are made.
    fn persist_routes(&self, adding: &[(Ipv4Addr, IpAddr)]) {
        let mut routes: Vec<(Ipv4Addr, IpAddr)> = adding.to_vec();
        for net in self.leases.lock().unwrap_or_else(|e| e.into_inner()).values() {
            routes.extend(&net.peers);
        }
        routes.sort();
        routes.dedup();
        let text: String = routes.iter().map(|(peer, via)| format!("{peer} {via}\n")).collect();
        let temporary = self.routes_file.with_extension("tmp");
        if let Err(err) = std::fs::write(&temporary, text).and_then(|()| std::fs::rename(&temporary, &self.routes_file))
        {
            tracing::warn!(file = %self.routes_file.display(), %err, "could not record the lease routes");
        }
    }

    fn table(&self) -> String {
        format!("gpuplane_{}", self.tag)
    }

    fn veth_prefix(&self) -> String {
        veth_prefix(&self.tag)
    }

    fn namespace(&self, lease_id: Uuid) -> String {
        format!("{}{lease_id}", namespace_prefix(&self.tag))
    }

    /// The nftables table, made anew (an agent restart drops the elements; the first sync adds them again).
    pub fn table_script(&self) -> String {
        let table = self.table();
        let veths = format!("\"{}*\"", self.veth_prefix());
        let allow = if self.egress_allow.is_empty() {
            String::new()
        } else {
            format!("elements = {{ {} }}", self.egress_allow.join(", "))
        };
        let egress = match self.egress {
            Egress::Public => "accept",
            Egress::None => "drop",
        };
        let (pid, started) = own_process();
        format!(
            "table inet {table}\ndelete table inet {table}\n\
             table inet {table} {{\n\
             \tcomment \"gpuplane-agent pid {pid} started {started}\"\n\
             \tset leases {{ type ipv4_addr; }}\n\
             \tset owners {{ type ifname . ipv4_addr; }}\n\
             \tset pairs {{ type ipv4_addr . ipv4_addr; }}\n\
             \tset peers {{ type ipv4_addr; }}\n\
             \tset allowed {{ type ipv4_addr; flags interval; {allow} }}\n\
             \tset non_public {{ type ipv4_addr; flags interval; elements = {{ {non_public} }} }}\n\
             \tchain input {{\n\t\ttype filter hook input priority filter; policy accept;\n\
             \t\tiifname {veths} ct state established,related accept\n\
             \t\tiifname {veths} drop\n\t}}\n\
             \tchain forward {{\n\t\ttype filter hook forward priority filter; policy accept;\n\
             \t\tiifname {veths} meta nfproto ipv6 drop\n\
             \t\toifname {veths} meta nfproto ipv6 drop\n\
             \t\tiifname {veths} iifname . ip saddr != @owners drop\n\
             \t\tiifname {veths} ip saddr . ip daddr @pairs accept\n\
             \t\toifname {veths} ip saddr . ip daddr @pairs accept\n\
             \t\toifname {veths} ct state established,related accept\n\
             \t\toifname {veths} drop\n\
             \t\tiifname {veths} ip daddr @allowed accept\n\
             \t\tiifname {veths} ip daddr @non_public drop\n\
             \t\tiifname {veths} {egress}\n\t}}\n\
             \tchain postrouting {{\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n\
             \t\tiifname {veths} ip daddr @peers return\n\
             \t\tiifname {veths} oifname != {veths} ip saddr @leases masquerade\n\t}}\n\
             }}\n",
            non_public = NON_PUBLIC.join(", "),
        )
    }

    /// This agent's namespaces under [`NETNS_DIR`]: each name, with its lease when the name parses as one.
    fn own_namespaces(&self) -> Vec<(String, Option<Uuid>)> {
        let prefix = namespace_prefix(&self.tag);
        namespaces_with_prefix(&prefix)
            .into_iter()
            .map(|name| {
                let lease_id = name.strip_prefix(&prefix).and_then(|id| id.parse::<Uuid>().ok());
                (name, lease_id)
            })
            .collect()
    }

    /// The command prefix that runs a program in the lease's namespace; fails when it is not set up.
    pub fn enter(&self, lease_id: Uuid) -> anyhow::Result<Vec<String>> {
        let path = Path::new(NETNS_DIR).join(self.namespace(lease_id));
        anyhow::ensure!(path.exists(), "the lease's network is not set up on this host");
        Ok(vec![self.nsenter.to_string_lossy().into_owned(), format!("--net={}", path.display()), "--".into()])
    }

    /// The namespace's path, for a container runtime that joins it (`podman --network ns:PATH`).
    pub fn namespace_path(&self, lease_id: Uuid) -> PathBuf {
        Path::new(NETNS_DIR).join(self.namespace(lease_id))
    }

    /// The lease's address here, once its network is set up.
    pub fn address(&self, lease_id: Uuid) -> Option<Ipv4Addr> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner()).get(&lease_id).map(|l| l.address)
    }

    /// Make every listed lease's network as the service describes it (idempotent; cheap when nothing changed),
    /// and remove this agent's namespaces of leases no longer listed nor `kept` (still stopping here).
    pub fn sync(&self, listed: &[NodeLease], kept: &[Uuid]) {
        for lease in listed {
            if let Err(err) = self.ensure(lease) {
                tracing::error!(lease.id = %lease.lease_id, err = format!("{err:#}"), "could not set up the lease's network");
            }
        }
        for (_, lease_id) in self.own_namespaces() {
            if let Some(lease_id) = lease_id
                && !listed.iter().any(|l| l.lease_id == lease_id)
                && !kept.contains(&lease_id)
            {
                self.remove(lease_id);
            }
        }
    }

    fn ensure(&self, lease: &NodeLease) -> anyhow::Result<()> {
        let address = self
            .subnet
            .lease_address(&lease.gpu_indices)
            .with_context(|| format!("no address for GPUs {:?} in {}", lease.gpu_indices, self.subnet))?;
        let lowest = lease.gpu_indices.iter().min().copied().unwrap_or_default();
        let veth = format!("{}x{lowest}", self.veth_prefix());
        let mut peers = Vec::new();
        for peer in &lease.peers {
            let Some(peer_address) = peer.lease_address.as_deref().and_then(|a| a.parse::<Ipv4Addr>().ok()) else {
                continue;
            };
            if peer_address == address || peers.iter().any(|(known, _)| *known == peer_address) {
                // Two nodes' lease subnets overlap (agents on one host with the default subnet): no route can
                // tell them apart, so that peer stays unreachable rather than shadowing this lease.
                tracing::warn!(lease.id = %lease.lease_id, peer = %peer.address, %peer_address, "a peer node's lease address is not unique: give each node its own --lease-subnet");
                continue;
            }
            match resolve(&peer.address) {
                Some(via) => peers.push((peer_address, via)),
                None => {
                    tracing::warn!(lease.id = %lease.lease_id, peer = %peer.address, "cannot resolve a peer node's address")
                }
            }
        }
        let wanted = LeaseNet { address, veth, peers };
        let known = self.leases.lock().unwrap_or_else(|e| e.into_inner()).get(&lease.lease_id).cloned();
        if known.as_ref() == Some(&wanted) && self.namespace_path(lease.lease_id).exists() {
            return Ok(());
        }
        self.set_up(lease.lease_id, &wanted, known.as_ref())?;
        self.leases.lock().unwrap_or_else(|e| e.into_inner()).insert(lease.lease_id, wanted);
        Ok(())
    }

    fn set_up(&self, lease_id: Uuid, net: &LeaseNet, before: Option<&LeaseNet>) -> anyhow::Result<()> {
        let ns = self.namespace(lease_id);
        let (address, gateway, veth) = (net.address.to_string(), self.subnet.gateway().to_string(), net.veth.as_str());
        if !self.namespace_path(lease_id).exists() {
            // A veth of that name is an ended lease's whose namespace some process still held: not this one's.
            if Path::new("/sys/class/net").join(veth).exists() {
                self.ip(&["link", "del", veth])?;
            }
            self.ip(&["netns", "add", &ns])?;
        }
        if !Path::new("/sys/class/net").join(veth).exists() {
            self.ip(&["link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
        }
        self.ip(&["addr", "replace", &format!("{gateway}/32"), "dev", veth])?;
        self.ip(&["link", "set", veth, "up"])?;
        self.ip(&["route", "replace", &format!("{address}/32"), "dev", veth])?;
        self.ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        self.ip(&["-n", &ns, "addr", "replace", &format!("{address}/32"), "dev", "eth0"])?;
        self.ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        self.ip(&["-n", &ns, "route", "replace", &format!("{gateway}/32"), "dev", "eth0", "scope", "link"])?;
        self.ip(&["-n", &ns, "route", "replace", "default", "via", &gateway, "dev", "eth0"])?;
        let table = self.table();
        let mut script = format!(
            "add element inet {table} leases {{ {address} }}\nadd element inet {table} owners {{ \"{veth}\" . {address} }}\n"
        );
        self.persist_routes(&net.peers);
        for (peer, via) in &net.peers {
            script.push_str(&format!(
                "add element inet {table} pairs {{ {address} . {peer}, {peer} . {address} }}\n\
                 add element inet {table} peers {{ {peer} }}\n"
            ));
            if let Err(err) = self.ip(&["route", "replace", &format!("{peer}/32"), "via", &via.to_string()]) {
                tracing::warn!(lease.id = %lease_id, %peer, %via, err = format!("{err:#}"), "no route to a peer node");
            }
        }
        if let Some(before) = before {
            for (peer, _) in before.peers.iter().filter(|p| !net.peers.iter().any(|n| n.0 == p.0)) {
                script.push_str(&self.forget_peer(net.address, *peer));
            }
        }
        self.nft_script(&script)?;
        tracing::info!(lease.id = %lease_id, %address, peers = net.peers.len(), "lease network ready");
        Ok(())
    }

    fn forget_peer(&self, address: Ipv4Addr, peer: Ipv4Addr) -> String {
        let _ = self.ip(&["route", "del", &format!("{peer}/32")]);
        let table = self.table();
        format!(
            "delete element inet {table} pairs {{ {address} . {peer}, {peer} . {address} }}\n\
             delete element inet {table} peers {{ {peer} }}\n"
        )
    }

    /// The lease has ended here: its namespace (and with it both ends of the veth and the route to it), its
    /// routes to peers and its rules go.
    pub fn remove(&self, lease_id: Uuid) {
        let known = self.leases.lock().unwrap_or_else(|e| e.into_inner()).remove(&lease_id);
        if let Some(net) = known {
            let table = self.table();
            let mut script = format!(
                "delete element inet {table} leases {{ {0} }}\ndelete element inet {table} owners {{ \"{1}\" . {0} }}\n",
                net.address, net.veth
            );
            for (peer, _) in &net.peers {
                script.push_str(&self.forget_peer(net.address, *peer));
            }
            // Forgotten once gone: a death just before leaves them listed, and the next start's delete is harmless.
            self.persist_routes(&[]);
            if let Err(err) = self.nft_script(&script) {
                tracing::warn!(lease.id = %lease_id, err = format!("{err:#}"), "could not remove the lease's rules");
            }
        }
        if self.namespace_path(lease_id).exists()
            && let Err(err) = self.ip(&["netns", "del", &self.namespace(lease_id)])
        {
            tracing::warn!(lease.id = %lease_id, err = format!("{err:#}"), "could not remove the lease's network namespace");
        }
    }

    /// The agent is stopping (its leases' processes have ended): every lease's namespace, veth, routes to peers
    /// and the agent's nftables table go, so a stopped agent leaves the host's network as it found it. The next
    /// start makes its listed leases' anew.
    pub fn tear_down(&self) {
        let known: Vec<Uuid> = self.leases.lock().unwrap_or_else(|e| e.into_inner()).keys().copied().collect();
        for lease_id in known {
            self.remove(lease_id);
        }
        self.remove_stale();
        if let Err(err) = self.nft_script(&format!("delete table inet {}\n", self.table())) {
            tracing::warn!(err = format!("{err:#}"), "could not remove the agent's nftables table");
        }
        tracing::info!(table = %self.table(), "lease networks removed");
    }

    fn ip(&self, args: &[&str]) -> anyhow::Result<()> {
        run(Command::new(&self.ip).args(args), &format!("ip {}", args.join(" ")))
    }

    fn nft_script(&self, script: &str) -> anyhow::Result<()> {
        use std::io::Write;
        let mut child = Command::new(&self.nft)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("running nft")?;
        child.stdin.take().context("nft's stdin")?.write_all(script.as_bytes())?;
        succeeded(&child.wait_with_output()?, "nft")
    }
}

fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    succeeded(&command.stdin(Stdio::null()).output().with_context(|| format!("running {what}"))?, what)
}

/// A finished program's verdict: its failure carries its exit status and what it printed on stderr.
fn succeeded(output: &std::process::Output, what: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        output.status.success(),
        "{what} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

/// A node's address as an IP: itself, or what its name resolves to.
fn resolve(address: &str) -> Option<IpAddr> {
    if let Ok(ip) = address.parse() {
        return Some(ip);
    }
    (address, 0).to_socket_addrs().ok()?.map(|a| a.ip()).find(IpAddr::is_ipv4)
}

/// This node's lease subnet when `--lease-subnet` is not given: a /24 of 100.64.0.0/10 named by the low 14 bits
/// of the node's IPv4 address (distinct for hosts of one /18), else by a hash of its host name (host-local:
/// multi-node leases then need `--lease-subnet`).
pub fn default_subnet(address: &str, hostname: &str) -> (LeaseSubnet, bool) {
    let (bits, from_address) = match address.parse::<Ipv4Addr>() {
        Ok(ip) => (u32::from(ip), true),
        Err(_) => (fnv1a(hostname.as_bytes()), false),
    };
    let index = bits & 0x3fff;
    let network = Ipv4Addr::new(100, 64 + (index >> 8) as u8, (index & 0xff) as u8, 0);
    (LeaseSubnet { network, prefix: 24 }, from_address)
}

/// Interface names of the veths of the agent tagged `tag`: `gp<tag>*`.
fn veth_prefix(tag: &str) -> String {
    format!("gp{tag}")
}

/// Names of the namespaces of the agent tagged `tag`: `gpuplane-<tag>-<lease id>`.
fn namespace_prefix(tag: &str) -> String {
    format!("gpuplane-{tag}-")
}

fn namespaces_with_prefix(prefix: &str) -> Vec<String> {
    std::fs::read_dir(NETNS_DIR)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(prefix))
        .collect()
}

/// This process's pid and start time (clock ticks after boot, /proc/self/stat's 22nd field): together they name
/// this run of the agent, where a pid alone may be reused.
fn own_process() -> (u32, u64) {
    let pid = std::process::id();
    (pid, process_start(pid).unwrap_or_default())
}

fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// The (pid, start time) a table's comment names, from `nft list table`'s output.
fn table_owner(listing: &str) -> Option<(u32, u64)> {
    let comment = listing.lines().find_map(|l| l.trim().strip_prefix("comment \"gpuplane-agent pid "))?;
    let (pid, rest) = comment.split_once(" started ")?;
    Some((pid.parse().ok()?, rest.trim_end_matches('"').parse().ok()?))
}

/// Whether the agent run (pid, start time) still runs.
fn agent_alive((pid, started): (u32, u64)) -> bool {
    process_start(pid) == Some(started)
}

/// Four hex digits for this agent's names, from its host name.
pub fn tag(hostname: &str) -> String {
    format!("{:04x}", fnv1a(hostname.as_bytes()) & 0xffff)
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |hash, b| (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tables_comment_names_its_agents_run_and_only_that_run_is_alive() {
        let listing =
            "table inet gpuplane_ab12 {\n\tcomment \"gpuplane-agent pid 4242 started 98765\"\n\tset leases {\n";
        assert_eq!(table_owner(listing), Some((4242, 98765)));
        assert_eq!(table_owner("table inet gpuplane_ab12 {\n\tset leases {\n"), None, "an older agent's table");
        let (pid, started) = own_process();
        assert!(started > 0 && agent_alive((pid, started)));
        assert!(!agent_alive((pid, started + 1)), "the pid reused by another process");
        assert!(!agent_alive((u32::MAX, started)), "no such process");
    }

    #[test]
    fn the_default_subnet_follows_the_address_and_stays_in_the_shared_range() {
        let (a, from_address) = default_subnet("10.77.0.1", "node-a");
        assert!(from_address);
        assert_eq!(a.to_string(), "100.64.1.0/24");
        assert_eq!(default_subnet("10.77.1.2", "x").0.to_string(), "100.65.2.0/24");
        assert_eq!(default_subnet("10.77.63.255", "x").0.to_string(), "100.127.255.0/24");
        let (named, from_address) = default_subnet("gpu-node-01", "gpu-node-01");
        assert!(!from_address);
        assert_eq!(named.network.octets()[0], 100);
        assert!((64..128).contains(&named.network.octets()[1]));
        assert_eq!(tag("node-a").len(), 4);
        assert_ne!(tag("node-a"), tag("node-b"));
    }
}
