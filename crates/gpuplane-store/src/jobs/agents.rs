//! What the nodes' agents fetch and report: their assignments (the jobs' parts on their node) and the status of
//! each.

use gpuplane_protocol::jobs::{Desired, JobState, LaunchSpec};
use sqlx::PgConnection;
use sqlx::types::Json;
use uuid::Uuid;

use super::lifecycle::history_push;
use crate::StoreResult;

/// Whether the node's credential generation is current.
pub async fn agent_current(conn: &mut PgConnection, node_id: Uuid, generation: i64) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM nodes WHERE id = $1 AND agent_generation = $2) AS "ok!""#,
        node_id,
        generation
    )
    .fetch_one(conn)
    .await?)
}

/// Lock, in id order, the jobs with a part on this node that no agent has fetched yet.
pub async fn lock_jobs_with_pending_parts(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<Uuid>> {
    // Jobs before their nodes, in id order, as every other writer locks them.
    Ok(sqlx::query_scalar!(
        "SELECT id FROM jobs WHERE id IN (SELECT job_id FROM job_nodes WHERE node_id = $1 AND state = 'pending') \
         ORDER BY id FOR UPDATE",
        node_id
    )
    .fetch_all(conn)
    .await?)
}

/// Mark the node's pending parts `assigned` (delivered to its agent).
pub async fn mark_parts_assigned(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<()> {
    // Runtime SQL: the history fragment `history_push` is shared by every statement that changes a part's state.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE job_nodes SET state = 'assigned', updated_at = now(), history = {} \
         WHERE node_id = $1 AND state = 'pending'",
        history_push("'assigned'", "NULL")
    )))
    .bind(node_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// An unfinished part on a node, as its agent's assignment (before the secret values join its environment).
pub struct AssignmentRow {
    pub job_node_id: Uuid,
    pub job_id: Uuid,
    pub lease_id: Uuid,
    pub desired: Desired,
    pub state: JobState,
    pub spec: LaunchSpec,
    pub notice_reason: Option<String>,
    pub notice_grace_s: Option<i32>,
}

/// The node's unfinished parts, in id order.
pub async fn open_assignments(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<AssignmentRow>> {
    let rows = sqlx::query!(
        r#"SELECT jn.id, jn.job_id, j.lease_id, jn.desired AS "desired: Desired", jn.state AS "state: JobState",
             jn.spec AS "spec: Json<LaunchSpec>", jn.notice_reason, jn.notice_grace_s
         FROM job_nodes jn
         JOIN jobs j ON j.id = jn.job_id
         WHERE jn.node_id = $1 AND jn.state IN ('pending', 'assigned', 'running') ORDER BY jn.id"#,
        node_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| AssignmentRow {
            job_node_id: r.id,
            job_id: r.job_id,
            lease_id: r.lease_id,
            desired: r.desired,
            state: r.state,
            spec: r.spec.0,
            notice_reason: r.notice_reason,
            notice_grace_s: r.notice_grace_s,
        })
        .collect())
}

/// The leases holding GPUs of the node, each with its GPUs' indices there: (lease id, indices), by lease.
pub async fn node_lease_gpus(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<(Uuid, Vec<i32>)>> {
    let rows = sqlx::query!(
        r#"SELECT g.held_by AS "held_by!", array_agg(g.idx ORDER BY g.idx) AS "indices!" FROM gpus g
         WHERE g.node_id = $1 AND g.held_by IS NOT NULL GROUP BY g.held_by ORDER BY g.held_by"#,
        node_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.held_by, r.indices)).collect())
}

/// Another node of a lease: where its peers reach it.
pub struct PeerRow {
    pub lease_id: Uuid,
    pub node_id: Uuid,
    pub address: String,
    pub echo_port: Option<i32>,
    pub lease_subnet: Option<String>,
    /// The lease's GPUs on it.
    pub gpu_indices: Vec<i32>,
}

/// The other nodes of these leases than `node_id`, by lease then node.
pub async fn lease_peers(conn: &mut PgConnection, lease_ids: &[Uuid], node_id: Uuid) -> StoreResult<Vec<PeerRow>> {
    Ok(sqlx::query_as!(
        PeerRow,
        r#"SELECT l.id AS lease_id, n.id AS node_id, n.address, n.echo_port, n.lease_subnet,
             array_agg(g.idx ORDER BY g.idx) AS "gpu_indices!" FROM leases l
         JOIN gpus g ON g.id = ANY(l.gpu_ids) AND g.held_by = l.id JOIN nodes n ON n.id = g.node_id
         WHERE l.id = ANY($1) AND g.node_id <> $2 GROUP BY l.id, n.id ORDER BY l.id, n.id"#,
        lease_ids,
        node_id
    )
    .fetch_all(conn)
    .await?)
}

