//! A lease across pools (migration 0037): its parts, one per pool. The lease row holds what every lease has (its
//! GPUs, term, state, period, events, one currency; its `pool_id` and `placement` are the first part's and its
//! `gpu_count` the sum); `lease_parts` says how many GPUs of which pool each part asked for, and keeps each part's
//! metering. The view `lease_shares` is the one statement of "the GPUs of which pool a lease holds", for single-pool
//! leases and leases with parts alike.

use sqlx::PgConnection;
use uuid::Uuid;

use super::{LeasePart, Placement};
use crate::StoreResult;

/// Most parts in one lease: the planner over unlike GPUs plans one to four kinds of GPU
/// (`gpuplane_planner::mixed`), trying every order of the parts along the pipeline.
pub const MAX_PARTS: usize = 4;

/// A part about to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewPart {
    pub pool_id: Uuid,
    pub gpu_count: i32,
    pub placement: Placement,
}

/// What a request across pools needs to know of each pool it names.
#[derive(Debug, Clone)]
pub struct PartPool {
    pub id: Uuid,
    pub gpu_model: String,
    pub currency: String,
    pub region: String,
}

/// The pools of `ids` that exist (in no particular order).
pub async fn pools(conn: &mut PgConnection, ids: &[Uuid]) -> StoreResult<Vec<PartPool>> {
    Ok(sqlx::query_as!(PartPool, "SELECT id, gpu_model, currency, region FROM pools WHERE id = ANY($1)", ids)
        .fetch_all(conn)
        .await?)
}

/// Record the parts of lease `lease_id`, in request order (part 0 first).
pub async fn insert(conn: &mut PgConnection, lease_id: Uuid, parts: &[NewPart]) -> StoreResult<()> {
    let pools: Vec<Uuid> = parts.iter().map(|p| p.pool_id).collect();
    let counts: Vec<i32> = parts.iter().map(|p| p.gpu_count).collect();
    let placements: Vec<Placement> = parts.iter().map(|p| p.placement).collect();
    sqlx::query!(
        "INSERT INTO lease_parts (lease_id, part, pool_id, gpu_count, placement) \
         SELECT $1, (p.ord - 1)::smallint, p.pool_id, p.gpu_count, p.placement \
         FROM UNNEST($2::uuid[], $3::int[], $4::text[]) WITH ORDINALITY AS p(pool_id, gpu_count, placement, ord)",
        lease_id,
        &pools,
        &counts,
        &placements as &[Placement]
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The parts of lease `lease_id` as asked (empty: a single-pool lease), part 0 first.
pub async fn asked(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<NewPart>> {
    Ok(sqlx::query_as!(
        NewPart,
        r#"SELECT pool_id, gpu_count, placement AS "placement: Placement" FROM lease_parts WHERE lease_id = $1 ORDER BY part"#,
        lease_id
    )
    .fetch_all(conn)
    .await?)
}

/// The parts of the leases `lease_ids` (leases without parts have none), by lease, part 0 first, each with the GPUs
/// the lease holds (or held) in its pool.
pub async fn of_leases(conn: &mut PgConnection, lease_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, LeasePart)>> {
    let rows = sqlx::query!(
        r#"SELECT p.lease_id, p.pool_id, pl.gpu_model, p.gpu_count, p.placement AS "placement: Placement",
             ARRAY(SELECT g.id FROM gpus g JOIN nodes n ON n.id = g.node_id
                   WHERE g.id = ANY(l.gpu_ids) AND n.pool_id = p.pool_id ORDER BY n.hostname, g.idx) AS "gpu_ids!"
         FROM lease_parts p JOIN leases l ON l.id = p.lease_id JOIN pools pl ON pl.id = p.pool_id
         WHERE p.lease_id = ANY($1) ORDER BY p.lease_id, p.part"#,
        lease_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let part = LeasePart {
                pool_id: r.pool_id,
                gpu_model: r.gpu_model,
                gpu_count: r.gpu_count,
                placement: r.placement,
                gpu_ids: r.gpu_ids,
            };
            (r.lease_id, part)
        })
        .collect())
}

/// How many GPUs of which pool lease `lease_id` holds (`lease_shares`): one share for a single-pool lease, one per
/// part for a lease across pools.
pub async fn shares(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<(Uuid, i32)>> {
    let rows = sqlx::query!(
        r#"SELECT pool_id AS "pool_id!", gpu_count AS "gpu_count!" FROM lease_shares WHERE lease_id = $1 ORDER BY part"#,
        lease_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.pool_id, r.gpu_count)).collect())
}

/// Whether leases wait in the queue of any of `pools` (a queued lease across pools waits in each of its parts'
/// pools): a new request does not jump them.
pub async fn queued_in(conn: &mut PgConnection, pools: &[Uuid]) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM leases WHERE pool_id = ANY($1) AND state = 'queued')
             OR EXISTS (SELECT 1 FROM lease_parts p JOIN leases l ON l.id = p.lease_id
                        WHERE p.pool_id = ANY($1) AND l.state = 'queued') AS "queued!""#,
        pools
    )
    .fetch_one(conn)
    .await?)
}

/// The nodes holding each part's GPUs of lease `lease_id`: `(part, pool, node)`, part 0 first, nodes by hostname
/// (empty for a single-pool lease).
pub async fn part_nodes(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<(i16, Uuid, Uuid)>> {
    let rows = sqlx::query!(
        r#"SELECT DISTINCT p.part, p.pool_id, n.id AS node_id, n.hostname
         FROM lease_parts p JOIN leases l ON l.id = p.lease_id
         JOIN gpus g ON g.id = ANY(l.gpu_ids) JOIN nodes n ON n.id = g.node_id AND n.pool_id = p.pool_id
         WHERE p.lease_id = $1 ORDER BY p.part, n.hostname"#,
        lease_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.part, r.pool_id, r.node_id)).collect())
}
