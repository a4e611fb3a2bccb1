//! What a tenant may ask of a new lease, checked with no I/O: the request's shape, and for a lease across pools
//! (`parts`) which pools may make one lease. `routes` and `parts` judge requests by these.
//!
//! Which pools may be mixed in one lease, and why:
//! - one currency: the lease is billed in one, its up-front amount is checked against one balance, and its hourly
//!   burn runs that one balance down;
//! - one region: a job on the lease runs one pipeline over every part, which crosses between them every step;
//! - each pool once: a part is "N GPUs of this pool"; more GPUs of a pool go in its one part.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use gpuplane_store::leases::parts::{MAX_PARTS, PartPool};

use super::rules::{MAX_HOURS, MAX_MONTHS};
use crate::error::{ApiError, FieldError};
use gpuplane_store::leases::{Placement, Term};

/// Most GPUs in one lease.
pub const MAX_GPUS: i32 = 4096;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"pool_id": "0192f5a0-0000-7000-8000-000000000001", "gpu_count": 8, "duration_hours": 24, "placement": "single_node"}))]
pub struct CreateLeaseRequest {
    /// The pool to lease from. Give this or `gpu_model`.
    pub pool_id: Option<Uuid>,
    /// Any pool of this GPU model (the one with the most free GPUs). Give this or `pool_id`.
    #[schema(pattern = r"^[a-z0-9][a-z0-9._-]{0,62}$")]
    pub gpu_model: Option<String>,
    /// GPUs wanted, 1-4096. Required, unless `parts` is given (then leave it out).
    #[schema(minimum = 1, maximum = 4096)]
    pub gpu_count: Option<i32>,
    /// Hourly term: length in hours (1-8784). Give this or `months`.
    #[schema(minimum = 1, maximum = 8784)]
    pub duration_hours: Option<i32>,
    /// Monthly term: length in calendar months (1-36). Give this or `duration_hours`.
    #[schema(minimum = 1, maximum = 36)]
    pub months: Option<i32>,
    /// How the GPUs are laid over the pool's nodes. With `parts`, each part has its own: leave this out (or `pack`).
    #[serde(default)]
    pub placement: Placement,
    /// A lease across pools: 2-4 parts, each GPUs of one pool (give `parts` instead of `pool_id`, `gpu_model` and
    /// `gpu_count`). All or nothing: every part gets its GPUs, or none does. The pools must all bill in one
    /// currency (the lease is billed, and its balance checked, in one) and lie in one region (a job's pipeline
    /// crosses between the parts every step). Each part is billed at its own pool's price and counts against the
    /// tenant's quota of its pool; the lease counts once against `max_concurrent_leases`. Queued (`queue`), it
    /// waits in its first part's pool's queue and starts once every part fits.
    #[schema(min_items = 2, max_items = 4)]
    pub parts: Option<Vec<LeasePartRequest>>,
    /// When capacity is short, wait in the pool's queue instead of failing with 409.
    #[serde(default)]
    pub queue: bool,
    /// Also start an interactive environment (SSH) on the lease's nodes once it is active; see
    /// `POST /v1/leases/{id}/environment`.
    #[serde(default)]
    pub environment: Option<crate::environments::requests::StartEnvironmentRequest>,
    /// Release the lease once it has been idle this many minutes (10-10080), after its running jobs got their
    /// stop notice; see `Lease.idle_since`. Absent or null: never released for idleness.
    #[schema(minimum = 10, maximum = 10080)]
    pub idle_release_after_minutes: Option<i32>,
    /// Volumes to attach as the lease is created (at most 16), each as `POST /v1/leases/{id}/volumes` takes it;
    /// the create is refused, with nothing written, when one cannot be attached. A host volume places the lease on
    /// the host that keeps it (409 `insufficient_capacity` with the reason when that host has no room or is
    /// offline; two host volumes must share a host); a read-write volume places it on one host (422 on `placement`
    /// for `spread` over several). Not with `parts`, nor with `queue` (attach once a queued lease has started).
    #[serde(default)]
    #[schema(max_items = 16)]
    pub volumes: Vec<crate::volumes::attachments::AttachVolumeRequest>,
    /// Prefer a host whose read-only model cache holds this model (a hub id such as `meta-llama/Llama-3.2-1B`;
    /// the pool's are listed by `GET /v1/pools/{pool_id}/models`): the lease goes on the best-fit such host with
    /// room now, else wherever it fits as without it. Every lease's sandbox mounts its host's cache at `/models`
    /// with `HF_HOME` there, so a job loads a cached model by its id without downloading it. Not with `parts`.
    #[schema(
        max_length = 193,
        pattern = r"^(?!.*--)[A-Za-z0-9_][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9_][A-Za-z0-9._-]{0,95})?$"
    )]
    pub cached_model: Option<String>,
}

