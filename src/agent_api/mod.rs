//! Node agents: join tokens, registration, heartbeats with DCGM-style telemetry, liveness and GPU health.
//! The agent program itself (the client) is `crate::agent`.

pub mod assignments;
pub mod codec;
pub mod environments;
pub mod healing;
pub mod holds;
pub mod liveness;
pub mod matching;
pub mod rollups;
pub mod routes;
pub mod telemetry;
pub mod tokens;
/// The agent wire protocol (crate `gpuplane-protocol`): registration and heartbeats.
pub use gpuplane_protocol::agent as protocol;
