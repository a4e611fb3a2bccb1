//! Allocation: admission, placement over nodes and the writing of a lease, the tuned hot path that
//! `cargo bench --bench allocation` measures. Its statements are as they were tuned: do not split them.

use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use utoipa::ToSchema;
use uuid::Uuid;

use super::events::NewEvent;
use super::parts::NewPart;
use super::placement::{pack_counts, spread_counts};
use super::{Actor, Lease, LeaseState, Placement, Term};
use crate::StoreResult;
use crate::new_id;

/// A transaction for allocation. Its statements keep one plan per connection (a generic plan) instead of being
/// planned anew for each call's parameters: the write statement ([`write_lease`]) has nine parts, and planning
/// it per call was the largest single cost of a create in `cargo bench --bench allocation`. Every statement
/// that runs in it is written to be index-driven whatever its parameters (arrays through `= ANY`, equality on
/// keys), so the generic plan is the plan a custom one would be. `SET LOCAL` ends with the transaction.
pub async fn begin(db: &PgPool) -> StoreResult<sqlx::Transaction<'static, sqlx::Postgres>> {
    Ok(db.begin_with("BEGIN; SET LOCAL plan_cache_mode = force_generic_plan").await?)
}

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

/// Nodes of pool `pool` that may take `need` GPUs on their own, best fit first: allocatable (active and
/// ready), and of those the smallest sufficient free block, then the lowest id. The one statement of the rule,
/// used by the admission statement and by the wait mode; `and` adds conditions, `tail` a limit and locking,
/// `columns` what it selects of the nodes.
fn best_fit_sql(pool: &str, need: &str, and: &str, tail: &str, columns: &str) -> String {
    format!(
        "SELECT {columns} FROM nodes WHERE pool_id = {pool} AND node_allocatable(admin_state, liveness) \
         AND free_gpus >= {need} {and} ORDER BY free_gpus, id {tail}"
    )
}

/// How many times a multi-node plan is re-made when its nodes changed between planning and locking.
const PLAN_ATTEMPTS: usize = 3;

/// What the admission statement of a new lease found, and the lease when it wrote one: one row whatever it found.
#[derive(sqlx::FromRow)]
pub struct Admission {
    /// The caller's key, for the server's `TenantAdminToken::accept`.
    #[sqlx(flatten)]
    pub key: crate::auth::KeyCheck,
    /// The key's tenant has a quota (None: no such tenant); only then is the tenant row locked, later.
    pub tenant_has_quotas: Option<bool>,
    /// The pool's currency; None: no such pool.
    pub pool_currency: Option<String>,
    /// `lease_upfront_minor` for the request at the pool's current price (None: the pool has no price).
    pub required_minor: Option<i64>,
    /// The tenant's balance in the pool's currency.
    pub balance_minor: Option<i64>,
    /// The balance covers `required_minor` ([`crate::billing::balance_covers_sql`]); None: no such pool.
    pub balance_covers: Option<bool>,
    /// Leases wait in the pool's queue: a new request does not jump it.
    pub queued_ahead: bool,
    /// Whether the statement tried to lock the best-fit node (asked to, no quota, no queue).
    pub lock_tried: bool,
    /// The best-fit node it locked (SKIP LOCKED).
    pub locked_node: Option<Uuid>,
    /// Some allocatable node has room for the request on its own, by this statement's snapshot; only looked up
    /// when the statement tried to lock one and locked none (false otherwise), the one case that reads it.
    pub node_fits: bool,
    /// The lease, active on the locked node, when the statement wrote it (see [`admit`]).
    pub lease: Option<sqlx::types::Json<Lease>>,
}