/// Most volumes attached at a lease's create.
pub const MAX_VOLUMES_AT_CREATE: usize = 16;

impl CreateLeaseRequest {
    pub fn validate(&self) -> Result<Term, ApiError> {
        let mut errors = Vec::new();
        match &self.parts {
            Some(parts) => check_parts(self, parts, &mut errors),
            None => {
                if self.pool_id.is_some() == self.gpu_model.is_some() {
                    errors.push(FieldError::new("pool_id", "give exactly one of pool_id and gpu_model"));
                }
                if !(1..=MAX_GPUS).contains(&self.gpu_count.unwrap_or(0)) {
                    errors.push(FieldError::new("gpu_count", format!("must be between 1 and {MAX_GPUS}")));
                }
            }
        }
        if let Some(image) = self.environment.as_ref().and_then(|e| e.image.as_deref()) {
            let mut image_errors = Vec::new();
            crate::jobs::problems::check_image(image, &mut image_errors);
            errors.extend(
                image_errors.into_iter().map(|e| FieldError::new(format!("environment.{}", e.field), e.message)),
            );
        }
        check_volumes(self, &mut errors);
        if let Some(model) = &self.cached_model {
            if let Err(e) = crate::inventory::model_cache::check_model_id(model) {
                errors.push(FieldError::new("cached_model", e));
            }
            if self.parts.is_some() {
                errors.push(FieldError::new("cached_model", "not with parts"));
            }
        }
        if let Some(minutes) = self.idle_release_after_minutes {
            errors.extend(super::idle::check_release_after(minutes).err());
        }
        let term = match (self.duration_hours, self.months) {
            (Some(h), None) => {
                if !(1..=MAX_HOURS).contains(&h) {
                    errors.push(FieldError::new("duration_hours", format!("must be between 1 and {MAX_HOURS}")));
                }
                Term::Hourly
            }
            (None, Some(m)) => {
                if !(1..=MAX_MONTHS).contains(&m) {
                    errors.push(FieldError::new("months", format!("must be between 1 and {MAX_MONTHS}")));
                }
                Term::Monthly
            }
            _ => {
                errors.push(FieldError::new("duration_hours", "give exactly one of duration_hours and months"));
                Term::Hourly
            }
        };
        if errors.is_empty() { Ok(term) } else { Err(ApiError::Validation(errors)) }
    }

    /// The GPUs of a single-pool request (validated: present).
    pub fn gpu_count(&self) -> i32 {
        self.gpu_count.unwrap_or(0)
    }
}

/// The shape of `volumes` (no I/O): how many, their mounts, and not with `parts` or `queue`.
fn check_volumes(req: &CreateLeaseRequest, errors: &mut Vec<FieldError>) {
    if req.volumes.is_empty() {
        return;
    }
    if req.volumes.len() > MAX_VOLUMES_AT_CREATE {
        errors.push(FieldError::new("volumes", format!("at most {MAX_VOLUMES_AT_CREATE} volumes")));
    }
    if req.parts.is_some() {
        errors.push(FieldError::new("volumes", "a lease across pools cannot attach volumes yet"));
    }
    if req.queue {
        errors.push(FieldError::new(
            "volumes",
            "a queued lease attaches its volumes once it has started (POST /v1/leases/{id}/volumes)",
        ));
    }
    for (i, volume) in req.volumes.iter().enumerate() {
        if let Some(Err(e)) = volume.mount.as_deref().map(crate::volumes::rules::check_name) {
            errors.push(FieldError::new(format!("volumes[{i}].mount"), e));
        }
    }
}

