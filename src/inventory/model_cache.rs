//! The read-only model cache hosts offer their leases (docs/volumes.md, "The model cache"): what agents report,
//! what tenants see of a pool's caches, and how a lease's create prefers a host that holds its model.
//!
//! The cache is filled by the operator on the host (`gpuplane-agent model-cache fill`), never through the API,
//! and nobody is billed for it; every lease of the host mounts it read-only at `/models` with `HF_HOME` there.

use axum::Json;
use axum::extract::State;
use uuid::Uuid;

use gpuplane_protocol::model_cache::{MAX_MODELS, is_model_id};
use gpuplane_store::inventory::model_cache::{self as store, CachedModel};

use crate::auth::AnyAuth;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::ApiPath;
use crate::state::AppState;

/// An agent's report of its cache (`cached_models` of a heartbeat): at most [`MAX_MODELS`] hub ids, sorted, each
/// once.
pub fn validate(models: Option<&[String]>, errors: &mut Vec<FieldError>) {
    let Some(models) = models else { return };
    if models.len() > MAX_MODELS {
        errors.push(FieldError::new("cached_models", format!("at most {MAX_MODELS} models")));
        return;
    }
    for (i, id) in models.iter().enumerate() {
        if !is_model_id(id) {
            errors.push(FieldError::new(format!("cached_models[{i}]"), "a hub id: name or org/name"));
        } else if i > 0 && models[i - 1] >= *id {
            errors.push(FieldError::new(format!("cached_models[{i}]"), "sorted, each once"));
        }
    }
}

/// The models a lease may name as `cached_model` (no I/O): a hub id.
pub fn check_model_id(id: &str) -> Result<(), &'static str> {
    if is_model_id(id) { Ok(()) } else { Err("a hub id: name or org/name (letters, digits, '.', '_', '-')") }
}

/// The models in the pool's caches: each with the ready hosts that hold it and their free GPUs. A lease that names
/// one as `cached_model` goes on such a host when one has room.
#[utoipa::path(
    get, path = "/v1/pools/{pool_id}/models", tag = "inventory", operation_id = "list_pool_models",
    params(("pool_id" = Uuid, Path, description = "Pool id")),
    responses(
        (status = 200, description = "The cached models, by id", body = Vec<CachedModel>),
        (status = 404, description = "No such pool", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_pool_models(
    State(state): State<AppState>,
    _auth: AnyAuth,
    ApiPath(pool_id): ApiPath<Uuid>,
) -> ApiResult<Json<Vec<CachedModel>>> {
    let mut conn = state.db.acquire().await?;
    if gpuplane_store::inventory::pools::load_pools(&mut conn, Some(pool_id)).await?.is_empty() {
        return Err(ApiError::NotFound("pool"));
    }
    Ok(Json(store::pool_models(&mut conn, pool_id).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_sorted_ids_each_once() {
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut errors = Vec::new();
        validate(Some(&ids(&["a/b", "gpt2", "meta-llama/Llama-3.2-1B"])), &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        validate(Some(&ids(&["b", "a", "a", "../x"])), &mut errors);
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["cached_models[1]", "cached_models[2]", "cached_models[3]"]);
    }
}