/// The first statement of a new lease: everything admission needs (the caller's key and tenant, quotas or not,
/// the up-front amount and the balance, a queue in the pool) and, with `try_lock` when nothing in that stops it,
/// the best-fit node locked with SKIP LOCKED. A SKIP LOCKED miss can keep a stray lock (a row updated under it
/// that then failed the recheck); such a row was a candidate in the statement's snapshot, so `node_fits` is
/// true whenever one may be held: the caller then rolls the transaction back and retries in wait mode
/// instead of waiting for anything while it may hold a node.
///
/// When it locked a node and everything admits the request (the key may act for `new.tenant_id`, the pool
/// exists, the balance covers it), the same statement also writes the lease on that node, active, with the
/// writes of [`write_lease`] (the one statement of them, [`lease_write_ctes`]). That needs the statement's
/// snapshot to show the node's GPUs as they are now: every change to which of a node's GPUs are free and healthy
/// updates the node's row under its lock, so the snapshot is current if the row it locked is the version the
/// snapshot shows. When it is not (a change committed between the snapshot and the lock), the statement writes
/// nothing and the caller goes on as without the write: in a transaction, [`place`] and [`write_lease`] on the
/// node it holds, in a new snapshot. Run on its own (autocommit) it is a whole create in one round trip.
pub async fn admit(
    conn: &mut PgConnection,
    new: &NewLease,
    session_id: Option<Uuid>,
    try_lock: bool,
) -> StoreResult<Admission> {
    let actor = Actor::Tenant(new.created_by);
    let event = NewEvent::new("allocated", None, Some(LeaseState::Active), &actor);
    let sql = format!(
        "WITH {key_check}, \
         tenant AS ( \
             SELECT t.id, t.max_concurrent_leases IS NOT NULL OR t.max_gpus_per_pool IS NOT NULL \
                 OR EXISTS (SELECT 1 FROM tenant_pool_quotas q WHERE q.tenant_id = t.id AND q.pool_id = $11) AS has_quotas \
             FROM tenants t WHERE t.id = (SELECT checked_tenant_id FROM key_check)), \
         pool AS ( \
             SELECT due.*, {covers} AS balance_covers FROM ( \
                 SELECT p.id, p.currency, \
                     lease_upfront_minor($12, $14, COALESCE($16, 0), cp.price_per_gpu_hour_minor, cp.price_per_gpu_month_minor) \
                         AS required_minor, \
                     COALESCE(b.balance_minor, 0) AS balance_minor, \
                     EXISTS (SELECT 1 FROM leases q WHERE q.pool_id = p.id AND q.state = 'queued') AS queued_ahead \
                 FROM pools p LEFT JOIN pool_current_prices cp ON cp.pool_id = p.id \
                 LEFT JOIN tenant_balances b ON b.tenant_id = (SELECT id FROM tenant) AND b.currency = p.currency \
                 WHERE p.id = $11) due), \
         gate AS (SELECT $21 AND NOT COALESCE((SELECT has_quotas FROM tenant), true) \
                      AND NOT COALESCE((SELECT queued_ahead FROM pool), true) AS lock_tried), \
         best_fit AS ({best_fit}), \
         seen AS (SELECT ctid AS seen FROM nodes WHERE id = (SELECT id FROM best_fit)), \
         admitted AS ( \
             SELECT COALESCE((SELECT key_may_act AND checked_tenant_id = $10 FROM key_check), false) \
                 AND COALESCE((SELECT balance_covers FROM pool), false) \
                 AND (SELECT locked FROM best_fit) = (SELECT seen FROM seen) AS go), \
         {write} \
         SELECT key_check.*, tenant.has_quotas AS tenant_has_quotas, pool.currency AS pool_currency, \
             pool.required_minor, pool.balance_minor, pool.balance_covers, \
             COALESCE(pool.queued_ahead, false) AS queued_ahead, \
             gate.lock_tried, (SELECT id FROM best_fit) AS locked_node, \
             gate.lock_tried AND (SELECT id FROM best_fit) IS NULL AND EXISTS ({fits}) AS node_fits, \
             (SELECT lease FROM written) AS lease \
         FROM gate LEFT JOIN key_check ON true LEFT JOIN tenant ON true LEFT JOIN pool ON true",
        key_check = crate::auth::key_check_cte("$17", "$22"),
        covers = crate::billing::balance_covers_sql("due.balance_minor", "due.required_minor"),
        best_fit = best_fit_sql(
            "$11",
            "$12",
            "AND (SELECT lock_tried FROM gate)",
            "LIMIT 1 FOR UPDATE SKIP LOCKED",
            "id, ctid AS locked"
        ),
        write = lease_write_ctes(
            "SELECT id AS node_id, $12::int AS take FROM best_fit WHERE (SELECT go FROM admitted)",
            "(SELECT go FROM admitted)",
            LeaseWrite::Create(new)
        ),
        fits = best_fit_sql("$11", "$12", "", "", "id"),
    );
    // Runtime SQL: it embeds the one statement of the key check (`auth::key_check_cte`), of the
    // balance rule (`billing::balance_covers_sql`), of the best-fit rule (`best_fit_sql`) and of the lease's
    // writes (`lease_write_ctes`), which the macros cannot take as fragments; a literal would repeat them.
    let write = LeaseWriteArgs { lease: LeaseWrite::Create(new), plan: None, event, active: true };
    // `$21` and `$22` follow the write's parameters.
    let mut admission: Admission = bind_lease_write(sqlx::query_as(sqlx::AssertSqlSafe(sql)), &write)
        .bind(try_lock)
        .bind(session_id)
        .fetch_one(&mut *conn)
        .await?;
    if let Some(lease) = admission.lease.as_mut() {
        read_parts(conn, &mut lease.0).await?;
    }
    Ok(admission)
}

