//! The wire types between agents and the service for environments.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// An environment this node must run (part of the node's assignment list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct EnvironmentSpec {
    pub lease_id: Uuid,
    /// Run the SSH server from this image (it must have `/usr/sbin/sshd`) instead of the host's.
    pub image: Option<String>,
    /// The tenant's current public keys, one `authorized_keys` line each.
    pub authorized_keys: Vec<String>,
}

/// An environment's state on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "server", derive(sqlx::Type))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "server", sqlx(type_name = "text", rename_all = "snake_case"))]
pub enum EnvironmentState {
    Starting,
    Ready,
    Failed,
    Stopped,
}

/// What an agent reports of an environment on its node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "server", schema(example = json!({"state": "ready", "port": 20000, "host_key_fingerprints": ["SHA256:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g50"]})))]
pub struct EnvironmentStatus {
    pub state: EnvironmentState,
    /// The port the SSH server listens on (`ready`).
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(maximum = 65535))]
    pub port: Option<u16>,
    /// The server's host keys as `SHA256:...` (at most 8).
    #[serde(default)]
    pub host_key_fingerprints: Vec<String>,
    /// Why, for `failed` (at most 500 characters are kept).
    #[serde(default)]
    pub reason: Option<String>,
}
