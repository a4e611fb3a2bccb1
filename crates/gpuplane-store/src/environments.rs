//! Lease environments: SSH keys and sessions.

use chrono::{DateTime, Utc};
use gpuplane_protocol::environments::{EnvironmentSpec, EnvironmentState};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;
use crate::leases::LeaseState;

/// A registered key. The key material itself is not returned: the fingerprint identifies it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SshKey {
    pub id: Uuid,
    pub name: String,
    /// The key's type, e.g. `ssh-ed25519`.
    pub key_type: String,
    /// As `ssh-keygen -l -E sha256` prints it: `SHA256:...`.
    pub fingerprint: String,
    pub created_at: DateTime<Utc>,
}

/// The tenant's keys as `authorized_keys` lines.
pub async fn authorized_keys(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<Vec<String>> {
    let keys = sqlx::query_scalar!("SELECT public_key FROM ssh_keys WHERE tenant_id = $1 ORDER BY id", tenant_id)
        .fetch_all(conn)
        .await?;
    Ok(keys)
}

/// The tenant's SSH keys, oldest first.
pub async fn list_ssh_keys(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<Vec<SshKey>> {
    let keys = sqlx::query_as!(
        SshKey,
        r#"SELECT id, name, split_part(public_key, ' ', 1) AS "key_type!", fingerprint, created_at
         FROM ssh_keys WHERE tenant_id = $1 ORDER BY id"#,
        tenant_id
    )
    .fetch_all(conn)
    .await?;
    Ok(keys)
}

/// Lock the tenant's row (`FOR UPDATE`), which serializes adds of its keys.
pub async fn lock_tenant(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<()> {
    sqlx::query!("SELECT 1 AS one FROM tenants WHERE id = $1 FOR UPDATE", tenant_id).fetch_optional(conn).await?;
    Ok(())
}

/// How many keys the tenant has.
pub async fn count_ssh_keys(conn: &mut PgConnection, tenant_id: Uuid) -> StoreResult<i64> {
    let count = sqlx::query_scalar!(r#"SELECT count(*) AS "count!" FROM ssh_keys WHERE tenant_id = $1"#, tenant_id)
        .fetch_one(conn)
        .await?;
    Ok(count)
}

/// A key to register: its `<type> <blob>` line and fingerprint, parsed by the caller.
#[derive(Debug, Clone)]
pub struct NewSshKey<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub name: &'a str,
    pub public_key: &'a str,
    pub fingerprint: &'a str,
    /// The API key that registered it.
    pub created_by: Uuid,
}

/// Register a key; `None` when the tenant has a key of this fingerprint already.
pub async fn insert_ssh_key(conn: &mut PgConnection, key: &NewSshKey<'_>) -> StoreResult<Option<SshKey>> {
    let inserted = sqlx::query_as!(
        SshKey,
        r#"INSERT INTO ssh_keys (id, tenant_id, name, public_key, fingerprint, created_by)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant_id, fingerprint) DO NOTHING
         RETURNING id, name, split_part(public_key, ' ', 1) AS "key_type!", fingerprint, created_at"#,
        key.id,
        key.tenant_id,
        key.name,
        key.public_key,
        key.fingerprint,
        key.created_by
    )
    .fetch_optional(conn)
    .await?;
    Ok(inserted)
}

/// Remove the tenant's key; false when it has no such key.
pub async fn delete_ssh_key(conn: &mut PgConnection, key_id: Uuid, tenant_id: Uuid) -> StoreResult<bool> {
    let deleted =
        sqlx::query!("DELETE FROM ssh_keys WHERE id = $1 AND tenant_id = $2", key_id, tenant_id).execute(conn).await?;
    Ok(deleted.rows_affected() > 0)
}

/// A lease's environment as recorded, with its lease's state.
#[derive(Debug, Clone)]
pub struct EnvironmentRow {
    pub image: Option<String>,
    /// `requested` or `stopped`.
    pub state: String,
    pub created_at: DateTime<Utc>,
    pub stopped_at: Option<DateTime<Utc>>,
    pub lease_state: LeaseState,
}

/// The environment of the tenant's lease, if it has one.
pub async fn load_environment(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
) -> StoreResult<Option<EnvironmentRow>> {
    let env = sqlx::query_as!(
        EnvironmentRow,
        r#"SELECT e.image, e.state, e.created_at, e.stopped_at, l.state AS "lease_state: LeaseState"
         FROM lease_environments e
         JOIN leases l ON l.id = e.lease_id WHERE e.lease_id = $1 AND e.tenant_id = $2"#,
        lease_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(env)
}

/// One node of a lease with what its agent last reported of the lease's environment (absent: nothing yet).
#[derive(Debug, Clone)]
pub struct EnvironmentNodeRow {
    pub node_id: Uuid,
    pub hostname: String,
    pub address: String,
    pub state: Option<EnvironmentState>,
    pub port: Option<i32>,
    pub host_key_fingerprints: Option<serde_json::Value>,
    pub reason: Option<String>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// The lease's nodes, by host name, each with its environment report.
pub async fn environment_nodes(conn: &mut PgConnection, lease_id: Uuid) -> StoreResult<Vec<EnvironmentNodeRow>> {
    let rows = sqlx::query_as!(
        EnvironmentNodeRow,
        r#"SELECT n.id AS node_id, n.hostname, n.address, en.state AS "state?: EnvironmentState", en.port AS "port?",
                  en.host_key_fingerprints AS "host_key_fingerprints?", en.reason AS "reason?",
                  en.updated_at AS "updated_at?"
         FROM (SELECT DISTINCT g.node_id FROM leases l JOIN gpus g ON g.id = ANY(l.gpu_ids) WHERE l.id = $1) lg
         JOIN nodes n ON n.id = lg.node_id
         LEFT JOIN environment_nodes en ON en.lease_id = $1 AND en.node_id = n.id ORDER BY n.hostname"#,
        lease_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// The state of the tenant's lease, read `FOR SHARE` (held against a concurrent end of the lease); `None` when
/// the tenant has no such lease.
pub async fn lease_state_for_share(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
) -> StoreResult<Option<LeaseState>> {
    let state = sqlx::query_scalar!(
        r#"SELECT state AS "state: LeaseState" FROM leases WHERE id = $1 AND tenant_id = $2 FOR SHARE"#,
        lease_id,
        tenant_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(state)
}

/// Record that the lease's nodes are to run its environment (afresh: earlier reports are forgotten).
pub async fn request_environment(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
    image: Option<&str>,
) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO lease_environments (lease_id, tenant_id, image) VALUES ($1, $2, $3) \
         ON CONFLICT (lease_id) DO UPDATE SET image = $3, state = 'requested', created_at = now(), stopped_at = NULL",
        lease_id,
        tenant_id,
        image
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM environment_nodes WHERE lease_id = $1", lease_id).execute(conn).await?;
    Ok(())
}

/// Mark the tenant's lease's environment stopped (keeping when it first stopped).
pub async fn stop_environment(conn: &mut PgConnection, tenant_id: Uuid, lease_id: Uuid) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE lease_environments SET state = 'stopped', stopped_at = coalesce(stopped_at, now()) \
         WHERE lease_id = $1 AND tenant_id = $2",
        lease_id,
        tenant_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The environments this node must run now, with their tenants' current keys.
pub async fn node_environments(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<EnvironmentSpec>> {
    let envs = sqlx::query!(
        "SELECT e.lease_id, e.tenant_id, e.image FROM lease_environments e JOIN leases l ON l.id = e.lease_id \
         WHERE e.state = 'requested' AND l.state = 'active' AND EXISTS (SELECT 1 FROM gpus g \
             WHERE g.node_id = $1 AND g.held_by = e.lease_id) \
         ORDER BY e.lease_id",
        node_id
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut specs = Vec::with_capacity(envs.len());
    for env in envs {
        let authorized_keys = authorized_keys(conn, env.tenant_id).await?;
        specs.push(EnvironmentSpec { lease_id: env.lease_id, image: env.image, authorized_keys });
    }
    Ok(specs)
}

/// Is `generation` the node's current agent credential generation?
pub async fn agent_generation_is_current(conn: &mut PgConnection, node_id: Uuid, generation: i64) -> StoreResult<bool> {
    let current = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM nodes WHERE id = $1 AND agent_generation = $2) AS "current!""#,
        node_id,
        generation
    )
    .fetch_one(conn)
    .await?;
    Ok(current)
}

/// An agent's report of a lease's environment on its node.
#[derive(Debug, Clone)]
pub struct EnvironmentReport<'a> {
    pub lease_id: Uuid,
    pub node_id: Uuid,
    pub state: EnvironmentState,
    pub port: Option<i32>,
    pub host_key_fingerprints: serde_json::Value,
    pub reason: Option<&'a str>,
}

/// Record the report, only for an environment of a lease that holds (or held) GPUs of this node; false when
/// there is none.
pub async fn record_environment_node(conn: &mut PgConnection, report: &EnvironmentReport<'_>) -> StoreResult<bool> {
    let recorded = sqlx::query!(
        "INSERT INTO environment_nodes (lease_id, node_id, state, port, host_key_fingerprints, reason) \
         SELECT $1, $2, $3, $4, $5, $6 FROM lease_environments e WHERE e.lease_id = $1 \
             AND EXISTS (SELECT 1 FROM leases l JOIN gpus g ON g.id = ANY(l.gpu_ids) WHERE l.id = $1 AND g.node_id = $2) \
         ON CONFLICT (lease_id, node_id) DO UPDATE SET state = $3, port = $4, host_key_fingerprints = $5, \
             reason = $6, updated_at = now()",
        report.lease_id,
        report.node_id,
        report.state as EnvironmentState,
        report.port,
        report.host_key_fingerprints,
        report.reason
    )
    .execute(conn)
    .await?;
    Ok(recorded.rows_affected() > 0)
}
