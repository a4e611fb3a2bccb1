//! A lease across pools (issue #37): `POST /v1/leases` with `parts`, each GPUs of one pool, allocated all or nothing
//! in one transaction by the one allocation core (`gpuplane_store::leases::allocation::place_parts` and
//! `write_lease`), each part billed at its own pool's price (`billing::metering`) and held to the tenant's quota of
//! its pool. A single-pool request never comes here.
//! Which pools may be mixed is `requests::check_pools`.

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sqlx::PgConnection;
use uuid::Uuid;

use gpuplane_store::leases::parts::{self as stored, NewPart};

use super::lifecycle;

use gpuplane_store::leases::allocation::{LeaseWrite, NewLease};

use super::requests::{CreateLeaseRequest, LeasePartRequest, check_pools};
use crate::auth::TenantAdminToken;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::new_id;
use crate::idempotency::{self, Claim, IdempotencyKey};
use crate::state::AppState;
use gpuplane_store::leases::events::NewEvent;
use gpuplane_store::leases::{Actor, LeaseState, Term};

/// One attempt at a lease across pools, in one transaction: the key, the idempotency claim, the pools, the balance,
/// the quotas, then every part placed (or the lease queued), written, and read back with its parts.
pub async fn try_create(
    state: &AppState,
    token: &TenantAdminToken,
    headers: &HeaderMap,
    req: &CreateLeaseRequest,
    parts: &[LeasePartRequest],
    term: Term,
) -> ApiResult<Response> {
    let auth = token.check(&state.db).await?;
    let mut tx = gpuplane_store::leases::allocation::begin(&state.db).await?;
    let idem = IdempotencyKey::from_headers(headers, auth.tenant_id, "create_lease", req)?;
    if let Some(key) = &idem
        && let Claim::Replay(response) = idempotency::claim(&mut tx, key).await?
    {
        return Ok(response);
    }
    let asked = resolve(&mut tx, parts).await?;
    let shares: Vec<(Uuid, i32)> = asked.iter().map(|p| (p.pool_id, p.gpu_count)).collect();
    crate::billing::require_balance(&mut tx, auth.tenant_id, &shares, term, req.months.unwrap_or(0)).await?;
    for part in &asked {
        lifecycle::check_quotas(&mut tx, auth.tenant_id, part.pool_id, part.gpu_count).await?;
    }
    let pools: Vec<Uuid> = asked.iter().map(|p| p.pool_id).collect();
    // A new request does not jump the queue of any of its pools (first come, first served).
    let plan = if stored::queued_in(&mut tx, &pools).await? {
        None
    } else {
        gpuplane_store::leases::allocation::place_parts(&mut tx, &asked).await?
    };
    if plan.is_none() {
        let mut never = Vec::new();
        for (i, part) in asked.iter().enumerate() {
            if let Some(why) = lifecycle::never_fits(&mut tx, part.pool_id, part.gpu_count, part.placement).await? {
                never.push(FieldError::new(format!("parts[{i}].gpu_count"), why));
            }
        }
        if !never.is_empty() {
            return Err(ApiError::Validation(never));
        }
        if !req.queue {
            return Err(capacity_short(&mut tx, &asked).await?);
        }
    }
    let new = NewLease {
        id: new_id(),
        tenant_id: auth.tenant_id,
        pool_id: asked[0].pool_id,
        gpu_count: asked.iter().map(|p| p.gpu_count).sum(),
        placement: asked[0].placement,
        term,
        duration_hours: req.duration_hours,
        months: req.months,
        created_by: auth.key_id,
        idle_release_after_minutes: req.idle_release_after_minutes,
    };
    let actor = Actor::Tenant(auth.key_id);
    let detail = serde_json::json!({ "parts": asked.iter().map(|p| serde_json::json!({
        "pool_id": p.pool_id, "gpu_count": p.gpu_count, "placement": p.placement,
    })).collect::<Vec<_>>() });
    let event = match plan {
        Some(_) => NewEvent::new("allocated", None, Some(LeaseState::Active), &actor),
        None => NewEvent::new("queued", None, Some(LeaseState::Queued), &actor).reason("capacity short"),
    }
    .detail(detail);
    if lifecycle::write_lease(&mut tx, LeaseWrite::Create(&new), plan.as_ref(), event).await?.is_none() {
        // A planned node's counter was out of step with its GPUs (logged); nothing was written.
        return Err(capacity_short(&mut tx, &asked).await?);
    }
    stored::insert(&mut tx, new.id, &asked).await?;
    if let Some(environment) = &req.environment {
        gpuplane_store::environments::request_environment(
            &mut tx,
            auth.tenant_id,
            new.id,
            environment.image.as_deref(),
        )
        .await?;
    }
    let lease = gpuplane_store::leases::read::load_lease(&mut tx, Some(auth.tenant_id), new.id)
        .await?
        .ok_or(ApiError::NotFound("lease"))?;
    if let Some(key) = &idem {
        idempotency::complete(&mut tx, key, StatusCode::CREATED, &lease).await?;
    }
    tx.commit().await?;
    tracing::info!(lease.id = %new.id, tenant.id = %new.tenant_id, state = lease.state.as_str(), gpus = new.gpu_count,
        parts = asked.len(), "lease created across pools");
    Ok((StatusCode::CREATED, Json(lease)).into_response())
}

