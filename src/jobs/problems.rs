//! The problems the jobs' and the environments' handlers share (a leaf: both route modules use it, it uses
//! neither).

use gpuplane_store::leases::LeaseState;

use crate::error::{ApiError, FieldError};

/// A container image reference: what `docker run` takes, and nothing it could read as an option.
pub fn check_image(image: &str, errors: &mut Vec<FieldError>) {
    let ok = !image.is_empty()
        && image.len() <= 255
        && !image.starts_with('-')
        && image.chars().all(|c| c.is_ascii_alphanumeric() || "._-/:@".contains(c));
    if !ok {
        errors.push(FieldError::new("image", "an image reference, e.g. nvcr.io/nvidia/pytorch:24.05-py3"));
    }
}

pub fn lease_not_active(state: LeaseState) -> ApiError {
    ApiError::conflict(
        "lease_not_active",
        format!("the lease is {}: jobs and environments run on active leases", state.as_str()),
    )
}

pub fn stale_credential() -> ApiError {
    ApiError::unauthorized("the agent credential was rotated or its node is gone: register again")
}
