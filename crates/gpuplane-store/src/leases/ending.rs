//! The end of a lease, whatever ends it, in one statement; and what the sweeper looks up to end or start leases.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::allocation::lease_json;
use super::{Actor, Lease, LeaseState, Placement};
use crate::StoreResult;
use crate::auth::KeyCheck;
use crate::new_id;

/// What ending a lease did.
pub struct Ended {
    pub from: LeaseState,
    /// Leases wait in the pool's queue: the freed GPUs may start one.
    pub queue_waiting: bool,
    /// The lease as it is now, with the GPUs it held.
    pub lease: Lease,
}

/// The pools whose queues may start leases once the transaction that ended some of their leases has committed:
/// every way a lease ends notes what [`end_lease`] did here; the server's `leases::lifecycle::wake` (or `start`)
/// then starts them. (The sweeper starts every queue each second anyway; this starts them at once.)
#[derive(Debug, Default)]
pub struct FreedPools(Vec<Uuid>);

impl FreedPools {
    /// Note an ended lease (nothing when none ended): its pool, if leases wait in its queue.
    pub fn note(&mut self, ended: Option<&Ended>) {
        if let Some(ended) = ended
            && ended.queue_waiting
            && !self.0.contains(&ended.lease.pool_id)
        {
            self.0.push(ended.lease.pool_id);
        }
    }

    /// The pools noted, each once.
    pub fn pools(self) -> Vec<Uuid> {
        self.0
    }
}

/// End a live lease (queued or active): set its final state, end its open jobs, free its GPUs, record the
/// event. With `tenant_id`, only that tenant's lease. Returns None when no such live lease exists (ending
/// twice is harmless). `ended_at` defaults to now; expiry passes the scheduled end, interruption the node's
/// last heartbeat; it is never before the lease started. Every way a lease ends (release, termination,
/// expiry, interruption, an exhausted balance) comes through here.
pub async fn end_lease(
    conn: &mut PgConnection,
    lease_id: Uuid,
    tenant_id: Option<Uuid>,
    to: LeaseState,
    reason: &str,
    actor: &Actor,
    ended_at: Option<DateTime<Utc>>,
) -> StoreResult<Option<Ended>> {
    Ok(end_lease_scoped(conn, lease_id, tenant_id, None, to, reason, actor, ended_at, false).await?.1)
}

/// The API key, and console session if any, of the token that ends a lease (its claims, not yet checked): the
/// statement that ends the lease checks them ([`crate::auth::key_check_cte`]).
#[derive(Debug, Clone, Copy)]
pub struct KeyScope {
    pub key_id: Uuid,
    pub session_id: Option<Uuid>,
}

/// [`end_lease`] by the token `key` of tenant `tenant_id` (a token's claims), which the same statement checks: it
/// writes nothing unless the key may act now (`key_may_act` of [`crate::auth::key_check_cte`], the console
/// session included) and the lease is that key's tenant's and `tenant_id`'s. Whenever
/// the server's `TenantAdminToken::accept` refuses the returned [`KeyCheck`], nothing was
/// written, so this may run on its own (autocommit). Nor does it end a lease that has jobs to notice first
/// ([`super::release::has_jobs_to_notice_sql`]): their release begins with the server's `release::ask`.
pub async fn end_lease_for_key(
    conn: &mut PgConnection,
    lease_id: Uuid,
    key: KeyScope,
    tenant_id: Uuid,
    to: LeaseState,
    reason: &str,
    actor: &Actor,
) -> StoreResult<(KeyCheck, Option<Ended>)> {
    end_lease_scoped(conn, lease_id, Some(tenant_id), Some(key), to, reason, actor, None, true).await
}

