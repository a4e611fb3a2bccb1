//! Lease persistence: allocation, release, transitions and events. Every function that writes takes the
//! caller's connection or transaction, so callers compose them atomically.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use utoipa::ToSchema;
use uuid::Uuid;

use super::placement::{pack_counts, pick_compact, spread_counts};
use super::{Actor, Lease, LeaseEvent, LeaseGpu, LeaseState, Placement, Term};
use crate::extract::new_id;

/// What is free in a pool, as told to a tenant whose request did not fit.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Capacity {
    pub requested: i32,
    /// Free GPUs in the pool now.
    pub free_gpus: i64,
    /// The most free GPUs on one node now.
    pub largest_free_block: i64,
    /// Leases waiting ahead in the pool's queue.
    pub queued_ahead: i64,
}

impl Capacity {
    /// 409 `insufficient_capacity`, with these figures as its context.
    pub fn into_error(self) -> crate::error::ApiError {
        crate::error::ApiError::Conflict {
            code: "insufficient_capacity",
            message: format!(
                "{} GPUs requested; {} free in the pool, at most {} on one node{}",
                self.requested,
                self.free_gpus,
                self.largest_free_block,
                if self.queued_ahead > 0 { format!(", {} leases queued", self.queued_ahead) } else { String::new() }
            ),
            context: serde_json::to_value(self).ok(),
        }
    }
}

/// The best-fit node: the smallest sufficient free block among allocatable nodes of the pool, skipping nodes
/// other allocations hold.
const BEST_FIT_SKIP_LOCKED: &str = "SELECT id FROM nodes \
    WHERE pool_id = $1 AND admin_state = 'active' AND liveness = 'ready' AND free_gpus >= $2 \
    ORDER BY free_gpus, id LIMIT 1 FOR UPDATE SKIP LOCKED";

/// Best-fit candidates in order, read without locks.
const BEST_FIT_CANDIDATES: &str = "SELECT id FROM nodes \
    WHERE pool_id = $1 AND admin_state = 'active' AND liveness = 'ready' AND free_gpus >= $2 \
    ORDER BY free_gpus, id LIMIT 32";

/// Free GPUs of the given (already locked) nodes.
const FREE_GPUS_OF: &str = "SELECT n.id, n.hostname, n.address, g.id, g.idx, g.uuid FROM nodes n JOIN gpus g ON g.node_id = n.id \
    WHERE n.id = ANY($1) AND g.healthy AND NOT EXISTS \
        (SELECT 1 FROM lease_gpus lg WHERE lg.gpu_id = g.id AND lg.released_at IS NULL) \
    ORDER BY n.id, g.idx";

/// A free GPU as allocation sees it: (node id, hostname, address, gpu id, index, uuid).
type FreeGpu = (Uuid, String, String, Uuid, i32, String);

/// How many times a multi-node plan is re-made when its nodes changed between planning and locking.
const PLAN_ATTEMPTS: usize = 3;

/// Lock the best-fit node for `need` GPUs and return its free GPUs. Nodes locked by concurrent allocations
/// are skipped first (so allocations spread over nodes instead of queueing on one); only if none is found
/// does it wait for locked ones, so "no capacity" is never an artefact of a lock. It holds no other node
/// lock while it waits, so it cannot deadlock. The GPUs are read by a second statement on purpose: its
/// snapshot is taken after the lock, so it sees every allocation committed on the node before.
async fn lock_best_fit(conn: &mut PgConnection, pool_id: Uuid, need: i32) -> Result<Vec<FreeGpu>, sqlx::Error> {
    // Even SKIP LOCKED can keep a stray lock (a row updated under it that then fails the recheck), so the
    // attempt runs in a savepoint that a miss rolls back before any waiting starts.
    sqlx::query("SAVEPOINT best_fit_skip").execute(&mut *conn).await?;
    let node: Option<(Uuid,)> =
        sqlx::query_as(BEST_FIT_SKIP_LOCKED).bind(pool_id).bind(need).fetch_optional(&mut *conn).await?;
    if let Some((node_id,)) = node {
        return sqlx::query_as(FREE_GPUS_OF).bind(vec![node_id]).fetch_all(&mut *conn).await;
    }
    sqlx::query("ROLLBACK TO SAVEPOINT best_fit_skip").execute(&mut *conn).await?;
    // Every node with room is held by someone. Wait for them one at a time, best fit first: a waiting
    // `FOR UPDATE` keeps the lock of a row it waited for even when the row no longer qualifies, so each wait
    // locks a single named node inside a savepoint, and a miss gives that lock back before the next. The
    // transaction therefore never waits while holding a node, and cannot deadlock with id-ordered lockers.
    let candidates: Vec<(Uuid,)> =
        sqlx::query_as(BEST_FIT_CANDIDATES).bind(pool_id).bind(need).fetch_all(&mut *conn).await?;
    for (candidate,) in candidates {
        sqlx::query("SAVEPOINT best_fit_wait").execute(&mut *conn).await?;
        let locked: Option<(Uuid,)> = sqlx::query_as(
            "SELECT id FROM nodes WHERE id = $1 AND admin_state = 'active' AND liveness = 'ready' AND free_gpus >= $2 \
             FOR UPDATE",
        )
        .bind(candidate)
        .bind(need)
        .fetch_optional(&mut *conn)
        .await?;
        if locked.is_some() {
            return sqlx::query_as(FREE_GPUS_OF).bind(vec![candidate]).fetch_all(&mut *conn).await;
        }
        sqlx::query("ROLLBACK TO SAVEPOINT best_fit_wait").execute(&mut *conn).await?;
    }
    Ok(Vec::new())
}

