//! Lease persistence: allocation, release, transitions and events. Every function that writes takes the
//! caller's connection or transaction, so callers compose them atomically.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use utoipa::ToSchema;
use uuid::Uuid;

use super::placement::{pick_compact, spread_counts};
use super::{Actor, Lease, LeaseEvent, LeaseGpu, LeaseState, Placement, Term};
use crate::extract::new_id;

/// What is free in a pool, as told to a tenant whose request did not fit.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Capacity {
    pub requested: i32,
    /// Free GPUs in the pool now.
    pub free_gpus: i64,
    /// The most free GPUs on one node now.
    pub largest_free_block: i64,
    /// Leases waiting ahead in the pool's queue.
    pub queued_ahead: i64,
}

const BEST_FIT: &str = "SELECT id, free_gpus FROM nodes \
    WHERE pool_id = $1 AND admin_state = 'active' AND liveness = 'ready' AND free_gpus >= $2 AND id <> ALL($3) \
    ORDER BY free_gpus, id LIMIT 1 FOR UPDATE";
const BEST_FIT_SKIP_LOCKED: &str = "SELECT id, free_gpus FROM nodes \
    WHERE pool_id = $1 AND admin_state = 'active' AND liveness = 'ready' AND free_gpus >= $2 AND id <> ALL($3) \
    ORDER BY free_gpus, id LIMIT 1 FOR UPDATE SKIP LOCKED";
const LARGEST: &str = "SELECT id, free_gpus FROM nodes \
    WHERE pool_id = $1 AND admin_state = 'active' AND liveness = 'ready' AND free_gpus > 0 AND id <> ALL($2) \
    ORDER BY free_gpus DESC, id DESC LIMIT 1 FOR UPDATE";

