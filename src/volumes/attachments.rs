//! `/v1/leases/{lease_id}/volumes`: attaching a tenant's volumes to its lease, and detaching them.
//!
//! Every node of the lease mounts an attached volume at `/volumes/<mount>` inside its sandbox, for jobs, image
//! jobs and SSH sessions alike. Volumes change only while nothing of the lease runs (no open job, no SSH
//! environment): a process never sees a volume appear or vanish under it. A volume is attached read-write to one
//! lease at a time, or read-only to any number, never both; read-write only to a lease on one host, since a
//! volume is one ext4 image that one host at a time may write (read-only, any number of hosts mount it). A host
//! volume needs a lease whose GPUs are all on its host (the one host that has it); a pool volume, a lease of its
//! pool. The lease's end detaches everything, the data staying in the volumes.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use gpuplane_store::volumes::{self as store, Attachment};

use super::rules;
use crate::auth::{TenantAdminAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"volume_id": "0193a0c1-0000-7000-8000-000000000002", "mount": "ckpt"}))]
pub struct AttachVolumeRequest {
    pub volume_id: Uuid,
    /// Mounted at `/volumes/<mount>` on every node of the lease: 1-63 characters, a-z, 0-9, `.`, `_`, `-`,
    /// starting with a letter or digit. Default: the volume's name.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 63, pattern = "^[a-z0-9][a-z0-9._-]{0,62}$")]
    pub mount: Option<String>,
    /// Read-only (any number of leases may read a volume at once); default read-write (one lease at a time).
    #[serde(default)]
    pub read_only: bool,
}

/// Why volumes cannot change on this lease now, if they cannot.
fn unchangeable(lease: &store::AttachLease) -> Option<ApiError> {
    if lease.state != "active" {
        return Some(ApiError::conflict("lease_not_active", format!("the lease is {}", lease.state)));
    }
    if lease.releasing {
        return Some(ApiError::conflict("release_under_way", "the lease is being released"));
    }
    if lease.open_jobs > 0 {
        return Some(ApiError::conflict(
            "lease_busy",
            format!("{} job(s) of the lease have not ended: volumes change only while no job runs", lease.open_jobs),
        ));
    }
    if lease.environment_running {
        return Some(ApiError::conflict(
            "lease_busy",
            "the lease's SSH environment runs: stop it first (volumes change only while nothing of the lease runs)",
        ));
    }
    None
}