/// Several nodes: plan from the free counters without locks, then lock the chosen nodes in id order (so two
/// multi-node allocations, or an allocation and a release, can never deadlock), check the plan still holds,
/// and return their free GPUs with how many to take from each node.
async fn lock_multi_node(
    conn: &mut PgConnection,
    pool_id: Uuid,
    gpu_count: i32,
    placement: Placement,
) -> Result<Option<(Vec<FreeGpu>, Vec<(Uuid, i32)>)>, sqlx::Error> {
    for _ in 0..PLAN_ATTEMPTS {
        let candidates: Vec<(Uuid, i32)> = sqlx::query_as(
            "SELECT id, free_gpus FROM nodes WHERE pool_id = $1 AND admin_state = 'active' AND liveness = 'ready' \
             AND free_gpus > 0 ORDER BY free_gpus DESC, id LIMIT $2",
        )
        .bind(pool_id)
        .bind(gpu_count as i64)
        .fetch_all(&mut *conn)
        .await?;
        let free: Vec<i32> = candidates.iter().map(|c| c.1).collect();
        let takes = match placement {
            Placement::Spread => spread_counts(&free, gpu_count),
            _ => pack_counts(&free, gpu_count),
        };
        let Some(takes) = takes else { return Ok(None) };
        let mut plan: Vec<(Uuid, i32)> =
            candidates.iter().zip(takes).filter(|(_, t)| *t > 0).map(|(c, t)| (c.0, t)).collect();
        plan.sort_unstable();
        let ids: Vec<Uuid> = plan.iter().map(|p| p.0).collect();
        // A savepoint, so that a plan overtaken by others gives its locks back before the next attempt: a
        // transaction never waits for a node while holding one out of id order.
        sqlx::query("SAVEPOINT multi_node_plan").execute(&mut *conn).await?;
        let locked: Vec<(Uuid, i32)> = sqlx::query_as(
            "SELECT id, free_gpus FROM nodes WHERE id = ANY($1) AND admin_state = 'active' AND liveness = 'ready' \
             ORDER BY id FOR UPDATE",
        )
        .bind(&ids)
        .fetch_all(&mut *conn)
        .await?;
        let still_fits = locked.len() == plan.len() && locked.iter().zip(&plan).all(|(l, p)| l.0 == p.0 && l.1 >= p.1);
        if !still_fits {
            sqlx::query("ROLLBACK TO SAVEPOINT multi_node_plan").execute(&mut *conn).await?;
            continue;
        }
        let gpus: Vec<FreeGpu> = sqlx::query_as(FREE_GPUS_OF).bind(&ids).fetch_all(&mut *conn).await?;
        return Ok(Some((gpus, plan)));
    }
    Ok(None)
}