impl Admission {
    /// Where allocation starts. None: every node that fits was held by others and a stray lock may be held
    /// (see [`admit`]): roll the transaction back and run it again without `try_lock`, in wait mode.
    pub fn best_fit(&self) -> Option<BestFit> {
        match self.locked_node {
            Some(node) => Some(BestFit::Locked(node)),
            None if self.lock_tried && self.node_fits => None,
            None if self.lock_tried => Some(BestFit::NoneFits),
            None => Some(BestFit::Search),
        }
    }
}

/// Where allocation starts looking for a single node.
#[derive(Debug, Clone, Copy)]
pub enum BestFit {
    /// The admission statement locked this best-fit node.
    Locked(Uuid),
    /// The admission statement looked: no allocatable node has room on its own, and nothing was locked.
    NoneFits,
    /// Nothing looked yet: skip held nodes, then wait for them one at a time ([`lock_best_fit`]).
    Search,
}

/// Lock the best-fit node for `need` GPUs and return it (None: none fits). Nodes locked by concurrent
/// allocations are skipped first (so allocations spread over nodes instead of queueing on one); only if none is
/// found does it wait for locked ones, so "no capacity" is never an artefact of a lock. It holds no other node
/// lock while it waits, so it cannot deadlock.
async fn lock_best_fit(conn: &mut PgConnection, pool_id: Uuid, need: i32) -> StoreResult<Option<Uuid>> {
    // Even SKIP LOCKED can keep a stray lock (a row updated under it that then fails the recheck), so the
    // attempt runs in a savepoint that a miss rolls back before any waiting starts.
    sqlx::query!("SAVEPOINT best_fit_skip").execute(&mut *conn).await?;
    // The three lookups below stay runtime SQL: they are `best_fit_sql`, the one statement of the best-fit rule
    // that the admission statement embeds too (see `admit`).
    // Runtime SQL: `best_fit_sql`, shared with admission.
    let node: Option<(Uuid,)> =
        sqlx::query_as(sqlx::AssertSqlSafe(best_fit_sql("$1", "$2", "", "LIMIT 1 FOR UPDATE SKIP LOCKED", "id")))
            .bind(pool_id)
            .bind(need)
            .fetch_optional(&mut *conn)
            .await?;
    if let Some((node_id,)) = node {
        return Ok(Some(node_id));
    }
    sqlx::query!("ROLLBACK TO SAVEPOINT best_fit_skip").execute(&mut *conn).await?;
    // Every node with room is held by someone. Wait for them one at a time, best fit first: a waiting
    // `FOR UPDATE` keeps the lock of a row it waited for even when the row no longer qualifies, so each wait
    // locks a single named node inside a savepoint, and a miss gives that lock back before the next. The
    // transaction therefore never waits while holding a node, and cannot deadlock with id-ordered lockers.
    // Runtime SQL: `best_fit_sql`, shared with admission.
    let candidates: Vec<(Uuid,)> = sqlx::query_as(sqlx::AssertSqlSafe(best_fit_sql("$1", "$2", "", "LIMIT 32", "id")))
        .bind(pool_id)
        .bind(need)
        .fetch_all(&mut *conn)
        .await?;
    for (candidate,) in candidates {
        sqlx::query!("SAVEPOINT best_fit_wait").execute(&mut *conn).await?;
        // Runtime SQL: `best_fit_sql`, shared with admission.
        let locked: Option<(Uuid,)> =
            sqlx::query_as(sqlx::AssertSqlSafe(best_fit_sql("$1", "$2", "AND id = $3", "FOR UPDATE", "id")))
                .bind(pool_id)
                .bind(need)
                .bind(candidate)
                .fetch_optional(&mut *conn)
                .await?;
        if locked.is_some() {
            return Ok(Some(candidate));
        }
        sqlx::query!("ROLLBACK TO SAVEPOINT best_fit_wait").execute(&mut *conn).await?;
    }
    Ok(None)
}