/// One statement: the lease row locked and ended, its open jobs ended, its nodes locked in id order (the order
/// multi-node allocation locks them in), with `key_id` the key checked and the tenant taken from it; then,
/// after those locks, its GPUs released, the counters of their nodes raised by the healthy ones, the event
/// recorded. Two rules keep one snapshot exact:
/// - Health is read from the GPU rows as the statement gives them back (`held_by` cleared), after the node
///   locks: an update acts on each row's latest committed version, so a health change committed before the
///   locks (health changes lock the node first) counts.
/// - The lease row must be the version of the statement's snapshot: any change to a lease's holdings also
///   updates its row (a queued lease starting), so if the row changed after the snapshot was taken the
///   statement writes nothing and runs again, in a new snapshot that sees those holdings.
#[allow(clippy::too_many_arguments)]
async fn end_lease_scoped(
    conn: &mut PgConnection,
    lease_id: Uuid,
    tenant_id: Option<Uuid>,
    key: Option<KeyScope>,
    to: LeaseState,
    reason: &str,
    actor: &Actor,
    ended_at: Option<DateTime<Utc>>,
    unless_jobs_to_notice: bool,
) -> StoreResult<(KeyCheck, Option<Ended>)> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        key: KeyCheck,
        lease: Option<sqlx::types::Json<Lease>>,
        old_state: Option<LeaseState>,
        queue_waiting: Option<bool>,
        /// The lease row changed after the statement's snapshot: nothing was written.
        stale: bool,
    }
    let sql = format!(
        "WITH {key_check}, \
         seen AS (SELECT ctid AS seen FROM leases WHERE id = $1), \
         old AS ( \
             SELECT id, state AS old_state, ctid AS locked FROM leases WHERE id = $1 \
                 AND ($5::uuid IS NULL OR tenant_id = $5) \
                 AND ($8::uuid IS NULL OR (tenant_id = (SELECT checked_tenant_id FROM key_check) \
                     AND (SELECT key_may_act FROM key_check))) \
                 AND NOT ($13 AND {jobs_to_notice}) \
             FOR UPDATE), \
         current AS (SELECT old.id, old.old_state FROM old JOIN seen ON seen.seen = old.locked), \
         ended AS ( \
             UPDATE leases l SET state = $2, \
                 ended_at = GREATEST(LEAST(COALESCE($3, now()), now()), COALESCE(l.starts_at, now())), \
                 end_reason = $4, generation = l.generation + 1, updated_at = now() \
             FROM current WHERE l.id = current.id AND current.old_state IN ('queued', 'active') \
             RETURNING l.*, current.old_state, \
                 EXISTS (SELECT 1 FROM leases q WHERE q.pool_id = l.pool_id AND q.state = 'queued' AND q.id <> l.id) \
                     AS queue_waiting), \
         {jobs}, \
         {volumes}, \
         locked AS ( \
             SELECT id FROM nodes WHERE id IN \
                 (SELECT node_id FROM gpus WHERE id = ANY((SELECT gpu_ids FROM ended)::uuid[]) AND held_by = $1) \
             ORDER BY id FOR UPDATE), \
         held AS ( \
             UPDATE gpus g SET held_by = NULL \
             WHERE g.id = ANY((SELECT gpu_ids FROM ended)::uuid[]) AND g.held_by = $1 AND (SELECT count(*) FROM locked) >= 0 \
             RETURNING g.id, g.node_id, g.idx, g.uuid, g.healthy), \
         counted AS ( \
             UPDATE nodes SET free_gpus = nodes.free_gpus + f.n \
             FROM (SELECT node_id, count(*) FILTER (WHERE healthy) AS n FROM held GROUP BY node_id) f \
             WHERE nodes.id = f.node_id), \
         recorded AS ( \
             INSERT INTO lease_events (id, lease_id, tenant_id, kind, from_state, to_state, actor, reason) \
             SELECT $9, ended.id, ended.tenant_id, $10, ended.old_state, $2, $11, $4 FROM ended) \
         SELECT key_check.*, {lease} AS lease, \
             ended.old_state, ended.queue_waiting, \
             EXISTS (SELECT 1 FROM old) AND NOT EXISTS (SELECT 1 FROM current) AS stale \
         FROM (SELECT 1) one LEFT JOIN key_check ON true LEFT JOIN ended ON true",
        key_check = crate::auth::key_check_cte("$8", "$12"),
        jobs = crate::jobs::end_jobs_of_leases_ctes("SELECT id FROM ended", "$6", "$7"),
        volumes = crate::volumes::detach_on_lease_end_ctes("SELECT id, ended_at FROM ended"),
        lease = lease_json("ended", "held"),
        jobs_to_notice = super::release::has_jobs_to_notice_sql("$1"),
    );
    let (job_state, job_reason) = crate::jobs::job_end_for_lease(to, reason);
    let kind = to.as_str();
    // Runtime SQL: it embeds the key check (`auth::key_check_cte`), the ending of a lease's jobs
    // (`jobs::end_jobs_of_leases_ctes`) and the detaching of its volumes (`volumes::detach_on_lease_end_ctes`),
    // each defined once in its own module; a literal would repeat them.
    for _ in 0..STALE_ATTEMPTS {
        let row: Row = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
            .bind(lease_id)
            .bind(to)
            .bind(ended_at)
            .bind(reason)
            .bind(tenant_id)
            .bind(job_state)
            .bind(&job_reason)
            .bind(key.map(|k| k.key_id))
            .bind(new_id())
            .bind(kind)
            .bind(actor.label())
            .bind(key.and_then(|k| k.session_id))
            .bind(unless_jobs_to_notice)
            .fetch_one(&mut *conn)
            .await?;
        if row.stale {
            continue;
        }
        let (Some(sqlx::types::Json(mut lease)), Some(from)) = (row.lease, row.old_state) else {
            return Ok((row.key, None));
        };
        super::allocation::read_parts(conn, &mut lease).await?;
        let ended = Ended { from, queue_waiting: row.queue_waiting.unwrap_or(false), lease };
        return Ok((row.key, Some(ended)));
    }
    // A lease row that changes under every attempt: the caller gets an error (a 500; its transaction, if it has
    // one, rolls back, and a release, which runs on its own, has written nothing).
    Err(sqlx::Error::Protocol(format!("lease {lease_id} kept changing while it was being ended")).into())
}

