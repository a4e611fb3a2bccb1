//! `/v1/volumes`: a tenant's volumes (create, list, get, grow, delete), and the operator's storage settings of a
//! pool and volume quotas of a tenant.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use gpuplane_protocol::volumes::VolumeKind;
use gpuplane_store::volumes::{self as store, NewVolume, Volume};

use super::rules::{self, MAX_IDLE_DAYS, MAX_SIZE_GIB};
use crate::auth::{OperatorAuth, TenantAdminAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, new_id};
use crate::state::AppState;

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "checkpoints", "pool_id": "0193a0c1-0000-7000-8000-000000000001", "size_gib": 100}))]
pub struct CreateVolumeRequest {
    /// 1-63 characters: a-z, 0-9, `.`, `_`, `-`, starting with a letter or digit; unique among the tenant's
    /// volumes that are not deleted.
    #[schema(min_length = 1, max_length = 63, pattern = "^[a-z0-9][a-z0-9._-]{0,62}$")]
    pub name: String,
    /// The pool whose hosts hold it (its leases can attach it).
    pub pool_id: Uuid,
    /// GiB, 1-65536. It can grow later, never shrink.
    #[schema(minimum = 1, maximum = 65536)]
    pub size_gib: i32,
    /// `pool` (on the pool's shared filesystem, any host can mount it) or `host` (on one host's disk); default
    /// `pool` where the pool offers it, else `host`.
    #[serde(default)]
    pub kind: Option<VolumeKind>,
    /// Delete it once detached this many days (1-365), with a `volume.idle` webhook a day before; default never.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 365)]
    pub delete_after_idle_days: Option<i32>,
}

/// The largest capacity or quota an operator sets, GiB (a zettabyte's worth: beyond any fleet).
const MAX_QUOTA_GIB: i64 = 1_000_000_000_000;

fn check_size(field: &str, size_gib: i32, errors: &mut Vec<FieldError>) {
    if !(1..=MAX_SIZE_GIB).contains(&size_gib) {
        errors.push(FieldError::new(field, format!("GiB, 1-{MAX_SIZE_GIB}")));
    }
}

fn check_idle_days(days: Option<i32>, errors: &mut Vec<FieldError>) {
    if days.is_some_and(|d| !(1..=MAX_IDLE_DAYS).contains(&d)) {
        errors.push(FieldError::new("delete_after_idle_days", format!("days, 1-{MAX_IDLE_DAYS}")));
    }
}

/// 402 `insufficient_balance` unless the tenant's balance in the pool's currency covers a day of `size_gib`.
async fn require_balance(
    conn: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    pool: &store::PoolStorage,
    size_gib: i32,
) -> ApiResult<()> {
    let required = rules::first_day_minor(size_gib, pool.price_per_gib_month_minor.unwrap_or(0));
    let balance = crate::billing::ledger::balance(conn, tenant_id, &pool.currency).await?;
    if balance < required.max(1) {
        return Err(ApiError::PaymentRequired {
            code: "insufficient_balance",
            message: format!(
                "the balance of {balance} {} minor units does not cover a day of {size_gib} GiB ({required})",
                pool.currency
            ),
            context: Some(
                serde_json::json!({ "balance_minor": balance, "required_minor": required, "currency": pool.currency }),
            ),
        });
    }
    Ok(())
}

/// Refuse a size the tenant's quota or the pool's capacity does not hold: `extra_gib` more than now, and one
/// more volume when `new_volume`.
async fn check_room(
    conn: &mut sqlx::PgConnection,
    tenant_id: Uuid,
    pool: &store::PoolStorage,
    extra_gib: i64,
    new_volume: bool,
) -> ApiResult<()> {
    let (max_volumes, max_gib) =
        store::lock_tenant_quotas(conn, tenant_id).await?.ok_or(ApiError::NotFound("tenant"))?;
    let (count, gib) = store::tenant_usage(conn, tenant_id).await?;
    if new_volume && max_volumes.is_some_and(|m| count >= i64::from(m)) {
        return Err(ApiError::conflict(
            "volume_quota_exceeded",
            format!("the tenant's quota is {} volumes and it holds {count}", max_volumes.unwrap_or_default()),
        ));
    }
    if let Some(max) = max_gib.filter(|&m| gib + extra_gib > m) {
        return Err(ApiError::conflict(
            "volume_quota_exceeded",
            format!("the tenant's quota is {max} GiB of volumes; it holds {gib} GiB and asks {extra_gib} more"),
        ));
    }
    if let Some(capacity) = pool.capacity_gib.filter(|&c| pool.used_gib + extra_gib > c) {
        return Err(ApiError::conflict(
            "pool_storage_full",
            format!(
                "pool {} sells {capacity} GiB of volumes and {} GiB are taken: {extra_gib} GiB more do not fit",
                pool.name, pool.used_gib
            ),
        ));
    }
    Ok(())
}