/// Lock the allocatable node with the smallest free block of at least `need` GPUs. Nodes locked by concurrent
/// allocations are skipped first (so allocations spread over nodes instead of queueing on one); only if none
/// is found does it wait for locked nodes, so a "no capacity" answer is never caused by a lock.
async fn lock_best_fit(
    conn: &mut PgConnection,
    pool_id: Uuid,
    need: i32,
    taken: &[Uuid],
) -> Result<Option<(Uuid, i32)>, sqlx::Error> {
    for sql in [BEST_FIT_SKIP_LOCKED, BEST_FIT] {
        let found: Option<(Uuid, i32)> =
            sqlx::query_as(sql).bind(pool_id).bind(need).bind(taken).fetch_optional(&mut *conn).await?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// Decide how many GPUs to take from which node, locking those nodes. None when the pool cannot fit it now.
async fn plan_nodes(
    conn: &mut PgConnection,
    pool_id: Uuid,
    gpu_count: i32,
    placement: Placement,
) -> Result<Option<Vec<(Uuid, i32)>>, sqlx::Error> {
    match placement {
        Placement::SingleNode => {
            Ok(lock_best_fit(conn, pool_id, gpu_count, &[]).await?.map(|(id, _)| vec![(id, gpu_count)]))
        }
        Placement::Pack => {
            // Fewest nodes: if one node fits the rest, take the best fit and stop; otherwise take the largest
            // free block whole and go on.
            let mut plan: Vec<(Uuid, i32)> = Vec::new();
            let mut taken: Vec<Uuid> = Vec::new();
            let mut left = gpu_count;
            while left > 0 {
                if let Some((id, _)) = lock_best_fit(conn, pool_id, left, &taken).await? {
                    plan.push((id, left));
                    return Ok(Some(plan));
                }
                let largest: Option<(Uuid, i32)> =
                    sqlx::query_as(LARGEST).bind(pool_id).bind(&taken).fetch_optional(&mut *conn).await?;
                let Some((id, free)) = largest else { return Ok(None) };
                let take = free.min(left);
                plan.push((id, take));
                taken.push(id);
                left -= take;
            }
            Ok(Some(plan))
        }
        Placement::Spread => {
            let nodes: Vec<(Uuid, i32)> = sqlx::query_as(
                "SELECT id, free_gpus FROM nodes WHERE pool_id = $1 AND admin_state = 'active' AND liveness = 'ready' \
                 AND free_gpus > 0 ORDER BY free_gpus DESC, id DESC LIMIT $2 FOR UPDATE",
            )
            .bind(pool_id)
            .bind(gpu_count as i64)
            .fetch_all(&mut *conn)
            .await?;
            let free: Vec<i32> = nodes.iter().map(|n| n.1).collect();
            Ok(spread_counts(&free, gpu_count)
                .map(|take| nodes.iter().zip(take).filter(|(_, t)| *t > 0).map(|(n, t)| (n.0, t)).collect()))
        }
    }
}

/// Allocate `gpu_count` GPUs of `pool_id` to `lease_id`, all or nothing. Returns false (having written nothing)
/// when the pool cannot fit the request now. Runs inside the caller's transaction, which holds the node locks
/// until it commits.
pub async fn allocate_gpus(
    conn: &mut PgConnection,
    lease_id: Uuid,
    pool_id: Uuid,
    gpu_count: i32,
    placement: Placement,
) -> Result<bool, sqlx::Error> {
    let Some(plan) = plan_nodes(conn, pool_id, gpu_count, placement).await? else { return Ok(false) };
    // Pick the GPUs first, write after: a shortfall on any node leaves nothing to undo.
    let mut picks: Vec<(Uuid, Vec<Uuid>)> = Vec::with_capacity(plan.len());
    for (node_id, take) in &plan {
        let free: Vec<(Uuid, i32)> = sqlx::query_as(
            "SELECT g.id, g.idx FROM gpus g WHERE g.node_id = $1 AND g.healthy AND NOT EXISTS \
             (SELECT 1 FROM lease_gpus lg WHERE lg.gpu_id = g.id AND lg.released_at IS NULL)",
        )
        .bind(node_id)
        .fetch_all(&mut *conn)
        .await?;
        let indices: Vec<i32> = free.iter().map(|g| g.1).collect();
        let Some(chosen) = pick_compact(&indices, *take as usize) else {
            tracing::warn!(node.id = %node_id, "free_gpus counter disagrees with the GPUs free on the node");
            return Ok(false);
        };
        let ids = free.iter().filter(|g| chosen.contains(&g.1)).map(|g| g.0).collect();
        picks.push((*node_id, ids));
    }
    let mut gpu_ids = Vec::with_capacity(gpu_count as usize);
    let mut node_ids = Vec::with_capacity(gpu_count as usize);
    for (node_id, ids) in &picks {
        for id in ids {
            gpu_ids.push(*id);
            node_ids.push(*node_id);
        }
    }
    sqlx::query("INSERT INTO lease_gpus (lease_id, gpu_id, node_id) SELECT $1, u.gpu, u.node FROM UNNEST($2::uuid[], $3::uuid[]) AS u(gpu, node)")
        .bind(lease_id)
        .bind(&gpu_ids)
        .bind(&node_ids)
        .execute(&mut *conn)
        .await?;
    let nodes: Vec<Uuid> = picks.iter().map(|p| p.0).collect();
    let takes: Vec<i32> = picks.iter().map(|p| p.1.len() as i32).collect();
    sqlx::query(
        "UPDATE nodes n SET free_gpus = n.free_gpus - u.take FROM UNNEST($1::uuid[], $2::int[]) AS u(id, take) WHERE n.id = u.id",
    )
    .bind(&nodes)
    .bind(&takes)
    .execute(&mut *conn)
    .await?;
    Ok(true)
}

/// Return a lease's GPUs to their nodes (healthy ones become free again).
pub async fn release_gpus(conn: &mut PgConnection, lease_id: Uuid) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "WITH released AS ( \
             UPDATE lease_gpus SET released_at = now() WHERE lease_id = $1 AND released_at IS NULL RETURNING gpu_id, node_id), \
         freed AS ( \
             SELECT r.node_id, count(*) FILTER (WHERE g.healthy) AS n FROM released r JOIN gpus g ON g.id = r.gpu_id \
             GROUP BY r.node_id) \
         UPDATE nodes SET free_gpus = nodes.free_gpus + freed.n FROM freed WHERE nodes.id = freed.node_id",
    )
    .bind(lease_id)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
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

#[derive(sqlx::FromRow)]
struct LeaseRow {
    id: Uuid,
    tenant_id: Uuid,
    pool_id: Uuid,
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

async fn with_gpus(conn: &mut PgConnection, rows: Vec<LeaseRow>) -> Result<Vec<Lease>, sqlx::Error> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let gpus: Vec<(Uuid, Uuid, Uuid, String, String, i32, String)> = sqlx::query_as(
        "SELECT lg.lease_id, g.id, n.id, n.hostname, n.address, g.idx, g.uuid FROM lease_gpus lg \
         JOIN gpus g ON g.id = lg.gpu_id JOIN nodes n ON n.id = lg.node_id \
         WHERE lg.lease_id = ANY($1) ORDER BY lg.lease_id, n.hostname, g.idx",
    )
    .bind(&ids)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Lease {
            gpus: gpus
                .iter()
                .filter(|g| g.0 == r.id)
                .map(|g| LeaseGpu {
                    gpu_id: g.1,
                    node_id: g.2,
                    hostname: g.3.clone(),
                    address: g.4.clone(),
                    index: g.5,
                    uuid: g.6.clone(),
                })
                .collect(),
            id: r.id,
            tenant_id: r.tenant_id,
            pool_id: r.pool_id,
            gpu_count: r.gpu_count,
            placement: r.placement,
            term: r.term,
            duration_hours: r.duration_hours,
            months: r.months,
            state: r.state,
            starts_at: r.starts_at,
            ends_at: r.ends_at,
            ended_at: r.ended_at,
            end_reason: r.end_reason,
            generation: r.generation,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
        .collect())
}

pub async fn list_events(conn: &mut PgConnection, lease_id: Uuid) -> Result<Vec<LeaseEvent>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, at, kind, from_state, to_state, actor, reason, detail FROM lease_events WHERE lease_id = $1 ORDER BY id",
    )
    .bind(lease_id)
    .fetch_all(conn)
    .await
}

