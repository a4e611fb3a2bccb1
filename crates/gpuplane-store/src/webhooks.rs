//! Webhooks: endpoints, the outbox of events and deliveries, the delivery worker's claims and attempts, and the
//! alerts raised once per condition and subject.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::StoreResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting for its first attempt or a retry.
    Pending,
    Succeeded,
    /// Every scheduled attempt failed (a manual retry makes it pending again).
    Failed,
}

/// A webhook endpoint. Its secret is shown once, when it is created.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookEndpoint {
    pub id: Uuid,
    pub url: String,
    /// Event type patterns it receives: `*`, `lease.*`, `lease.ended` ...
    pub event_types: Vec<String>,
    pub description: String,
    /// Disabled endpoints receive nothing (the service disables one that failed for days).
    pub enabled: bool,
    /// Why the service disabled it, if it did.
    pub disabled_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One attempt to deliver.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookAttempt {
    pub attempted_at: DateTime<Utc>,
    pub succeeded: bool,
    /// The receiver's HTTP status, when it answered.
    pub response_code: Option<i32>,
    pub latency_ms: i32,
    /// What went wrong (transport error, or the status and the first bytes of the body).
    pub error: Option<String>,
}

/// An event's delivery to one endpoint, with its attempt log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookDelivery {
    pub id: Uuid,
    /// The event id: the `webhook-id` header of every attempt.
    pub event_id: Uuid,
    pub event_type: String,
    pub state: DeliveryState,
    pub attempts: i32,
    /// When the next attempt is due (pending deliveries).
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    pub last_status_code: Option<i32>,
    pub created_at: DateTime<Utc>,
    /// Every attempt, oldest first.
    pub attempt_log: Vec<WebhookAttempt>,
}

/// An event, as its webhook body carries it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, sqlx::FromRow)]
pub struct WebhookEvent {
    /// Stable across retries: the `webhook-id` header.
    pub id: Uuid,
    #[serde(rename = "type")]
    #[sqlx(rename = "type")]
    pub type_: String,
    pub timestamp: DateTime<Utc>,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

/// A delivery's attempt log as the statements read it (a JSON array of [`WebhookAttempt`]s), so that a checked
/// `query_as!(WebhookDelivery, ...)` decodes it into the field's `Vec`.
#[derive(sqlx::Type)]
#[sqlx(transparent)]
struct AttemptLog(sqlx::types::Json<Vec<WebhookAttempt>>);

impl From<AttemptLog> for Vec<WebhookAttempt> {
    fn from(log: AttemptLog) -> Self {
        log.0.0
    }
}

/// Record event `id` for the audience `tenant_id` (None: the operators) and queue it for every enabled endpoint
/// of that audience subscribed to `event_type` (`webhook_emit`, migration 0015).
pub async fn emit(
    conn: &mut PgConnection,
    id: Uuid,
    tenant_id: Option<Uuid>,
    event_type: &str,
    data: serde_json::Value,
) -> StoreResult<()> {
    sqlx::query!("SELECT webhook_emit($1, $2, $3, $4)", id, tenant_id, event_type, data).execute(conn).await?;
    Ok(())
}

/// Endpoint `id` of the audience `tenant_id` (None: the operators); None: no such endpoint there.
pub async fn load_endpoint(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    id: Uuid,
) -> StoreResult<Option<WebhookEndpoint>> {
    let endpoint = sqlx::query_as!(
        WebhookEndpoint,
        "SELECT id, url, event_types, description, enabled, disabled_reason, created_at, updated_at
         FROM webhook_endpoints WHERE id = $1 AND webhook_in_audience(tenant_id, $2)",
        id,
        tenant_id as Option<Uuid>
    )
    .fetch_optional(conn)
    .await?;
    Ok(endpoint)
}

/// The endpoints of the audience `tenant_id` after `after`, in id order, at most `limit`.
pub async fn list_endpoints(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    after: Uuid,
    limit: i64,
) -> StoreResult<Vec<WebhookEndpoint>> {
    let rows = sqlx::query_as!(
        WebhookEndpoint,
        "SELECT id, url, event_types, description, enabled, disabled_reason, created_at, updated_at
         FROM webhook_endpoints WHERE webhook_in_audience(tenant_id, $1) AND id > $2 ORDER BY id LIMIT $3",
        tenant_id as Option<Uuid>,
        after,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// Serialize endpoint creations of the audience `tenant_id` until the transaction ends.
pub async fn lock_audience(conn: &mut PgConnection, tenant_id: Option<Uuid>) -> StoreResult<()> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended('webhooks:' || COALESCE($1::text, 'operators'), 0))",
        tenant_id as Option<Uuid>
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// How many endpoints the audience `tenant_id` has.
pub async fn count_endpoints(conn: &mut PgConnection, tenant_id: Option<Uuid>) -> StoreResult<i64> {
    let count = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM webhook_endpoints WHERE webhook_in_audience(tenant_id, $1)"#,
        tenant_id as Option<Uuid>
    )
    .fetch_one(conn)
    .await?;
    Ok(count)
}

/// A new endpoint, as [`insert_endpoint`] writes it (its secret sealed by the caller).
pub struct NewEndpoint<'a> {
    pub id: Uuid,
    /// The audience: None for the operators.
    pub tenant_id: Option<Uuid>,
    pub url: &'a str,
    pub event_types: &'a [String],
    pub description: &'a str,
    pub enabled: bool,
    pub secret_key_id: &'a str,
    pub secret_sealed: &'a [u8],
}