/// One part of a lease across pools: GPUs of one pool.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeasePartRequest {
    /// The pool of this part. Give this or `gpu_model`, or both (then the pool must offer that model).
    pub pool_id: Option<Uuid>,
    /// Any pool of this GPU model (the one with the most free GPUs).
    #[schema(pattern = r"^[a-z0-9][a-z0-9._-]{0,62}$")]
    pub gpu_model: Option<String>,
    /// GPUs of this part, 1-4096 (all parts together: at most 4096).
    #[schema(minimum = 1, maximum = 4096)]
    pub gpu_count: i32,
    /// How this part's GPUs are laid over its pool's nodes.
    #[serde(default)]
    pub placement: Placement,
}

/// The shape of a request with `parts` (no I/O): 2-4 parts, each naming a pool or a model and 1-4096 GPUs, 4096 in
/// all, no pool named twice, and none of the single-pool fields. Errors name their field paths.
pub fn check_parts(req: &CreateLeaseRequest, parts: &[LeasePartRequest], errors: &mut Vec<FieldError>) {
    for (given, field) in [(req.pool_id.is_some(), "pool_id"), (req.gpu_model.is_some(), "gpu_model")] {
        if given {
            errors.push(FieldError::new(field, "give each part's pool in parts[].pool_id or parts[].gpu_model"));
        }
    }
    if req.gpu_count.is_some() {
        errors.push(FieldError::new("gpu_count", "give each part's GPUs in parts[].gpu_count"));
    }
    if req.placement != Placement::default() {
        errors.push(FieldError::new("placement", "give each part's placement in parts[].placement"));
    }
    if !(2..=MAX_PARTS).contains(&parts.len()) {
        errors.push(FieldError::new(
            "parts",
            format!("give 2 to {MAX_PARTS} parts (one pool: pool_id and gpu_count instead)"),
        ));
    }
    let mut total: i64 = 0;
    for (i, part) in parts.iter().enumerate() {
        if part.pool_id.is_none() && part.gpu_model.is_none() {
            errors.push(FieldError::new(format!("parts[{i}].pool_id"), "give pool_id or gpu_model"));
        }
        if !(1..=MAX_GPUS).contains(&part.gpu_count) {
            errors.push(FieldError::new(format!("parts[{i}].gpu_count"), format!("must be between 1 and {MAX_GPUS}")));
        }
        total += i64::from(part.gpu_count.max(0));
        if let Some(pool) = part.pool_id
            && let Some(first) = parts[..i].iter().position(|p| p.pool_id == Some(pool))
        {
            errors.push(FieldError::new(
                format!("parts[{i}].pool_id"),
                format!("parts[{first}] names this pool already: one part per pool (ask for more GPUs there)"),
            ));
        }
    }
    if total > i64::from(MAX_GPUS) {
        errors.push(FieldError::new("parts", format!("{total} GPUs in all; at most {MAX_GPUS} in one lease")));
    }
}

