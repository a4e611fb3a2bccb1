//! Signed webhooks (Standard Webhooks) for tenants (their events) and operators (fleet events), with a
//! transactional outbox.
//!
//! [`emit`] is the one entry point for every part of the service that reports something: it writes the event
//! and a pending delivery per subscribed endpoint in the caller's transaction (`webhook_emit`, migration 0015),
//! so a change is never committed without its deliveries. Lease transitions are emitted by a trigger on
//! `lease_events` through the same function. The delivery worker ([`delivery`]) sends them from any replica.

pub mod alerts;
pub mod delivery;
pub mod routes;
pub mod signing;
pub mod ssrf;

use sqlx::PgConnection;
use uuid::Uuid;

/// Who an event is for: one tenant's endpoints, or the operators' endpoints (fleet events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Tenant(Uuid),
    Operators,
}

impl Audience {
    /// The `tenant_id` column value of this audience (NULL for operators).
    pub fn tenant_id(self) -> Option<Uuid> {
        match self {
            Audience::Tenant(id) => Some(id),
            Audience::Operators => None,
        }
    }
}

/// Record an event for `audience` in the caller's transaction and queue it for every enabled endpoint of that
/// audience that subscribed to `event_type`. Returns the event id, which receivers get as `webhook-id`.
pub async fn emit(
    conn: &mut PgConnection,
    audience: Audience,
    event_type: &str,
    data: serde_json::Value,
) -> Result<Uuid, sqlx::Error> {
    let id = crate::extract::new_id();
    gpuplane_store::webhooks::emit(conn, id, audience.tenant_id(), event_type, data).await?;
    Ok(id)
}
