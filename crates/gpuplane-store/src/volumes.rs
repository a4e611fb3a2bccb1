//! Tenant volumes: their rows, the quotas and capacity they count against, and what agents report of them.
//! Every tenant-facing query takes the tenant's id and filters by it.

use chrono::{DateTime, Utc};
use gpuplane_protocol::volumes::{VolumeKind, VolumeOutcome, VolumeReport, VolumeStore};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

/// Bytes in a GiB.
pub const GIB: i64 = 1 << 30;

/// A tenant's volume, as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Volume {
    pub id: Uuid,
    pub name: String,
    pub pool_id: Uuid,
    pub pool_name: String,
    /// `host` (kept on one host: leases that attach it are placed there) or `pool` (on the pool's shared
    /// filesystem: any host of the pool can mount it).
    pub kind: String,
    pub size_gib: i32,
    /// `creating` (its host's agent makes it at its next heartbeat), `ready`, `failed` (never made, never
    /// charged), `deleting` (billing stopped; its agent destroys the data), `deleted`.
    pub state: String,
    /// Why it failed, or why its last grow has not taken effect.
    pub state_reason: Option<String>,
    /// The host that holds a host volume (or makes a pool volume).
    pub node: String,
    /// False while that host is offline: a host volume cannot be mounted then (its data is kept, and it is not
    /// billed for the time its host is silent).
    pub available: bool,
    /// What is written in it, bytes, as its agent last reported.
    pub used_bytes: Option<i64>,
    /// Deleted automatically once detached this many days (a `volume.idle` webhook a day before); null: never.
    pub delete_after_idle_days: Option<i32>,
    pub created_at: DateTime<Utc>,
    pub ready_at: Option<DateTime<Utc>>,
    pub deleted_at: Option<DateTime<Utc>>,
    /// What it has been charged so far, minor units of `currency`.
    pub charged_minor: i64,
    pub currency: String,
    /// The leases it is attached to now (one read-write, or any number read-only).
    pub attached_to: Vec<Uuid>,
}

/// A tenant's volume by id (a deleted one too: it is shown as such).
pub async fn get(conn: &mut PgConnection, tenant_id: Uuid, id: Uuid) -> StoreResult<Option<Volume>> {
    Ok(select(conn, tenant_id, Some(id), true).await?.pop())
}

/// A tenant's volumes, newest first; deleted ones only when asked.
pub async fn list(conn: &mut PgConnection, tenant_id: Uuid, include_deleted: bool) -> StoreResult<Vec<Volume>> {
    select(conn, tenant_id, None, include_deleted).await
}

/// The one statement that reads volumes as the API shows them: one of the tenant's, or all (at most 1,000).
async fn select(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    id: Option<Uuid>,
    include_deleted: bool,
) -> StoreResult<Vec<Volume>> {
    let volumes = sqlx::query_as!(
        Volume,
        r#"SELECT v.id, v.name, v.pool_id, p.name AS pool_name, v.kind, v.size_gib, v.state, v.state_reason,
                  n.hostname AS node, (n.liveness = 'ready') AS "available!", v.used_bytes,
                  v.delete_after_idle_days, v.created_at, v.ready_at, v.deleted_at, v.charged_minor, v.currency,
                  ARRAY(SELECT a.lease_id FROM volume_attachments a WHERE a.volume_id = v.id AND a.detached_at IS NULL
                        ORDER BY a.lease_id) AS "attached_to!"
           FROM volumes v JOIN pools p ON p.id = v.pool_id JOIN nodes n ON n.id = v.node_id
           WHERE v.tenant_id = $1 AND ($2::uuid IS NULL OR v.id = $2) AND ($3 OR v.state <> 'deleted')
           ORDER BY v.id DESC LIMIT 1000"#,
        tenant_id,
        id,
        include_deleted
    )
    .fetch_all(conn)
    .await?;
    Ok(volumes)
}

