//! `/v1/uploads`: HTTP only. A tenant uploads an archive and looks one up by its digest.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use utoipa::ToSchema;

use super::{Upload, digest_of, is_digest};
use crate::auth::{TenantAdminAuth, TenantAuth};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiPath;
use crate::state::AppState;

/// The request body of `POST /v1/uploads`: the archive's bytes.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct ArchiveBody(#[allow(dead_code)] Vec<u8>);

/// The media type an upload is sent as.
pub const ARCHIVE_MEDIA_TYPE: &str = "application/octet-stream";

/// Upload a job's working directory: a gzip-compressed tar archive (`tar -czf - -C mydir .`), sent as
/// `application/octet-stream`, at most the service's cap (`--upload-cap-mib`, 100 MiB by default). It is kept once
/// per tenant under its SHA-256: an archive the tenant already uploaded is answered 200 with what is kept, and
/// nothing is stored twice. It is refused whole, and nothing is stored, when an entry is not a file or a directory
/// (links, devices, FIFOs), a path is not plain and relative (a leading `/`, `..`), a path repeats, or it unpacks to
/// more than 100,000 entries, 2 GiB, or 200 times its own size (`archive_refused`, 422, naming the entry and the
/// rule). A job unpacks it into each part's working directory by naming its `digest` as `workdir`.
#[utoipa::path(
    post, path = "/v1/uploads", tag = "uploads", operation_id = "create_upload",
    request_body(content = ArchiveBody, content_type = "application/octet-stream", description = "A gzip-compressed tar archive"),
    responses(
        (status = 201, description = "Stored", body = Upload),
        (status = 200, description = "The tenant had uploaded this archive already", body = Upload),
        (status = 422, description = "Not a gzip-compressed tar archive, or an entry breaks a rule (`archive_refused`; `context` has the `entry` and the `rule`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_upload(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<Upload>)> {
    let media = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if media.split(';').next().map(str::trim) != Some(ARCHIVE_MEDIA_TYPE) {
        return Err(ApiError::UnsupportedMediaType(ARCHIVE_MEDIA_TYPE));
    }
    let cap = state.settings.upload_cap_bytes;
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > cap as u64) {
        return Err(ApiError::PayloadTooLarge);
    }
    let bytes = axum::body::to_bytes(body, cap).await.map_err(|_| ApiError::PayloadTooLarge)?;
    if bytes.is_empty() {
        return Err(archive_refused(None, "the body is empty: send a gzip-compressed tar archive"));
    }
    let digest = digest_of(&bytes);
    let mut conn = state.db.acquire().await?;
    // Sent again: kept as it is, its last use now.
    if let Some(kept) = gpuplane_store::uploads::touch(&mut conn, auth.tenant_id, &digest).await? {
        return Ok((StatusCode::OK, Json(kept.into())));
    }
    drop(conn);
    // Decompressing up to 2 GiB is work for a blocking thread, not the request loop.
    let checked = bytes.clone();
    let summary = tokio::task::spawn_blocking(move || {
        gpuplane_agent::archive::inspect(&checked, gpuplane_agent::archive::LIMITS)
    })
    .await
    .map_err(anyhow::Error::from)?
    .map_err(|refusal| archive_refused(refusal.entry.as_deref(), &refusal.reason))?;
    let mut conn = state.db.acquire().await?;
    let created = gpuplane_store::uploads::insert(
        &mut conn,
        auth.tenant_id,
        &digest,
        summary.files as i64,
        summary.unpacked_bytes as i64,
        &bytes,
    )
    .await?;
    let kept = gpuplane_store::uploads::find(&mut conn, auth.tenant_id, &digest)
        .await?
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("upload {digest} vanished after its insert")))?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(kept.into())))
}

fn archive_refused(entry: Option<&str>, rule: &str) -> ApiError {
    let message = match entry {
        Some(entry) => format!("the archive is refused: `{entry}`: {rule}"),
        None => format!("the archive is refused: {rule}"),
    };
    ApiError::Unprocessable {
        code: "archive_refused",
        message,
        context: Some(serde_json::json!({"entry": entry, "rule": rule})),
    }
}

/// An upload of the caller's tenant, by its digest: whether it need be sent again.
#[utoipa::path(
    get, path = "/v1/uploads/{digest}", tag = "uploads", operation_id = "get_upload",
    params(("digest" = String, Path, description = "`sha256:` and the archive's SHA-256 in hex")),
    responses((status = 200, description = "The upload", body = Upload))
)]
pub async fn get_upload(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(digest): ApiPath<String>,
) -> ApiResult<Json<Upload>> {
    if !is_digest(&digest) {
        return Err(ApiError::NotFound("upload"));
    }
    let mut conn = state.db.acquire().await?;
    let kept = gpuplane_store::uploads::find(&mut conn, auth.tenant_id, &digest).await?;
    Ok(Json(kept.ok_or(ApiError::NotFound("upload"))?.into()))
}