/// Store a new endpoint.
pub async fn insert_endpoint(conn: &mut PgConnection, new: &NewEndpoint<'_>) -> StoreResult<WebhookEndpoint> {
    let endpoint = sqlx::query_as!(
        WebhookEndpoint,
        "INSERT INTO webhook_endpoints
             (id, tenant_id, url, event_types, description, enabled, secret_key_id, secret_sealed)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         RETURNING id, url, event_types, description, enabled, disabled_reason, created_at, updated_at",
        new.id,
        new.tenant_id,
        new.url,
        new.event_types,
        new.description,
        new.enabled,
        new.secret_key_id,
        new.secret_sealed
    )
    .fetch_one(conn)
    .await?;
    Ok(endpoint)
}

/// What [`update_endpoint`] changes (None: left as it is).
pub struct EndpointChange<'a> {
    pub url: Option<&'a str>,
    pub event_types: Option<&'a [String]>,
    pub description: Option<&'a str>,
    /// Enabling clears the failure history and the reason the endpoint was disabled.
    pub enabled: Option<bool>,
}

/// Change endpoint `id` of the audience `tenant_id`; None: no such endpoint there.
pub async fn update_endpoint(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    id: Uuid,
    change: &EndpointChange<'_>,
) -> StoreResult<Option<WebhookEndpoint>> {
    let updated = sqlx::query_as!(
        WebhookEndpoint,
        "UPDATE webhook_endpoints SET url = COALESCE($3, url), event_types = COALESCE($4, event_types),
             description = COALESCE($5, description), enabled = COALESCE($6, enabled),
             disabled_reason = CASE WHEN $6 THEN NULL ELSE disabled_reason END,
             failing_since = CASE WHEN $6 THEN NULL ELSE failing_since END, updated_at = now()
         WHERE id = $1 AND webhook_in_audience(tenant_id, $2)
         RETURNING id, url, event_types, description, enabled, disabled_reason, created_at, updated_at",
        id,
        tenant_id as Option<Uuid>,
        change.url,
        change.event_types,
        change.description,
        change.enabled
    )
    .fetch_optional(conn)
    .await?;
    Ok(updated)
}

/// Delete endpoint `id` of the audience `tenant_id` and its delivery log: whether there was one.
pub async fn delete_endpoint(conn: &mut PgConnection, tenant_id: Option<Uuid>, id: Uuid) -> StoreResult<bool> {
    let deleted = sqlx::query!(
        "DELETE FROM webhook_endpoints WHERE id = $1 AND webhook_in_audience(tenant_id, $2)",
        id,
        tenant_id as Option<Uuid>
    )
    .execute(conn)
    .await?;
    Ok(deleted.rows_affected() > 0)
}

