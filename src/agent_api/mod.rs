//! Node agents: join tokens, registration, heartbeats with DCGM-style telemetry, liveness and GPU health.
//! The agent program itself (the client) is `crate::agent`.

pub mod codec;
pub mod gpu_map;
pub mod holds;
pub mod launchers;
pub mod liveness;
pub mod matching;
pub mod rollups;
pub mod routes;
pub mod telemetry;
pub mod tokens;
/// The agent wire protocol (crate `gpuplane-protocol`): registration and heartbeats.
pub use gpuplane_protocol::agent as protocol;

pub use gpu_map::{GpuMap, GpuMapCache};

/// Driver and CUDA version syntax and order (crate `gpuplane-protocol`): the agent checks its flags with it too.
pub use gpuplane_protocol::versions;