/// Several nodes: plan from the free counters without locks, then lock the chosen nodes in id order (so two
/// multi-node allocations, or an allocation and a release, can never deadlock), check the plan still holds,
/// and return how many GPUs to take from each node.
async fn lock_multi_node(
    conn: &mut PgConnection,
    pool_id: Uuid,
    gpu_count: i32,
    placement: Placement,
) -> StoreResult<Option<Plan>> {
    for _ in 0..PLAN_ATTEMPTS {
        let candidates = sqlx::query!(
            "SELECT id, free_gpus FROM nodes WHERE pool_id = $1 AND node_allocatable(admin_state, liveness) \
             AND free_gpus > 0 ORDER BY free_gpus DESC, id LIMIT $2",
            pool_id,
            gpu_count as i64
        )
        .fetch_all(&mut *conn)
        .await?;
        let free: Vec<i32> = candidates.iter().map(|c| c.free_gpus).collect();
        let takes = match placement {
            Placement::Spread => spread_counts(&free, gpu_count),
            _ => pack_counts(&free, gpu_count),
        };
        let Some(takes) = takes else { return Ok(None) };
        let mut plan: Vec<(Uuid, i32)> =
            candidates.iter().zip(takes).filter(|(_, t)| *t > 0).map(|(c, t)| (c.id, t)).collect();
        plan.sort_unstable();
        let ids: Vec<Uuid> = plan.iter().map(|p| p.0).collect();
        // A savepoint, so that a plan overtaken by others gives its locks back before the next attempt: a
        // transaction never waits for a node while holding one out of id order.
        sqlx::query!("SAVEPOINT multi_node_plan").execute(&mut *conn).await?;
        let locked = sqlx::query!(
            "SELECT id, free_gpus FROM nodes WHERE id = ANY($1) AND node_allocatable(admin_state, liveness) \
             ORDER BY id FOR UPDATE",
            &ids
        )
        .fetch_all(&mut *conn)
        .await?;
        let still_fits =
            locked.len() == plan.len() && locked.iter().zip(&plan).all(|(l, p)| l.id == p.0 && l.free_gpus >= p.1);
        if !still_fits {
            sqlx::query!("ROLLBACK TO SAVEPOINT multi_node_plan").execute(&mut *conn).await?;
            continue;
        }
        return Ok(Some(Plan(plan)));
    }
    Ok(None)
}

/// How many GPUs a lease takes from each node, by node id in id order; the nodes are locked by the caller's
/// transaction until it commits. Which GPUs of a node is decided when the lease is written ([`write_lease`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan(pub Vec<(Uuid, i32)>);

/// Plan `gpu_count` GPUs of `pool_id`, all or nothing, and lock their nodes: one node, best fit, when one fits
/// (not for `spread`); else, for `pack` and `spread`, several nodes planned from the counters. Returns None
/// when the pool cannot fit the request now. Writes nothing: [`write_lease`] does.
pub async fn place(
    conn: &mut PgConnection,
    pool_id: Uuid,
    gpu_count: i32,
    placement: Placement,
    best_fit: BestFit,
) -> StoreResult<Option<Plan>> {
    let single = match (placement, best_fit) {
        (Placement::Spread, _) | (_, BestFit::NoneFits) => None,
        (_, BestFit::Locked(node)) => Some(node),
        (_, BestFit::Search) => lock_best_fit(conn, pool_id, gpu_count).await?,
    };
    match single {
        Some(node) => Ok(Some(Plan(vec![(node, gpu_count)]))),
        None if placement == Placement::SingleNode => Ok(None),
        None => lock_multi_node(conn, pool_id, gpu_count, placement).await,
    }
}

/// Lock the best-fit node of the pool (the rule of [`best_fit_sql`]) among those whose model cache holds `model`,
/// skipping nodes other allocations hold: a preference, so None (none free now) leaves the caller to place the
/// lease as usual.
pub async fn lock_best_fit_holding(
    conn: &mut PgConnection,
    pool_id: Uuid,
    need: i32,
    model: &str,
) -> StoreResult<Option<Uuid>> {
    // A savepoint: SKIP LOCKED may keep a stray lock of a row that failed its recheck.
    sqlx::query!("SAVEPOINT cached_model_fit").execute(&mut *conn).await?;
    // Runtime SQL: `best_fit_sql`, shared with admission.
    let node: Option<(Uuid,)> = sqlx::query_as(sqlx::AssertSqlSafe(best_fit_sql(
        "$1",
        "$2",
        "AND $3 = ANY(cached_models)",
        "LIMIT 1 FOR UPDATE SKIP LOCKED",
        "id",
    )))
    .bind(pool_id)
    .bind(need)
    .bind(model)
    .fetch_optional(&mut *conn)
    .await?;
    if node.is_none() {
        sqlx::query!("ROLLBACK TO SAVEPOINT cached_model_fit").execute(&mut *conn).await?;
    }
    Ok(node.map(|(id,)| id))
}

