//! Fleet-level liveness holds, for operators: which pools hold their interruptions, and releasing a hold.
//! The sweeper opens and clears them (see `liveness`).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

/// Too many of a pool's agent nodes went silent at once: while `released_at` is null, no lease in the pool is
/// interrupted for node silence.
#[derive(Debug, Clone, Serialize, ToSchema, sqlx::FromRow)]
pub struct LivenessHold {
    pub id: Uuid,
    pub pool_id: Uuid,
    pub opened_at: DateTime<Utc>,
    /// Silent agent nodes when the hold opened.
    pub silent_nodes: i32,
    /// Agent nodes of the pool when the hold opened.
    pub total_nodes: i32,
    /// When interruptions resumed (operator release, or the pool recovered).
    pub released_at: Option<DateTime<Utc>>,
    /// `operator:<key id>` or `system: the pool recovered`.
    pub released_by: Option<String>,
}

/// Liveness holds not cleared yet (open ones, and ones an operator released), oldest first.
pub async fn list_uncleared(conn: &mut PgConnection) -> StoreResult<Vec<LivenessHold>> {
    Ok(sqlx::query_as!(
        LivenessHold,
        "SELECT id, pool_id, opened_at, silent_nodes, total_nodes, released_at, released_by \
         FROM liveness_holds WHERE cleared_at IS NULL ORDER BY opened_at"
    )
    .fetch_all(conn)
    .await?)
}

/// Release a pool's unreleased hold in an operator's name (by key id); None when it has none.
pub async fn release(
    conn: &mut PgConnection,
    pool_id: Uuid,
    operator_key_id: Uuid,
) -> StoreResult<Option<LivenessHold>> {
    Ok(sqlx::query_as!(
        LivenessHold,
        "UPDATE liveness_holds SET released_at = now(), released_by = 'operator:' || $2::uuid::text \
         WHERE pool_id = $1 AND released_at IS NULL \
         RETURNING id, pool_id, opened_at, silent_nodes, total_nodes, released_at, released_by",
        pool_id,
        operator_key_id
    )
    .fetch_optional(conn)
    .await?)
}