/// Allocate `gpu_count` GPUs of `pool_id` to `lease_id`, all or nothing, and record `event`. Returns the GPUs,
/// or None (having written nothing) when the pool cannot fit the request now. Runs inside the caller's
/// transaction, which holds the node locks until it commits.
pub async fn allocate_gpus(
    conn: &mut PgConnection,
    lease_id: Uuid,
    pool_id: Uuid,
    gpu_count: i32,
    placement: Placement,
    event: NewEvent<'_>,
) -> Result<Option<Vec<LeaseGpu>>, sqlx::Error> {
    let mut single = Vec::new();
    if placement != Placement::Spread {
        single = lock_best_fit(conn, pool_id, gpu_count).await?;
    }
    let (free, plan) = if !single.is_empty() {
        let node = single[0].0;
        (single, vec![(node, gpu_count)])
    } else if placement == Placement::SingleNode {
        return Ok(None);
    } else {
        match lock_multi_node(conn, pool_id, gpu_count, placement).await? {
            Some(found) => found,
            None => return Ok(None),
        }
    };
    // Pick the GPUs first, write after: a shortfall on any node leaves nothing to undo.
    let mut chosen: Vec<&FreeGpu> = Vec::with_capacity(gpu_count as usize);
    for (node_id, take) in &plan {
        let on_node: Vec<&FreeGpu> = free.iter().filter(|g| g.0 == *node_id).collect();
        let indices: Vec<i32> = on_node.iter().map(|g| g.4).collect();
        let Some(picked) = pick_compact(&indices, *take as usize) else {
            tracing::warn!(node.id = %node_id, "free_gpus counter disagrees with the GPUs free on the node");
            return Ok(None);
        };
        chosen.extend(on_node.into_iter().filter(|g| picked.contains(&g.4)));
    }
    let gpu_ids: Vec<Uuid> = chosen.iter().map(|g| g.3).collect();
    let node_ids: Vec<Uuid> = chosen.iter().map(|g| g.0).collect();
    let plan_nodes: Vec<Uuid> = plan.iter().map(|p| p.0).collect();
    let plan_takes: Vec<i32> = plan.iter().map(|p| p.1).collect();
    // One statement: hold the GPUs, decrement the counters, record the event.
    sqlx::query(
        "WITH held AS ( \
             INSERT INTO lease_gpus (lease_id, gpu_id, node_id) \
             SELECT $1, u.gpu, u.node FROM UNNEST($2::uuid[], $3::uuid[]) AS u(gpu, node)), \
         counted AS ( \
             UPDATE nodes n SET free_gpus = n.free_gpus - u.take \
             FROM UNNEST($4::uuid[], $5::int[]) AS u(id, take) WHERE n.id = u.id) \
         INSERT INTO lease_events (id, lease_id, kind, from_state, to_state, actor, reason, detail) \
         VALUES ($6, $1, $7, $8, $9, $10, $11, $12)",
    )
    .bind(lease_id)
    .bind(&gpu_ids)
    .bind(&node_ids)
    .bind(&plan_nodes)
    .bind(&plan_takes)
    .bind(new_id())
    .bind(event.kind)
    .bind(event.from.map(LeaseState::as_str))
    .bind(event.to.map(LeaseState::as_str))
    .bind(event.actor.label())
    .bind(event.reason)
    .bind(event.detail)
    .execute(&mut *conn)
    .await?;
    let mut gpus: Vec<LeaseGpu> = chosen
        .into_iter()
        .map(|g| LeaseGpu {
            gpu_id: g.3,
            node_id: g.0,
            hostname: g.1.clone(),
            address: g.2.clone(),
            index: g.4,
            uuid: g.5.clone(),
        })
        .collect();
    gpus.sort_by(|a, b| (&a.hostname, a.index).cmp(&(&b.hostname, b.index)));
    Ok(Some(gpus))
}

/// What a one-round-trip call (`allocate_lease_fast` / `release_lease_fast`, migration 0006) did.
pub enum FastOutcome {
    /// Done: the lease as it is now; for a release, whether leases wait in the pool's queue.
    Done(Lease, bool),
    /// An allocation the pool cannot hold now by its committed counters (nothing written): 409, or queue it.
    Insufficient(Capacity),
    /// Not the common case (a key or tenant not in order, quotas, a queue, spread, every fitting node held, a
    /// balance too small, open jobs, a lease not active ...): nothing was written. Check the key, then run the
    /// general path.
    Fallback,
}

#[derive(sqlx::FromRow)]
struct FastRow {
    outcome: String,
    lease: Option<sqlx::types::Json<Lease>>,
    queue_waiting: Option<bool>,
    capacity: Option<sqlx::types::Json<Capacity>>,
}

