//! `gpuplane agent` flags, and the parsers that validate them at the edge.

use std::path::PathBuf;

use clap::Args;

pub use super::simulated::{InjectXid, SimulateSpec};

/// Run the node agent on a GPU host (or `--probe` to print what it would report).
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// Base URL of the gpuplane service, e.g. http://10.0.0.1:8080. Required unless --probe.
    #[arg(long, env = "GPUPLANE_SERVER", required_unless_present = "probe")]
    pub server: Option<String>,
    /// Join token minted by an operator for the pool this node joins. Optional when a saved credential exists.
    /// Prefer --join-token-file or the environment: a flag's value is visible to every user of the host in `ps`.
    #[arg(long, env = "GPUPLANE_JOIN_TOKEN", hide_env_values = true, conflicts_with = "join_token_file")]
    pub join_token: Option<String>,
    /// A file holding the join token (e.g. /etc/gpuplane/join-token, mode 0600).
    #[arg(long, env = "GPUPLANE_JOIN_TOKEN_FILE", value_name = "PATH")]
    pub join_token_file: Option<PathBuf>,
    /// PEM file of a private CA to trust for the server's certificate, in addition to the system's roots.
    #[arg(long, env = "GPUPLANE_CA_CERT", value_name = "PATH")]
    pub ca_cert: Option<PathBuf>,
    /// Development only: allow a plain http:// server that is not on loopback. Join tokens, credentials and job
    /// specs then cross the network in clear.
    #[arg(long, env = "GPUPLANE_AGENT_INSECURE_HTTP")]
    pub insecure_http: bool,
    /// Where the agent keeps its credential and job records between restarts (created 0700; no job ever sees it).
    #[arg(long, env = "GPUPLANE_AGENT_STATE_DIR", default_value = "/var/lib/gpuplane-agent")]
    pub state_dir: PathBuf,
    /// Where leases' files live (one directory per lease, wiped when the lease ends). Must not contain the state
    /// directory nor lie inside it. Default: the state directory's path with `-jobs` appended.
    #[arg(long, env = "GPUPLANE_AGENT_JOBS_DIR", value_name = "PATH")]
    pub jobs_dir: Option<PathBuf>,
    /// The uids (and gids) jobs run as, one per lease on this host, as FIRST-LAST. No other account of the host
    /// may use them.
    #[arg(long, env = "GPUPLANE_AGENT_JOB_UIDS", default_value = "200000-209999", value_parser = UidRange::parse)]
    pub job_uids: UidRange,
    /// Most processes and threads one lease's jobs may run at once.
    #[arg(long, env = "GPUPLANE_AGENT_JOB_MAX_PROCESSES", default_value_t = 16384, value_parser = clap::value_parser!(u32).range(16..))]
    pub job_max_processes: u32,
    /// A host directory every job may read (datasets, toolchains, scripts); repeatable. Jobs run as an
    /// unprivileged uid: the path must let other users read it (the agent warns at start when it does not). Jobs
    /// get a fresh /tmp; with the systemd unit (PrivateTmp) the host's /tmp and /var/tmp are not the agent's, so
    /// share a directory outside them (e.g. /srv/gpuplane/shared). In the environment, comma-separated.
    #[arg(long, env = "GPUPLANE_AGENT_JOB_RO_BIND", value_delimiter = ',', value_name = "PATH")]
    pub job_ro_bind: Vec<PathBuf>,
    /// A volume store this host offers, as KIND=DIR; repeatable, one of each kind. `host=DIR`: volumes kept on
    /// this host's disk; `pool=DIR`: the pool's shared filesystem, mounted at DIR on every host of the pool. The
    /// images go in DIR/images (docs/volumes.md). In the environment, comma-separated.
    #[arg(long, env = "GPUPLANE_AGENT_VOLUME_STORE", value_delimiter = ',', value_name = "KIND=DIR", value_parser = crate::volume_keeper::StoreSpec::parse)]
    pub volume_store: Vec<crate::volume_keeper::StoreSpec>,
    /// The read-only model cache this host offers its leases: a directory in the Hugging Face hub layout
    /// (DIR/hub/models--ORG--NAME/...), mounted read-only at /models in every lease's sandbox and image job, with
    /// HF_HOME=/models unless the job sets its own; the agent reports the models it holds. Fill it with
    /// `gpuplane-agent model-cache fill`. Per host on a local disk, or per pool on the pool's shared filesystem,
    /// mounted at the same path on every host (docs/volumes.md). Jobs run as an unprivileged uid: it must let
    /// other users read it (the agent warns at start when it does not).
    #[arg(long, env = "GPUPLANE_AGENT_MODEL_CACHE", value_name = "DIR")]
    pub model_cache: Option<PathBuf>,
    /// Ports the agent gives leases' SSH environments, as FIRST-LAST (open them in the host's firewall to tenants).
    #[arg(long, env = "GPUPLANE_AGENT_ENV_PORTS", default_value = "20000-20999", value_parser = PortRange::parse)]
    pub env_ports: PortRange,
    /// Ports the agent forwards the service's gateway on to the jobs that serve, as FIRST-LAST (open them in the
    /// host's firewall to the service only; a connection without the replica's token reaches nothing).
    #[arg(long, env = "GPUPLANE_AGENT_SERVE_PORTS", default_value = "21000-21999", value_parser = PortRange::parse)]
    pub serve_ports: PortRange,
    /// The SSH server environments run (Debian's openssh-server), inside the lease's sandbox.
    #[arg(long, env = "GPUPLANE_AGENT_SSHD", default_value = "/usr/sbin/sshd", value_name = "PATH")]
    pub sshd: PathBuf,
    /// The container runtime for jobs that name an image.
    #[arg(long, env = "GPUPLANE_AGENT_CONTAINER_RUNTIME", value_enum, default_value = "docker")]
    pub container_runtime: ContainerRuntime,
    /// Development only: run jobs WITHOUT the sandbox, as the agent's own user, seeing every GPU and process of
    /// the host. Never on a host that serves tenants.
    #[arg(long, env = "GPUPLANE_AGENT_INSECURE_UNSANDBOXED_JOBS")]
    pub insecure_unsandboxed_jobs: bool,
    /// Simulated GPUs instead of NVML, as MODEL:COUNT, e.g. h100:8 (models: rtx4090, a10, a100-40g, a100-80g,
    /// h100, h200, b200).
    #[arg(long, env = "GPUPLANE_AGENT_SIMULATE", value_name = "MODEL:COUNT", value_parser = SimulateSpec::parse)]
    pub simulate: Option<SimulateSpec>,
    /// Host name to register as (default: the machine's host name).
    #[arg(long, env = "GPUPLANE_AGENT_HOSTNAME")]
    pub hostname: Option<String>,
    /// Address other nodes and tenants reach this host at: jobs' MASTER_ADDR, environments' SSH lines. Default:
    /// the address of the default route's interface, else the host name (simulated hosts: the host name).
    #[arg(long, env = "GPUPLANE_AGENT_ADDRESS")]
    pub address: Option<String>,
    /// The IPv4 subnet (a /16 to /24) this host gives its leases' network namespaces, routed to this host's
    /// address by the lease's other nodes: like a pod CIDR, one per host, distinct across hosts. Default: a /24
    /// of 100.64.0.0/10 named by the low 14 bits of `--address` (distinct for hosts of one /18); with a host
    /// name as the address, a host-local one (multi-node leases then need this flag).
    #[arg(long, env = "GPUPLANE_AGENT_LEASE_SUBNET", value_name = "CIDR", value_parser = parse_lease_subnet)]
    pub lease_subnet: Option<gpuplane_protocol::lease_network::LeaseSubnet>,
    /// Where leases may open connections besides their own nodes: `public` addresses (masqueraded), or `none`.
    #[arg(long, env = "GPUPLANE_AGENT_LEASE_EGRESS", value_enum, default_value = "public")]
    pub lease_egress: super::lease_net::Egress,
    /// A private address or network leases may reach all the same (a dataset store, a package mirror), as
    /// A.B.C.D or A.B.C.D/P; repeatable. In the environment, comma-separated.
    #[arg(long, env = "GPUPLANE_AGENT_LEASE_EGRESS_ALLOW", value_delimiter = ',', value_name = "CIDR", value_parser = parse_ipv4_network)]
    pub lease_egress_allow: Vec<String>,
    /// Inter-node network bandwidth, Gbit/s. Default: the link speed of the default route's interface
    /// (/sys/class/net/IFACE/speed), else 100 (simulated hosts: 100).
    #[arg(long, env = "GPUPLANE_AGENT_NETWORK_GBPS", value_parser = clap::value_parser!(i32).range(1..))]
    pub network_gbps: Option<i32>,
    /// The inter-node network supports RDMA (InfiniBand/RoCE): `--rdma`, `--rdma=false`. Default: whether
    /// /sys/class/infiniband lists a device (simulated hosts: false).
    #[arg(long, env = "GPUPLANE_AGENT_RDMA", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_name = "BOOL", value_parser = clap::builder::BoolishValueParser::new())]
    pub rdma: Option<bool>,
    /// Serve the latest GPU sample for Prometheus at http://ADDR/metrics, in dcgm-exporter's names
    /// (DCGM_FI_DEV_GPU_UTIL, ...). Bind a management address: jobs must not reach it. Off by default.
    #[arg(long, env = "GPUPLANE_AGENT_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Print the host facts and one telemetry sample as JSON, then exit.
    #[arg(long, env = "GPUPLANE_AGENT_PROBE")]
    pub probe: bool,
    /// Simulation only: report XID CODE on GPU GPU_INDEX once, in the second sampling round.
    #[arg(long, env = "GPUPLANE_AGENT_INJECT_XID", value_name = "GPU_INDEX:CODE", value_parser = InjectXid::parse, requires = "simulate")]
    pub inject_xid: Option<InjectXid>,
    /// Simulation only: the NVIDIA driver version the host reports (default 550.54.15).
    #[arg(long, env = "GPUPLANE_AGENT_DRIVER_VERSION", value_name = "VERSION", requires = "simulate", value_parser = parse_version_arg)]
    pub driver_version: Option<String>,
    /// Simulation only: the CUDA version the host reports (default 12.4).
    #[arg(long, env = "GPUPLANE_AGENT_CUDA_VERSION", value_name = "VERSION", requires = "simulate", value_parser = parse_version_arg)]
    pub cuda_version: Option<String>,
    /// UDP port of the echo listener the lease's other nodes probe round trips against (0: any free port,
    /// registered with the node). Open it in the host's firewall between GPU hosts.
    #[arg(long, env = "GPUPLANE_AGENT_ECHO_PORT", default_value_t = 0)]
    pub echo_port: u16,
    /// Simulation only: answer echo probes this many milliseconds late (to exercise the latency alert).
    #[arg(long, env = "GPUPLANE_AGENT_SIMULATE_ECHO_DELAY_MS", value_name = "MS", default_value_t = 0, requires = "simulate",
          value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub simulate_echo_delay_ms: u64,
    /// Samples kept while the service is unreachable; beyond it the oldest are dropped.
    #[arg(long, env = "GPUPLANE_AGENT_MAX_BUFFERED_SAMPLES", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_buffered_samples: u32,
}