/// Attach a volume to a lease (tenant admin), while no job and no SSH environment of the lease runs.
#[utoipa::path(
    post, path = "/v1/leases/{lease_id}/volumes", tag = "volumes", operation_id = "attach_volume",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    request_body = AttachVolumeRequest,
    responses(
        (status = 201, description = "Attached: the lease's next jobs and SSH sessions see it", body = Attachment),
        (status = 404, description = "No such lease or volume of the tenant's", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lease is not active (`lease_not_active`), being released (`release_under_way`) or running something (`lease_busy`); the volume is not ready (`volume_not_ready`), attached read-write elsewhere or, for a read-write attach, attached at all (`volume_in_use`); the lease has this volume or this mount already (`volume_already_attached`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields; a volume of another pool, a host volume on a lease with GPUs on other hosts, a read-write volume on a lease across hosts, or a lease across pools (`volume_out_of_reach`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn attach_volume(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<AttachVolumeRequest>,
) -> ApiResult<(StatusCode, Json<Attachment>)> {
    if let Some(Err(e)) = req.mount.as_deref().map(rules::check_name) {
        return Err(ApiError::Validation(vec![FieldError::new("mount", e)]));
    }
    let mut tx = state.db.begin().await?;
    // The lease first, then the volume: the order in which a lease's end detaches its volumes.
    let lease = store::lock_lease(&mut tx, auth.tenant_id, lease_id).await?.ok_or(ApiError::NotFound("lease"))?;
    let volume = store::lock(&mut tx, auth.tenant_id, req.volume_id).await?.ok_or(ApiError::NotFound("volume"))?;
    if let Some(refusal) = unchangeable(&lease) {
        return Err(refusal);
    }
    let attachment = attach_locked(&mut tx, auth.tenant_id, lease_id, &lease, &volume, &req).await?;
    tx.commit().await?;
    tracing::info!(lease.id = %lease_id, volume.id = %volume.id, mount = %attachment.mount_path, read_only = req.read_only, "volume attached");
    Ok((StatusCode::CREATED, Json(attachment)))
}

/// Attach volumes to a lease its create has just written, in the create's transaction (`volumes` of
/// `POST /v1/leases`): each as `POST /v1/leases/{id}/volumes` would, in order; any refusal refuses the create.
pub async fn attach_at_create(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
    volumes: &[AttachVolumeRequest],
) -> ApiResult<()> {
    if volumes.is_empty() {
        return Ok(());
    }
    // What the checks read of the lease (its pool, hosts, parts) no attach changes: locked and read once.
    let lease = store::lock_lease(tx, tenant_id, lease_id).await?.ok_or(ApiError::NotFound("lease"))?;
    for (i, req) in volumes.iter().enumerate() {
        let volume = store::lock(tx, tenant_id, req.volume_id).await?.ok_or_else(|| {
            ApiError::Validation(vec![FieldError::new(format!("volumes[{i}].volume_id"), "no such volume")])
        })?;
        attach_locked(tx, tenant_id, lease_id, &lease, &volume, req).await?;
        tracing::info!(lease.id = %lease_id, volume.id = %volume.id, read_only = req.read_only, "volume attached at the lease's create");
    }
    Ok(())
}

/// The host a lease with these volumes must be placed on (no I/O): a host volume's, the same for all of them.
/// `homes` are the volumes' (id, kind, node); Err names the field at fault.
pub fn pinned_host(
    volumes: &[AttachVolumeRequest],
    homes: &[(Uuid, String, Uuid)],
) -> Result<Option<Uuid>, FieldError> {
    let mut pinned: Option<(usize, Uuid)> = None;
    for (i, req) in volumes.iter().enumerate() {
        let Some((_, kind, node)) = homes.iter().find(|(id, _, _)| *id == req.volume_id) else {
            return Err(FieldError::new(format!("volumes[{i}].volume_id"), "no such volume"));
        };
        if kind != "host" {
            continue;
        }
        match pinned {
            Some((first, host)) if host != *node => {
                return Err(FieldError::new(
                    format!("volumes[{i}].volume_id"),
                    format!(
                        "a host volume on another host than volumes[{first}]'s: one lease is placed on one of them"
                    ),
                ));
            }
            Some(_) => {}
            None => pinned = Some((i, *node)),
        }
    }
    Ok(pinned.map(|(_, host)| host))
}

/// Whether a lease with these volumes must lie on one host: a read-write volume is one filesystem image that
/// one host at a time may write, and a host volume is on one host.
pub fn needs_one_host(volumes: &[AttachVolumeRequest], homes: &[(Uuid, String, Uuid)]) -> bool {
    volumes.iter().any(|v| !v.read_only || homes.iter().any(|(id, kind, _)| *id == v.volume_id && kind == "host"))
}

/// The checks and the write of one attach, with the lease and the volume locked (lease first) and the lease
/// found changeable.
async fn attach_locked(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    lease_id: Uuid,
    lease: &store::AttachLease,
    volume: &store::LockedVolume,
    req: &AttachVolumeRequest,
) -> ApiResult<Attachment> {
    if volume.state != "ready" {
        return Err(ApiError::conflict("volume_not_ready", format!("the volume is {}", volume.state)));
    }
    let out_of_reach =
        |why: String| ApiError::Unprocessable { code: "volume_out_of_reach", message: why, context: None };
    if lease.has_parts {
        return Err(out_of_reach("a lease across pools cannot attach volumes yet".into()));
    }
    if lease.pool_id != volume.pool_id {
        return Err(out_of_reach(
            "the volume is in another pool than the lease: only that pool's hosts hold it".into(),
        ));
    }
    if !req.read_only && lease.node_ids.len() > 1 {
        return Err(out_of_reach(format!(
            "the lease has GPUs on {} hosts, and a volume is one filesystem image that one host at a time may write: \
             attach it read-only, or read-write to a lease on one host",
            lease.node_ids.len()
        )));
    }
    if volume.kind == "host" && lease.node_ids.iter().any(|n| *n != volume.node_id) {
        return Err(out_of_reach(
            "a host volume is on one host, and this lease has GPUs on others: lease on its host only (its `node`)"
                .into(),
        ));
    }
    let attached = store::open_attachments(&mut *tx, volume.id).await?;
    if let Some((other, _)) = attached.iter().find(|(other, ro)| *other != lease_id && (!ro || !req.read_only)) {
        return Err(ApiError::conflict(
            "volume_in_use",
            format!(
                "the volume is attached to lease {other}{}: a volume is read-write on one lease, or read-only on any",
                if attached.iter().any(|(_, ro)| !ro) { " read-write" } else { " read-only" }
            ),
        ));
    }
    let volume_name = store::get(&mut *tx, tenant_id, volume.id).await?.ok_or(ApiError::NotFound("volume"))?.name;
    let mount = req.mount.clone().unwrap_or(volume_name);
    if !store::attach(&mut *tx, volume.id, lease_id, &mount, req.read_only).await? {
        return Err(ApiError::conflict(
            "volume_already_attached",
            format!("the lease has this volume, or another at /volumes/{mount}, already"),
        ));
    }
    let attachment = store::lease_attachments(&mut *tx, tenant_id, lease_id)
        .await?
        .into_iter()
        .find(|a| a.volume_id == volume.id)
        .ok_or(ApiError::NotFound("volume"))?;
    Ok(attachment)
}

/// The volumes attached to a lease now.
#[utoipa::path(
    get, path = "/v1/leases/{lease_id}/volumes", tag = "volumes", operation_id = "list_lease_volumes",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    responses(
        (status = 200, description = "Its volumes, by mount path", body = Vec<Attachment>),
        (status = 404, description = "No such lease of the tenant's", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_lease_volumes(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
) -> ApiResult<Json<Vec<Attachment>>> {
    let mut conn = state.db.acquire().await?;
    if gpuplane_store::jobs::tenant_lease(&mut conn, lease_id, auth.tenant_id).await?.is_none() {
        return Err(ApiError::NotFound("lease"));
    }
    Ok(Json(store::lease_attachments(&mut conn, auth.tenant_id, lease_id).await?))
}

/// Detach a volume from a lease (tenant admin), while no job and no SSH environment of the lease runs. Its
/// data stays in the volume.
#[utoipa::path(
    delete, path = "/v1/leases/{lease_id}/volumes/{volume_id}", tag = "volumes", operation_id = "detach_volume",
    params(("lease_id" = Uuid, Path, description = "Lease id"), ("volume_id" = Uuid, Path, description = "Volume id")),
    responses(
        (status = 204, description = "Detached"),
        (status = 404, description = "No such lease of the tenant's, or the volume is not attached to it", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The lease is not active, being released or running something (`lease_not_active`, `release_under_way`, `lease_busy`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn detach_volume(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath((lease_id, volume_id)): ApiPath<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    let mut tx = state.db.begin().await?;
    let lease = store::lock_lease(&mut tx, auth.tenant_id, lease_id).await?.ok_or(ApiError::NotFound("lease"))?;
    store::lock(&mut tx, auth.tenant_id, volume_id).await?.ok_or(ApiError::NotFound("volume"))?;
    if let Some(refusal) = unchangeable(&lease) {
        return Err(refusal);
    }
    if !store::detach(&mut tx, volume_id, lease_id).await? {
        return Err(ApiError::NotFound("attachment"));
    }
    tx.commit().await?;
    tracing::info!(lease.id = %lease_id, volume.id = %volume_id, "volume detached");
    Ok(StatusCode::NO_CONTENT)
}
