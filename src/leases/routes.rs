//! Lease endpoints for tenants and operators.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sqlx::PgConnection;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use gpuplane_store::leases::changes;

use super::lifecycle;
use super::{release, rules};
use crate::auth::{OperatorAuth, TenantAdminAuth, TenantAdminToken, TenantAuth};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, new_id};
use crate::idempotency::{self, Claim, IdempotencyKey};
use crate::state::AppState;
use gpuplane_store::leases::allocation::{LeaseWrite, NewLease};
use gpuplane_store::leases::ending::FreedPools;
use gpuplane_store::leases::events::NewEvent;
use gpuplane_store::leases::read::LeaseFilter;
use gpuplane_store::leases::{Actor, Lease, LeaseEvent, LeaseState, Placement, Term};

crate::page_schema!(LeasePage, Lease);

pub use super::requests::{CreateLeaseRequest, MAX_GPUS};
pub use super::rules::{MAX_HOURS, MAX_MONTHS};

fn is_retryable(err: &ApiError) -> bool {
    matches!(err, ApiError::Database(sqlx::Error::Database(db)) if matches!(db.code().as_deref(), Some("40P01" | "40001")))
}

/// Run a whole transaction again when PostgreSQL aborted it as a deadlock victim or a serialization failure
/// (up to 5 attempts); nothing of an aborted attempt remains.
async fn retry_deadlocks<T, F, Fut>(mut attempt: F) -> ApiResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ApiResult<T>>,
{
    for _ in 1..5 {
        match attempt().await {
            Err(err) if is_retryable(&err) => continue,
            other => return other,
        }
    }
    attempt().await
}