/// Lock one named node of the pool for `need` GPUs: a lease that must lie on that host (it attaches a host
/// volume kept there). Ok(()) when the node is allocatable and has the room now (it stays locked until the
/// transaction ends); Err says why not.
pub async fn lock_named_node(
    conn: &mut PgConnection,
    pool_id: Uuid,
    node_id: Uuid,
    need: i32,
) -> StoreResult<Result<(), String>> {
    let node = sqlx::query!(
        r#"SELECT hostname, free_gpus, node_allocatable(admin_state, liveness) AS "allocatable!"
           FROM nodes WHERE id = $1 AND pool_id = $2 FOR UPDATE"#,
        node_id,
        pool_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(match node {
        None => Err("its host is not in this pool".into()),
        Some(n) if !n.allocatable => Err(format!("its host {} is offline or not taking leases now", n.hostname)),
        Some(n) if n.free_gpus < need => {
            Err(format!("its host {} has {} free GPU(s) now, and the lease asks for {need}", n.hostname, n.free_gpus))
        }
        Some(_) => Ok(()),
    })
}

/// Plan the parts of a lease across pools, all or nothing, and lock their nodes: each part in its own pool as a
/// single-pool lease is placed ([`place`], waiting for held nodes), the parts in pool id order, so that any two such
/// allocations lock nodes in one order (pools, then nodes by id). None: some part does not fit now; the locks taken
/// for the parts before it are given back (a savepoint). Writes nothing: [`write_lease`] writes the whole plan.
pub async fn place_parts(conn: &mut PgConnection, parts: &[NewPart]) -> StoreResult<Option<Plan>> {
    let mut order: Vec<&NewPart> = parts.iter().collect();
    order.sort_by_key(|p| p.pool_id);
    sqlx::query!("SAVEPOINT place_parts").execute(&mut *conn).await?;
    let mut takes = Vec::new();
    for part in order {
        match place(conn, part.pool_id, part.gpu_count, part.placement, BestFit::Search).await? {
            Some(Plan(part_takes)) => takes.extend(part_takes),
            None => {
                sqlx::query!("ROLLBACK TO SAVEPOINT place_parts").execute(&mut *conn).await?;
                return Ok(None);
            }
        }
    }
    takes.sort_unstable();
    Ok(Some(Plan(takes)))
}

/// A lease about to be created.
pub struct NewLease {
    pub id: Uuid,
    pub tenant_id: Uuid,
    /// For a lease across pools: its first part's pool and placement, and the sum of its parts' GPUs.
    pub pool_id: Uuid,
    pub gpu_count: i32,
    pub placement: Placement,
    pub term: Term,
    pub duration_hours: Option<i32>,
    pub months: Option<i32>,
    /// The API key that asked for it.
    pub created_by: Uuid,
    /// Release it once idle this many minutes (the server's idle release).
    pub idle_release_after_minutes: Option<i32>,
}

/// What [`write_lease`] does to the lease row. A statement of [`lease_write_ctes`] carries only the write it
/// makes: every writing CTE opens its table and that table's indexes on each execution, whether it writes or not.
#[derive(Clone, Copy)]
pub enum LeaseWrite<'a> {
    /// Insert it: active with the planned GPUs, or queued without.
    Create(&'a NewLease),
    /// Activate this queued lease with the planned GPUs.
    Activate(Uuid),
    /// Add the planned GPUs to this active lease: a replacement node joins a lease healed of a lost one
    /// (`healing`).
    Join(Uuid),
}

impl LeaseWrite<'_> {
    /// The lease it writes.
    pub fn lease_id(&self) -> Uuid {
        match self {
            LeaseWrite::Create(new) => new.id,
            LeaseWrite::Activate(id) | LeaseWrite::Join(id) => *id,
        }
    }
}

