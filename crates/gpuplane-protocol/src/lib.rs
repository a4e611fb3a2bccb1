//! The wire protocol between gpuplane's node agents and its service, shared by both binaries so the two cannot
//! disagree: registration and heartbeats ([`agent`]), job assignments and their status ([`jobs`]), interactive
//! environments ([`environments`]), each lease's address on a node ([`lease_network`]) the OpenSSH key format both sides check ([`ssh_keys`]) and
//! the characters text may hold ([`text`]), jobs' full output ([`logs`]), tenant volumes ([`volumes`]) and the
//! read-only model cache ([`model_cache`]).
//!
//! Plain data with serde. With the `server` feature the types also derive their OpenAPI schemas and PostgreSQL
//! encodings; the agent builds without either.

pub mod agent;
pub mod environments;
pub mod jobs;
pub mod lease_network;
pub mod logs;
pub mod model_cache;
pub mod ssh_keys;
pub mod text;
pub mod time;
pub mod versions;
pub mod volumes;