impl FastRow {
    fn into_outcome(self, done: &str) -> FastOutcome {
        match (self.outcome.as_str(), self.lease) {
            (outcome, Some(lease)) if outcome == done => {
                FastOutcome::Done(lease.0, self.queue_waiting.unwrap_or(false))
            }
            ("insufficient", _) => match self.capacity {
                Some(capacity) => FastOutcome::Insufficient(capacity.0),
                None => FastOutcome::Fallback,
            },
            _ => FastOutcome::Fallback,
        }
    }
}

/// A new active lease on one node (pack or single-node placement), best fit, in one statement that also
/// requires the caller's key to be valid, the tenant active and without quotas, and the balance sufficient.
/// Runs in its own transaction: give it the pool, not a transaction.
#[allow(clippy::too_many_arguments)]
pub async fn allocate_fast(
    db: &PgPool,
    lease_id: Uuid,
    key_id: Uuid,
    tenant_id: Uuid,
    pool_id: Uuid,
    gpu_count: i32,
    placement: Placement,
    term: Term,
    duration_hours: Option<i32>,
    months: Option<i32>,
) -> Result<FastOutcome, sqlx::Error> {
    let row: FastRow = sqlx::query_as(
        "SELECT outcome, lease, NULL::boolean AS queue_waiting, capacity \
         FROM allocate_lease_fast($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(lease_id)
    .bind(new_id())
    .bind(key_id)
    .bind(tenant_id)
    .bind(pool_id)
    .bind(gpu_count)
    .bind(placement)
    .bind(term)
    .bind(duration_hours)
    .bind(months)
    .fetch_one(db)
    .await?;
    Ok(row.into_outcome("allocated"))
}

/// Release an active lease of the tenant in one statement that also requires the caller's key to be valid.
/// Falls back when it is not, or the lease is not active, not the tenant's, or has open jobs.
pub async fn release_fast(
    db: &PgPool,
    lease_id: Uuid,
    key_id: Uuid,
    tenant_id: Uuid,
) -> Result<FastOutcome, sqlx::Error> {
    let row: FastRow = sqlx::query_as(
        "SELECT outcome, lease, queue_waiting, NULL::jsonb AS capacity FROM release_lease_fast($1, $2, $3, $4)",
    )
    .bind(lease_id)
    .bind(new_id())
    .bind(key_id)
    .bind(tenant_id)
    .fetch_one(db)
    .await?;
    Ok(row.into_outcome("released"))
}

/// Return a lease's GPUs to their nodes (healthy ones become free again) and record `event`. The nodes are
/// locked in id order first, the same order multi-node allocation locks them in.
pub async fn release_gpus(conn: &mut PgConnection, lease_id: Uuid, event: NewEvent<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "SELECT 1 FROM nodes WHERE id IN (SELECT node_id FROM lease_gpus WHERE lease_id = $1 AND released_at IS NULL) \
         ORDER BY id FOR UPDATE",
    )
    .bind(lease_id)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "WITH released AS ( \
             UPDATE lease_gpus SET released_at = now() WHERE lease_id = $1 AND released_at IS NULL RETURNING gpu_id, node_id), \
         freed AS ( \
             SELECT r.node_id, count(*) FILTER (WHERE g.healthy) AS n FROM released r JOIN gpus g ON g.id = r.gpu_id \
             GROUP BY r.node_id), \
         counted AS (UPDATE nodes SET free_gpus = nodes.free_gpus + freed.n FROM freed WHERE nodes.id = freed.node_id) \
         INSERT INTO lease_events (id, lease_id, kind, from_state, to_state, actor, reason, detail) \
         VALUES ($2, $1, $3, $4, $5, $6, $7, $8)",
    )
    .bind(lease_id)
    .bind(new_id())
    .bind(event.kind)
    .bind(event.from.map(LeaseState::as_str))
    .bind(event.to.map(LeaseState::as_str))
    .bind(event.actor.label())
    .bind(event.reason)
    .bind(event.detail)
    .execute(conn)
    .await?;
    Ok(())
}