/// The lease `row` (a row of `leases`) as the API returns it ([`Lease`]), with the GPUs of `gpus` (rows with
/// `id`, `node_id`, `idx` and `uuid`), as jsonb: the one statement of that shape, for the statements that return a
/// lease they wrote (a new lease, an activated or ended one). Its parts are not read here, so that the statements
/// of a single-pool lease (nearly every lease) plan and run no parts lookup: `parts` is null when the GPUs show the
/// lease has none (they are all in its pool), and `[]` when they cannot (they span pools, or there are none yet),
/// for [`read_parts`] to fill from `lease_parts` after the statement.
pub(super) fn lease_json(row: &str, gpus: &str) -> String {
    format!(
        "(to_jsonb({row}) - 'gpu_ids') || ( \
             SELECT jsonb_build_object('gpus', COALESCE(jsonb_agg(jsonb_build_object('gpu_id', h.id, 'node_id', n.id, \
                 'hostname', n.hostname, 'address', n.address, 'index', h.idx, 'uuid', h.uuid, 'external', n.external) \
                 ORDER BY n.hostname, h.idx), '[]'), 'external', COALESCE(bool_or(n.external), false), \
                 'parts', CASE WHEN count(h.id) = 0 OR bool_or(n.pool_id <> {row}.pool_id) THEN '[]'::jsonb END) \
             FROM {gpus} h JOIN nodes n ON n.id = h.node_id)"
    )
}

/// Fill the parts of a lease that [`lease_json`] gave as `[]` (it could not tell from its GPUs that it has none):
/// its parts from `lease_parts` (`parts::of_leases`), or none. A lease whose GPUs are all in its pool costs nothing.
pub(super) async fn read_parts(conn: &mut PgConnection, lease: &mut Lease) -> StoreResult<()> {
    if lease.parts.as_ref().is_some_and(Vec::is_empty) {
        let parts: Vec<_> = super::parts::of_leases(conn, &[lease.id]).await?.into_iter().map(|(_, p)| p).collect();
        lease.parts = (!parts.is_empty()).then_some(parts);
    }
    Ok(())
}

