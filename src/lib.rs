//! gpuplane: the control plane of a GPU rental platform.
//!
//! One module per domain (`tenants`, `inventory`, ...), each owning its routes, handlers, queries and types.
//! `app` wires them into one router; `main.rs` only parses the command line. The planner, the agent's wire
//! protocol and the agent itself are crates of their own under `crates/`.

pub mod agents;
pub mod app;
pub mod auth;
pub mod billing;
pub mod cli;
pub mod config;
pub mod console;
pub mod db;
pub mod demo;
pub mod environments;
pub mod error;
pub mod extract;
pub mod health;
pub mod idempotency;
pub mod inventory;
pub mod jobs;
pub mod leases;
pub mod openapi;
pub mod planning;
pub mod rate_limit;
pub mod secrets;
pub mod telemetry;
pub mod tenants;
pub mod webhooks;

pub use app::{AppState, build_router, run};
/// The auto-parallel planner (crate `gpuplane-planner`), pure: the API, the CLI and the benches call it.
pub use gpuplane_planner as planner;