/// The tenant's volume quotas (NULL: unlimited), locking the tenant's row so creates and grows of one tenant
/// serialize and the quotas hold under concurrency. None: no such tenant.
pub async fn lock_tenant_quotas(
    conn: &mut PgConnection,
    tenant_id: Uuid,
) -> StoreResult<Option<(Option<i32>, Option<i64>)>> {
    let row = sqlx::query!("SELECT max_volumes, max_volume_gib FROM tenants WHERE id = $1 FOR UPDATE", tenant_id)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(|r| (r.max_volumes, r.max_volume_gib)))
}

/// How many volumes the tenant holds and their GiB (not failed or deleted ones: those hold no storage; a
/// deleting one does until its agent destroyed it).
pub async fn tenant_usage(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<(i64, i64)> {
    let row = sqlx::query!(
        r#"SELECT count(*) AS "count!", coalesce(sum(size_gib), 0)::bigint AS "gib!"
           FROM volumes WHERE tenant_id = $1 AND state IN ('creating', 'ready', 'deleting')"#,
        tenant_id
    )
    .fetch_one(conn)
    .await?;
    Ok((row.count, row.gib))
}

/// What a pool sells of storage, with its row locked (creates and grows in one pool serialize, so its capacity
/// holds): the kinds it offers, its capacity, its currency and the storage price in force now.
#[derive(Debug, Clone)]
pub struct PoolStorage {
    pub id: Uuid,
    pub name: String,
    pub volume_kinds: Vec<String>,
    pub capacity_gib: Option<i64>,
    pub currency: String,
    pub price_per_gib_month_minor: Option<i64>,
    /// GiB of the pool's volumes that hold storage now.
    pub used_gib: i64,
    /// GiB of those on the pool's shared filesystem (kind `pool`).
    pub pool_kind_gib: i64,
}

/// Lock a pool the tenant may see and read what it sells of storage. None: no such pool.
pub async fn lock_pool_storage(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<Option<PoolStorage>> {
    let row = sqlx::query!(
        r#"SELECT p.id, p.name, p.volume_kinds, p.volume_capacity_gib, p.currency,
                  (SELECT price_per_gib_month_minor FROM pool_storage_prices s
                   WHERE s.pool_id = p.id AND s.effective_from <= now()
                   ORDER BY s.effective_from DESC LIMIT 1) AS price,
                  (SELECT coalesce(sum(size_gib), 0)::bigint FROM volumes v
                   WHERE v.pool_id = p.id AND v.state IN ('creating', 'ready', 'deleting')) AS "used_gib!",
                  (SELECT coalesce(sum(size_gib), 0)::bigint FROM volumes v
                   WHERE v.pool_id = p.id AND v.kind = 'pool'
                     AND v.state IN ('creating', 'ready', 'deleting')) AS "pool_kind_gib!"
           FROM pools p WHERE p.id = $1 FOR UPDATE OF p"#,
        pool_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| PoolStorage {
        id: r.id,
        name: r.name,
        volume_kinds: r.volume_kinds,
        capacity_gib: r.volume_capacity_gib,
        currency: r.currency,
        price_per_gib_month_minor: r.price,
        used_gib: r.used_gib,
        pool_kind_gib: r.pool_kind_gib,
    }))
}

/// A node of a pool that could hold a volume: what its agent reported of its stores, and the GiB of volumes
/// already promised to it.
#[derive(Debug, Clone)]
pub struct StoreNode {
    pub node_id: Uuid,
    pub hostname: String,
    pub stores: Vec<VolumeStore>,
    /// GiB of this node's live host volumes (images are sparse: promised space is not yet used space).
    pub host_promised_gib: i64,
}

/// The pool's nodes that are ready and in service, with their reported stores, in id order.
pub async fn store_nodes(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<Vec<StoreNode>> {
    let rows = sqlx::query!(
        r#"SELECT n.id, n.hostname, n.volume_stores,
                  (SELECT coalesce(sum(size_gib), 0)::bigint FROM volumes v
                   WHERE v.node_id = n.id AND v.kind = 'host'
                     AND v.state IN ('creating', 'ready', 'deleting')) AS "promised!"
           FROM nodes n
           WHERE n.pool_id = $1 AND n.admin_state = 'active' AND n.liveness = 'ready'
           ORDER BY n.id"#,
        pool_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| StoreNode {
            node_id: r.id,
            hostname: r.hostname,
            // Written only from validated heartbeats; anything else reads as no store.
            stores: serde_json::from_value(r.volume_stores).unwrap_or_default(),
            host_promised_gib: r.promised,
        })
        .collect())
}

/// A volume to insert.
pub struct NewVolume<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub pool_id: Uuid,
    pub name: &'a str,
    pub kind: VolumeKind,
    pub size_gib: i32,
    pub node_id: Uuid,
    pub delete_after_idle_days: Option<i32>,
    pub currency: &'a str,
    pub created_by: Uuid,
}

