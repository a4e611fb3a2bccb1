//! Tenant volumes between agent and service: the stores an agent offers, what it holds, and what the service
//! asks of it. A volume is one ext4 image, made, grown, mounted and destroyed by the agent of its node
//! (docs/volumes.md); the service only ever names volumes by id, never a path.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Where a volume's image lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum VolumeKind {
    /// On one host's own disk: it stays on that host, and leases that attach it are placed there.
    Host,
    /// On the pool's shared filesystem (mounted by the operator at one path on every host of the pool): any host
    /// of the pool can mount it.
    Pool,
}

impl VolumeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeKind::Host => "host",
            VolumeKind::Pool => "pool",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "host" => Some(VolumeKind::Host),
            "pool" => Some(VolumeKind::Pool),
            _ => None,
        }
    }
}

/// A volume store the agent offers, with its space now (reported with every heartbeat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VolumeStore {
    pub kind: VolumeKind,
    /// Size of the filesystem that holds the images, bytes.
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 1000000000000000000i64))]
    pub total_bytes: i64,
    /// Free space on it, bytes (images are sparse: what a volume has not written yet is still free here).
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 1000000000000000000i64))]
    pub free_bytes: i64,
}

/// What the agent did with one volume the service asked it to hold or destroy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum VolumeOutcome {
    /// The image exists at (at least) the asked size and is mounted on this host.
    Ready,
    /// The image could not be made or grown (`message` says why).
    Failed,
    /// The image is gone, its data with it.
    Destroyed,
}

/// One volume's state on this host, reported with the heartbeat after it changed and then with every heartbeat
/// while it is held (its use changes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VolumeReport {
    pub volume_id: Uuid,
    pub outcome: VolumeOutcome,
    /// The filesystem's size, bytes (ready volumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 1000000000000000000i64))]
    pub size_bytes: Option<i64>,
    /// What is written in it, bytes (ready volumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 0, maximum = 1000000000000000000i64))]
    pub used_bytes: Option<i64>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(max_length = 1000))]
    pub message: Option<String>,
}

/// What the service asks of the agent for one volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum VolumeAction {
    /// Make the image if it is missing, grow it to `size_bytes` if smaller, and keep it mounted.
    Hold,
    /// Unmount it and delete the image: the tenant deleted the volume.
    Destroy,
}

/// One volume of this node's, in the heartbeat's answer. Every volume the node must hold or destroy is listed
/// with every answer, so an agent that restarts or missed an answer catches up at its next heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct VolumeOrder {
    pub volume_id: Uuid,
    pub kind: VolumeKind,
    pub action: VolumeAction,
    /// The volume's size, bytes (GiB x 2^30).
    pub size_bytes: i64,
}

/// A volume's name and a volume's mount under `/volumes`: 1-63 characters, a-z, 0-9, `.`, `_`, `-`, starting with a
/// letter or digit (so never `..`, never a path). The service checks what it stores by it; the agent, root,
/// checks what it binds.
pub fn is_name(name: &str) -> bool {
    name.len() <= 63
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

/// Where volumes are mounted inside a lease's sandbox: `/volumes/<mount>`.
pub const MOUNT_ROOT: &str = "/volumes";

/// A volume attached to a lease, as the lease's agents mount it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct LeaseVolume {
    pub volume_id: Uuid,
    pub kind: VolumeKind,
    /// Mounted at `/volumes/<mount>`: 1-63 characters, a-z, 0-9, `.`, `_`, `-`, starting with a letter or digit.
    pub mount: String,
    pub read_only: bool,
}

impl LeaseVolume {
    /// Where the lease's processes find it.
    pub fn mount_path(&self) -> String {
        format!("{MOUNT_ROOT}/{}", self.mount)
    }
}
