//! Releases with notice: the statements of a release that gives a lease's running jobs their stop notice first
//! (the rule is the server's `leases::release`).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;

/// Whether the lease has a job that is to be told before the lease ends: one that an agent may be running, with a
/// grace to checkpoint in. The condition the one-statement release checks, as a SQL predicate on `lease_param`.
pub fn has_jobs_to_notice_sql(lease_param: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM jobs nj WHERE nj.lease_id = {lease_param} AND nj.state IN ('assigned', 'running') \
         AND nj.stop_grace_s > 0)"
    )
}

/// Lock the open jobs of a lease, in id order as every other writer locks them: (job id, its `stop_grace_s`).
pub async fn lock_open_jobs(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<(Uuid, i32)>> {
    let jobs = sqlx::query!(
        "SELECT id, stop_grace_s FROM jobs WHERE lease_id = $1 AND state IN ('pending', 'assigned', 'running') \
         ORDER BY id FOR UPDATE",
        lease_id
    )
    .fetch_all(conn)
    .await?;
    Ok(jobs.into_iter().map(|j| (j.id, j.stop_grace_s)).collect())
}

/// Abandon the job's pending replan (the job is stopping).
pub async fn abandon_pending_generation(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_generations SET state = 'abandoned', ended_at = now() WHERE job_id = $1 AND state = 'pending'",
        job_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Mark the release of a lease begun: its deadline `wait_s` seconds from now, and the reason and actor it will
/// record when it ends. Returns the deadline.
pub async fn start_release(
    conn: &mut PgConnection,
    lease_id: Uuid,
    wait_s: f64,
    end_reason: &str,
    actor_label: &str,
) -> StoreResult<DateTime<Utc>> {
    Ok(sqlx::query_scalar!(
        "UPDATE leases SET release_started_at = now(), release_deadline = now() + make_interval(secs => $2), \
             release_reason = $3, release_actor = $4 \
         WHERE id = $1 RETURNING release_deadline AS \"release_deadline!\"",
        lease_id,
        wait_s,
        end_reason,
        actor_label
    )
    .fetch_one(conn)
    .await?)
}

/// A release under way that is due: its lease, and the reason and actor label recorded when it began.
pub struct DueRelease {
    pub id: Uuid,
    pub release_reason: String,
    pub release_actor: String,
}

/// Lock up to `batch` leases whose release has begun and whose open jobs have all stopped, or whose deadline has
/// passed, skipping those locked by others.
pub async fn lock_due_releases(conn: &mut PgConnection, batch: i64) -> StoreResult<Vec<DueRelease>> {
    Ok(sqlx::query_as!(
        DueRelease,
        "SELECT l.id, l.release_reason AS \"release_reason!\", l.release_actor AS \"release_actor!\" FROM leases l \
             WHERE l.state = 'active' AND l.release_started_at IS NOT NULL \
                 AND (l.release_deadline <= now() OR NOT EXISTS ( \
                     SELECT 1 FROM jobs j WHERE j.lease_id = l.id AND j.state IN ('pending', 'assigned', 'running'))) \
             ORDER BY l.release_deadline LIMIT $1 FOR UPDATE OF l SKIP LOCKED",
        batch
    )
    .fetch_all(conn)
    .await?)
}

/// Lock the tenant's active lease for its release: (a release is under way, it has jobs to notice); None: no such
/// active lease of the tenant.
pub async fn lock_for_release(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
) -> StoreResult<Option<(bool, bool)>> {
    // Runtime SQL: it embeds `has_jobs_to_notice_sql`, the predicate the one-statement release
    // (`ending::end_lease_for_key`) embeds too.
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT release_started_at IS NOT NULL, {} FROM leases WHERE id = $1 AND tenant_id = $2 AND state = 'active' \
         FOR UPDATE",
        has_jobs_to_notice_sql("$1")
    )))
    .bind(lease_id)
    .bind(tenant_id)
    .fetch_optional(conn)
    .await?)
}