/// Whether the pools the parts resolved to may make one lease (no I/O): each part's pool exists and offers the
/// model the part names, no pool serves two parts, and all share the first part's currency and region (see the
/// module documentation for why). `resolved[i]` is part `i`'s pool, `pools` those of them that exist.
pub fn check_pools(parts: &[LeasePartRequest], resolved: &[Uuid], pools: &[PartPool]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let first = resolved.first().and_then(|id| pools.iter().find(|p| p.id == *id));
    for (i, (part, pool_id)) in parts.iter().zip(resolved).enumerate() {
        let field = |name: &str| format!("parts[{i}].{name}");
        let Some(pool) = pools.iter().find(|p| p.id == *pool_id) else {
            errors.push(FieldError::new(field("pool_id"), "no such pool"));
            continue;
        };
        if let Some(model) = &part.gpu_model
            && *model != pool.gpu_model
        {
            errors
                .push(FieldError::new(field("gpu_model"), format!("the pool offers {}, not {model}", pool.gpu_model)));
        }
        if let Some(earlier) = resolved[..i].iter().position(|id| id == pool_id) {
            errors.push(FieldError::new(
                field("gpu_model"),
                format!("resolves to the pool of parts[{earlier}]: one part per pool"),
            ));
        }
        if let Some(first) = first.filter(|_| i > 0) {
            if pool.currency != first.currency {
                errors.push(FieldError::new(
                    field("pool_id"),
                    format!(
                        "the pool bills in {}, parts[0]'s in {}: a lease is billed in one currency",
                        pool.currency, first.currency
                    ),
                ));
            }
            if pool.region != first.region {
                errors.push(FieldError::new(
                    field("pool_id"),
                    format!(
                        "the pool is in region {}, parts[0]'s in {}: a lease's parts share one region",
                        pool.region, first.region
                    ),
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(pool: Option<Uuid>, model: Option<&str>, gpus: i32) -> LeasePartRequest {
        LeasePartRequest {
            pool_id: pool,
            gpu_model: model.map(str::to_owned),
            gpu_count: gpus,
            placement: Placement::Pack,
        }
    }

    fn pool(id: Uuid, model: &str, currency: &str, region: &str) -> PartPool {
        PartPool { id, gpu_model: model.into(), currency: currency.into(), region: region.into() }
    }

    fn request(parts: Vec<LeasePartRequest>) -> CreateLeaseRequest {
        serde_json::from_value(serde_json::json!({ "duration_hours": 1, "parts": parts })).unwrap()
    }

    fn fields(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(|e| e.field.clone()).collect()
    }

    #[test]
    fn request_shape_names_the_fields_at_fault() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let ok = vec![part(Some(a), None, 2), part(None, Some("rtx4090"), 2)];
        let mut errors = Vec::new();
        check_parts(&request(ok.clone()), &ok, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");

        let one = vec![part(Some(a), None, 2)];
        let mut errors = Vec::new();
        check_parts(&request(one.clone()), &one, &mut errors);
        assert_eq!(fields(&errors), ["parts"]);

        let five: Vec<_> = (0..5).map(|i| part(Some(Uuid::from_u128(i)), None, 1)).collect();
        let mut errors = Vec::new();
        check_parts(&request(five.clone()), &five, &mut errors);
        assert_eq!(fields(&errors), ["parts"]);

        let bad = vec![part(Some(a), None, 0), part(Some(a), None, 2), part(None, None, 2), part(Some(b), None, 4096)];
        let mut errors = Vec::new();
        check_parts(&request(bad.clone()), &bad, &mut errors);
        assert_eq!(
            fields(&errors),
            ["parts[0].gpu_count", "parts[1].pool_id", "parts[2].pool_id", "parts"],
            "{errors:?}"
        );

        let mut both: CreateLeaseRequest = request(ok.clone());
        both.pool_id = Some(a);
        both.gpu_count = Some(4);
        both.placement = Placement::Spread;
        let mut errors = Vec::new();
        check_parts(&both, &ok, &mut errors);
        assert_eq!(fields(&errors), ["pool_id", "gpu_count", "placement"]);
    }

    #[test]
    fn pools_must_share_currency_and_region_and_match_the_model() {
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let parts = vec![part(Some(a), None, 2), part(Some(b), Some("rtx4090"), 2)];
        let same = [pool(a, "a100-80g", "EUR", "eu-west"), pool(b, "rtx4090", "EUR", "eu-west")];
        assert!(check_pools(&parts, &[a, b], &same).is_empty());

        let apart = [pool(a, "a100-80g", "EUR", "eu-west"), pool(b, "rtx4090", "USD", "us-east")];
        let errors = check_pools(&parts, &[a, b], &apart);
        assert_eq!(fields(&errors), ["parts[1].pool_id", "parts[1].pool_id"], "{errors:?}");
        assert!(errors[0].message.contains("one currency") && errors[1].message.contains("one region"));

        let wrong_model = [pool(a, "a100-80g", "EUR", "eu-west"), pool(b, "h100-sxm", "EUR", "eu-west")];
        assert_eq!(fields(&check_pools(&parts, &[a, b], &wrong_model)), ["parts[1].gpu_model"]);

        assert_eq!(fields(&check_pools(&parts, &[a, c], &same)), ["parts[1].pool_id"], "a pool that does not exist");

        let by_model = vec![part(Some(a), None, 2), part(None, Some("a100-80g"), 2)];
        assert_eq!(fields(&check_pools(&by_model, &[a, a], &same)), ["parts[1].gpu_model"], "one pool, two parts");
    }
}