/// Each part's pool (a part naming a model: the pool of that model with the most free GPUs), checked by
/// [`check_pools`]; 422 with the parts' field paths when they may not make one lease.
async fn resolve(conn: &mut PgConnection, parts: &[LeasePartRequest]) -> ApiResult<Vec<NewPart>> {
    let mut resolved = Vec::with_capacity(parts.len());
    let mut errors = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        match (part.pool_id, &part.gpu_model) {
            (Some(id), _) => resolved.push(id),
            (None, Some(model)) => match gpuplane_store::leases::changes::pool_by_model(conn, model).await? {
                Some(id) => resolved.push(id),
                None => {
                    errors.push(FieldError::new(format!("parts[{i}].gpu_model"), "no pool offers this GPU model"));
                    resolved.push(Uuid::nil());
                }
            },
            // `check_request` refused it.
            (None, None) => resolved.push(Uuid::nil()),
        }
    }
    let pools = stored::pools(conn, &resolved).await?;
    // A part whose model no pool offers has no pool to check further.
    let unresolved: Vec<String> = errors.iter().map(|e| e.field.replace(".gpu_model", ".")).collect();
    errors.extend(
        check_pools(parts, &resolved, &pools)
            .into_iter()
            .filter(|e| !unresolved.iter().any(|prefix| e.field.starts_with(prefix.as_str()))),
    );
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    Ok(parts
        .iter()
        .zip(resolved)
        .map(|(part, pool_id)| NewPart { pool_id, gpu_count: part.gpu_count, placement: part.placement })
        .collect())
}

/// 409 `insufficient_capacity` for a lease across pools: what is free in each part's pool.
async fn capacity_short(conn: &mut PgConnection, asked: &[NewPart]) -> Result<ApiError, sqlx::Error> {
    let mut capacities = Vec::with_capacity(asked.len());
    for part in asked {
        capacities.push(gpuplane_store::leases::allocation::capacity(conn, part.pool_id, part.gpu_count).await?);
    }
    let figures: Vec<String> = capacities
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "parts[{i}]: {} requested, {} free, at most {} on one node",
                c.requested, c.free_gpus, c.largest_free_block
            )
        })
        .collect();
    Ok(ApiError::Conflict {
        code: "insufficient_capacity",
        message: format!("the parts do not all fit now ({})", figures.join("; ")),
        context: Some(serde_json::json!({ "parts": capacities })),
    })
}