/// Insert a volume in `creating`. False: the tenant has a live volume of that name.
pub async fn insert(conn: &mut PgConnection, v: &NewVolume<'_>) -> StoreResult<bool> {
    let inserted = sqlx::query!(
        r#"INSERT INTO volumes (id, tenant_id, pool_id, name, kind, size_gib, node_id, delete_after_idle_days,
                                currency, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
           ON CONFLICT (tenant_id, name) WHERE state <> 'deleted' DO NOTHING"#,
        v.id,
        v.tenant_id,
        v.pool_id,
        v.name,
        v.kind.as_str(),
        v.size_gib,
        v.node_id,
        v.delete_after_idle_days,
        v.currency,
        v.created_by,
    )
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// A tenant's volume locked for a change: its pool, node, kind, size and state.
#[derive(Debug, Clone)]
pub struct LockedVolume {
    pub id: Uuid,
    pub pool_id: Uuid,
    pub node_id: Uuid,
    pub kind: String,
    pub size_gib: i32,
    pub state: String,
}

/// Where each of a tenant's live volumes is kept, read without locks (a lease's create places itself by them;
/// the attach that follows locks and checks each): (id, kind, node). Volumes not the tenant's, and deleted ones,
/// are left out.
pub async fn homes(conn: &mut PgConnection, tenant_id: Uuid, ids: &[Uuid]) -> StoreResult<Vec<(Uuid, String, Uuid)>> {
    let rows = sqlx::query!(
        "SELECT id, kind, node_id FROM volumes WHERE tenant_id = $1 AND id = ANY($2) AND state <> 'deleted'",
        tenant_id,
        ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.kind, r.node_id)).collect())
}