fn parse_lease_subnet(text: &str) -> Result<gpuplane_protocol::lease_network::LeaseSubnet, String> {
    gpuplane_protocol::lease_network::LeaseSubnet::parse(text)
}

/// `--lease-egress-allow`: an IPv4 address or network, as nftables takes it.
fn parse_ipv4_network(text: &str) -> Result<String, String> {
    let (address, prefix) = text.split_once('/').unwrap_or((text, "32"));
    let address: std::net::Ipv4Addr = address.parse().map_err(|_| format!("`{address}` is not an IPv4 address"))?;
    let prefix: u8 =
        prefix.parse().ok().filter(|p| *p <= 32).ok_or_else(|| format!("`{prefix}` is not a prefix (0-32)"))?;
    Ok(format!("{address}/{prefix}"))
}

/// `--driver-version` / `--cuda-version`: dotted numbers, as NVML prints them.
fn parse_version_arg(text: &str) -> Result<String, String> {
    gpuplane_protocol::versions::parse_version(text)
        .map(|_| text.to_owned())
        .ok_or_else(|| format!("expected 1-4 dot-separated numbers, e.g. 470.57.02, got `{text}`"))
}

/// `--container-runtime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ContainerRuntime {
    /// Docker with the NVIDIA Container Toolkit (`--gpus`).
    Docker,
    /// Podman with the toolkit's CDI specs (`--device nvidia.com/gpu=N`).
    Podman,
}

