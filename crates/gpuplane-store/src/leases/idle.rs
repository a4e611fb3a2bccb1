//! Idle leases: the statements of the idle rounds (the rule is the server's `leases::idle`).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;

/// Serializes the judging rounds of the replicas ("idlelease" in ASCII, truncated to eight bytes).
const JUDGE_LOCK: i64 = 0x69646c656c656173;

/// Take the judging lock on this connection (a session lock; false: another replica judges now).
pub async fn try_lock_judging(conn: &mut PgConnection) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(r#"SELECT pg_try_advisory_lock($1) AS "locked!""#, JUDGE_LOCK).fetch_one(conn).await?)
}

/// Give the judging lock back.
pub async fn unlock_judging(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query!("SELECT pg_advisory_unlock($1)", JUDGE_LOCK).fetch_one(conn).await?;
    Ok(())
}

/// A lease to judge, with what the round needs to know whether a verdict changes anything.
pub struct Candidate {
    pub id: Uuid,
    pub starts_at: DateTime<Utc>,
    /// It is in an idle spell.
    pub in_spell: bool,
    /// Its spell's last recorded verdict is less than half a window old: an idle verdict need not be written.
    pub recorded_recently: bool,
    /// Its spell has lasted as long as its `idle_release_after_minutes`.
    pub release_due: bool,
}

/// Up to `batch` active leases after `after` (in id order) that have been active a whole window (`window_s`) and
/// are not being released. Leases with a GPU on an external node are left out here: they report no samples, so
/// the rule would never find them idle, and measuring them would cost a query each round.
pub async fn candidates(
    conn: &mut PgConnection,
    after: Uuid,
    window_s: f64,
    batch: i64,
) -> StoreResult<Vec<Candidate>> {
    Ok(sqlx::query_as!(
        Candidate,
        "SELECT l.id, l.starts_at AS \"starts_at!\", l.idle_since IS NOT NULL AS \"in_spell!\", \
             COALESCE(l.idle_checked_at > now() - make_interval(secs => $2::float8 / 2), false) AS \"recorded_recently!\", \
             COALESCE(l.idle_since <= now() - make_interval(mins => l.idle_release_after_minutes), false) \
                 AS \"release_due!\" \
         FROM leases l WHERE l.state = 'active' AND l.id > $1 \
             AND l.starts_at <= now() - make_interval(secs => $2::float8) AND l.release_started_at IS NULL \
             AND NOT EXISTS (SELECT 1 FROM gpus g JOIN nodes n ON n.id = g.node_id \
                             WHERE g.id = ANY(l.gpu_ids) AND n.external) \
         ORDER BY l.id LIMIT $3",
        after,
        window_s,
        batch
    )
    .fetch_all(conn)
    .await?)
}

/// A lease's idle state, as locked for a verdict.
pub struct Locked {
    pub idle_since: Option<DateTime<Utc>>,
    pub idle_checked_at: Option<DateTime<Utc>>,
    pub idle_release_after_minutes: Option<i32>,
    /// The transaction's time.
    pub now: DateTime<Utc>,
}

/// Lock an active lease not being released, for a verdict; None: ended, being released, or locked by others now.
pub async fn lock_for_verdict(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Option<Locked>> {
    Ok(sqlx::query_as!(
        Locked,
        "SELECT idle_since, idle_checked_at, idle_release_after_minutes, now() AS \"now!\" FROM leases \
         WHERE id = $1 AND state = 'active' AND release_started_at IS NULL FOR UPDATE SKIP LOCKED",
        lease_id
    )
    .fetch_optional(conn)
    .await?)
}

/// Record an idle verdict: the spell's start, and when it was last found idle.
pub async fn record_idle(
    conn: &mut PgConnection,
    lease_id: Uuid,
    since: DateTime<Utc>,
    checked_at: DateTime<Utc>,
) -> StoreResult<()> {
    sqlx::query!("UPDATE leases SET idle_since = $2, idle_checked_at = $3 WHERE id = $1", lease_id, since, checked_at)
        .execute(conn)
        .await?;
    Ok(())
}

/// End the lease's idle spell.
pub async fn clear_idle(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<()> {
    sqlx::query!("UPDATE leases SET idle_since = NULL, idle_checked_at = NULL WHERE id = $1", lease_id)
        .execute(conn)
        .await?;
    Ok(())
}