/// The CTEs that write a lease: the lease row (as `row` asks: inserted on create, or its queued row activated on
/// queue start), its GPUs (`gpus.held_by`, `leases.gpu_ids`), the nodes' free counters and the event; the last one,
/// `written`, gives the lease as JSON (no row: nothing was written). `plan` is a query of `(node_id, take)`: how
/// many GPUs to take from each node, nodes the transaction has locked; `enabled` a boolean SQL expression, false
/// to write nothing. Parameters are those bound by [`bind_lease_write`].
///
/// The statement also picks the GPUs, from its snapshot, which must show every allocation committed on the
/// plan's nodes. Inside each node it takes the window of `take` free healthy GPUs with the smallest index span,
/// ties to the lowest indices: adjacent indices share a PCIe switch or NVLink pair on common boards, so the
/// smallest span is the best guess when a node reports no finer topology, and taking the low end keeps the high
/// end free in one block. This is the one statement of that rule. It writes nothing when a planned node has
/// fewer free healthy GPUs than its take (a counter out of step). The foreign keys to the lease are checked at the
/// statement's end, when its row exists.
fn lease_write_ctes(plan: &str, enabled: &str, row: LeaseWrite<'_>) -> String {
    format!(
        "plan AS ({plan}), \
         plan_nodes AS (SELECT ARRAY(SELECT node_id FROM plan) AS ids), \
         free AS ( \
             SELECT g.id, g.node_id, g.idx, g.uuid, p.take, row_number() OVER w AS rn, \
                 lead(g.idx, p.take - 1) OVER w AS window_last \
             FROM gpus g JOIN plan p ON p.node_id = g.node_id \
             WHERE g.node_id = ANY((SELECT ids FROM plan_nodes)::uuid[]) AND g.healthy AND g.held_by IS NULL \
             WINDOW w AS (PARTITION BY g.node_id ORDER BY g.idx)), \
         best AS ( \
             SELECT DISTINCT ON (node_id) node_id, rn AS first_rn, take FROM free WHERE window_last IS NOT NULL \
             ORDER BY node_id, window_last - idx, idx), \
         picked AS ( \
             SELECT f.id, f.node_id, f.idx, f.uuid \
             FROM best b JOIN free f ON f.node_id = b.node_id AND f.rn >= b.first_rn AND f.rn < b.first_rn + b.take), \
         complete AS ( \
             SELECT {enabled} AND (SELECT count(*) FROM picked) = (SELECT COALESCE(sum(take), 0) FROM plan) AS ok), \
         picked_ids AS (SELECT ARRAY(SELECT id FROM picked ORDER BY id) AS ids), \
         lease AS ({row}), \
         held AS ( \
             UPDATE gpus SET held_by = $1 \
             WHERE id = ANY((SELECT ids FROM picked_ids)::uuid[]) AND held_by IS NULL AND (SELECT ok FROM complete)), \
         counted AS ( \
             UPDATE nodes n SET free_gpus = n.free_gpus - p.take \
             FROM plan p WHERE n.id = ANY((SELECT ids FROM plan_nodes)::uuid[]) AND n.id = p.node_id \
                 AND (SELECT ok FROM complete)), \
         recorded AS ( \
             INSERT INTO lease_events (id, lease_id, tenant_id, kind, from_state, to_state, actor, reason, detail) \
             SELECT $4, $1, (SELECT tenant_id FROM lease), $5, $6, $7, $8, $9, $19 WHERE (SELECT ok FROM complete)), \
         written AS (SELECT {lease} AS lease FROM lease l)",
        lease = lease_json("l", "picked"),
        row = match row {
            LeaseWrite::Create(_) => {
                "INSERT INTO leases (id, tenant_id, pool_id, gpu_count, placement, term, duration_hours, months, state, \
                     starts_at, ends_at, created_by, metered_until, currency, gpu_ids, idle_release_after_minutes) \
                 SELECT $1, $10, $11, $12, $13, $14, $15, $16, a.state, a.at, \
                     a.at + make_interval(months => COALESCE($16, 0), hours => COALESCE($15, 0)), $17, a.at, \
                     (SELECT currency FROM pools WHERE id = $11), (SELECT ids FROM picked_ids), $20 \
                 FROM (SELECT CASE WHEN $18 THEN 'active' ELSE 'queued' END AS state, \
                              CASE WHEN $18 THEN now() END AS at) a \
                 WHERE (SELECT ok FROM complete) \
                 RETURNING *"
            }
            LeaseWrite::Activate(_) => {
                "UPDATE leases SET state = 'active', starts_at = now(), metered_until = now(), \
                     ends_at = now() + make_interval(months => COALESCE(months, 0), hours => COALESCE(duration_hours, 0)), \
                     gpu_ids = (SELECT ids FROM picked_ids), generation = generation + 1, updated_at = now() \
                 WHERE id = $1 AND state = 'queued' AND (SELECT ok FROM complete) RETURNING *"
            }
            LeaseWrite::Join(_) => {
                "UPDATE leases SET gpu_ids = gpu_ids || (SELECT ids FROM picked_ids), \
                     gpu_count = gpu_count + (SELECT COALESCE(sum(take), 0) FROM plan)::int, updated_at = now() \
                 WHERE id = $1 AND state = 'active' AND (SELECT ok FROM complete) RETURNING *"
            }
        },
    )
}

/// What a statement with [`lease_write_ctes`] writes.
struct LeaseWriteArgs<'a> {
    lease: LeaseWrite<'a>,
    plan: Option<&'a Plan>,
    event: NewEvent<'a>,
    /// Active with GPUs (create with a plan, or an admission that locked a node), or queued without.
    active: bool,
}

/// Bind the parameters of [`lease_write_ctes`], `$1` to `$20`: `$1` the lease; `$2`, `$3` the plan's nodes and
/// takes (empty without a plan); `$4` to `$9` and `$19` the event; `$10` to `$17` and `$20` the new lease (tenant, pool,
/// GPU count, placement, term, hours, months, the key that asked, its idle release; null when activating) and `$18`
/// whether the new lease is active. The activating statement does not use `$10` to `$18` nor `$20`.
fn bind_lease_write<'q, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    w: &LeaseWriteArgs<'_>,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    let plan_nodes: Vec<Uuid> = w.plan.map(|p| p.0.iter().map(|t| t.0).collect()).unwrap_or_default();
    let plan_takes: Vec<i32> = w.plan.map(|p| p.0.iter().map(|t| t.1).collect()).unwrap_or_default();
    let new = match w.lease {
        LeaseWrite::Create(new) => Some(new),
        LeaseWrite::Activate(_) | LeaseWrite::Join(_) => None,
    };
    query
        .bind(w.lease.lease_id())
        .bind(plan_nodes)
        .bind(plan_takes)
        .bind(new_id())
        .bind(w.event.kind.to_owned())
        .bind(w.event.from)
        .bind(w.event.to)
        .bind(w.event.actor.label())
        .bind(w.event.reason.map(str::to_owned))
        .bind(new.map(|n| n.tenant_id))
        .bind(new.map(|n| n.pool_id))
        .bind(new.map(|n| n.gpu_count))
        .bind(new.map(|n| n.placement))
        .bind(new.map(|n| n.term))
        .bind(new.and_then(|n| n.duration_hours))
        .bind(new.and_then(|n| n.months))
        .bind(new.map(|n| n.created_by))
        .bind(w.active)
        .bind(w.event.detail.clone())
        .bind(new.and_then(|n| n.idle_release_after_minutes))
}

