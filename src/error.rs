//! One error type for every handler, rendered as RFC 9457 `application/problem+json` with a stable machine `code`.
//!
//! Internal failures (database, I/O) become a 500 with a generic body; their detail goes to the log only.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// A field-level validation failure.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the offending field, e.g. `gpu_count` or `gpus[2].uuid`.
    pub field: String,
    /// What is wrong with it, for a person.
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// RFC 9457 problem details, as every error response of this API carries them.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the problem type (`about:blank` style, stable per `code`).
    #[serde(rename = "type")]
    pub type_: String,
    /// Short human summary of the problem type.
    pub title: String,
    /// HTTP status code.
    pub status: u16,
    /// Human explanation of this occurrence.
    pub detail: String,
    /// Stable machine-readable code, e.g. `validation_failed`, `not_found`, `insufficient_capacity`.
    pub code: String,
    /// Field-level errors, present for validation failures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// Extra machine-readable facts about the problem (e.g. free capacity), when the code defines any.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub context: Option<serde_json::Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("malformed JSON body: {0}")]
    MalformedJson(String),
    #[error("{message}")]
    Unauthorized { code: &'static str, message: String },
    #[error("{message}")]
    Forbidden { code: &'static str, message: String },
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{message}")]
    Conflict { code: &'static str, message: String, context: Option<serde_json::Value> },
    #[error("{message}")]
    PreconditionFailed { code: &'static str, message: String },
    #[error("request body too large")]
    PayloadTooLarge,
    #[error("unsupported content type: expected {0}")]
    UnsupportedMediaType(&'static str),
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error("{message}")]
    Unprocessable { code: &'static str, message: String, context: Option<serde_json::Value> },
    #[error("{message}")]
    PaymentRequired { code: &'static str, message: String, context: Option<serde_json::Value> },
    #[error("too many requests; retry in {retry_after_secs} s")]
    TooManyRequests { retry_after_secs: u64 },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("internal error: {0}")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    /// One field failed validation.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Validation(vec![FieldError::new(field, message)])
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::Unauthorized { code: "unauthorized", message: message.into() }
    }

    /// A console session that no longer exists: signed out, its tenant suspended, or never this key's.
    pub fn session_ended() -> Self {
        ApiError::Unauthorized {
            code: "session_ended",
            message: "the console session has ended (signed out, or its tenant suspended): sign in again".into(),
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::Forbidden { code: "forbidden", message: message.into() }
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Conflict { code, message: message.into(), context: None }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::MalformedJson(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::PreconditionFailed { .. } => StatusCode::PRECONDITION_FAILED,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Validation(_) | ApiError::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::PaymentRequired { .. } => StatusCode::PAYMENT_REQUIRED,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Database(err) if is_unavailable(err) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Database(_) | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::MalformedJson(_) => "malformed_json",
            ApiError::Unauthorized { code, .. }
            | ApiError::Forbidden { code, .. }
            | ApiError::Conflict { code, .. }
            | ApiError::PreconditionFailed { code, .. }
            | ApiError::Unprocessable { code, .. }
            | ApiError::PaymentRequired { code, .. } => code,
            ApiError::NotFound(_) => "not_found",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Validation(_) => "validation_failed",
            ApiError::TooManyRequests { .. } => "rate_limited",
            ApiError::Database(err) if is_unavailable(err) => "service_unavailable",
            ApiError::Database(_) | ApiError::Internal(_) => "internal_error",
        }
    }

    pub fn problem(&self) -> Problem {
        let status = self.status();
        let code = self.code();
        let detail = match self {
            ApiError::Database(err) if is_unavailable(err) => {
                format!("the database is unreachable for now; retry in {RETRY_AFTER_UNAVAILABLE_SECS} s")
            }
            ApiError::Database(_) | ApiError::Internal(_) => {
                "the server failed to handle the request; it has been logged".to_string()
            }
            ApiError::Validation(errors) => {
                let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
                format!("invalid value for: {}", fields.join(", "))
            }
            other => other.to_string(),
        };
        let (errors, context) = match self {
            ApiError::Validation(errors) => (errors.clone(), None),
            ApiError::Conflict { context, .. }
            | ApiError::Unprocessable { context, .. }
            | ApiError::PaymentRequired { context, .. } => (Vec::new(), context.clone()),
            _ => (Vec::new(), None),
        };
        Problem {
            type_: format!("https://gpuplane.dev/problems/{}", code.replace('_', "-")),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail,
            code: code.to_string(),
            errors,
            context,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(error = %self, "request failed");
        }
        if let ApiError::Database(err) = &self {
            crate::observability::record_db_error(err);
        }
        let problem = self.problem();
        let body = serde_json::to_vec(&problem).unwrap_or_else(|_| b"{}".to_vec());
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        let retry_after = match &self {
            ApiError::TooManyRequests { retry_after_secs } => Some((*retry_after_secs).max(1)),
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Some(RETRY_AFTER_UNAVAILABLE_SECS),
            _ => None,
        };
        if let Some(secs) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(r#"Bearer realm="gpuplane", error="invalid_token""#),
            );
        }
        response
    }
}

/// What a 503 tells the client to wait before retrying.
pub const RETRY_AFTER_UNAVAILABLE_SECS: u64 = 5;

pub use gpuplane_store::error::{constraint_name, is_unavailable};

impl From<gpuplane_store::StoreError> for ApiError {
    fn from(err: gpuplane_store::StoreError) -> Self {
        ApiError::Database(err.0)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