/// Capacity figures for an error message (only computed when a request did not fit).
pub async fn capacity(conn: &mut PgConnection, pool_id: Uuid, requested: i32) -> Result<Capacity, sqlx::Error> {
    let (free_gpus, largest_free_block, queued_ahead): (i64, i64, i64) = sqlx::query_as(
        "SELECT COALESCE(sum(free_gpus), 0)::bigint, COALESCE(max(free_gpus), 0)::bigint, \
                (SELECT count(*) FROM leases WHERE pool_id = $1 AND state = 'queued') \
         FROM nodes WHERE pool_id = $1 AND admin_state = 'active' AND liveness = 'ready'",
    )
    .bind(pool_id)
    .fetch_one(conn)
    .await?;
    Ok(Capacity { requested, free_gpus, largest_free_block, queued_ahead })
}

/// The pool's size whatever its state: all its GPUs, and the most on one node. Requests above these can never fit.
pub async fn pool_size(conn: &mut PgConnection, pool_id: Uuid) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        "SELECT COALESCE(sum(gpu_count), 0)::bigint, COALESCE(max(gpu_count), 0)::bigint FROM nodes WHERE pool_id = $1",
    )
    .bind(pool_id)
    .fetch_one(conn)
    .await
}

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

pub async fn record_event(conn: &mut PgConnection, lease_id: Uuid, event: NewEvent<'_>) -> Result<(), sqlx::Error> {
    let NewEvent { kind, from, to, actor, reason, detail } = event;
    sqlx::query(
        "INSERT INTO lease_events (id, lease_id, kind, from_state, to_state, actor, reason, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(new_id())
    .bind(lease_id)
    .bind(kind)
    .bind(from.map(LeaseState::as_str))
    .bind(to.map(LeaseState::as_str))
    .bind(actor.label())
    .bind(reason)
    .bind(detail)
    .execute(conn)
    .await?;
    Ok(())
}

/// A lease row as stored; `into_lease` adds its GPUs.
#[derive(sqlx::FromRow)]
pub struct LeaseRow {
    id: Uuid,
    tenant_id: Uuid,
    pub pool_id: Uuid,
    gpu_count: i32,
    placement: Placement,
    term: Term,
    duration_hours: Option<i32>,
    months: Option<i32>,
    state: LeaseState,
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
    ended_at: Option<DateTime<Utc>>,
    end_reason: Option<String>,
    generation: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

const LEASE_COLUMNS: &str = "id, tenant_id, pool_id, gpu_count, placement, term, duration_hours, months, state, \
    starts_at, ends_at, ended_at, end_reason, generation, created_at, updated_at";

/// Filters for listing leases. `tenant_id` is always set for tenant callers.
#[derive(Debug, Default, Clone)]
pub struct LeaseFilter {
    pub tenant_id: Option<Uuid>,
    pub pool_id: Option<Uuid>,
    pub state: Option<LeaseState>,
    pub after: Uuid,
    pub limit: i64,
}

pub async fn list_leases(conn: &mut PgConnection, filter: &LeaseFilter) -> Result<Vec<Lease>, sqlx::Error> {
    let rows: Vec<LeaseRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {LEASE_COLUMNS} FROM leases WHERE id > $1 AND ($2::uuid IS NULL OR tenant_id = $2) \
         AND ($3::uuid IS NULL OR pool_id = $3) AND ($4::text IS NULL OR state = $4) ORDER BY id LIMIT $5"
    )))
    .bind(filter.after)
    .bind(filter.tenant_id)
    .bind(filter.pool_id)
    .bind(filter.state)
    .bind(filter.limit)
    .fetch_all(&mut *conn)
    .await?;
    with_gpus(conn, rows).await
}

/// Load a lease; with `tenant_id`, only if it is that tenant's (another tenant's lease is "not found").
pub async fn load_lease(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    id: Uuid,
) -> Result<Option<Lease>, sqlx::Error> {
    let rows: Vec<LeaseRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {LEASE_COLUMNS} FROM leases WHERE id = $1 AND ($2::uuid IS NULL OR tenant_id = $2)"
    )))
    .bind(id)
    .bind(tenant_id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(with_gpus(conn, rows).await?.pop())
}