/// Lease GPUs. All or nothing: the lease gets every GPU it asked for, or none. Send an `Idempotency-Key`
/// header to make retries safe.
#[utoipa::path(
    post, path = "/v1/leases", tag = "leases", operation_id = "create_lease",
    request_body = CreateLeaseRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to retry for 24 h", pattern = r"^[!-~]{1,255}$")),
    responses(
        (status = 201, description = "The lease, active with its GPUs or queued", body = Lease),
        (status = 402, description = "The balance does not cover the first hour or the monthly term (`insufficient_balance`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "`insufficient_capacity` (context: free GPUs, largest block; or, for a lease with a host volume, why the volume's host cannot take it) or `quota_exceeded` (context: the quota); with `volumes`, also `volume_not_ready`, `volume_in_use` and `volume_already_attached` as `POST /v1/leases/{id}/volumes` answers them", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields (`validation_failed`, naming each); with `volumes`, `volume_out_of_reach` as `POST /v1/leases/{id}/volumes` answers it", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_lease(
    State(state): State<AppState>,
    token: TenantAdminToken,
    headers: HeaderMap,
    ApiJson(req): ApiJson<CreateLeaseRequest>,
) -> ApiResult<Response> {
    let term = req.validate()?;
    // The header's shape is checked now; the key is scoped to the tenant once the key is checked.
    let idempotent = IdempotencyKey::from_headers(&headers, Uuid::nil(), "create_lease", &req)?.is_some();
    if let Some(parts) = &req.parts {
        let result = retry_deadlocks(|| super::parts::try_create(&state, &token, &headers, &req, parts, term)).await;
        if let Err(err) = &result
            && idempotent
            && let Ok(auth) = token.check(&state.db).await
            && let Some(key) = IdempotencyKey::from_headers(&headers, auth.tenant_id, "create_lease", &req)?
        {
            idempotency::record_error(&state.db, &key, err).await?;
        }
        return result;
    }
    // Without an Idempotency-Key or an environment to write with it, a lease on one node is written by the
    // admission statement on its own; anything else, and whatever that statement leaves, runs as a transaction.
    let mut search = if !idempotent
        && req.environment.is_none()
        && req.volumes.is_empty()
        && req.cached_model.is_none()
        && req.placement != Placement::Spread
    {
        NodeSearch::Direct
    } else {
        NodeSearch::SkipLocked
    };
    let result = loop {
        match retry_deadlocks(|| try_create_lease(&state, &token, &headers, &req, term, search)).await {
            Ok(Attempt::Created(response)) => break Ok(response),
            Ok(Attempt::InTransaction) => search = NodeSearch::SkipLocked,
            Ok(Attempt::WaitForNodes) => search = NodeSearch::Wait,
            Err(err) => break Err(err),
        }
    };
    if let Err(err) = &result
        && idempotent
        && let Ok(auth) = token.check(&state.db).await
        && let Some(key) = IdempotencyKey::from_headers(&headers, auth.tenant_id, "create_lease", &req)?
    {
        idempotency::record_error(&state.db, &key, err).await?;
    }
    result
}

/// How a create looks for its single node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeSearch {
    /// The admission statement on its own (autocommit): it locks the best-fit node, skipping held ones, and
    /// writes the lease there when everything admits it (`gpuplane_store::leases::allocation::admit`), in one round trip.
    Direct,
    /// In a transaction, in the admission statement, skipping held nodes.
    SkipLocked,
    /// Every fitting node was held: wait for them, one at a time (`gpuplane_store::leases::allocation::place` with `BestFit::Search`).
    Wait,
}

enum Attempt {
    Created(Response),
    /// The admission statement on its own wrote nothing, and refused nothing: run the transaction.
    InTransaction,
    /// Every node that fits was held by others (and a stray lock may be held): the transaction was rolled
    /// back; run it again in wait mode.
    WaitForNodes,
}

/// One attempt. Direct: the admission statement alone, which either writes the lease or writes nothing.
/// Otherwise one transaction: BEGIN; admission, which with `SkipLocked` locks the best-fit node and usually
/// writes the lease there; else placement and the write in a new snapshot (`gpuplane_store::leases::allocation::place`, `lifecycle::write_lease`);
/// the environment and the idempotency record; COMMIT.
async fn try_create_lease(
    state: &AppState,
    token: &TenantAdminToken,
    headers: &HeaderMap,
    req: &CreateLeaseRequest,
    term: Term,
    search: NodeSearch,
) -> ApiResult<Attempt> {
    if search == NodeSearch::Direct {
        let mut conn = state.db.acquire().await?;
        let (_, new, admission) = admit(state, &mut conn, token, req, term, true).await?;
        let Some(lease) = admission.lease else { return Ok(Attempt::InTransaction) };
        return Ok(created(&new, lease.0));
    }
    let mut tx = gpuplane_store::leases::allocation::begin(&state.db).await?;
    // With an Idempotency-Key the key's record is claimed first, and no node is locked before the claim
    // (which may wait for a concurrent request with the same key).
    // Volumes may pin the lease to a host, and a cached model prefers some: the admission statement does not
    // know, so then it only admits.
    let try_lock = search == NodeSearch::SkipLocked
        && req.placement != Placement::Spread
        && req.volumes.is_empty()
        && req.cached_model.is_none()
        && !headers.contains_key(idempotency::HEADER);
    let (auth, new, admission) = admit(state, &mut tx, token, req, term, try_lock).await?;
    let tenant_id = auth.tenant_id;
    let idem = IdempotencyKey::from_headers(headers, tenant_id, "create_lease", req)?;
    if let Some(key) = &idem
        && let Claim::Replay(response) = idempotency::claim(&mut tx, key).await?
    {
        return Ok(Attempt::Created(response));
    }
    let lease = match admission.lease {
        Some(lease) => lease.0,
        None => match place_and_write(&mut tx, &auth, req, &new, &admission).await? {
            Some(lease) => lease,
            None => {
                tx.rollback().await?;
                return Ok(Attempt::WaitForNodes);
            }
        },
    };
    crate::volumes::attachments::attach_at_create(&mut tx, tenant_id, new.id, &req.volumes).await?;
    if let Some(environment) = &req.environment {
        // Started by the nodes once the lease is active (a queued lease's, when it starts).
        gpuplane_store::environments::request_environment(&mut tx, tenant_id, new.id, environment.image.as_deref())
            .await?;
    }
    if let Some(key) = &idem {
        idempotency::complete(&mut tx, key, StatusCode::CREATED, &lease).await?;
    }
    tx.commit().await?;
    Ok(created(&new, lease))
}

/// The caller, the new lease and the admission statement's findings ([`gpuplane_store::leases::allocation::admit`]), once the key is
/// accepted and the pool and balance admit the request; an error otherwise. With `try_lock` the statement may
/// also have written the lease (`admission.lease`): it does so only if the key may act for the token's tenant,
/// which `accept` then checks again.
async fn admit(
    state: &AppState,
    conn: &mut PgConnection,
    token: &TenantAdminToken,
    req: &CreateLeaseRequest,
    term: Term,
    try_lock: bool,
) -> ApiResult<(TenantAdminAuth, NewLease, gpuplane_store::leases::allocation::Admission)> {
    let pool = match (req.pool_id, &req.gpu_model) {
        (Some(id), _) => Ok(id),
        (None, Some(model)) => resolve_pool_by_model(conn, model).await,
        (None, None) => Err(ApiError::field("pool_id", "give exactly one of pool_id and gpu_model")),
    };
    let pool_id = match pool {
        Ok(id) => id,
        // The caller's key is answered for first.
        Err(err) => return Err(token.check(&state.db).await.err().unwrap_or(err)),
    };
    let new = NewLease {
        id: new_id(),
        tenant_id: token.claimed_tenant_id(),
        pool_id,
        gpu_count: req.gpu_count(),
        placement: req.placement,
        term,
        duration_hours: req.duration_hours,
        months: req.months,
        created_by: token.key_id(),
        idle_release_after_minutes: req.idle_release_after_minutes,
    };
    let admission = gpuplane_store::leases::allocation::admit(conn, &new, token.session_id(), try_lock).await?;
    let auth = token.accept(&admission.key)?;
    let Some(currency) = &admission.pool_currency else { return Err(ApiError::field("pool_id", "no such pool")) };
    if admission.balance_covers == Some(false)
        && let (Some(required), Some(balance)) = (admission.required_minor, admission.balance_minor)
    {
        return Err(crate::billing::insufficient_balance(currency, required, balance, term));
    }
    Ok((auth, new, admission))
}

fn created(new: &NewLease, lease: Lease) -> Attempt {
    tracing::info!(lease.id = %new.id, tenant.id = %new.tenant_id, state = lease.state.as_str(), gpus = new.gpu_count, "lease created");
    Attempt::Created((StatusCode::CREATED, Json(lease)).into_response())
}

/// The general path of a create, after an admission that wrote nothing: quotas, placement (or the queue) and
/// one write in a new snapshot. None: every node that fits was held by others and a stray lock may be held;
/// the caller rolls back and runs the create again in wait mode.
async fn place_and_write(
    tx: &mut PgConnection,
    auth: &TenantAdminAuth,
    req: &CreateLeaseRequest,
    new: &NewLease,
    admission: &gpuplane_store::leases::allocation::Admission,
) -> ApiResult<Option<Lease>> {
    let pool_id = new.pool_id;
    if admission.tenant_has_quotas == Some(true) {
        lifecycle::check_quotas(tx, auth.tenant_id, pool_id, new.gpu_count).await?;
    }
    let Some(best_fit) = admission.best_fit() else { return Ok(None) };
    let (pinned, placement) = volume_placement(tx, auth.tenant_id, req).await?;
    // A new request does not jump the pool's queue (first come, first served).
    let plan = if admission.queued_ahead {
        None
    } else if let Some(host) = pinned {
        match gpuplane_store::leases::allocation::lock_named_node(tx, pool_id, host, new.gpu_count).await? {
            Ok(()) => Some(gpuplane_store::leases::allocation::Plan(vec![(host, new.gpu_count)])),
            Err(why) => {
                return Err(ApiError::conflict(
                    "insufficient_capacity",
                    format!("the lease attaches a host volume, so it goes on the volume's host, and {why}"),
                ));
            }
        }
    } else if let Some(node) = match &req.cached_model {
        Some(model) if placement != Placement::Spread => {
            gpuplane_store::leases::allocation::lock_best_fit_holding(tx, pool_id, new.gpu_count, model).await?
        }
        _ => None,
    } {
        Some(gpuplane_store::leases::allocation::Plan(vec![(node, new.gpu_count)]))
    } else {
        gpuplane_store::leases::allocation::place(tx, pool_id, new.gpu_count, placement, best_fit).await?
    };
    if plan.is_none() {
        if let Some(why) = lifecycle::never_fits(tx, pool_id, new.gpu_count, placement).await? {
            return Err(ApiError::field("gpu_count", why));
        }
        if !req.queue {
            return Err(gpuplane_store::leases::allocation::capacity(tx, pool_id, new.gpu_count).await?.into());
        }
    }
    let actor = Actor::Tenant(auth.key_id);
    let event = match plan {
        Some(_) => NewEvent::new("allocated", None, Some(LeaseState::Active), &actor),
        None => NewEvent::new("queued", None, Some(LeaseState::Queued), &actor).reason("capacity short"),
    };
    let written = lifecycle::write_lease(tx, LeaseWrite::Create(new), plan.as_ref(), event).await.map_err(|err| {
        match crate::error::constraint_name(&err) {
            Some("leases_pool_id_fkey") => ApiError::field("pool_id", "no such pool"),
            _ => err.into(),
        }
    })?;
    // None: a planned node's counter was out of step with its GPUs (logged); nothing was written.
    match written {
        Some(lease) => Ok(Some(lease)),
        None => Err(gpuplane_store::leases::allocation::capacity(tx, pool_id, new.gpu_count).await?.into()),
    }
}

/// Where a lease's volumes make it go: the host its host volumes are kept on, if any, and the placement (one
/// host when a volume is read-write or a host volume's). 422 naming the volume when they cannot share a lease.
async fn volume_placement(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    req: &CreateLeaseRequest,
) -> ApiResult<(Option<Uuid>, Placement)> {
    if req.volumes.is_empty() {
        return Ok((None, req.placement));
    }
    let ids: Vec<Uuid> = req.volumes.iter().map(|v| v.volume_id).collect();
    let homes = gpuplane_store::volumes::homes(conn, tenant_id, &ids).await?;
    let pinned =
        crate::volumes::attachments::pinned_host(&req.volumes, &homes).map_err(|e| ApiError::Validation(vec![e]))?;
    if !crate::volumes::attachments::needs_one_host(&req.volumes, &homes) {
        return Ok((pinned, req.placement));
    }
    if req.placement == Placement::Spread && req.gpu_count() > 1 {
        return Err(ApiError::field(
            "placement",
            "a read-write or host volume needs the lease on one host: `spread` cannot lay it over several",
        ));
    }
    Ok((pinned, Placement::SingleNode))
}

async fn resolve_pool_by_model(conn: &mut PgConnection, model: &str) -> ApiResult<Uuid> {
    let pool = changes::pool_by_model(conn, model).await?;
    pool.ok_or_else(|| ApiError::field("gpu_model", "no pool offers this GPU model"))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LeaseListParams {
    /// Only leases in this state.
    pub state: Option<LeaseState>,
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    pub after: Option<Uuid>,
}

/// List the tenant's leases.
#[utoipa::path(
    get, path = "/v1/leases", tag = "leases", operation_id = "list_leases",
    params(LeaseListParams),
    responses((status = 200, description = "A page of the tenant's leases", body = LeasePage))
)]
pub async fn list_leases(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiQuery(params): ApiQuery<LeaseListParams>,
) -> ApiResult<Json<Page<Lease>>> {
    let page = PageParams { limit: params.limit, after: params.after };
    let limit = page.fetch_limit()?;
    let mut conn = state.db.acquire().await?;
    let filter =
        LeaseFilter { tenant_id: Some(auth.tenant_id), pool_id: None, state: params.state, after: page.after(), limit };
    let leases = gpuplane_store::leases::read::list_leases(&mut conn, &filter).await?;
    Ok(Json(Page::from_rows(leases, limit, |l| l.id)))
}

