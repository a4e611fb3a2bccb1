//! The wire protocol between node agents and the service: registration and heartbeats.
//! Shared by the server routes (`agents::routes`) and the agent program (`agent`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One GPU as the node's driver reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GpuFacts {
    /// Index as CUDA_VISIBLE_DEVICES counts (0-63).
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 63))]
    pub index: i32,
    /// NVML UUID, e.g. `GPU-5a1c...`.
    #[cfg_attr(
        feature = "server",
        schema(
            min_length = 1,
            max_length = 128,
            pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
        )
    )]
    pub uuid: String,
    /// NVML name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Total framebuffer memory, bytes.
    pub memory_bytes: i64,
}

/// What a node agent tells the service about its host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NodeFacts {
    #[cfg_attr(feature = "server", schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$"))]
    pub hostname: String,
    /// Address other nodes and tenants reach this host at.
    #[cfg_attr(
        feature = "server",
        schema(min_length = 1, max_length = 255, pattern = r"^[^\s\u0000-\u001f\u007f-\u009f]+$")
    )]
    pub address: String,
    #[cfg_attr(feature = "server", schema(min_items = 1, max_items = 64))]
    pub gpus: Vec<GpuFacts>,
    /// `nvlink` when the GPUs are connected by NVLink, else `pcie`.
    pub intra_link: IntraLink,
    /// GPU-to-GPU bandwidth, GB/s, when known.
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 100000))]
    pub intra_link_gbps: Option<i32>,
    /// GPU-to-GPU topology matrix as `nvidia-smi topo -m` prints it (`X`, `NV18`, `PIX`, `PXB`, `NODE`, `SYS`),
    /// row and column i being GPU index i.
    #[serde(default)]
    pub topology: Option<Vec<Vec<String>>>,
    /// NVIDIA driver version, e.g. `550.54.15` (judged against the minimum: see `GET /v1/admin/nodes/{id}`).
    #[serde(default)]
    #[cfg_attr(
        feature = "server",
        schema(min_length = 1, max_length = 64, pattern = r"^[^\u0000-\u001f\u007f-\u009f]+$")
    )]
    pub driver_version: Option<String>,
    /// CUDA version, e.g. `12.4`.
    #[serde(default)]
    #[cfg_attr(
        feature = "server",
        schema(min_length = 1, max_length = 64, pattern = r"^[^\u0000-\u001f\u007f-\u009f]+$")
    )]
    pub cuda_version: Option<String>,
    /// Inter-node network bandwidth, Gbit/s.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 100000))]
    pub network_gbps: i32,
    /// Whether the inter-node network supports RDMA (InfiniBand/RoCE).
    #[serde(default)]
    pub rdma: bool,
    /// UDP port of the agent's echo listener at `address`: the lease's other nodes probe round trips to it.
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 65535))]
    pub echo_port: Option<i32>,
    /// The IPv4 subnet this node gives its leases' network namespaces (`100.64.7.0/24`, a /16 to /24), routed
    /// to this node's `address` by the lease's other nodes. Absent: the node runs jobs on its own network
    /// (an agent with `--insecure-unsandboxed-jobs`, or an older agent).
    #[serde(default)]
    #[cfg_attr(
        feature = "server",
        schema(pattern = r"^[0-9]{1,3}(\.[0-9]{1,3}){3}/(1[6-9]|2[0-4])$", example = "100.64.7.0/24")
    )]
    pub lease_subnet: Option<String>,
    /// What this host can launch jobs with ([`LAUNCHERS`]): each one found, with its version when it tells one.
    /// Absent: not looked for (an older agent); the service then does not know what the host can run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<std::collections::BTreeMap<String, Option<String>>>))]
    pub launchers: Option<Launchers>,
}