impl LeaseRow {
    pub fn into_lease(self, gpus: Vec<LeaseGpu>) -> Lease {
        Lease {
            gpus,
            id: self.id,
            tenant_id: self.tenant_id,
            pool_id: self.pool_id,
            gpu_count: self.gpu_count,
            placement: self.placement,
            term: self.term,
            duration_hours: self.duration_hours,
            months: self.months,
            state: self.state,
            starts_at: self.starts_at,
            ends_at: self.ends_at,
            ended_at: self.ended_at,
            end_reason: self.end_reason,
            generation: self.generation,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// (lease id, GPU) of the given leases' GPUs.
const LEASE_GPUS: &str = "SELECT lg.lease_id, g.id AS gpu_id, n.id AS node_id, n.hostname, n.address, g.idx AS index, g.uuid \
    FROM lease_gpus lg JOIN gpus g ON g.id = lg.gpu_id JOIN nodes n ON n.id = lg.node_id";

#[derive(sqlx::FromRow)]
struct HeldGpu {
    lease_id: Uuid,
    #[sqlx(flatten)]
    gpu: LeaseGpu,
}

async fn with_gpus(conn: &mut PgConnection, rows: Vec<LeaseRow>) -> Result<Vec<Lease>, sqlx::Error> {
    let held: Vec<HeldGpu> = match rows.as_slice() {
        [] => Vec::new(),
        // One lease (the common case): an equality lookup, whatever the table statistics say.
        [one] => {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "{LEASE_GPUS} WHERE lg.lease_id = $1 ORDER BY n.hostname, g.idx"
            )))
            .bind(one.id)
            .fetch_all(&mut *conn)
            .await?
        }
        many => {
            let ids: Vec<Uuid> = many.iter().map(|r| r.id).collect();
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "{LEASE_GPUS} WHERE lg.lease_id = ANY($1) ORDER BY lg.lease_id, n.hostname, g.idx"
            )))
            .bind(&ids)
            .fetch_all(&mut *conn)
            .await?
        }
    };
    Ok(rows
        .into_iter()
        .map(|r| {
            let gpus = held.iter().filter(|h| h.lease_id == r.id).map(|h| h.gpu.clone()).collect();
            r.into_lease(gpus)
        })
        .collect())
}

/// 404 unless the lease exists and is the tenant's (another tenant's lease is never revealed).
pub async fn ensure_owned(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
) -> Result<(), crate::error::ApiError> {
    let owned: Option<(Uuid,)> = sqlx::query_as("SELECT id FROM leases WHERE id = $1 AND tenant_id = $2")
        .bind(lease_id)
        .bind(tenant_id)
        .fetch_optional(conn)
        .await?;
    owned.map(|_| ()).ok_or(crate::error::ApiError::NotFound("lease"))
}

pub async fn list_events(conn: &mut PgConnection, lease_id: Uuid) -> Result<Vec<LeaseEvent>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, at, kind, from_state, to_state, actor, reason, detail FROM lease_events WHERE lease_id = $1 ORDER BY id",
    )
    .bind(lease_id)
    .fetch_all(conn)
    .await
}

/// What ending a lease did.
pub struct Ended {
    pub from: LeaseState,
    /// Leases wait in the pool's queue: the freed GPUs may start one.
    pub queue_waiting: bool,
    /// The lease as it is now (without its GPUs).
    pub lease: LeaseRow,
}

/// End a live lease (queued or active): set its final state, free its GPUs, record the event. With
/// `tenant_id`, only that tenant's lease. Returns None when no such live lease exists (ending twice is
/// harmless). `ended_at` defaults to now; expiry passes the scheduled end, interruption the node's last
/// heartbeat; it is never before the lease started.
pub async fn end_lease(
    conn: &mut PgConnection,
    lease_id: Uuid,
    tenant_id: Option<Uuid>,
    to: LeaseState,
    reason: &str,
    actor: &Actor,
    ended_at: Option<DateTime<Utc>>,
) -> Result<Option<Ended>, sqlx::Error> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        lease: LeaseRow,
        old_state: LeaseState,
        queue_waiting: bool,
    }
    let ended: Option<Row> = sqlx::query_as(
        "UPDATE leases l SET state = $2, \
             ended_at = GREATEST(LEAST(COALESCE($3, now()), now()), COALESCE(l.starts_at, now())), end_reason = $4, \
             generation = l.generation + 1, updated_at = now() \
         FROM (SELECT id, state AS old_state FROM leases WHERE id = $1 AND ($5::uuid IS NULL OR tenant_id = $5) \
               FOR UPDATE) old \
         WHERE l.id = old.id AND old.old_state IN ('queued', 'active') \
         RETURNING l.id, l.tenant_id, l.pool_id, l.gpu_count, l.placement, l.term, l.duration_hours, l.months, l.state, \
             l.starts_at, l.ends_at, l.ended_at, l.end_reason, l.generation, l.created_at, l.updated_at, old.old_state, \
             EXISTS (SELECT 1 FROM leases q WHERE q.pool_id = l.pool_id AND q.state = 'queued' AND q.id <> l.id) \
                 AS queue_waiting",
    )
    .bind(lease_id)
    .bind(to)
    .bind(ended_at)
    .bind(reason)
    .bind(tenant_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(Row { lease, old_state: from, queue_waiting }) = ended else { return Ok(None) };
    crate::jobs::store::end_jobs_of_lease(conn, lease_id, to, reason).await?;
    let event = NewEvent::new(to.as_str(), Some(from), Some(to), actor).reason(reason);
    if from == LeaseState::Active {
        release_gpus(conn, lease_id, event).await?;
    } else {
        record_event(conn, lease_id, event).await?;
    }
    Ok(Some(Ended { from, queue_waiting, lease }))
}

