//! Reading leases: one, a filtered page of them, with the GPUs they hold.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Lease, LeaseGpu, LeasePart, LeaseState, Placement, Term};
use crate::StoreResult;

/// A lease row as stored; `into_lease` adds its GPUs and parts.
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
    idle_release_after_minutes: Option<i32>,
    idle_since: Option<DateTime<Utc>>,
    release_deadline: Option<DateTime<Utc>>,
}

/// Filters for listing leases. `tenant_id` is always set for tenant callers.
#[derive(Debug, Default, Clone)]
pub struct LeaseFilter {
    pub tenant_id: Option<Uuid>,
    /// Leases with GPUs of this pool (a lease across pools: any of its parts).
    pub pool_id: Option<Uuid>,
    pub state: Option<LeaseState>,
    pub after: Uuid,
    pub limit: i64,
}

/// A page of the leases `filter` selects, in id order, with their GPUs.
pub async fn list_leases(conn: &mut PgConnection, filter: &LeaseFilter) -> StoreResult<Vec<Lease>> {
    let rows = sqlx::query_as!(
        LeaseRow,
        r#"SELECT id, tenant_id, pool_id, gpu_count, placement AS "placement: Placement", term AS "term: Term",
             duration_hours, months, state AS "state: LeaseState", starts_at, ends_at, ended_at, end_reason,
             generation, created_at, updated_at, idle_release_after_minutes, idle_since, release_deadline
         FROM leases WHERE id > $1 AND ($2::uuid IS NULL OR tenant_id = $2)
         AND ($3::uuid IS NULL OR pool_id = $3
              OR EXISTS (SELECT 1 FROM lease_parts p WHERE p.lease_id = leases.id AND p.pool_id = $3))
         AND ($4::text IS NULL OR state = $4) ORDER BY id LIMIT $5"#,
        filter.after,
        filter.tenant_id,
        filter.pool_id,
        filter.state as Option<LeaseState>,
        filter.limit
    )
    .fetch_all(&mut *conn)
    .await?;
    with_gpus(conn, rows).await
}

/// Load a lease; with `tenant_id`, only if it is that tenant's (another tenant's lease is "not found").
pub async fn load_lease(conn: &mut PgConnection, tenant_id: Option<Uuid>, id: Uuid) -> StoreResult<Option<Lease>> {
    let rows = sqlx::query_as!(
        LeaseRow,
        r#"SELECT id, tenant_id, pool_id, gpu_count, placement AS "placement: Placement", term AS "term: Term",
             duration_hours, months, state AS "state: LeaseState", starts_at, ends_at, ended_at, end_reason,
             generation, created_at, updated_at, idle_release_after_minutes, idle_since, release_deadline
         FROM leases WHERE id = $1 AND ($2::uuid IS NULL OR tenant_id = $2)"#,
        id,
        tenant_id
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(with_gpus(conn, rows).await?.pop())
}

impl LeaseRow {
    pub fn into_lease(self, gpus: Vec<LeaseGpu>, parts: Option<Vec<LeasePart>>) -> Lease {
        Lease {
            parts,
            external: gpus.iter().any(|g| g.external),
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
            idle_release_after_minutes: self.idle_release_after_minutes,
            idle_since: self.idle_since,
            release_deadline: self.release_deadline,
        }
    }
}

/// A GPU given to one of the leases read ([`with_gpus`]).
struct HeldGpuRow {
    lease_id: Uuid,
    gpu_id: Uuid,
    node_id: Uuid,
    hostname: String,
    address: String,
    index: i32,
    uuid: String,
    external: bool,
}

impl HeldGpuRow {
    fn gpu(&self) -> LeaseGpu {
        LeaseGpu {
            gpu_id: self.gpu_id,
            node_id: self.node_id,
            hostname: self.hostname.clone(),
            address: self.address.clone(),
            index: self.index,
            uuid: self.uuid.clone(),
            external: self.external,
        }
    }
}

async fn with_gpus(conn: &mut PgConnection, rows: Vec<LeaseRow>) -> StoreResult<Vec<Lease>> {
    let held: Vec<HeldGpuRow> = match rows.as_slice() {
        [] => Vec::new(),
        // One lease (the common case): an equality lookup, whatever the table statistics say.
        [one] => sqlx::query_as!(
            HeldGpuRow,
            "SELECT l.id AS lease_id, g.id AS gpu_id, n.id AS node_id, n.hostname, n.address, g.idx AS index, g.uuid, \
                 n.external \
             FROM leases l JOIN gpus g ON g.id = ANY(l.gpu_ids) JOIN nodes n ON n.id = g.node_id \
             WHERE l.id = $1 ORDER BY n.hostname, g.idx",
            one.id
        )
        .fetch_all(&mut *conn)
        .await?,
        many => {
            let ids: Vec<Uuid> = many.iter().map(|r| r.id).collect();
            sqlx::query_as!(
                HeldGpuRow,
                "SELECT l.id AS lease_id, g.id AS gpu_id, n.id AS node_id, n.hostname, n.address, g.idx AS index, g.uuid, \
                 n.external \
                 FROM leases l JOIN gpus g ON g.id = ANY(l.gpu_ids) JOIN nodes n ON n.id = g.node_id \
                 WHERE l.id = ANY($1) ORDER BY l.id, n.hostname, g.idx",
                &ids
            )
            .fetch_all(&mut *conn)
            .await?
        }
    };
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let parts = if ids.is_empty() { Vec::new() } else { super::parts::of_leases(conn, &ids).await? };
    Ok(rows
        .into_iter()
        .map(|r| {
            let gpus = held.iter().filter(|h| h.lease_id == r.id).map(HeldGpuRow::gpu).collect();
            let mine: Vec<LeasePart> = parts.iter().filter(|(id, _)| *id == r.id).map(|(_, p)| p.clone()).collect();
            r.into_lease(gpus, (!mine.is_empty()).then_some(mine))
        })
        .collect())
}

/// Whether the lease exists and is the tenant's.
pub async fn lease_is_owned(conn: &mut PgConnection, tenant_id: Uuid, lease_id: Uuid) -> StoreResult<bool> {
    let owned = sqlx::query_scalar!("SELECT id FROM leases WHERE id = $1 AND tenant_id = $2", lease_id, tenant_id)
        .fetch_optional(conn)
        .await?;
    Ok(owned.is_some())
}