/// The launchers an agent looks for, by the name it reports them under: `python3`; `torch` (found by that
/// `python3`, with its distribution's version); `torchrun`, `deepspeed`, `vllm`, `accelerate` and `sshd` on the
/// PATH jobs see; `container_runtime` (the agent's `--container-runtime`, docker or podman); `gpuplane_runtime`
/// (the Python package of the job runtime, found by that `python3`).
pub const LAUNCHERS: [&str; 9] = [
    "python3",
    "torch",
    "torchrun",
    "deepspeed",
    "vllm",
    "accelerate",
    "sshd",
    "container_runtime",
    "gpuplane_runtime",
];

/// Launchers found on a host: name ([`LAUNCHERS`]) -> version (None when the launcher printed none). A name
/// that is absent was not found.
pub type Launchers = std::collections::BTreeMap<String, Option<String>>;

/// Longest launcher version kept (characters); longer output is cut by the agent and refused by the service.
pub const MAX_LAUNCHER_VERSION_CHARS: usize = 64;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "server", schema(example = json!({"join_token": "gpj_...", "node": {"hostname": "gpu-node-01", "address": "10.0.0.11",
    "gpus": [{"index": 0, "uuid": "GPU-0a1b2c3d-0000-0000-0000-000000000000", "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85520809984u64}],
    "intra_link": "nvlink", "driver_version": "550.54.15", "cuda_version": "12.4", "network_gbps": 400, "rdma": true}})))]
pub struct RegisterRequest {
    /// A join token minted by an operator for the pool this node joins.
    pub join_token: String,
    pub node: NodeFacts,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RegisterResponse {
    pub node_id: Uuid,
    pub pool_id: Uuid,
    /// Credential for `/v1/agent/*` (Bearer). Re-registering the same host rotates it.
    pub agent_token: String,
    /// Seconds between heartbeats.
    pub heartbeat_interval_s: u32,
}

/// One GPU's telemetry at one instant, named after the NVIDIA DCGM fields it carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GpuSample {
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 63))]
    pub gpu_index: i32,
    /// When the sample was taken (UTC).
    #[serde(deserialize_with = "crate::time::sane_time")]
    pub at: DateTime<Utc>,
    /// DCGM_FI_DEV_GPU_UTIL, percent.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 100))]
    pub gpu_util: f32,
    /// DCGM_FI_DEV_MEM_COPY_UTIL, percent.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 100))]
    pub mem_copy_util: f32,
    /// DCGM_FI_DEV_FB_USED, MiB.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 4194304))]
    pub fb_used_mib: i64,
    /// DCGM_FI_DEV_FB_FREE, MiB.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 4194304))]
    pub fb_free_mib: i64,
    /// DCGM_FI_DEV_POWER_USAGE, watts.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 5000))]
    pub power_w: f32,
    /// DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, millijoules since driver load (a counter).
    #[cfg_attr(feature = "server", schema(minimum = 0))]
    pub energy_mj: i64,
    /// DCGM_FI_DEV_GPU_TEMP, Celsius.
    #[cfg_attr(feature = "server", schema(minimum = -40, maximum = 150))]
    pub gpu_temp_c: f32,
    /// DCGM_FI_DEV_MEMORY_TEMP, Celsius (not every GPU reports it).
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(minimum = -40, maximum = 150))]
    pub mem_temp_c: Option<f32>,
    /// DCGM_FI_DEV_SM_CLOCK, MHz.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 10000))]
    pub sm_clock_mhz: i32,
    /// DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, GB/s (absent without NVLink).
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 100000))]
    pub nvlink_bandwidth_gbps: Option<f32>,
    /// Number of XID events since the previous sample (DCGM_FI_DEV_XID_ERRORS keeps only the last one).
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 100000))]
    pub xid_count: i32,
    /// The XID codes seen since the previous sample.
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(max_items = 64))]
    pub xid_codes: Vec<i32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// Samples since the last delivered heartbeat; after an outage, everything buffered (oldest first).
    #[cfg_attr(feature = "server", schema(max_items = 4096))]
    pub samples: Vec<GpuSample>,
    /// The NVIDIA driver version now (an upgraded host says so here without registering again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "server",
        schema(min_length = 1, max_length = 64, pattern = r"^[^\u0000-\u001f\u007f-\u009f]+$")
    )]
    pub driver_version: Option<String>,
    /// The CUDA version now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "server",
        schema(min_length = 1, max_length = 64, pattern = r"^[^\u0000-\u001f\u007f-\u009f]+$")
    )]
    pub cuda_version: Option<String>,
    /// Round trips measured since the last heartbeat to the other nodes of this node's multi-node leases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "server", schema(max_items = 1024))]
    pub latency: Vec<PeerLatency>,
    /// Optimizer steps the gpuplane runtime measured in this node's jobs since the last delivered heartbeat,
    /// oldest first (buffered through outages like the samples). Only this node's own assignments are accepted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "server", schema(max_items = 1024))]
    pub steps: Vec<crate::jobs::JobStep>,
    /// The host's launchers, sent when they changed since registration (or the last heartbeat that carried
    /// them): software installed or removed while the agent runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<std::collections::BTreeMap<String, Option<String>>>))]
    pub launchers: Option<Launchers>,
    /// The UDP port of the agent's echo listener, sent with the first heartbeat after it starts: an agent that
    /// restarts with its saved credential may listen on another port, and its peers' probes must follow it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 65535))]
    pub echo_port: Option<i32>,
    /// The volume stores this agent offers (`--volume-store`), with their space now; none when it offers none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "server", schema(max_items = 2))]
    pub volume_stores: Vec<crate::volumes::VolumeStore>,
    /// The volumes this agent holds or was asked to destroy, as they are now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "server", schema(max_items = 4096))]
    pub volumes: Vec<crate::volumes::VolumeReport>,
    /// The models in this host's read-only model cache (`--model-cache`), as hub ids (`name` or `org/name`, each
    /// part 1-96 of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`, no `--`), sorted and each once: sent with
    /// the first heartbeat after the agent starts and whenever the list changed; absent: unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(max_items = 1024))]
    pub cached_models: Option<Vec<String>>,
    /// This node's serving parts (replicas of services) as they are now: the forwarder's port and readiness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "server", schema(max_items = 1024))]
    pub serving: Vec<crate::jobs::ServingReport>,
    /// How far this node's running parts are, as they say in their progress files (those that keep one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "server", schema(max_items = 1024))]
    pub progress: Vec<crate::jobs::PartProgress>,
}

