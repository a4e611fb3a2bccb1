//! API integration tests: each test gets its own freshly migrated PostgreSQL database (`#[sqlx::test]`).
//! One test binary keeps linking cheap.

mod support;

mod agent_e2e;
mod agents;
mod auth;
mod billing;
mod cli_e2e;
mod config_docs;
mod console;
mod contract;
mod demo;
mod deploy;
mod environment_e2e;
mod errors;
mod idle_leases;
mod inventory;
mod isolation_e2e;
mod jobs;
mod jobs_e2e;
mod leases;
mod liveness;
mod logs;
mod migrations;
mod mixed_e2e;
mod mixed_leases;
mod network_e2e;
mod openapi;
mod outage_e2e;
mod planner_cli;
mod planning;
mod readiness;
mod readiness_e2e;
mod recovery;
mod recovery_e2e;
mod replan_e2e;
mod secrets;
mod services;
mod serving_e2e;
mod sessions;
mod strict_requests;
mod tenants;
mod torch_e2e;
mod uploads;
mod volumes;
mod webhooks;