impl ContainerRuntime {
    /// The program it is run as.
    pub fn program(self) -> &'static str {
        match self {
            ContainerRuntime::Docker => "docker",
            ContainerRuntime::Podman => "podman",
        }
    }
}

/// `--job-uids FIRST-LAST`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    pub first: u32,
    pub last: u32,
}

impl UidRange {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (first, last) =
            text.split_once('-').ok_or_else(|| format!("expected FIRST-LAST, e.g. 200000-209999, got `{text}`"))?;
        let number = |s: &str| s.trim().parse::<u32>().map_err(|_| format!("`{s}` is not a uid"));
        let (first, last) = (number(first)?, number(last)?);
        if first < 1000 {
            return Err(format!("job uids start at 1000 or above (system accounts live below), got {first}"));
        }
        if last < first || last >= 4_294_967_294 {
            return Err(format!("expected FIRST <= LAST < 4294967294, got {first}-{last}"));
        }
        Ok(Self { first, last })
    }

    pub fn contains(&self, uid: u32) -> bool {
        (self.first..=self.last).contains(&uid)
    }
}

/// `--env-ports FIRST-LAST`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (first, last) =
            text.split_once('-').ok_or_else(|| format!("expected FIRST-LAST, e.g. 20000-20999, got `{text}`"))?;
        let number = |s: &str| s.trim().parse::<u16>().map_err(|_| format!("`{s}` is not a port"));
        let (first, last) = (number(first)?, number(last)?);
        if first < 1024 || last < first {
            return Err(format!("expected 1024 <= FIRST <= LAST <= 65535, got {first}-{last}"));
        }
        Ok(Self { first, last })
    }

    /// The first port of the range that is not `taken` and that nothing else on the host listens on (`flag`
    /// names the range in the error).
    pub fn free(&self, taken: impl Fn(u16) -> bool, flag: &str) -> anyhow::Result<u16> {
        (self.first..=self.last)
            .find(|port| !taken(*port) && std::net::TcpListener::bind(("0.0.0.0", *port)).is_ok())
            .ok_or_else(|| anyhow::anyhow!("no free port in {flag}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_ranges_stay_clear_of_system_accounts() {
        assert_eq!(UidRange::parse("200000-200009").unwrap(), UidRange { first: 200000, last: 200009 });
        assert!(UidRange::parse("0-10").unwrap_err().contains("1000 or above"));
        assert!(UidRange::parse("5000-4000").unwrap_err().contains("FIRST <= LAST"));
        assert!(UidRange::parse("5000").unwrap_err().contains("FIRST-LAST"));
        assert!(UidRange::parse("a-b").unwrap_err().contains("not a uid"));
    }

    #[test]
    fn inject_xid_parses_and_rejects_garbage() {
        assert_eq!(InjectXid::parse("1:79").unwrap(), InjectXid { gpu_index: 1, code: 79 });
        assert!(InjectXid::parse("79").unwrap_err().contains("GPU_INDEX:CODE"));
        assert!(InjectXid::parse("-1:79").unwrap_err().contains("GPU_INDEX"));
        assert!(InjectXid::parse("0:0").unwrap_err().contains("positive"));
        assert!(InjectXid::parse("0:x").unwrap_err().contains("CODE"));
    }
}
