//! The bodies of the services' API, and what a job asks for when it serves.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::FieldError;

/// Ports a job's server may not take: the runtime's rendezvous (`MASTER_PORT` default) is the job's own choice,
/// but nothing below 1024 (the sandbox's user cannot bind them).
const MIN_PORT: i32 = 1024;
pub const MAX_RATE_LIMIT: i32 = 1_000_000;

/// `serve` on a job: its parts are replicas of a service that callers reach through the gateway.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"port": 8000, "health_path": "/v1/models", "protocol": "openai"}))]
pub struct ServeRequest {
    /// The port the job's server listens on in the lease's namespace, 1024-65535; it must listen on every address
    /// (`0.0.0.0`), not only loopback. Also in the job's environment as `GPUPLANE_SERVE_PORT`.
    #[schema(minimum = 1024, maximum = 65535)]
    pub port: i32,
    /// Probed with `GET` every second on each replica; a 2xx answer makes it ready (default `/health`). Starts with
    /// `/`, at most 200 characters, printable ASCII without spaces.
    #[serde(default = "default_health_path")]
    #[schema(max_length = 200, pattern = "^/[!-~]*$")]
    pub health_path: String,
    /// `http` (default), or `openai` for an OpenAI-compatible server (vLLM, SGLang, `transformers serve`): the
    /// gateway then also counts the tokens its answers report.
    #[serde(default = "default_protocol")]
    #[schema(pattern = "^(http|openai)$")]
    pub protocol: String,
    /// Callable without a key (default false: callers need one of the service's keys).
    #[serde(default)]
    pub public: bool,
    /// Requests per minute per key (per client address when public), 1-1000000; default unlimited.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000000)]
    pub rate_limit_per_minute: Option<i32>,
}

fn default_health_path() -> String {
    "/health".into()
}

fn default_protocol() -> String {
    "http".into()
}

impl ServeRequest {
    pub fn validate(&self, errors: &mut Vec<FieldError>) {
        if !(MIN_PORT..=65535).contains(&self.port) {
            errors.push(FieldError::new("serve.port", format!("a port, {MIN_PORT}-65535")));
        }
        if !health_path_valid(&self.health_path) {
            errors.push(FieldError::new(
                "serve.health_path",
                "a path starting with `/`, at most 200 characters, printable ASCII without spaces",
            ));
        }
        if !["http", "openai"].contains(&self.protocol.as_str()) {
            errors.push(FieldError::new("serve.protocol", "`http` or `openai`"));
        }
        check_rate_limit("serve.rate_limit_per_minute", self.rate_limit_per_minute, errors);
    }
}

fn health_path_valid(path: &str) -> bool {
    path.starts_with('/') && path.len() <= 200 && path.bytes().all(|b| b.is_ascii_graphic())
}

fn check_rate_limit(field: &str, limit: Option<i32>, errors: &mut Vec<FieldError>) {
    if limit.is_some_and(|l| !(1..=MAX_RATE_LIMIT).contains(&l)) {
        errors.push(FieldError::new(field, format!("requests per minute, 1-{MAX_RATE_LIMIT}")));
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"public": false, "rate_limit_per_minute": 600}))]
pub struct UpdateServiceRequest {
    /// Callable without a key.
    #[serde(default)]
    pub public: Option<bool>,
    /// Requests per minute per key (per client address when public), 1-1000000; `null`: unlimited.
    #[serde(default, deserialize_with = "crate::extract::double_option")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 1000000)]
    pub rate_limit_per_minute: Option<Option<i32>>,
}

impl UpdateServiceRequest {
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        check_rate_limit("rate_limit_per_minute", self.rate_limit_per_minute.flatten(), &mut errors);
        errors
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "mobile-app"}))]
pub struct CreateServiceKeyRequest {
    /// What the key is for, 1-100 characters, no control characters.
    #[schema(min_length = 1, max_length = 100, pattern = r"^[^\u0000-\u001f\u007f-\u009f]+$")]
    pub name: String,
}

impl CreateServiceKeyRequest {
    pub fn validate(&self) -> Vec<FieldError> {
        let length = self.name.chars().count();
        if !(1..=100).contains(&length) || self.name.chars().any(char::is_control) {
            return vec![FieldError::new("name", "1-100 characters, no control characters")];
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(json: serde_json::Value) -> ServeRequest {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_serve_request_is_checked_field_by_field() {
        let ok = serve(serde_json::json!({"port": 8000}));
        assert_eq!((ok.health_path.as_str(), ok.protocol.as_str(), ok.public), ("/health", "http", false));
        let mut errors = Vec::new();
        ok.validate(&mut errors);
        assert!(errors.is_empty());
        let bad = serve(serde_json::json!({
            "port": 80, "health_path": "health", "protocol": "grpc", "rate_limit_per_minute": 0
        }));
        bad.validate(&mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["serve.port", "serve.health_path", "serve.protocol", "serve.rate_limit_per_minute"]);
        let mut errors = Vec::new();
        serve(serde_json::json!({"port": 8000, "health_path": "/a b"})).validate(&mut errors);
        assert_eq!(errors.len(), 1);
    }
}
