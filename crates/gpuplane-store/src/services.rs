//! Services (jobs that serve), their callers' keys and their replicas as agents report them. Every tenant-facing
//! query takes the tenant's id and filters by it; the gateway's reads take the service's id and a key's hash.

use chrono::{DateTime, Utc};
use gpuplane_protocol::jobs::ServingReport;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

/// A service as the API shows it (its URL is the service's, added above).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ServiceRow {
    pub id: Uuid,
    pub job_id: Uuid,
    pub lease_id: Uuid,
    pub port: i32,
    pub health_path: String,
    /// `http`, or `openai` (an OpenAI-compatible server: the gateway also counts the tokens it returns).
    pub protocol: String,
    /// Callable without a key.
    pub public: bool,
    /// Requests per minute per key (per client address when public); null: unlimited.
    pub rate_limit_per_minute: Option<i32>,
    /// The job's parts that run and answered their health path last.
    pub ready_replicas: i64,
    /// The job's parts that run (or are starting).
    pub replicas: i64,
    /// The job's state (the service answers while it runs).
    pub job_state: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a new service stores.
pub struct NewService<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub job_id: Uuid,
    pub port: i32,
    pub health_path: &'a str,
    pub protocol: &'a str,
    pub public: bool,
    pub rate_limit_per_minute: Option<i32>,
}

