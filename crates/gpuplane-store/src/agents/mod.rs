//! What node agents write and read: registration, heartbeats, telemetry, holds.

pub mod heartbeat;
pub mod holds;
pub mod liveness;
pub mod registration;
pub mod rollups;
pub mod telemetry;
pub mod tokens;

pub use liveness::Liveness;
