//! gpuplane: the control plane of a GPU rental platform.
//!
//! One module per domain (`tenants`, `inventory`, ...), each owning its routes, handlers, queries and types.
//! `state` is what handlers and workers share, `router` lists every route once, `workers` the background loops
//! and `app` serves; `main.rs` only parses the command line. The planner, the agent's wire
//! protocol and the agent itself are crates of their own under `crates/`.

pub mod access;
pub mod agent_api;
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
pub mod gateway;
pub mod health;
pub mod idempotency;
pub mod inventory;
pub mod jobs;
pub mod jwt;
pub mod leases;
pub mod observability;
pub mod openapi;
pub mod planning_api;
pub mod rate_limit;
pub mod router;
pub mod secrets;
pub mod services;
pub mod state;
pub mod tenants;
pub mod uploads;
pub mod volumes;
pub mod webhooks;
pub mod workers;

pub use app::run;
/// The auto-parallel planner (crate `gpuplane-planner`), pure: the API, the CLI and the benches call it.
pub use gpuplane_planner as planner;
pub use router::build_router;
pub use state::AppState;