/// Get one of the tenant's leases.
#[utoipa::path(
    get, path = "/v1/leases/{lease_id}", tag = "leases", operation_id = "get_lease",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    responses((status = 200, description = "The lease", body = Lease))
)]
pub async fn get_lease(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
) -> ApiResult<Json<Lease>> {
    let mut conn = state.db.acquire().await?;
    gpuplane_store::leases::read::load_lease(&mut conn, Some(auth.tenant_id), lease_id)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound("lease"))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"hours": 24}))]
pub struct ExtendLeaseRequest {
    /// Hours to add (hourly leases).
    #[schema(minimum = 1, maximum = 8784)]
    pub hours: Option<i32>,
    /// Months to add (monthly leases).
    #[schema(minimum = 1, maximum = 36)]
    pub months: Option<i32>,
}

impl ExtendLeaseRequest {
    /// Shape checks that need no lease: exactly one of the two, each within a whole term's bounds.
    pub fn validate(&self) -> Result<(), ApiError> {
        match (self.hours, self.months) {
            (Some(h), None) if !(1..=MAX_HOURS).contains(&h) => {
                Err(ApiError::field("hours", format!("must be between 1 and {MAX_HOURS}")))
            }
            (None, Some(m)) if !(1..=MAX_MONTHS).contains(&m) => {
                Err(ApiError::field("months", format!("must be between 1 and {MAX_MONTHS}")))
            }
            (Some(_), None) | (None, Some(_)) => Ok(()),
            _ => Err(ApiError::field("hours", "give exactly one of hours and months")),
        }
    }
}

