//! Lease events: recording a lease's history, and reading it.

use sqlx::PgConnection;
use uuid::Uuid;

use super::{Actor, LeaseEvent, LeaseState};
use crate::StoreResult;
use crate::new_id;

/// A lease event about to be recorded.
pub struct NewEvent<'a> {
    pub kind: &'a str,
    pub from: Option<LeaseState>,
    pub to: Option<LeaseState>,
    pub actor: &'a Actor,
    pub reason: Option<&'a str>,
    pub detail: Option<serde_json::Value>,
}

impl<'a> NewEvent<'a> {
    pub fn new(kind: &'a str, from: Option<LeaseState>, to: Option<LeaseState>, actor: &'a Actor) -> Self {
        NewEvent { kind, from, to, actor, reason: None, detail: None }
    }
    pub fn reason(mut self, reason: &'a str) -> Self {
        self.reason = Some(reason);
        self
    }
    pub fn detail(mut self, detail: serde_json::Value) -> Self {
        self.detail = Some(detail);
        self
    }
}

/// Record an event of a lease's history.
pub async fn record_event(conn: &mut PgConnection, lease_id: Uuid, event: NewEvent<'_>) -> StoreResult<()> {
    let NewEvent { kind, from, to, actor, reason, detail } = event;
    sqlx::query!(
        "INSERT INTO lease_events (id, lease_id, tenant_id, kind, from_state, to_state, actor, reason, detail) \
         VALUES ($1, $2, (SELECT tenant_id FROM leases WHERE id = $2), $3, $4, $5, $6, $7, $8)",
        new_id(),
        lease_id,
        kind,
        from.map(LeaseState::as_str),
        to.map(LeaseState::as_str),
        actor.label(),
        reason,
        detail
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A lease's history, oldest first.
pub async fn list_events(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<LeaseEvent>> {
    Ok(sqlx::query_as!(
        LeaseEvent,
        "SELECT id, at, kind, from_state, to_state, actor, reason, detail FROM lease_events WHERE lease_id = $1 ORDER BY id",
        lease_id
    )
    .fetch_all(conn)
    .await?)
}