/// The job of a part on this node; none when the node has no such part.
pub async fn assignment_job(conn: &mut PgConnection, job_node_id: Uuid, node_id: Uuid) -> StoreResult<Option<Uuid>> {
    Ok(sqlx::query_scalar!("SELECT job_id FROM job_nodes WHERE id = $1 AND node_id = $2", job_node_id, node_id)
        .fetch_optional(conn)
        .await?)
}

/// Lock a job's row.
pub async fn lock_job(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<()> {
    sqlx::query!("SELECT 1 AS one FROM jobs WHERE id = $1 FOR UPDATE", job_id).fetch_optional(conn).await?;
    Ok(())
}

/// Lock a part: its state and exit code.
pub async fn lock_part(conn: &mut PgConnection, job_node_id: Uuid) -> StoreResult<(JobState, Option<i32>)> {
    let row = sqlx::query!(
        r#"SELECT state AS "state: JobState", exit_code FROM job_nodes WHERE id = $1 FOR UPDATE"#,
        job_node_id
    )
    .fetch_one(conn)
    .await?;
    Ok((row.state, row.exit_code))
}

/// Move a part forward to `next` with what its agent reported (its start and finish times as the state says).
pub async fn advance_part(
    conn: &mut PgConnection,
    job_node_id: Uuid,
    next: JobState,
    exit_code: Option<i32>,
    output_tail: &[String],
    reason: Option<&str>,
) -> StoreResult<()> {
    // Runtime SQL: the history fragment `history_push` is shared by every statement that changes a part's state.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE job_nodes SET state = $2, exit_code = $3, output_tail = $4, reason = COALESCE($5, reason), \
             updated_at = now(), history = {}, \
             started_at = CASE WHEN $2 = 'running' THEN now() ELSE started_at END, \
             finished_at = CASE WHEN $2 IN ('succeeded', 'failed', 'cancelled') THEN now() ELSE NULL END \
         WHERE id = $1",
        history_push("$2", "$5")
    )))
    .bind(job_node_id)
    .bind(next)
    .bind(exit_code)
    .bind(Json(output_tail))
    .bind(reason)
    .execute(conn)
    .await?;
    Ok(())
}

/// Record a part's latest output, and its exit code where it has none yet.
pub async fn update_part_output(
    conn: &mut PgConnection,
    job_node_id: Uuid,
    output_tail: &[String],
    exit_code: Option<i32>,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE job_nodes SET output_tail = $2, exit_code = COALESCE(exit_code, $3), updated_at = now() WHERE id = $1",
        job_node_id,
        Json(output_tail) as _,
        exit_code
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A part's state and desired state.
pub async fn part_state(conn: &mut PgConnection, job_node_id: Uuid) -> StoreResult<(JobState, Desired)> {
    let row = sqlx::query!(
        r#"SELECT state AS "state: JobState", desired AS "desired: Desired" FROM job_nodes WHERE id = $1"#,
        job_node_id
    )
    .fetch_one(conn)
    .await?;
    Ok((row.state, row.desired))
}

/// How far the node's own parts are (their agent's report): parts of other nodes are not its to tell.
pub async fn record_progress(
    conn: &mut PgConnection,
    node_id: Uuid,
    parts: &[gpuplane_protocol::jobs::PartProgress],
) -> StoreResult<()> {
    let ids: Vec<Uuid> = parts.iter().map(|p| p.job_node_id).collect();
    let done: Vec<i64> = parts.iter().map(|p| p.progress.done).collect();
    let total: Vec<i64> = parts.iter().map(|p| p.progress.total).collect();
    sqlx::query!(
        "UPDATE job_nodes jn SET progress_done = r.done, progress_total = r.total, updated_at = now()
         FROM UNNEST($2::uuid[], $3::bigint[], $4::bigint[]) AS r(id, done, total)
         WHERE jn.id = r.id AND jn.node_id = $1
           AND (jn.progress_done, jn.progress_total) IS DISTINCT FROM (r.done, r.total)",
        node_id,
        &ids,
        &done,
        &total
    )
    .execute(conn)
    .await?;
    Ok(())
}