/// The deliveries of endpoint `endpoint_id` of the audience `tenant_id` after `after`, in id order, at most
/// `limit`.
pub async fn list_deliveries(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    endpoint_id: Uuid,
    after: Uuid,
    limit: i64,
) -> StoreResult<Vec<WebhookDelivery>> {
    // `event_type!`: the view `event_log` keeps only events whose type is not null (migration 0036).
    let rows = sqlx::query_as!(
        WebhookDelivery,
        r#"SELECT d.id, d.event_id, ev.type AS "event_type!", d.state AS "state: DeliveryState", d.attempts,
             CASE WHEN d.state = 'pending' THEN d.next_attempt_at END AS next_attempt_at, d.last_attempt_at,
             d.last_status_code, d.created_at,
             COALESCE((SELECT json_agg(json_build_object('attempted_at', a.attempted_at, 'succeeded', a.succeeded,
                 'response_code', a.response_code, 'latency_ms', a.latency_ms, 'error', a.error) ORDER BY a.id)
                 FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]') AS "attempt_log!: AttemptLog"
         FROM webhook_deliveries d JOIN event_log ev ON ev.id = d.event_id
         JOIN webhook_endpoints e ON e.id = d.endpoint_id
         WHERE d.endpoint_id = $1 AND webhook_in_audience(e.tenant_id, $2) AND d.id > $3
         ORDER BY d.id LIMIT $4"#,
        endpoint_id,
        tenant_id as Option<Uuid>,
        after,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// Delivery `id` with its attempt log.
pub async fn load_delivery(conn: &mut PgConnection, id: Uuid) -> StoreResult<WebhookDelivery> {
    // `event_type!`: as in `list_deliveries`.
    let delivery = sqlx::query_as!(
        WebhookDelivery,
        r#"SELECT d.id, d.event_id, ev.type AS "event_type!", d.state AS "state: DeliveryState", d.attempts,
             CASE WHEN d.state = 'pending' THEN d.next_attempt_at END AS next_attempt_at, d.last_attempt_at,
             d.last_status_code, d.created_at,
             COALESCE((SELECT json_agg(json_build_object('attempted_at', a.attempted_at, 'succeeded', a.succeeded,
                 'response_code', a.response_code, 'latency_ms', a.latency_ms, 'error', a.error) ORDER BY a.id)
                 FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]') AS "attempt_log!: AttemptLog"
         FROM webhook_deliveries d JOIN event_log ev ON ev.id = d.event_id
         JOIN webhook_endpoints e ON e.id = d.endpoint_id
         WHERE d.id = $1"#,
        id
    )
    .fetch_one(conn)
    .await?;
    Ok(delivery)
}

/// Queue a `webhook.test` event `event_id` (audience `tenant_id`) as delivery `delivery_id` to endpoint
/// `endpoint_id` alone, whatever its event types.
pub async fn insert_test_delivery(
    conn: &mut PgConnection,
    event_id: Uuid,
    tenant_id: Option<Uuid>,
    data: serde_json::Value,
    delivery_id: Uuid,
    endpoint_id: Uuid,
) -> StoreResult<()> {
    sqlx::query!(
        "WITH ev AS (INSERT INTO webhook_events (id, tenant_id, type, data) VALUES ($1, $2, 'webhook.test', $3)) \
         INSERT INTO webhook_deliveries (id, endpoint_id, event_id) VALUES ($4, $5, $1)",
        event_id,
        tenant_id as Option<Uuid>,
        data,
        delivery_id,
        endpoint_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Make delivery `delivery_id` of endpoint `endpoint_id` (audience `tenant_id`) pending and due now: whether
/// there was one.
pub async fn retry_delivery(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    endpoint_id: Uuid,
    delivery_id: Uuid,
) -> StoreResult<bool> {
    let retried = sqlx::query!(
        "UPDATE webhook_deliveries d SET state = 'pending', next_attempt_at = now(), claim = NULL \
         FROM webhook_endpoints e \
         WHERE d.id = $1 AND d.endpoint_id = $2 AND e.id = d.endpoint_id AND webhook_in_audience(e.tenant_id, $3)",
        delivery_id,
        endpoint_id,
        tenant_id as Option<Uuid>
    )
    .execute(conn)
    .await?;
    Ok(retried.rows_affected() > 0)
}

/// The events of the audience `tenant_id` after `after` (only of type `event_type`, if given), oldest first,
/// at most `limit`.
pub async fn list_events(
    conn: &mut PgConnection,
    tenant_id: Option<Uuid>,
    after: Uuid,
    event_type: Option<&str>,
    limit: i64,
) -> StoreResult<Vec<WebhookEvent>> {
    let rows = sqlx::query_as!(
        WebhookEvent,
        r#"SELECT id AS "id!", type AS "type_!", created_at AS "timestamp!", data AS "data!" FROM event_log
         WHERE webhook_in_audience(tenant_id, $1) AND id > $2 AND ($3::text IS NULL OR type = $3)
         ORDER BY id LIMIT $4"#,
        tenant_id as Option<Uuid>,
        after,
        event_type,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// A claimed delivery with what it takes to send it.
#[derive(Debug, sqlx::FromRow)]
pub struct ClaimedDelivery {
    pub delivery_id: Uuid,
    pub attempts: i32,
    pub endpoint_id: Uuid,
    pub tenant_id: Option<Uuid>,
    pub url: String,
    pub secret: Option<String>,
    pub secret_key_id: Option<String>,
    pub secret_sealed: Option<Vec<u8>>,
    pub event_id: Uuid,
    pub event_type: String,
    pub data: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// Claim up to `batch` due deliveries of enabled endpoints (any replica; `FOR UPDATE SKIP LOCKED`): stamp them
/// with `claim` and push them `lapse_secs` into the future, so no other worker picks them meanwhile.
pub async fn claim_due(
    conn: &mut PgConnection,
    batch: i64,
    claim: Uuid,
    lapse_secs: f64,
) -> StoreResult<Vec<ClaimedDelivery>> {
    // The worker's tuned claim (a hot path); its events are read from the one event log (migration 0036).
    let claimed = sqlx::query_as!(
        ClaimedDelivery,
        "WITH due AS ( \
             SELECT d.id FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id \
             WHERE d.state = 'pending' AND d.next_attempt_at <= now() AND e.enabled \
             ORDER BY d.next_attempt_at LIMIT $1 FOR UPDATE OF d SKIP LOCKED) \
         UPDATE webhook_deliveries d SET claim = $2, next_attempt_at = now() + make_interval(secs => $3) \
         FROM due, webhook_endpoints e, event_log ev \
         WHERE d.id = due.id AND e.id = d.endpoint_id AND ev.id = d.event_id \
         RETURNING d.id AS delivery_id, d.attempts, e.id AS endpoint_id, e.tenant_id, e.url, \
             e.secret, e.secret_key_id, e.secret_sealed, \
             ev.id AS \"event_id!\", ev.type AS \"event_type!\", ev.data AS \"data!\", \
             ev.created_at AS \"created_at!\"",
        batch,
        claim,
        lapse_secs
    )
    .fetch_all(conn)
    .await?;
    Ok(claimed)
}

/// Log an attempt at delivery `delivery_id`.
pub async fn insert_attempt(
    conn: &mut PgConnection,
    delivery_id: Uuid,
    succeeded: bool,
    response_code: Option<i32>,
    latency_ms: i32,
    error: Option<&str>,
) -> StoreResult<()> {
    sqlx::query!(
        "INSERT INTO webhook_attempts (id, delivery_id, succeeded, response_code, latency_ms, error) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        crate::new_id(),
        delivery_id,
        succeeded,
        response_code,
        latency_ms,
        error
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Record the outcome of an attempt on delivery `delivery_id`, if `claim` still holds it: its new state, its
/// attempt count, the receiver's status, and when the next attempt is due (`retry_in_secs` from now).
pub async fn record_outcome(
    conn: &mut PgConnection,
    delivery_id: Uuid,
    claim: Uuid,
    state: DeliveryState,
    attempts: i32,
    response_code: Option<i32>,
    retry_in_secs: f64,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE webhook_deliveries SET state = $3, attempts = $4, claim = NULL, last_attempt_at = now(), \
             last_status_code = $5, next_attempt_at = now() + make_interval(secs => $6) \
         WHERE id = $1 AND claim = $2",
        delivery_id,
        claim,
        state as DeliveryState,
        attempts,
        response_code,
        retry_in_secs
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Endpoint `endpoint_id` delivered: it is failing no more.
pub async fn clear_failing(conn: &mut PgConnection, endpoint_id: Uuid) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL",
        endpoint_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Endpoint `endpoint_id` failed: it is failing since now, unless it was already.
pub async fn mark_failing(conn: &mut PgConnection, endpoint_id: Uuid) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, now()) WHERE id = $1",
        endpoint_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Disable endpoint `endpoint_id` if it is enabled and has failed for `after_secs` or longer: since when it
/// failed, when it was disabled now.
pub async fn disable_if_failing(
    conn: &mut PgConnection,
    endpoint_id: Uuid,
    after_secs: f64,
) -> StoreResult<Option<DateTime<Utc>>> {
    let disabled = sqlx::query_scalar!(
        r#"UPDATE webhook_endpoints SET enabled = false, updated_at = now(),
             disabled_reason = 'every delivery failed since ' || failing_since
         WHERE id = $1 AND enabled AND failing_since <= now() - make_interval(secs => $2)
         RETURNING failing_since AS "failing_since!""#,
        endpoint_id,
        after_secs
    )
    .fetch_optional(conn)
    .await?;
    Ok(disabled)
}

/// Record that `condition` holds for `subject`; true when it was not raised already. A compare-and-set: of two
/// transactions raising the same alert, the second waits for the first and finds it.
pub async fn raise_alert(conn: &mut PgConnection, condition: &str, subject: Uuid) -> StoreResult<bool> {
    let inserted = sqlx::query!(
        "INSERT INTO webhook_alerts (condition, subject_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        condition,
        subject
    )
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Forget that `condition` was raised for `subject`; true when it was.
pub async fn clear_alert(conn: &mut PgConnection, condition: &str, subject: Uuid) -> StoreResult<bool> {
    let deleted =
        sqlx::query!("DELETE FROM webhook_alerts WHERE condition = $1 AND subject_id = $2", condition, subject)
            .execute(conn)
            .await?;
    Ok(deleted.rows_affected() == 1)
}

/// Forget raised alerts of `condition` whose subject is not in `still`.
pub async fn clear_alerts_except(conn: &mut PgConnection, condition: &str, still: &[Uuid]) -> StoreResult<()> {
    sqlx::query!("DELETE FROM webhook_alerts WHERE condition = $1 AND NOT (subject_id = ANY($2))", condition, still)
        .execute(conn)
        .await?;
    Ok(())
}

/// An active lease that ends soon.
#[derive(Debug, Clone)]
pub struct ExpiringLease {
    pub lease_id: Uuid,
    pub tenant_id: Uuid,
    pub ends_at: DateTime<Utc>,
}

/// Active leases that end within `lead_secs`, in id order.
pub async fn expiring_leases(conn: &mut PgConnection, lead_secs: f64) -> StoreResult<Vec<ExpiringLease>> {
    let rows = sqlx::query_as!(
        ExpiringLease,
        r#"SELECT id AS lease_id, tenant_id, ends_at AS "ends_at!" FROM leases
         WHERE state = 'active' AND ends_at > now() AND ends_at <= now() + make_interval(secs => $1) ORDER BY id"#,
        lead_secs
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// A pool whose queue has waited long.
#[derive(Debug, Clone)]
pub struct StalledQueue {
    pub pool_id: Uuid,
    pub queued: i64,
    /// When its oldest queued lease was made.
    pub since: DateTime<Utc>,
}

/// Pools whose oldest queued lease has waited longer than `after_secs`, in id order.
pub async fn stalled_queues(conn: &mut PgConnection, after_secs: f64) -> StoreResult<Vec<StalledQueue>> {
    let rows = sqlx::query_as!(
        StalledQueue,
        r#"SELECT pool_id, count(*) AS "queued!", min(created_at) AS "since!" FROM leases WHERE state = 'queued'
         GROUP BY pool_id HAVING min(created_at) < now() - make_interval(secs => $1) ORDER BY pool_id"#,
        after_secs
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// An active lease with a running job.
#[derive(Debug, Clone)]
pub struct RunningLease {
    pub lease_id: Uuid,
    pub tenant_id: Uuid,
    pub pool_id: Uuid,
}

/// Active leases with a running job, in id order.
pub async fn leases_running_jobs(conn: &mut PgConnection) -> StoreResult<Vec<RunningLease>> {
    let rows = sqlx::query_as!(
        RunningLease,
        r#"SELECT DISTINCT l.id AS lease_id, l.tenant_id, l.pool_id FROM leases l JOIN jobs j ON j.lease_id = l.id
         WHERE l.state = 'active' AND j.state = 'running' ORDER BY l.id"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}