/// Create a volume (tenant admin). It is `creating` until the agent of the host chosen for it has made the image
/// (its next heartbeat), then `ready`; it is billed per GiB from then until it is deleted, at the pool's storage
/// price.
#[utoipa::path(
    post, path = "/v1/volumes", tag = "volumes", operation_id = "create_volume",
    request_body = CreateVolumeRequest,
    responses(
        (status = 201, description = "The volume, `creating`", body = Volume),
        (status = 402, description = "The balance does not cover the volume's first day (`insufficient_balance`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such pool", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "A live volume has this name (`volume_name_taken`), a quota (`volume_quota_exceeded`) or the pool's storage capacity (`pool_storage_full`) does not hold it, or no ready host has room for it (`no_volume_store`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields, a kind the pool does not offer, or a pool that sells no storage (`volumes_not_offered`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_volume(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiJson(req): ApiJson<CreateVolumeRequest>,
) -> ApiResult<(StatusCode, Json<Volume>)> {
    let mut errors = Vec::new();
    if let Err(e) = rules::check_name(&req.name) {
        errors.push(FieldError::new("name", e));
    }
    check_size("size_gib", req.size_gib, &mut errors);
    check_idle_days(req.delete_after_idle_days, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    let pool = store::lock_pool_storage(&mut tx, req.pool_id).await?.ok_or(ApiError::NotFound("pool"))?;
    if pool.price_per_gib_month_minor.is_none() {
        return Err(ApiError::Unprocessable {
            code: "volumes_not_offered",
            message: format!("pool {} has no storage price: it sells no volumes", pool.name),
            context: None,
        });
    }
    let kind = rules::choose_kind(req.kind, &pool.volume_kinds, &pool.name).map_err(|e| ApiError::field("kind", e))?;
    check_room(&mut tx, auth.tenant_id, &pool, i64::from(req.size_gib), true).await?;
    require_balance(&mut tx, auth.tenant_id, &pool, req.size_gib).await?;
    let nodes = store::store_nodes(&mut tx, pool.id).await?;
    let node_id = rules::place(kind, req.size_gib, &nodes, pool.pool_kind_gib)
        .map_err(|e| ApiError::conflict("no_volume_store", format!("pool {}: {e}", pool.name)))?;
    let id = new_id();
    let new = NewVolume {
        id,
        tenant_id: auth.tenant_id,
        pool_id: pool.id,
        name: &req.name,
        kind,
        size_gib: req.size_gib,
        node_id,
        delete_after_idle_days: req.delete_after_idle_days,
        currency: &pool.currency,
        created_by: auth.key_id,
    };
    if !store::insert(&mut tx, &new).await? {
        return Err(ApiError::conflict("volume_name_taken", format!("a volume named {} exists", req.name)));
    }
    let volume = store::get(&mut tx, auth.tenant_id, id).await?.ok_or(ApiError::NotFound("volume"))?;
    tx.commit().await?;
    tracing::info!(tenant.id = %auth.tenant_id, volume.id = %id, kind = kind.as_str(), size_gib = req.size_gib, node = %volume.node, "volume created");
    Ok((StatusCode::CREATED, Json(volume)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListVolumesParams {
    /// List deleted volumes too.
    #[serde(default)]
    pub include_deleted: bool,
}

/// The tenant's volumes, newest first (at most 1,000).
#[utoipa::path(
    get, path = "/v1/volumes", tag = "volumes", operation_id = "list_volumes",
    params(ListVolumesParams),
    responses((status = 200, description = "The tenant's volumes", body = Vec<Volume>))
)]
pub async fn list_volumes(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiQuery(params): ApiQuery<ListVolumesParams>,
) -> ApiResult<Json<Vec<Volume>>> {
    let mut conn = state.db.acquire().await?;
    Ok(Json(store::list(&mut conn, auth.tenant_id, params.include_deleted).await?))
}

/// One of the tenant's volumes.
#[utoipa::path(
    get, path = "/v1/volumes/{volume_id}", tag = "volumes", operation_id = "get_volume",
    params(("volume_id" = Uuid, Path, description = "Volume id")),
    responses(
        (status = 200, description = "The volume", body = Volume),
        (status = 404, description = "No such volume of the tenant's", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_volume(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(volume_id): ApiPath<Uuid>,
) -> ApiResult<Json<Volume>> {
    let mut conn = state.db.acquire().await?;
    let volume = store::get(&mut conn, auth.tenant_id, volume_id).await?.ok_or(ApiError::NotFound("volume"))?;
    Ok(Json(volume))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"size_gib": 200}))]
pub struct UpdateVolumeRequest {
    /// A larger size, GiB (up to 65536): volumes grow, never shrink. Its agent grows the filesystem in place at
    /// its next heartbeat, mounted or not.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 65536)]
    pub size_gib: Option<i32>,
    /// Delete it once detached this many days (1-365); `null` turns the idle deletion off.
    #[serde(default, deserialize_with = "crate::extract::double_option")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 365)]
    pub delete_after_idle_days: Option<Option<i32>>,
}

/// Grow a volume or change its idle policy (tenant admin).
#[utoipa::path(
    patch, path = "/v1/volumes/{volume_id}", tag = "volumes", operation_id = "update_volume",
    params(("volume_id" = Uuid, Path, description = "Volume id")),
    request_body = UpdateVolumeRequest,
    responses(
        (status = 200, description = "The volume as changed", body = Volume),
        (status = 402, description = "The balance does not cover a day at the new size (`insufficient_balance`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such volume of the tenant's", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "Deleted or failed (`volume_not_live`), or a quota, the pool's capacity or its host's room does not hold the new size (`volume_quota_exceeded`, `pool_storage_full`, `no_volume_store`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields, or a smaller size (volumes never shrink)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn update_volume(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(volume_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<UpdateVolumeRequest>,
) -> ApiResult<Json<Volume>> {
    let mut errors = Vec::new();
    if let Some(size) = req.size_gib {
        check_size("size_gib", size, &mut errors);
    }
    check_idle_days(req.delete_after_idle_days.flatten(), &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut tx = state.db.begin().await?;
    // The pool's lock before the volume's, as a create takes them, so the two never deadlock.
    let pool_id = store::get(&mut tx, auth.tenant_id, volume_id).await?.ok_or(ApiError::NotFound("volume"))?.pool_id;
    let pool = store::lock_pool_storage(&mut tx, pool_id).await?.ok_or(ApiError::NotFound("volume"))?;
    let volume = store::lock(&mut tx, auth.tenant_id, volume_id).await?.ok_or(ApiError::NotFound("volume"))?;
    if !matches!(volume.state.as_str(), "creating" | "ready") {
        return Err(ApiError::conflict("volume_not_live", format!("the volume is {}: it cannot change", volume.state)));
    }
    let size = req.size_gib.unwrap_or(volume.size_gib);
    if size < volume.size_gib {
        return Err(ApiError::field(
            "size_gib",
            format!("volumes grow, never shrink: it is {} GiB, at least that", volume.size_gib),
        ));
    }
    let extra = i64::from(size - volume.size_gib);
    if extra > 0 {
        check_room(&mut tx, auth.tenant_id, &pool, extra, false).await?;
        require_balance(&mut tx, auth.tenant_id, &pool, size).await?;
        // Its store must hold the growth: the same rule as a new volume's, on its own node.
        let kind = VolumeKind::parse(&volume.kind).unwrap_or(VolumeKind::Host);
        let nodes: Vec<_> =
            store::store_nodes(&mut tx, pool.id).await?.into_iter().filter(|n| n.node_id == volume.node_id).collect();
        let promised = if kind == VolumeKind::Pool { pool.pool_kind_gib } else { 0 };
        rules::place(kind, size - volume.size_gib, &nodes, promised)
            .map_err(|e| ApiError::conflict("no_volume_store", format!("its host cannot grow it: {e}")))?;
    }
    let days = match req.delete_after_idle_days {
        Some(days) => days,
        None => store::get(&mut tx, auth.tenant_id, volume_id).await?.and_then(|v| v.delete_after_idle_days),
    };
    if extra > 0 {
        // Every second before the grow is charged at the size it had.
        super::metering::meter_before_resize(&mut tx, volume_id).await?;
    }
    store::update(&mut tx, volume_id, size, days).await?;
    let volume = store::get(&mut tx, auth.tenant_id, volume_id).await?.ok_or(ApiError::NotFound("volume"))?;
    tx.commit().await?;
    Ok(Json(volume))
}

/// Delete a volume (tenant admin): billing stops now and its agent destroys the data at its next heartbeat
/// (`deleting`, then `deleted`); the data is never handed to another volume.
#[utoipa::path(
    delete, path = "/v1/volumes/{volume_id}", tag = "volumes", operation_id = "delete_volume",
    params(("volume_id" = Uuid, Path, description = "Volume id")),
    responses(
        (status = 200, description = "The volume, `deleting` (or `deleted`, if it was never made)", body = Volume),
        (status = 404, description = "No such volume of the tenant's", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "Attached to a lease (`volume_attached`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_volume(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(volume_id): ApiPath<Uuid>,
) -> ApiResult<Json<Volume>> {
    let mut tx = state.db.begin().await?;
    store::lock(&mut tx, auth.tenant_id, volume_id).await?.ok_or(ApiError::NotFound("volume"))?;
    let attached = store::open_attachments(&mut tx, volume_id).await?;
    if !attached.is_empty() {
        let leases: Vec<String> = attached.iter().map(|(lease, _)| lease.to_string()).collect();
        return Err(ApiError::conflict(
            "volume_attached",
            format!("the volume is attached to lease {}: detach it (or end the lease) first", leases.join(", ")),
        ));
    }
    store::mark_deleted(&mut tx, volume_id).await?;
    let volume = store::get(&mut tx, auth.tenant_id, volume_id).await?.ok_or(ApiError::NotFound("volume"))?;
    tx.commit().await?;
    tracing::info!(tenant.id = %auth.tenant_id, volume.id = %volume_id, state = %volume.state, "volume deleted");
    Ok(Json(volume))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"volume_kinds": ["pool"], "capacity_gib": 10000}))]
pub struct PoolStorageSettings {
    /// The kinds of volume the pool sells: `host` (agents started with a host volume store) and/or `pool`
    /// (agents started with the pool's shared filesystem as their pool store). Empty: none.
    #[schema(max_items = 2)]
    pub volume_kinds: Vec<VolumeKind>,
    /// GiB of volumes the pool sells in all, up to 10^12 (null: as much as its hosts report room for).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1000000000000i64)]
    pub capacity_gib: Option<i64>,
}

/// Set what a pool sells of storage (operator). Volumes already made keep their kind.
#[utoipa::path(
    put, path = "/v1/admin/pools/{pool_id}/storage", tag = "volumes", operation_id = "set_pool_storage",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    request_body = PoolStorageSettings,
    responses(
        (status = 200, description = "As stored", body = PoolStorageSettings),
        (status = 404, description = "No such pool", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn set_pool_storage(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<PoolStorageSettings>,
) -> ApiResult<Json<PoolStorageSettings>> {
    let mut errors = Vec::new();
    if req.capacity_gib.is_some_and(|c| !(0..=MAX_QUOTA_GIB).contains(&c)) {
        errors.push(FieldError::new("capacity_gib", format!("GiB, 0-{MAX_QUOTA_GIB}")));
    }
    if req.volume_kinds.len() > 2 {
        errors.push(FieldError::new("volume_kinds", "host and/or pool, once each"));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut kinds: Vec<VolumeKind> = req.volume_kinds.clone();
    kinds.sort();
    kinds.dedup();
    let names: Vec<String> = kinds.iter().map(|k| k.as_str().to_string()).collect();
    let mut conn = state.db.acquire().await?;
    if !store::set_pool_storage(&mut conn, pool_id, &names, req.capacity_gib).await? {
        return Err(ApiError::NotFound("pool"));
    }
    Ok(Json(PoolStorageSettings { volume_kinds: kinds, capacity_gib: req.capacity_gib }))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"price_per_gib_month_minor": 7}))]
pub struct StoragePriceRequest {
    /// Minor units per GiB per 30-day month (0-100000000), metered per GiB-second.
    #[schema(minimum = 0, maximum = 100000000)]
    pub price_per_gib_month_minor: i64,
    /// When it takes effect (default now). Never in the past: charges already made are never rewritten.
    #[serde(default, deserialize_with = "crate::extract::sane_time_opt")]
    #[schema(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-")]
    pub effective_from: Option<DateTime<Utc>>,
}

/// Schedule a storage price for a pool (operator): a pool sells volumes only with a price in force.
#[utoipa::path(
    post, path = "/v1/admin/pools/{pool_id}/storage-prices", tag = "volumes", operation_id = "create_storage_price",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    request_body = StoragePriceRequest,
    responses(
        (status = 201, description = "Scheduled", body = StoragePriceRequest),
        (status = 404, description = "No such pool", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "A price starts at that time already (`storage_price_exists`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_storage_price(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<StoragePriceRequest>,
) -> ApiResult<(StatusCode, Json<StoragePriceRequest>)> {
    let mut errors = Vec::new();
    if !(0..=100_000_000).contains(&req.price_per_gib_month_minor) {
        errors.push(FieldError::new("price_per_gib_month_minor", "minor units, 0-100000000"));
    }
    if req.effective_from.is_some_and(|t| t < Utc::now() - chrono::Duration::seconds(5)) {
        errors.push(FieldError::new("effective_from", "must not be in the past"));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let effective_from = req.effective_from.unwrap_or_else(Utc::now);
    let mut tx = state.db.begin().await?;
    if store::lock_pool_storage(&mut tx, pool_id).await?.is_none() {
        return Err(ApiError::NotFound("pool"));
    }
    if !store::add_storage_price(&mut tx, pool_id, effective_from, req.price_per_gib_month_minor).await? {
        return Err(ApiError::conflict("storage_price_exists", "a storage price starts at that time already"));
    }
    tx.commit().await?;
    let stored = StoragePriceRequest { effective_from: Some(effective_from), ..req };
    Ok((StatusCode::CREATED, Json(stored)))
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"max_volumes": 20, "max_volume_gib": 5000}))]
pub struct VolumeQuotas {
    /// Volumes the tenant may hold at once, up to 1,000,000 (null: unlimited).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_volumes: Option<i32>,
    /// GiB of volumes the tenant may hold at once, up to 10^12 (null: unlimited).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1000000000000i64)]
    pub max_volume_gib: Option<i64>,
}

/// Set a tenant's volume quotas (operator). Volumes already held are kept; new ones and grows must fit.
#[utoipa::path(
    put, path = "/v1/admin/tenants/{tenant_id}/volume-quotas", tag = "volumes", operation_id = "set_volume_quotas",
    params(("tenant_id" = Uuid, Path, description = "Tenant id")),
    request_body = VolumeQuotas,
    responses(
        (status = 200, description = "As stored", body = VolumeQuotas),
        (status = 404, description = "No such tenant", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn set_volume_quotas(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(tenant_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<VolumeQuotas>,
) -> ApiResult<Json<VolumeQuotas>> {
    let mut errors = Vec::new();
    if req.max_volumes.is_some_and(|m| !(0..=1_000_000).contains(&m)) {
        errors.push(FieldError::new("max_volumes", "0-1000000"));
    }
    if req.max_volume_gib.is_some_and(|m| !(0..=MAX_QUOTA_GIB).contains(&m)) {
        errors.push(FieldError::new("max_volume_gib", format!("GiB, 0-{MAX_QUOTA_GIB}")));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut conn = state.db.acquire().await?;
    if !store::set_tenant_quotas(&mut conn, tenant_id, req.max_volumes, req.max_volume_gib).await? {
        return Err(ApiError::NotFound("tenant"));
    }
    Ok(Json(req))
}