/// Round trips from this node to one other node of a lease (UDP echo probes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PeerLatency {
    pub lease_id: Uuid,
    /// The other node.
    pub peer_node_id: Uuid,
    /// Median round trip, microseconds.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 60000000))]
    pub p50_us: i32,
    /// 99th percentile round trip, microseconds (at least `p50_us`).
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 60000000))]
    pub p99_us: i32,
    /// Probes answered. 0 when every probe was lost (`lost` at least 1, `p50_us` and `p99_us` 0): the peer is
    /// unreachable.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 100000))]
    pub probes: i32,
    /// Probes without an answer in time.
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 100000))]
    pub lost: i32,
}

/// What the service wants the node to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DesiredState {
    /// Keep serving.
    Active,
    /// Take nothing new; finish what runs (cordoned or draining).
    Drain,
    /// Out of service.
    Maintenance,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct HeartbeatResponse {
    /// Seconds until the next heartbeat.
    pub heartbeat_interval_s: u32,
    pub desired_state: DesiredState,
    /// There is work to fetch at `GET /v1/agent/assignments`.
    pub assignments_pending: bool,
    /// Samples stored (duplicates of already delivered samples are skipped).
    pub accepted_samples: u64,
    /// Every volume this node must hold or destroy (only to agents that offer a volume store).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<crate::volumes::VolumeOrder>,
}

/// XID codes after which a GPU must leave service: 48 double-bit ECC, 63/64 row remapping, 79 fell off the
/// bus, 94/95 contained/uncontained ECC.
pub const FATAL_XIDS: [i32; 6] = [48, 63, 64, 79, 94, 95];

/// Link between the GPUs inside a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "server", derive(sqlx::Type))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "server", sqlx(type_name = "text", rename_all = "snake_case"))]
pub enum IntraLink {
    Nvlink,
    Pcie,
}