/// The GPUs a lease holds or held, for a lease loaded without them.
pub async fn lease_gpus(conn: &mut PgConnection, lease_id: Uuid) -> Result<Vec<LeaseGpu>, sqlx::Error> {
    let held: Vec<HeldGpu> =
        sqlx::query_as(sqlx::AssertSqlSafe(format!("{LEASE_GPUS} WHERE lg.lease_id = $1 ORDER BY n.hostname, g.idx")))
            .bind(lease_id)
            .fetch_all(conn)
            .await?;
    Ok(held.into_iter().map(|h| h.gpu).collect())
}

/// Start queued leases of a pool in arrival order while they fit (strict FIFO: a head that does not fit
/// blocks the ones behind it, so large requests are not starved). One replica at a time per pool.
pub async fn start_queued(db: &PgPool, pool_id: Uuid) -> Result<u32, sqlx::Error> {
    let mut tx = db.begin().await?;
    let (locked,): (bool,) =
        sqlx::query_as("SELECT pg_try_advisory_xact_lock(hashtextextended('queue:' || $1::text, 0))")
            .bind(pool_id)
            .fetch_one(&mut *tx)
            .await?;
    if !locked {
        return Ok(0);
    }
    let mut started = 0;
    loop {
        let head: Option<(Uuid, i32, Placement)> = sqlx::query_as(
            "SELECT id, gpu_count, placement FROM leases WHERE pool_id = $1 AND state = 'queued' ORDER BY id LIMIT 1 FOR UPDATE",
        )
        .bind(pool_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((lease_id, gpu_count, placement)) = head else { break };
        let event = NewEvent::new("allocated", Some(LeaseState::Queued), Some(LeaseState::Active), &Actor::System)
            .reason("capacity freed");
        if allocate_gpus(&mut tx, lease_id, pool_id, gpu_count, placement, event).await?.is_none() {
            break;
        }
        sqlx::query(
            "UPDATE leases SET state = 'active', starts_at = now(), metered_until = now(), \
                 ends_at = now() + make_interval(months => COALESCE(months, 0), hours => COALESCE(duration_hours, 0)), \
                 generation = generation + 1, updated_at = now() WHERE id = $1",
        )
        .bind(lease_id)
        .execute(&mut *tx)
        .await?;
        started += 1;
    }
    tx.commit().await?;
    Ok(started)
}

/// Expire up to `batch` active leases whose end time has passed. Safe on several replicas (SKIP LOCKED).
/// Returns how many it expired.
pub async fn expire_due(db: &PgPool, batch: i64) -> Result<usize, sqlx::Error> {
    let mut tx = db.begin().await?;
    let due: Vec<(Uuid, DateTime<Utc>)> = sqlx::query_as(
        "SELECT id, ends_at FROM leases WHERE state = 'active' AND ends_at <= now() ORDER BY ends_at LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(batch)
    .fetch_all(&mut *tx)
    .await?;
    let count = due.len();
    for (lease_id, ends_at) in due {
        end_lease(&mut tx, lease_id, None, LeaseState::Expired, "reached its end time", &Actor::System, Some(ends_at))
            .await?;
    }
    tx.commit().await?;
    Ok(count)
}