/// Lock a tenant's volume (`FOR UPDATE`). None: not the tenant's, or no such volume.
pub async fn lock(conn: &mut PgConnection, tenant_id: Uuid, id: Uuid) -> StoreResult<Option<LockedVolume>> {
    let row = sqlx::query_as!(
        LockedVolume,
        "SELECT id, pool_id, node_id, kind, size_gib, state FROM volumes WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
        tenant_id,
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// Set a locked volume's size (a grow) and idle policy.
pub async fn update(
    conn: &mut PgConnection,
    id: Uuid,
    size_gib: i32,
    delete_after_idle_days: Option<i32>,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE volumes SET size_gib = $2, delete_after_idle_days = $3, idle_notice_at = NULL WHERE id = $1",
        id,
        size_gib,
        delete_after_idle_days
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Delete a locked volume: a failed one is gone at once (no data was made); any other is `deleting` until its
/// agent destroyed the image. Billing stops now either way.
pub async fn mark_deleted(conn: &mut PgConnection, id: Uuid) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE volumes SET state = CASE WHEN state = 'failed' THEN 'deleted' ELSE 'deleting' END,
                deleted_at = now(), state_reason = NULL
         WHERE id = $1 AND state <> 'deleted'",
        id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Save what the agent reports of its volume stores (written only when it changed).
pub async fn record_stores(conn: &mut PgConnection, node_id: Uuid, stores: &[VolumeStore]) -> StoreResult<()> {
    let stores = serde_json::to_value(stores).unwrap_or_default();
    sqlx::query!(
        "UPDATE nodes SET volume_stores = $2 WHERE id = $1 AND volume_stores IS DISTINCT FROM $2",
        node_id,
        stores
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Apply an agent's reports of its own volumes (another node's volume is ignored): a volume made becomes
/// `ready` (billed from now), one that could not be made `failed`, one destroyed `deleted`; a ready volume's
/// use is refreshed, and a grow that failed is kept as its reason. Returns how many volumes changed state.
pub async fn apply_reports(conn: &mut PgConnection, node_id: Uuid, reports: &[VolumeReport]) -> StoreResult<u64> {
    let mut changed = 0;
    for r in reports {
        let (ready, failed, destroyed) = (
            r.outcome == VolumeOutcome::Ready,
            r.outcome == VolumeOutcome::Failed,
            r.outcome == VolumeOutcome::Destroyed,
        );
        let row = sqlx::query!(
            r#"UPDATE volumes v SET
                 state = CASE
                   WHEN $3 AND v.state = 'creating' THEN 'ready'
                   WHEN $4 AND v.state = 'creating' THEN 'failed'
                   WHEN $5 AND v.state = 'deleting' THEN 'deleted'
                   ELSE v.state END,
                 ready_at = CASE WHEN $3 AND v.state = 'creating' THEN now() ELSE v.ready_at END,
                 metered_until = CASE WHEN $3 AND v.state = 'creating' THEN now() ELSE v.metered_until END,
                 state_reason = CASE
                   WHEN $4 THEN $8
                   WHEN $3 AND $6::bigint >= v.size_gib::bigint * 1073741824 THEN NULL
                   ELSE v.state_reason END,
                 reported_size_bytes = coalesce($6, v.reported_size_bytes),
                 used_bytes = coalesce($7, v.used_bytes),
                 reported_at = now()
               FROM volumes old
               WHERE v.id = $2 AND v.node_id = $1 AND old.id = v.id
               RETURNING old.state AS was, v.state"#,
            node_id,
            r.volume_id,
            ready,
            failed,
            destroyed,
            r.size_bytes,
            r.used_bytes,
            r.message.as_deref(),
        )
        .fetch_optional(&mut *conn)
        .await?;
        if row.is_some_and(|row| row.was != row.state) {
            changed += 1;
        }
    }
    Ok(changed)
}

/// One volume the node must hold or destroy.
#[derive(Debug, Clone)]
pub struct NodeVolume {
    pub id: Uuid,
    pub kind: String,
    pub size_gib: i32,
    pub state: String,
}

/// Every volume of this node's that its agent must hold (`creating`, `ready`) or destroy (`deleting`).
pub async fn node_volumes(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<NodeVolume>> {
    let rows = sqlx::query_as!(
        NodeVolume,
        "SELECT id, kind, size_gib, state FROM volumes
         WHERE node_id = $1 AND state IN ('creating', 'ready', 'deleting') ORDER BY id",
        node_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// Set what a pool sells of storage (an operator's change). False: no such pool.
pub async fn set_pool_storage(
    conn: &mut PgConnection,
    pool_id: Uuid,
    kinds: &[String],
    capacity_gib: Option<i64>,
) -> StoreResult<bool> {
    let done = sqlx::query!(
        "UPDATE pools SET volume_kinds = $2, volume_capacity_gib = $3, updated_at = now() WHERE id = $1",
        pool_id,
        kinds,
        capacity_gib
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Add a storage price taking effect at `effective_from` (not in the past). False: one starts then already.
pub async fn add_storage_price(
    conn: &mut PgConnection,
    pool_id: Uuid,
    effective_from: DateTime<Utc>,
    price_per_gib_month_minor: i64,
) -> StoreResult<bool> {
    let done = sqlx::query!(
        "INSERT INTO pool_storage_prices (id, pool_id, effective_from, price_per_gib_month_minor)
         VALUES ($1, $2, $3, $4) ON CONFLICT (pool_id, effective_from) DO NOTHING",
        crate::new_id(),
        pool_id,
        effective_from,
        price_per_gib_month_minor
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Set a tenant's volume quotas (NULL: unlimited). False: no such tenant.
pub async fn set_tenant_quotas(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    max_volumes: Option<i32>,
    max_volume_gib: Option<i64>,
) -> StoreResult<bool> {
    let done = sqlx::query!(
        "UPDATE tenants SET max_volumes = $2, max_volume_gib = $3, updated_at = now() WHERE id = $1",
        tenant_id,
        max_volumes,
        max_volume_gib
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Where every volume is mounted inside a lease's sandbox: `/volumes/<mount name>`.
pub const MOUNT_ROOT: &str = "/volumes";

/// A volume attached to a lease.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Attachment {
    pub volume_id: Uuid,
    pub volume_name: String,
    pub lease_id: Uuid,
    /// Where jobs, image jobs and SSH sessions of the lease find it, on every node: `/volumes/<mount name>`.
    pub mount_path: String,
    pub read_only: bool,
    pub attached_at: DateTime<Utc>,
}

/// The lease an attach or detach changes, locked (`FOR UPDATE`: no job is created on it meanwhile), with what
/// decides whether volumes may change on it.
#[derive(Debug, Clone)]
pub struct AttachLease {
    pub state: String,
    pub pool_id: Uuid,
    pub has_parts: bool,
    pub releasing: bool,
    /// Jobs not yet ended.
    pub open_jobs: i64,
    /// Its SSH environment is requested (running or starting).
    pub environment_running: bool,
    /// The nodes holding its GPUs now.
    pub node_ids: Vec<Uuid>,
}

/// Lock a tenant's lease for an attach or detach. None: not the tenant's, or no such lease.
pub async fn lock_lease(conn: &mut PgConnection, tenant_id: Uuid, lease_id: Uuid) -> StoreResult<Option<AttachLease>> {
    let row = sqlx::query!(
        r#"SELECT l.state::text AS "state!", l.pool_id, l.release_deadline IS NOT NULL AS "releasing!",
                  EXISTS (SELECT 1 FROM lease_parts p WHERE p.lease_id = l.id) AS "has_parts!",
                  (SELECT count(*) FROM jobs j WHERE j.lease_id = l.id
                     AND j.state IN ('pending', 'assigned', 'running')) AS "open_jobs!",
                  EXISTS (SELECT 1 FROM lease_environments e WHERE e.lease_id = l.id AND e.state = 'requested')
                      AS "environment_running!",
                  ARRAY(SELECT DISTINCT g.node_id FROM gpus g
                        WHERE g.id = ANY(l.gpu_ids) AND g.held_by = l.id ORDER BY g.node_id) AS "node_ids!"
           FROM leases l WHERE l.id = $1 AND l.tenant_id = $2 FOR UPDATE OF l"#,
        lease_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| AttachLease {
        state: r.state,
        pool_id: r.pool_id,
        has_parts: r.has_parts,
        releasing: r.releasing,
        open_jobs: r.open_jobs,
        environment_running: r.environment_running,
        node_ids: r.node_ids,
    }))
}

/// The leases a volume is attached to now, and whether each attachment is read-only.
pub async fn open_attachments(conn: &mut PgConnection, volume_id: Uuid) -> StoreResult<Vec<(Uuid, bool)>> {
    let rows = sqlx::query!(
        "SELECT lease_id, read_only FROM volume_attachments WHERE volume_id = $1 AND detached_at IS NULL ORDER BY lease_id",
        volume_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.lease_id, r.read_only)).collect())
}

/// Attach a locked volume to a locked lease. False: the lease has it, or another volume at that mount, already.
pub async fn attach(
    conn: &mut PgConnection,
    volume_id: Uuid,
    lease_id: Uuid,
    mount_name: &str,
    read_only: bool,
) -> StoreResult<bool> {
    let inserted = sqlx::query!(
        "INSERT INTO volume_attachments (volume_id, lease_id, mount_name, read_only) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING",
        volume_id,
        lease_id,
        mount_name,
        read_only
    )
    .execute(&mut *conn)
    .await?;
    if inserted.rows_affected() == 1 {
        sqlx::query!("UPDATE volumes SET detached_since = NULL, idle_notice_at = NULL WHERE id = $1", volume_id)
            .execute(conn)
            .await?;
    }
    Ok(inserted.rows_affected() == 1)
}

/// Detach a volume from a locked lease. False: it was not attached.
pub async fn detach(conn: &mut PgConnection, volume_id: Uuid, lease_id: Uuid) -> StoreResult<bool> {
    let done = sqlx::query!(
        "UPDATE volume_attachments SET detached_at = now()
         WHERE volume_id = $1 AND lease_id = $2 AND detached_at IS NULL",
        volume_id,
        lease_id
    )
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 1 {
        sqlx::query!(
            "UPDATE volumes SET detached_since = now() WHERE id = $1
               AND NOT EXISTS (SELECT 1 FROM volume_attachments a WHERE a.volume_id = $1 AND a.detached_at IS NULL)",
            volume_id
        )
        .execute(conn)
        .await?;
    }
    Ok(done.rows_affected() == 1)
}

/// The volumes attached to a tenant's lease now.
pub async fn lease_attachments(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
) -> StoreResult<Vec<Attachment>> {
    let rows = sqlx::query_as!(
        Attachment,
        r#"SELECT a.volume_id, v.name AS volume_name, a.lease_id, '/volumes/' || a.mount_name AS "mount_path!",
                  a.read_only, a.attached_at
           FROM volume_attachments a JOIN volumes v ON v.id = a.volume_id
           WHERE a.lease_id = $1 AND v.tenant_id = $2 AND a.detached_at IS NULL ORDER BY a.mount_name"#,
        lease_id,
        tenant_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// A volume of a lease as the lease's agents get it.
#[derive(Debug, Clone)]
pub struct LeaseVolumeRow {
    pub lease_id: Uuid,
    pub volume_id: Uuid,
    pub kind: String,
    pub mount_name: String,
    pub read_only: bool,
}

/// The volumes attached to these leases now.
pub async fn volumes_of_leases(conn: &mut PgConnection, lease_ids: &[Uuid]) -> StoreResult<Vec<LeaseVolumeRow>> {
    let rows = sqlx::query_as!(
        LeaseVolumeRow,
        "SELECT a.lease_id, a.volume_id, v.kind, a.mount_name, a.read_only
         FROM volume_attachments a JOIN volumes v ON v.id = a.volume_id
         WHERE a.lease_id = ANY($1) AND a.detached_at IS NULL ORDER BY a.lease_id, a.mount_name",
        lease_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// The statement fragment (CTEs) that detaches every volume of the leases `ended` selects (a query with `id` and
/// `ended_at` columns), for the one statement that ends a lease: a volume is attached only while its lease lives.
/// A volume left with no attachment is detached since its lease's end.
pub fn detach_on_lease_end_ctes(ended: &str) -> String {
    format!(
        "volumes_detached AS ( \
             UPDATE volume_attachments a SET detached_at = GREATEST(e.ended_at, a.attached_at) \
             FROM ({ended}) e WHERE a.lease_id = e.id AND a.detached_at IS NULL \
             RETURNING a.volume_id, a.detached_at), \
         volumes_idle AS ( \
             UPDATE volumes v SET detached_since = d.detached_at FROM volumes_detached d \
             WHERE v.id = d.volume_id AND NOT EXISTS ( \
                 SELECT 1 FROM volume_attachments o WHERE o.volume_id = v.id AND o.detached_at IS NULL \
                     AND o.lease_id NOT IN (SELECT id FROM ({ended}) e2)))"
    )
}

/// A volume with unmetered time, locked, and how far it is to be metered.
pub struct DueVolume {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub pool_id: Uuid,
    pub size_gib: i32,
    pub metered_until: DateTime<Utc>,
    /// Its deletion; else now, or for a host volume the last heartbeat of its host if earlier (a silent host's
    /// time is not charged until it proves it was alive).
    pub meter_to: DateTime<Utc>,
    /// Deleted: metered to `meter_to` for good.
    pub ended: bool,
    /// Exact cost so far, numeric as text.
    pub cost_units: String,
    pub charged_minor: i64,
    pub currency: String,
}

/// Lock up to `limit` volumes with at least a whole unmetered second (or a deleted one's last fraction), skipping
/// those another replica meters now.
pub async fn lock_due(conn: &mut PgConnection, limit: i64) -> StoreResult<Vec<DueVolume>> {
    let rows = sqlx::query_as!(
        DueVolume,
        r#"SELECT v.id, v.tenant_id, v.pool_id, v.size_gib, v.metered_until AS "metered_until!",
                  due.meter_to AS "meter_to!", v.deleted_at IS NOT NULL AS "ended!", v.cost_units::text AS "cost_units!",
                  v.charged_minor, v.currency
           FROM volumes v JOIN nodes n ON n.id = v.node_id,
                LATERAL (SELECT CASE
                    WHEN v.deleted_at IS NOT NULL THEN v.deleted_at
                    WHEN v.kind = 'host' THEN LEAST(now(), COALESCE(n.last_heartbeat_at, v.metered_until))
                    ELSE now() END AS meter_to) due
           WHERE v.metered_until IS NOT NULL
             AND (due.meter_to >= v.metered_until + interval '1 second'
                  OR (v.deleted_at IS NOT NULL AND v.metered_until < v.deleted_at))
           ORDER BY v.id LIMIT $1 FOR UPDATE OF v SKIP LOCKED"#,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// What a tenant's live volumes in `currency` cost per hour at the storage prices in force, minor units, rounded
/// up (a price is per GiB and 30-day month, 720 hours): the storage part of the tenant's burn, which the
/// balance rules count with its hourly leases'.
pub async fn storage_burn_per_hour(conn: &mut PgConnection, tenant_id: Uuid, currency: &str) -> StoreResult<i64> {
    let per_hour = sqlx::query_scalar!(
        r#"SELECT ceil(coalesce(sum(v.size_gib::numeric * p.price_per_gib_month_minor), 0) / 720)::bigint AS "per_hour!"
           FROM volumes v
           JOIN pools po ON po.id = v.pool_id AND po.currency = $2
           JOIN LATERAL (SELECT price_per_gib_month_minor FROM pool_storage_prices s
                         WHERE s.pool_id = v.pool_id AND s.effective_from <= now()
                         ORDER BY s.effective_from DESC LIMIT 1) p ON true
           WHERE v.tenant_id = $1 AND v.state = 'ready'"#,
        tenant_id,
        currency
    )
    .fetch_one(conn)
    .await?;
    Ok(per_hour)
}

/// The pool's storage prices that start before `until`, oldest first, as prices per GiB and 30-day month.
pub async fn storage_prices_before(
    conn: &mut PgConnection,
    pool_id: Uuid,
    until: DateTime<Utc>,
) -> StoreResult<Vec<crate::billing::metering::Price>> {
    let rows = sqlx::query!(
        "SELECT effective_from, price_per_gib_month_minor FROM pool_storage_prices
         WHERE pool_id = $1 AND effective_from < $2 ORDER BY effective_from",
        pool_id,
        until
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| crate::billing::metering::Price {
            effective_from: r.effective_from,
            per_gpu_hour_minor: 0,
            per_gpu_month_minor: Some(r.price_per_gib_month_minor),
        })
        .collect())
}

/// One rated piece of a volume's time, about to be written as a usage record.
pub struct NewVolumeUsage<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub volume_id: Uuid,
    pub pool_id: Uuid,
    pub period_start: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
    pub gib: i32,
    pub gib_seconds: i64,
    pub unit_price_minor: i64,
    pub currency: &'a str,
    /// The exact cost, numeric as text.
    pub cost_units: String,
    pub amount_minor: i64,
}

/// Write a volume's usage record (term `storage`).
pub async fn insert_usage(conn: &mut PgConnection, r: &NewVolumeUsage<'_>) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO usage_records (id, tenant_id, volume_id, pool_id, period_start, period_end, gpu_count, gpu_seconds,
             gib, gib_seconds, term, unit_price_minor, currency, cost_units, amount_minor)
         VALUES ($1, $2, $3, $4, $5, $6, 0, 0, $7, $8, 'storage', $9, $10, $11::text::numeric, $12)",
        r.id,
        r.tenant_id,
        r.volume_id,
        r.pool_id,
        r.period_start,
        r.period_end,
        r.gib,
        r.gib_seconds,
        r.unit_price_minor,
        r.currency,
        &r.cost_units,
        r.amount_minor
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Move a volume's metering forward.
pub async fn set_metered(
    conn: &mut PgConnection,
    id: Uuid,
    metered_until: DateTime<Utc>,
    cost_units: String,
    charged_minor: i64,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE volumes SET metered_until = $2, cost_units = $3::text::numeric, charged_minor = $4 WHERE id = $1",
        id,
        metered_until,
        cost_units,
        charged_minor
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Lock one volume for metering before its size changes (a grow); None if it has no meter yet (not ready).
pub async fn lock_for_metering(conn: &mut PgConnection, id: Uuid) -> StoreResult<Option<DueVolume>> {
    let row = sqlx::query_as!(
        DueVolume,
        r#"SELECT v.id, v.tenant_id, v.pool_id, v.size_gib, v.metered_until AS "metered_until!",
                  CASE WHEN v.kind = 'host' THEN LEAST(now(), COALESCE(n.last_heartbeat_at, v.metered_until))
                       ELSE now() END AS "meter_to!",
                  false AS "ended!", v.cost_units::text AS "cost_units!", v.charged_minor, v.currency
           FROM volumes v JOIN nodes n ON n.id = v.node_id
           WHERE v.id = $1 AND v.metered_until IS NOT NULL AND v.deleted_at IS NULL FOR UPDATE OF v"#,
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// A volume the idle policy acts on now.
#[derive(Debug, Clone)]
pub struct IdleVolume {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    pub detached_since: DateTime<Utc>,
    pub delete_after_idle_days: i32,
    /// When it is deleted: its idle days after it was last detached, and never sooner than a day after the notice.
    pub deletes_at: DateTime<Utc>,
}

/// Ready volumes with an idle policy, detached long enough that their notice is due (a day before their idle
/// days are up) and not yet given; each marked noticed (locked, SKIP LOCKED: replicas share the work).
pub async fn take_idle_notices(conn: &mut PgConnection, limit: i64) -> StoreResult<Vec<IdleVolume>> {
    let rows = sqlx::query_as!(
        IdleVolume,
        r#"WITH due AS (
               SELECT id FROM volumes
               WHERE state = 'ready' AND delete_after_idle_days IS NOT NULL AND detached_since IS NOT NULL
                 AND idle_notice_at IS NULL
                 AND detached_since + make_interval(days => delete_after_idle_days - 1) <= now()
               ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
           UPDATE volumes v SET idle_notice_at = now() FROM due WHERE v.id = due.id
           RETURNING v.id, v.tenant_id, v.name, v.detached_since AS "detached_since!",
                     v.delete_after_idle_days AS "delete_after_idle_days!",
                     GREATEST(v.detached_since + make_interval(days => v.delete_after_idle_days),
                              now() + interval '1 day') AS "deletes_at!""#,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// Ready volumes whose idle days are up, noticed a day ago at least and still detached: each `deleting` now
/// (billing stops; its agent destroys the data), locked as [`take_idle_notices`] does.
pub async fn take_idle_deletions(conn: &mut PgConnection, limit: i64) -> StoreResult<Vec<IdleVolume>> {
    let rows = sqlx::query_as!(
        IdleVolume,
        r#"WITH due AS (
               SELECT id FROM volumes
               WHERE state = 'ready' AND delete_after_idle_days IS NOT NULL AND detached_since IS NOT NULL
                 AND idle_notice_at IS NOT NULL
                 AND now() >= GREATEST(detached_since + make_interval(days => delete_after_idle_days),
                                       idle_notice_at + interval '1 day')
                 AND NOT EXISTS (SELECT 1 FROM volume_attachments a WHERE a.volume_id = volumes.id AND a.detached_at IS NULL)
               ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
           UPDATE volumes v SET state = 'deleting', deleted_at = now(),
                  state_reason = 'deleted: detached for ' || v.delete_after_idle_days || ' days (its idle policy)'
           FROM due WHERE v.id = due.id
           RETURNING v.id, v.tenant_id, v.name, v.detached_since AS "detached_since!",
                     v.delete_after_idle_days AS "delete_after_idle_days!", now() AS "deletes_at!""#,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}
