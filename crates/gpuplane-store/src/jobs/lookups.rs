//! What creating, replanning, judging and inspecting a job reads around it: its lease, the lease's nodes and GPUs,
//! its pool, the job's stored request and the retune loop's due jobs.

use chrono::{DateTime, Utc};
use gpuplane_protocol::jobs::JobState;
use sqlx::PgConnection;
use uuid::Uuid;

use super::types::RetuneMode;
use crate::StoreResult;
use crate::lease_kinds::LeaseState;

/// A tenant's lease as a new job needs it.
pub struct JobLease {
    pub state: LeaseState,
    pub pool_id: Uuid,
    pub ends_at: Option<DateTime<Utc>>,
}

/// A tenant's lease as a new job needs it; none when the tenant has no such lease.
pub async fn tenant_lease(conn: &mut PgConnection, lease_id: Uuid, tenant_id: Uuid) -> StoreResult<Option<JobLease>> {
    Ok(sqlx::query_as!(
        JobLease,
        r#"SELECT state AS "state: LeaseState", pool_id, ends_at FROM leases WHERE id = $1 AND tenant_id = $2"#,
        lease_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?)
}

/// Hold a lease against a concurrent end (`FOR SHARE`): its state and release deadline.
pub async fn share_lease(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<(LeaseState, Option<DateTime<Utc>>)> {
    let row = sqlx::query!(
        r#"SELECT state AS "state: LeaseState", release_deadline FROM leases WHERE id = $1 FOR SHARE"#,
        lease_id
    )
    .fetch_one(conn)
    .await?;
    Ok((row.state, row.release_deadline))
}

/// One GPU a lease holds, with its node.
pub struct LeaseGpuRow {
    pub node_id: Uuid,
    pub hostname: String,
    pub address: String,
    pub lease_subnet: Option<String>,
    pub rdma: bool,
    pub intra_link: String,
    pub network_gbps: i32,
    pub idx: i32,
}

/// The GPUs a lease holds, by node hostname then index.
pub async fn lease_gpu_rows(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<LeaseGpuRow>> {
    Ok(sqlx::query_as!(
        LeaseGpuRow,
        "SELECT n.id AS node_id, n.hostname, n.address, n.lease_subnet, n.rdma, n.intra_link, n.network_gbps, g.idx \
         FROM leases l JOIN gpus g ON g.id = ANY(l.gpu_ids) AND g.held_by = l.id JOIN nodes n ON n.id = g.node_id \
         WHERE l.id = $1 ORDER BY n.hostname, g.idx",
        lease_id
    )
    .fetch_all(conn)
    .await?)
}

/// What these nodes reported they can launch jobs with (as JSON: the type is the agent API's): (node id,
/// hostname, external, launchers), by hostname.
pub async fn node_launcher_rows(
    conn: &mut PgConnection,
    node_ids: &[Uuid],
) -> StoreResult<Vec<(Uuid, String, bool, Option<serde_json::Value>)>> {
    let rows = sqlx::query!(
        "SELECT id, hostname, external, launchers FROM nodes WHERE id = ANY($1) ORDER BY hostname",
        node_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.hostname, r.external, r.launchers)).collect())
}

/// A lease's pool.
pub async fn lease_pool(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Uuid> {
    Ok(sqlx::query_scalar!("SELECT pool_id FROM leases WHERE id = $1", lease_id).fetch_one(conn).await?)
}

/// A tenant's lease's pool; none when the tenant has no such lease.
pub async fn tenant_lease_pool(conn: &mut PgConnection, lease_id: Uuid, tenant_id: Uuid) -> StoreResult<Option<Uuid>> {
    Ok(sqlx::query_scalar!("SELECT pool_id FROM leases WHERE id = $1 AND tenant_id = $2", lease_id, tenant_id)
        .fetch_optional(conn)
        .await?)
}

/// The request a job was created with, as stored.
pub async fn job_request(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<serde_json::Value> {
    Ok(sqlx::query_scalar!("SELECT request FROM jobs WHERE id = $1", job_id).fetch_one(conn).await?)
}

/// Whether the tenant has this job.
pub async fn tenant_has_job(conn: &mut PgConnection, job_id: Uuid, tenant_id: Uuid) -> StoreResult<bool> {
    let owned = sqlx::query_scalar!("SELECT id FROM jobs WHERE id = $1 AND tenant_id = $2", job_id, tenant_id)
        .fetch_optional(conn)
        .await?;
    Ok(owned.is_some())
}

/// What a replan starts from: the job's state, lease, template and request, the lease's pool, and the pending
/// generation (as JSON) if one is.
pub struct ReplanSubject {
    pub state: JobState,
    pub lease_id: Uuid,
    pub template: String,
    pub request: serde_json::Value,
    pub pool_id: Uuid,
    pub pending: Option<serde_json::Value>,
}

/// A job to replan; with `tenant_id`, only that tenant's.
pub async fn replan_subject(
    conn: &mut PgConnection,
    job_id: Uuid,
    tenant_id: Option<Uuid>,
) -> StoreResult<Option<ReplanSubject>> {
    Ok(sqlx::query_as!(
        ReplanSubject,
        r#"SELECT j.state AS "state: JobState", j.lease_id, j.template, j.request, l.pool_id,
             (SELECT to_jsonb(g.generation) FROM job_generations g WHERE g.job_id = j.id AND g.state = 'pending')
                 AS pending
         FROM jobs j JOIN leases l ON l.id = j.lease_id WHERE j.id = $1 AND ($2::uuid IS NULL OR j.tenant_id = $2)"#,
        job_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?)
}

/// The lease's latest running job that has started: (job id, its plan as JSON, when it started).
pub async fn running_job_of_lease(
    conn: &mut PgConnection,
    lease_id: Uuid,
) -> StoreResult<Option<(Uuid, Option<serde_json::Value>, DateTime<Utc>)>> {
    let row = sqlx::query!(
        r#"SELECT id, plan, started_at AS "started_at!" FROM jobs
         WHERE lease_id = $1 AND state = 'running' AND started_at IS NOT NULL
         ORDER BY id DESC LIMIT 1"#,
        lease_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.id, r.plan, r.started_at)))
}

/// The GPU-to-GPU link of a pool's GPU model.
pub async fn pool_gpu_link(conn: &mut PgConnection, pool_id: Uuid) -> StoreResult<String> {
    Ok(sqlx::query_scalar!(
        "SELECT m.gpu_link FROM pools p JOIN gpu_models m ON m.key = p.gpu_model WHERE p.id = $1",
        pool_id
    )
    .fetch_one(conn)
    .await?)
}

/// The replan suggested for a job's current generation, if any.
pub async fn current_suggestion(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<Option<serde_json::Value>> {
    Ok(sqlx::query_scalar!(
        "SELECT g.suggestion FROM job_generations g JOIN jobs j ON j.id = g.job_id AND j.generation = g.generation \
         WHERE j.id = $1",
        job_id
    )
    .fetch_optional(conn)
    .await?
    .flatten())
}

/// The running jobs with retune on whose current generation has no suggestion yet and that have no replan
/// pending: (job id, retune mode), at most 100.
pub async fn due_for_retune(conn: &mut PgConnection) -> StoreResult<Vec<(Uuid, RetuneMode)>> {
    let rows = sqlx::query!(
        r#"SELECT j.id, j.retune AS "retune: RetuneMode" FROM jobs j
         JOIN job_generations g ON g.job_id = j.id AND g.generation = j.generation
         WHERE j.state = 'running' AND j.retune <> 'off' AND g.suggested_at IS NULL
             AND NOT EXISTS (SELECT 1 FROM job_generations p WHERE p.job_id = j.id AND p.state = 'pending')
         ORDER BY j.id LIMIT 100"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.retune)).collect())
}

/// Record the replan suggested for a job's current generation, once: the job's tenant, or none when one was
/// recorded already.
pub async fn record_suggestion(
    conn: &mut PgConnection,
    job_id: Uuid,
    suggestion: &serde_json::Value,
) -> StoreResult<Option<Uuid>> {
    Ok(sqlx::query_scalar!(
        "UPDATE job_generations g SET suggested_at = now(), suggestion = $2 FROM jobs j \
         WHERE g.job_id = $1 AND j.id = g.job_id AND g.generation = j.generation AND g.suggested_at IS NULL \
         RETURNING j.tenant_id",
        job_id,
        suggestion
    )
    .fetch_optional(conn)
    .await?)
}

/// Keep what gpuplane sees of a running job now (its insights, as JSON) with the job.
pub async fn save_insights(conn: &mut PgConnection, job_id: Uuid, insights: &serde_json::Value) -> StoreResult<()> {
    sqlx::query!("UPDATE jobs SET insights = $2, insights_at = now() WHERE id = $1", job_id, insights)
        .execute(conn)
        .await?;
    Ok(())
}

/// The insights last kept with these jobs, and when: (job id, insights, at).
pub async fn saved_insights(
    conn: &mut PgConnection,
    job_ids: &[Uuid],
) -> StoreResult<Vec<(Uuid, serde_json::Value, DateTime<Utc>)>> {
    let rows = sqlx::query!(
        r#"SELECT id, insights AS "insights!", insights_at AS "insights_at!" FROM jobs
           WHERE id = ANY($1) AND insights IS NOT NULL AND insights_at IS NOT NULL"#,
        job_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.insights, r.insights_at)).collect())
}