/// The generation in `If-Match` (`"3"`, `3` or `W/"3"`), if sent.
fn if_match_generation(headers: &HeaderMap) -> ApiResult<Option<i64>> {
    let Some(value) = headers.get(axum::http::header::IF_MATCH) else { return Ok(None) };
    let text = value.to_str().unwrap_or_default().trim().trim_start_matches("W/").trim_matches('"');
    text.parse::<i64>().map(Some).map_err(|_| ApiError::field("If-Match", "the lease's generation, e.g. \"3\""))
}

/// Extend a lease, keeping the same GPUs. With `If-Match: <generation>`, a lease changed since it was read is 412.
#[utoipa::path(
    post, path = "/v1/leases/{lease_id}/extend", tag = "leases", operation_id = "extend_lease",
    params(
        ("lease_id" = Uuid, Path, description = "Lease id"),
        ("If-Match" = Option<String>, Header, description = "The generation the change is based on: `3`, `\"3\"` or `W/\"3\"`", pattern = r#"^(W/)?("[0-9]{1,18}"|[0-9]{1,18})$"#),
    ),
    request_body = ExtendLeaseRequest,
    responses(
        (status = 200, description = "The extended lease", body = Lease),
        (status = 402, description = "The balance does not cover the extension (`insufficient_balance`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lease has ended (`lease_not_active`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 412, description = "The generation in If-Match is stale (`generation_mismatch`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn extend_lease(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<ExtendLeaseRequest>,
) -> ApiResult<Json<Lease>> {
    let expected = if_match_generation(&headers)?;
    req.validate()?;
    let mut tx = state.db.begin().await?;
    let row = changes::lock_for_extension(&mut tx, auth.tenant_id, lease_id).await?;
    let Some(row) = row else { return Err(ApiError::NotFound("lease")) };
    let (generation, lease_state, term, hours, months) =
        (row.generation, row.state, row.term, row.duration_hours, row.months);
    if let Some(expected) = expected
        && expected != generation
    {
        return Err(ApiError::PreconditionFailed {
            code: "generation_mismatch",
            message: format!("the lease is at generation {generation}, not {expected}: re-read it and retry"),
        });
    }
    if !lease_state.is_live() {
        return Err(ApiError::conflict("lease_not_active", format!("the lease is {}", lease_state.as_str())));
    }
    let (add_hours, add_months) =
        rules::extension(term, hours, months, req.hours, req.months).map_err(|e| ApiError::Validation(vec![e]))?;
    let shares = gpuplane_store::leases::parts::shares(&mut tx, lease_id).await?;
    crate::billing::require_balance(&mut tx, auth.tenant_id, &shares, term, add_months).await?;
    changes::extend(&mut tx, lease_id, add_hours, add_months).await?;
    let actor = Actor::Tenant(auth.key_id);
    let event = NewEvent::new("extended", Some(lease_state), Some(lease_state), &actor)
        .detail(serde_json::json!({ "hours": add_hours, "months": add_months }));
    gpuplane_store::leases::events::record_event(&mut tx, lease_id, event).await?;
    let lease = gpuplane_store::leases::read::load_lease(&mut tx, Some(auth.tenant_id), lease_id)
        .await?
        .ok_or(ApiError::NotFound("lease"))?;
    tx.commit().await?;
    Ok(Json(lease))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"idle_release_after_minutes": 60}))]
pub struct UpdateLeaseRequest {
    /// Release the lease once it has been idle this many minutes (10-10080), after its running jobs got their
    /// stop notice; `null` turns the idle release off.
    #[serde(default, deserialize_with = "crate::extract::double_option")]
    #[schema(value_type = Option<i32>, minimum = 10, maximum = 10080, required = true)]
    pub idle_release_after_minutes: Option<Option<i32>>,
}

/// Change a live lease's settings: when it is released for idleness. With `If-Match: <generation>`, a lease
/// changed since it was read is 412. Once a release has begun (its jobs were given notice) it cannot be
/// changed.
#[utoipa::path(
    patch, path = "/v1/leases/{lease_id}", tag = "leases", operation_id = "update_lease",
    params(
        ("lease_id" = Uuid, Path, description = "Lease id"),
        ("If-Match" = Option<String>, Header, description = "The generation the change is based on: `3`, `\"3\"` or `W/\"3\"`", pattern = r#"^(W/)?("[0-9]{1,18}"|[0-9]{1,18})$"#),
    ),
    request_body = UpdateLeaseRequest,
    responses(
        (status = 200, description = "The lease, changed", body = Lease),
        (status = 404, description = "No such lease of the tenant (`not_found`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lease has ended (`lease_not_active`), or its release has begun (`release_under_way`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 412, description = "The generation in If-Match is stale (`generation_mismatch`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "`idle_release_after_minutes` is missing or out of range (`validation_failed`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn update_lease(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<UpdateLeaseRequest>,
) -> ApiResult<Json<Lease>> {
    let expected = if_match_generation(&headers)?;
    let Some(minutes) = req.idle_release_after_minutes else {
        return Err(ApiError::field("idle_release_after_minutes", "nothing to change: give it (null turns it off)"));
    };
    if let Some(minutes) = minutes {
        super::idle::check_release_after(minutes).map_err(|e| ApiError::Validation(vec![e]))?;
    }
    let mut tx = state.db.begin().await?;
    let row = changes::lock_for_settings(&mut tx, auth.tenant_id, lease_id).await?;
    let Some(row) = row else { return Err(ApiError::NotFound("lease")) };
    if let Some(expected) = expected
        && expected != row.generation
    {
        return Err(ApiError::PreconditionFailed {
            code: "generation_mismatch",
            message: format!("the lease is at generation {}, not {expected}: re-read it and retry", row.generation),
        });
    }
    if !row.state.is_live() {
        return Err(ApiError::conflict("lease_not_active", format!("the lease is {}", row.state.as_str())));
    }
    if let Some(deadline) = row.release_deadline {
        return Err(ApiError::conflict(
            "release_under_way",
            format!(
                "the lease is being released: its jobs were given their stop notice, and it ends by {}",
                deadline.to_rfc3339()
            ),
        ));
    }
    if row.idle_release_after_minutes != minutes {
        changes::set_idle_release(&mut tx, lease_id, minutes).await?;
        let actor = Actor::Tenant(auth.key_id);
        let event = NewEvent::new("updated", Some(row.state), Some(row.state), &actor).detail(serde_json::json!({
            "idle_release_after_minutes": { "from": row.idle_release_after_minutes, "to": minutes }
        }));
        gpuplane_store::leases::events::record_event(&mut tx, lease_id, event).await?;
    }
    let lease = gpuplane_store::leases::read::load_lease(&mut tx, Some(auth.tenant_id), lease_id)
        .await?
        .ok_or(ApiError::NotFound("lease"))?;
    tx.commit().await?;
    Ok(Json(lease))
}

/// Release a lease. Without a running job it is released now. With running jobs, they are given their stop
/// notice first (each its `stop_grace_s`, to checkpoint): the lease stays active, and billed, until they have
/// stopped, at the latest at its `release_deadline` (the longest grace plus a heartbeat); cancel a job to stop
/// it at once. Releasing an ended lease, or one being released, is harmless and returns it as it is.
#[utoipa::path(
    post, path = "/v1/leases/{lease_id}/release", tag = "leases", operation_id = "release_lease",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    responses(
        (status = 200, description = "The lease, released (or as it was, if it had already ended)", body = Lease),
        (status = 202, description = "The lease's running jobs were given their stop notice: it is released once they have stopped, by `release_deadline` at the latest", body = Lease),
        (status = 409, description = "The lease's jobs kept changing while it was being released (`lease_changing`): retry", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn release_lease(
    State(state): State<AppState>,
    token: TenantAdminToken,
    ApiPath(lease_id): ApiPath<Uuid>,
) -> ApiResult<(StatusCode, Json<Lease>)> {
    retry_deadlocks(|| try_release(&state, &token, lease_id)).await
}

/// One statement on its own (autocommit, one round trip): the key checked, the lease ended with its jobs, its
/// nodes locked, its GPUs given back with the counters and the event. It writes nothing unless the key may act
/// and the lease is the token's tenant's (`gpuplane_store::leases::ending::end_lease_for_key`), so a refused key has changed nothing.
/// In PostgreSQL's default plan cache mode the statement settles on its generic plan after five calls on a
/// connection (checked with EXPLAIN on a loaded bench database: 0.02 ms planning instead of 0.7 ms).
/// A lease with running jobs is not ended by that statement: its release begins instead
/// ([`release::ask`]: the jobs get their stop notice) and the answer is 202 with the lease still active.
async fn try_release(
    state: &AppState,
    token: &TenantAdminToken,
    lease_id: Uuid,
) -> ApiResult<(StatusCode, Json<Lease>)> {
    let mut conn = state.db.acquire().await?;
    let actor = Actor::Tenant(token.key_id());
    // Twice at most: a lease whose last job ended between the statement and the look at its jobs is released by
    // the second statement.
    for _ in 0..2 {
        let (key, ended) = gpuplane_store::leases::ending::end_lease_for_key(
            &mut conn,
            lease_id,
            gpuplane_store::leases::ending::KeyScope { key_id: token.key_id(), session_id: token.session_id() },
            token.claimed_tenant_id(),
            LeaseState::Released,
            release::TENANT_RELEASE_REASON,
            &actor,
        )
        .await?;
        let auth = token.accept(&key)?;
        if let Some(ended) = ended {
            let mut freed = FreedPools::default();
            freed.note(Some(&ended));
            lifecycle::wake(freed, &state.db);
            return Ok((StatusCode::OK, Json(ended.lease)));
        }
        let asked =
            release::ask(&state.db, auth.tenant_id, lease_id, &actor, state.settings.heartbeat_interval).await?;
        let status = match asked {
            release::Asked::ReleaseNow => continue,
            release::Asked::Noticed => StatusCode::ACCEPTED,
            // Not live (or not the tenant's): return it as it is, or 404.
            release::Asked::NotLive => StatusCode::OK,
        };
        let lease = gpuplane_store::leases::read::load_lease(&mut conn, Some(auth.tenant_id), lease_id).await?;
        return Ok((status, Json(lease.ok_or(ApiError::NotFound("lease"))?)));
    }
    Err(ApiError::conflict("lease_changing", "the lease's jobs changed while it was being released: retry"))
}

/// A lease's history: every transition with who, when and why.
#[utoipa::path(
    get, path = "/v1/leases/{lease_id}/events", tag = "leases", operation_id = "list_lease_events",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    responses((status = 200, description = "Events, oldest first", body = Vec<LeaseEvent>))
)]
pub async fn list_lease_events(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
) -> ApiResult<Json<Vec<LeaseEvent>>> {
    let mut conn = state.db.acquire().await?;
    crate::access::ensure_lease_owned(&mut conn, auth.tenant_id, lease_id).await?;
    Ok(Json(gpuplane_store::leases::events::list_events(&mut conn, lease_id).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AdminLeaseListParams {
    pub tenant_id: Option<Uuid>,
    pub pool_id: Option<Uuid>,
    pub state: Option<LeaseState>,
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    pub after: Option<Uuid>,
}

/// List every tenant's leases, filtered.
#[utoipa::path(
    get, path = "/v1/admin/leases", tag = "admin", operation_id = "admin_list_leases",
    params(AdminLeaseListParams),
    responses((status = 200, description = "A page of leases", body = LeasePage))
)]
pub async fn admin_list_leases(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiQuery(params): ApiQuery<AdminLeaseListParams>,
) -> ApiResult<Json<Page<Lease>>> {
    let page = PageParams { limit: params.limit, after: params.after };
    let limit = page.fetch_limit()?;
    let mut conn = state.db.acquire().await?;
    let filter = LeaseFilter {
        tenant_id: params.tenant_id,
        pool_id: params.pool_id,
        state: params.state,
        after: page.after(),
        limit,
    };
    let leases = gpuplane_store::leases::read::list_leases(&mut conn, &filter).await?;
    Ok(Json(Page::from_rows(leases, limit, |l| l.id)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"reason": "abuse report #4411"}))]
pub struct TerminateLeaseRequest {
    /// Why, recorded in the lease's events (1-500 characters).
    #[schema(
        min_length = 1,
        max_length = 500,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub reason: String,
}

/// Terminate a lease (operator), with a reason.
#[utoipa::path(
    post, path = "/v1/admin/leases/{lease_id}/terminate", tag = "admin", operation_id = "terminate_lease",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    request_body = TerminateLeaseRequest,
    responses((status = 200, description = "The lease, terminated (or as it was, if it had already ended)", body = Lease))
)]
pub async fn terminate_lease(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<TerminateLeaseRequest>,
) -> ApiResult<Json<Lease>> {
    crate::extract::check_name("reason", &req.reason, 500).map_err(|e| ApiError::Validation(vec![e]))?;
    let reason = req.reason.trim();
    let mut tx = state.db.begin().await?;
    let ended = gpuplane_store::leases::ending::end_lease(
        &mut tx,
        lease_id,
        None,
        LeaseState::Terminated,
        reason,
        &Actor::Operator(op.key_id),
        None,
    )
    .await?;
    let mut freed = FreedPools::default();
    freed.note(ended.as_ref());
    let lease = match ended {
        Some(ended) => ended.lease,
        None => gpuplane_store::leases::read::load_lease(&mut tx, None, lease_id)
            .await?
            .ok_or(ApiError::NotFound("lease"))?,
    };
    tx.commit().await?;
    lifecycle::wake(freed, &state.db);
    Ok(Json(lease))
}

/// Compare the running job's measured GPU utilization (last 5 minutes) with its plan: low utilization and
/// communication-bound plans are reported with the change to make.
#[utoipa::path(
    get, path = "/v1/leases/{lease_id}/insights", tag = "jobs", operation_id = "get_lease_insights",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    responses((status = 200, description = "Findings about the running job", body = super::insights::LeaseInsights))
)]
pub async fn get_lease_insights(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
) -> ApiResult<Json<super::insights::LeaseInsights>> {
    let mut conn = state.db.acquire().await?;
    let Some(pool_id) = gpuplane_store::jobs::tenant_lease_pool(&mut conn, lease_id, auth.tenant_id).await? else {
        return Err(ApiError::NotFound("lease"));
    };
    Ok(Json(super::insights::evaluate_lease(&mut conn, lease_id, pool_id).await?))
}