pub async fn insert_service(conn: &mut PgConnection, new: &NewService<'_>) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO services (id, tenant_id, job_id, port, health_path, protocol, public, rate_limit_per_minute)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        new.id,
        new.tenant_id,
        new.job_id,
        new.port,
        new.health_path,
        new.protocol,
        new.public,
        new.rate_limit_per_minute
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The tenant's services in id order (`limit` with ids above `after`), or the one with `id`.
pub async fn list_services(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    id: Option<Uuid>,
    limit: i64,
    after: Uuid,
) -> StoreResult<Vec<ServiceRow>> {
    let rows = sqlx::query_as!(
        ServiceRow,
        r#"SELECT s.id, s.job_id, j.lease_id, s.port, s.health_path, s.protocol, s.public, s.rate_limit_per_minute,
             (SELECT count(*) FROM service_ready_replicas r WHERE r.service_id = s.id) AS "ready_replicas!",
             (SELECT count(*) FROM job_nodes jn
               WHERE jn.job_id = s.job_id AND jn.state IN ('pending', 'assigned', 'running')) AS "replicas!",
             j.state AS job_state, s.created_at, s.updated_at
         FROM services s JOIN jobs j ON j.id = s.job_id
         WHERE s.tenant_id = $1 AND ($2::uuid IS NULL OR s.id = $2) AND s.id > $4
         ORDER BY s.id LIMIT $3"#,
        tenant_id,
        id,
        limit,
        after
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// Change who may call the service and how often; `None`: unchanged. Whether it is the tenant's.
pub async fn update_service(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    id: Uuid,
    public: Option<bool>,
    rate_limit_per_minute: Option<Option<i32>>,
) -> StoreResult<bool> {
    let done = sqlx::query!(
        "UPDATE services SET public = coalesce($3, public),
             rate_limit_per_minute = CASE WHEN $4 THEN $5 ELSE rate_limit_per_minute END, updated_at = now()
         WHERE id = $1 AND tenant_id = $2",
        id,
        tenant_id,
        public,
        rate_limit_per_minute.is_some(),
        rate_limit_per_minute.flatten()
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A caller's key as listed (never its secret).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ServiceKey {
    pub id: Uuid,
    pub service_id: Uuid,
    pub name: String,
    /// The first characters of the secret, to tell keys apart.
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    /// Set once revoked: the key never works again.
    pub revoked_at: Option<DateTime<Utc>>,
}

pub async fn insert_key(
    conn: &mut PgConnection,
    id: Uuid,
    service_id: Uuid,
    name: &str,
    prefix: &str,
    secret_sha256: &[u8],
) -> StoreResult<ServiceKey> {
    let key = sqlx::query_as!(
        ServiceKey,
        "INSERT INTO service_keys (id, service_id, name, prefix, secret_sha256) VALUES ($1, $2, $3, $4, $5)
         RETURNING id, service_id, name, prefix, created_at, revoked_at",
        id,
        service_id,
        name,
        prefix,
        secret_sha256
    )
    .fetch_one(conn)
    .await?;
    Ok(key)
}

pub async fn list_keys(conn: &mut PgConnection, service_id: Uuid) -> StoreResult<Vec<ServiceKey>> {
    let keys = sqlx::query_as!(
        ServiceKey,
        "SELECT id, service_id, name, prefix, created_at, revoked_at FROM service_keys
         WHERE service_id = $1 ORDER BY created_at, id",
        service_id
    )
    .fetch_all(conn)
    .await?;
    Ok(keys)
}

/// Revoke a key of the service (idempotent: the first revocation's time is kept). None: no such key.
pub async fn revoke_key(conn: &mut PgConnection, service_id: Uuid, key_id: Uuid) -> StoreResult<Option<ServiceKey>> {
    let key = sqlx::query_as!(
        ServiceKey,
        "UPDATE service_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 AND service_id = $2
         RETURNING id, service_id, name, prefix, created_at, revoked_at",
        key_id,
        service_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(key)
}

/// Record what a node's agent reports of its serving parts: only its own running parts of a service are
/// taken; its parts with a replica that the report leaves out are not ready any more.
pub async fn record_replicas(conn: &mut PgConnection, node_id: Uuid, reports: &[ServingReport]) -> StoreResult<()> {
    let ids: Vec<Uuid> = reports.iter().map(|r| r.job_node_id).collect();
    let ports: Vec<i32> = reports.iter().map(|r| r.port).collect();
    let ready: Vec<bool> = reports.iter().map(|r| r.ready).collect();
    if !reports.is_empty() {
        sqlx::query!(
            "INSERT INTO service_replicas (job_node_id, service_id, port, ready, reported_at)
             SELECT jn.id, s.id, r.port, r.ready, now()
             FROM UNNEST($2::uuid[], $3::int[], $4::bool[]) AS r(id, port, ready)
             JOIN job_nodes jn ON jn.id = r.id AND jn.node_id = $1 AND jn.state IN ('assigned', 'running')
             JOIN services s ON s.job_id = jn.job_id
             ON CONFLICT (job_node_id) DO UPDATE SET port = EXCLUDED.port, ready = EXCLUDED.ready, reported_at = now()",
            node_id,
            &ids,
            &ports,
            &ready
        )
        .execute(&mut *conn)
        .await?;
        // When each replica first answered (its restarts' backoff starts over after it).
        sqlx::query!(
            "UPDATE job_nodes SET ready_at = now()
             FROM UNNEST($2::uuid[], $3::bool[]) AS r(id, ready)
             WHERE job_nodes.id = r.id AND r.ready AND job_nodes.node_id = $1 AND job_nodes.ready_at IS NULL
               AND job_nodes.state IN ('assigned', 'running')",
            node_id,
            &ids,
            &ready
        )
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query!(
        "UPDATE service_replicas sr SET ready = false, reported_at = now()
         FROM job_nodes jn WHERE jn.id = sr.job_node_id AND jn.node_id = $1 AND sr.ready AND sr.job_node_id <> ALL($2)",
        node_id,
        &ids
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// What the gateway needs of a service for one request: who may call it, how often, and where its ready
/// replicas are (in one query: one round trip per request).
#[derive(Debug, Clone)]
pub struct Route {
    pub tenant_id: Uuid,
    pub public: bool,
    pub protocol: String,
    pub rate_limit_per_minute: Option<i32>,
    /// The key whose secret's hash was given, when it is this service's and not revoked.
    pub key_id: Option<Uuid>,
    /// The replicas that run, are not being stopped, and answered their last probe.
    pub replicas: Vec<ReadyReplica>,
}

/// A ready replica: the job part, and where its forwarder listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyReplica {
    pub job_node_id: Uuid,
    pub address: String,
    pub port: i32,
}

pub async fn route(conn: &mut PgConnection, service_id: Uuid, key_sha256: Option<&[u8]>) -> StoreResult<Option<Route>> {
    let row = sqlx::query!(
        r#"SELECT s.tenant_id, s.public, s.protocol, s.rate_limit_per_minute,
             (SELECT k.id FROM service_keys k
               WHERE k.service_id = s.id AND k.secret_sha256 = $2 AND k.revoked_at IS NULL) AS key_id,
             (SELECT coalesce(json_agg(json_build_object('job_node_id', r.job_node_id, 'address', r.address,
                                                         'port', r.port) ORDER BY r.job_node_id), '[]')
               FROM service_ready_replicas r WHERE r.service_id = s.id) AS "replicas!: sqlx::types::Json<Vec<ReadyReplica>>"
         FROM services s WHERE s.id = $1"#,
        service_id,
        key_sha256
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| Route {
        tenant_id: r.tenant_id,
        public: r.public,
        protocol: r.protocol,
        rate_limit_per_minute: r.rate_limit_per_minute,
        key_id: r.key_id,
        replicas: r.replicas.0,
    }))
}

/// Whether the job serves (its parts are a service's replicas).
pub async fn job_serves(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<bool> {
    let serves =
        sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM services WHERE job_id = $1) AS "serves!""#, job_id)
            .fetch_one(conn)
            .await?;
    Ok(serves)
}

/// A service's counts over one minute, as a gateway process adds them (or as they add up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMinute {
    pub service_id: Uuid,
    pub minute: DateTime<Utc>,
    pub requests: i64,
    pub errors: i64,
    pub refused: i64,
    pub output_tokens: i64,
    /// Requests per latency bucket (the service's edges).
    pub latency: Vec<i64>,
}

/// Add a gateway's counts to what the others counted.
pub async fn add_request_minutes(conn: &mut PgConnection, minutes: &[RequestMinute]) -> StoreResult<()> {
    for m in minutes {
        sqlx::query!(
            "INSERT INTO service_request_minutes AS t
                 (service_id, minute, requests, errors, refused, output_tokens, latency)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (service_id, minute) DO UPDATE SET
                 requests = t.requests + EXCLUDED.requests, errors = t.errors + EXCLUDED.errors,
                 refused = t.refused + EXCLUDED.refused, output_tokens = t.output_tokens + EXCLUDED.output_tokens,
                 latency = ARRAY(SELECT a + b FROM unnest(t.latency, EXCLUDED.latency) AS u(a, b))",
            m.service_id,
            m.minute,
            m.requests,
            m.errors,
            m.refused,
            m.output_tokens,
            &m.latency
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Delete up to `limit` minutes, of any service, older than `before`; returns how many.
pub async fn expire_request_minutes(conn: &mut PgConnection, before: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
    let done = sqlx::query!(
        "DELETE FROM service_request_minutes t USING ( \
             SELECT service_id, minute FROM service_request_minutes WHERE minute < $1 \
             ORDER BY minute LIMIT $2 FOR UPDATE SKIP LOCKED) due \
         WHERE t.service_id = due.service_id AND t.minute = due.minute",
        before,
        limit
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// The service's minutes from `since` on.
pub async fn request_minutes(
    conn: &mut PgConnection,
    service_id: Uuid,
    since: DateTime<Utc>,
) -> StoreResult<Vec<RequestMinute>> {
    let rows = sqlx::query_as!(
        RequestMinute,
        "SELECT service_id, minute, requests, errors, refused, output_tokens, latency FROM service_request_minutes
         WHERE service_id = $1 AND minute >= $2 ORDER BY minute",
        service_id,
        since
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}