/// End a live lease (queued or active): set its final state, free its GPUs, record the event.
/// Returns the pool and previous state, or None when the lease was not live (ending twice is harmless).
/// `ended_at` defaults to now; expiry passes the scheduled end, interruption the node's last heartbeat.
pub async fn end_lease(
    conn: &mut PgConnection,
    lease_id: Uuid,
    to: LeaseState,
    reason: &str,
    actor: &Actor,
    ended_at: Option<DateTime<Utc>>,
) -> Result<Option<(Uuid, LeaseState)>, sqlx::Error> {
    let ended: Option<(Uuid, LeaseState)> = sqlx::query_as(
        "UPDATE leases l SET state = $2, \
             ended_at = GREATEST(LEAST(COALESCE($3, now()), now()), COALESCE(l.starts_at, now())), end_reason = $4, \
             generation = l.generation + 1, updated_at = now() \
         FROM (SELECT id, state AS old_state FROM leases WHERE id = $1 FOR UPDATE) old \
         WHERE l.id = old.id AND old.old_state IN ('queued', 'active') \
         RETURNING l.pool_id, old.old_state",
    )
    .bind(lease_id)
    .bind(to)
    .bind(ended_at)
    .bind(reason)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((pool_id, from)) = ended else { return Ok(None) };
    release_gpus(conn, lease_id).await?;
    record_event(conn, lease_id, NewEvent::new(to.as_str(), Some(from), Some(to), actor).reason(reason)).await?;
    Ok(Some((pool_id, from)))
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
        if !allocate_gpus(&mut tx, lease_id, pool_id, gpu_count, placement).await? {
            break;
        }
        sqlx::query(
            "UPDATE leases SET state = 'active', starts_at = now(), \
                 ends_at = now() + make_interval(months => COALESCE(months, 0), hours => COALESCE(duration_hours, 0)), \
                 generation = generation + 1, updated_at = now() WHERE id = $1",
        )
        .bind(lease_id)
        .execute(&mut *tx)
        .await?;
        let event = NewEvent::new("allocated", Some(LeaseState::Queued), Some(LeaseState::Active), &Actor::System);
        record_event(&mut tx, lease_id, event.reason("capacity freed")).await?;
        started += 1;
    }
    tx.commit().await?;
    Ok(started)
}

/// Expire active leases whose end time has passed. Safe on several replicas (SKIP LOCKED). Returns the pools
/// that got capacity back.
pub async fn expire_due(db: &PgPool, batch: i64) -> Result<Vec<Uuid>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let due: Vec<(Uuid, DateTime<Utc>)> = sqlx::query_as(
        "SELECT id, ends_at FROM leases WHERE state = 'active' AND ends_at <= now() ORDER BY ends_at LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(batch)
    .fetch_all(&mut *tx)
    .await?;
    let mut pools = Vec::new();
    for (lease_id, ends_at) in due {
        if let Some((pool_id, _)) =
            end_lease(&mut tx, lease_id, LeaseState::Expired, "reached its end time", &Actor::System, Some(ends_at))
                .await?
            && !pools.contains(&pool_id)
        {
            pools.push(pool_id);
        }
    }
    tx.commit().await?;
    Ok(pools)
}
