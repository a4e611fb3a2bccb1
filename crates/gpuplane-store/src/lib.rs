//! gpuplane's persistence layer: every SQL statement the service runs, and its migrations.
//!
//! The rules of this crate (docs/ARCHITECTURE.md):
//! - Functions take `&mut PgConnection` (or a pool where a statement stands alone): the caller owns the
//!   transaction, so it composes several calls atomically.
//! - They return domain values or a [`StoreError`], never anything of HTTP: no status codes, no `ApiError`,
//!   no axum. The server's HTTP layer and its workers depend on this crate; it depends on neither, and Cargo
//!   refuses the arrow the other way.
//! - Queries are `query!` / `query_as!`, checked at compile time against the migrations (`.sqlx/` at the
//!   workspace root holds what they were checked against). A runtime string is used only where the SQL is
//!   truly dynamic, and says why where it is.

pub mod agents;
pub mod auth;
pub mod billing;
pub mod environments;
pub mod error;
pub mod idempotency;
pub mod inventory;
pub mod jobs;
pub mod lease_kinds;
pub mod leases;
pub mod ops;
pub mod secrets;
pub mod services;
pub mod tenants;
pub mod uploads;
pub mod volumes;
pub mod webhooks;

pub use error::StoreError;

/// A `Result` whose error is the store's.
pub type StoreResult<T> = Result<T, StoreError>;

/// The migrations in the workspace's `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// A new row id: UUIDv7, so ids sort by creation time and index pages fill in order.
pub fn new_id() -> uuid::Uuid {
    uuid::Uuid::now_v7()
}