/// Write a lease with the GPUs of `plan` on nodes the transaction has locked, in one statement
/// ([`lease_write_ctes`]), and return it; its snapshot, taken after the locks, sees every allocation committed
/// on them. Without a plan the lease is written queued (create) and holds nothing. Returns None, having written
/// nothing, when a planned node has fewer free healthy GPUs than its counter said (a counter out of step; the
/// caller says so in its log).
pub async fn write_lease(
    conn: &mut PgConnection,
    lease: LeaseWrite<'_>,
    plan: Option<&Plan>,
    event: NewEvent<'_>,
) -> StoreResult<Option<Lease>> {
    let sql = format!(
        "WITH {write} SELECT lease FROM written",
        write = lease_write_ctes(
            "SELECT p.node_id, p.take FROM UNNEST($2::uuid[], $3::int[]) AS p(node_id, take)",
            "true",
            lease
        )
    );
    let args = LeaseWriteArgs { lease, plan, event, active: plan.is_some() };
    // Runtime SQL: the writes are one statement (`lease_write_ctes`) that admission embeds too.
    let written: Option<(sqlx::types::Json<Lease>,)> =
        bind_lease_write(sqlx::query_as(sqlx::AssertSqlSafe(sql)), &args).fetch_optional(&mut *conn).await?;
    let Some((sqlx::types::Json(mut lease),)) = written else { return Ok(None) };
    read_parts(conn, &mut lease).await?;
    Ok(Some(lease))
}

/// Capacity figures for an error message (only computed when a request did not fit).
pub async fn capacity(conn: &mut PgConnection, pool_id: Uuid, requested: i32) -> StoreResult<Capacity> {
    let row = sqlx::query!(
        r#"SELECT COALESCE(sum(free_gpus), 0)::bigint AS "free_gpus!", COALESCE(max(free_gpus), 0)::bigint AS "largest_free_block!",
                (SELECT count(*) FROM leases WHERE pool_id = $1 AND state = 'queued') AS "queued_ahead!"
         FROM nodes WHERE pool_id = $1 AND node_allocatable(admin_state, liveness)"#,
        pool_id
    )
    .fetch_one(conn)
    .await?;
    Ok(Capacity {
        requested,
        free_gpus: row.free_gpus,
        largest_free_block: row.largest_free_block,
        queued_ahead: row.queued_ahead,
    })
}

/// A pool's size whatever its state.
pub struct PoolSize {
    /// All its GPUs.
    pub total: i64,
    /// The most GPUs on one node.
    pub largest_node: i64,
}

/// The pool's size whatever its state: all its GPUs, and the most on one node. Requests above these can never fit.
pub async fn pool_size(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<PoolSize> {
    Ok(sqlx::query_as!(
        PoolSize,
        r#"SELECT COALESCE(sum(gpu_count), 0)::bigint AS "total!", COALESCE(max(gpu_count), 0)::bigint AS "largest_node!"
         FROM nodes WHERE pool_id = $1"#,
        pool_id
    )
    .fetch_one(conn)
    .await?)
}

/// Remove the dead row versions of `nodes` (`VACUUM (SKIP_LOCKED)`: a replica already vacuuming it is enough).
/// VACUUM cannot run in a transaction: `conn` must not be in one.
pub async fn vacuum_nodes(conn: &mut PgConnection) -> StoreResult<()> {
    // Runtime SQL: VACUUM is a utility statement the macros cannot describe (it returns no rows and cannot be
    // prepared).
    sqlx::raw_sql("VACUUM (SKIP_LOCKED) nodes").execute(conn).await?;
    Ok(())
}