/// How many times ending a lease is re-run when its row changed after the statement's snapshot was taken.
const STALE_ATTEMPTS: usize = 5;

/// Take the transaction's lock on the queue of `pool_id` (false: another replica is starting that queue now).
pub async fn try_lock_queue(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_xact_lock(hashtextextended('queue:' || $1::uuid::text, 0)) AS "locked!""#,
        pool_id
    )
    .fetch_one(conn)
    .await?)
}

/// The first lease of a pool's queue, locked.
pub struct QueueHead {
    pub id: Uuid,
    pub gpu_count: i32,
    pub placement: Placement,
}

/// Lock the first lease (in arrival order) of the queue of `pool_id`; None: the queue is empty.
pub async fn lock_queue_head(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<Option<QueueHead>> {
    Ok(sqlx::query_as!(
        QueueHead,
        r#"SELECT id, gpu_count, placement AS "placement: Placement" FROM leases
             WHERE pool_id = $1 AND state = 'queued' ORDER BY id LIMIT 1 FOR UPDATE"#,
        pool_id
    )
    .fetch_optional(conn)
    .await?)
}

/// Lock up to `batch` active leases whose end time has passed, skipping those locked by others: (id, end time).
pub async fn lock_due_expiries(conn: &mut PgConnection, batch: i64) -> StoreResult<Vec<(Uuid, DateTime<Utc>)>> {
    let due = sqlx::query!(
        r#"SELECT id, ends_at AS "ends_at!" FROM leases WHERE state = 'active' AND ends_at <= now()
         ORDER BY ends_at LIMIT $1 FOR UPDATE SKIP LOCKED"#,
        batch
    )
    .fetch_all(conn)
    .await?;
    Ok(due.into_iter().map(|d| (d.id, d.ends_at)).collect())
}

/// The pools with leases in their queue.
pub async fn queued_pools(conn: &mut PgConnection) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar!("SELECT DISTINCT pool_id FROM leases WHERE state = 'queued'").fetch_all(conn).await?)
}
