//! HTTP calls to the service's `/v1/agent/*` endpoints, and how their failures are classified.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use reqwest::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;

use gpuplane_protocol::agent::{HeartbeatRequest, HeartbeatResponse, RegisterRequest, RegisterResponse};
use gpuplane_protocol::jobs::{AssignmentList, AssignmentStatus, AssignmentStatusResponse};

/// A problem+json body, or as much of an error answer as could be read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Problem {
    pub code: String,
    pub detail: String,
}

impl Problem {
    fn from_body(body: &str) -> Self {
        let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let field = |name: &str| value.get(name).and_then(|v| v.as_str()).map(str::to_owned);
        let mut detail = field("detail").or_else(|| field("title")).unwrap_or_else(|| body.trim().to_owned());
        if let Some(errors) = value.get("errors") {
            detail = format!("{detail} {errors}");
        }
        Self { code: field("code").unwrap_or_default(), detail }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code.is_empty(), self.detail.is_empty()) {
            (false, false) => write!(f, "{}: {}", self.code, self.detail),
            (false, true) => f.write_str(&self.code),
            (true, _) => f.write_str(&self.detail),
        }
    }
}

/// Why a call failed, by what the agent should do about it.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// 401: the credential (or join token) is not valid.
    Unauthorized(Problem),
    /// Any other 4xx but 429: the request itself is wrong, so sending it again cannot help.
    Rejected { status: u16, problem: Problem },
    /// 429, 5xx, a network failure or an unreadable answer: the same request may succeed later.
    Transient(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unauthorized(problem) => write!(f, "HTTP 401 ({problem})"),
            Self::Rejected { status, problem } => write!(f, "HTTP {status} ({problem})"),
            Self::Transient(reason) => f.write_str(reason),
        }
    }
}

/// What a non-success status means for the caller; `None` for success.
pub fn classify(status: StatusCode, problem: Problem) -> Option<CallError> {
    if status.is_success() {
        None
    } else if status == StatusCode::UNAUTHORIZED {
        Some(CallError::Unauthorized(problem))
    } else if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS {
        Some(CallError::Rejected { status: status.as_u16(), problem })
    } else {
        Some(CallError::Transient(format!("HTTP {} ({problem})", status.as_u16())))
    }
}

#[derive(Clone)]
pub struct ServiceClient {
    http: reqwest::Client,
    server: String,
}

/// How long a readiness probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

impl ServiceClient {
    /// `server` is the base URL, without a trailing slash. HTTPS is verified against the system's roots and, if
    /// given, the PEM certificates in `ca_cert` (a private CA). Redirects are never followed: one could lead a
    /// credential to another host or to plain HTTP.
    pub fn new(server: &str, ca_cert: Option<&Path>) -> anyhow::Result<Self> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("gpuplane-agent/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none());
        if let Some(path) = ca_cert {
            let pem = std::fs::read(path).with_context(|| format!("reading --ca-cert {}", path.display()))?;
            let certificates = reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("--ca-cert {}: not a PEM certificate bundle", path.display()))?;
            anyhow::ensure!(!certificates.is_empty(), "--ca-cert {}: no certificate in it", path.display());
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        Ok(Self { http: builder.build()?, server: server.to_owned() })
    }

    /// Register, or re-attach this host's existing node: then `current_token` (the saved credential) proves it is
    /// the same agent; a join token alone never takes over a registered node.
    pub async fn register(
        &self,
        request: &RegisterRequest,
        current_token: Option<&str>,
    ) -> Result<RegisterResponse, CallError> {
        self.post("/v1/agent/register", current_token, request).await
    }

    pub async fn heartbeat(
        &self,
        agent_token: &str,
        request: &HeartbeatRequest,
    ) -> Result<HeartbeatResponse, CallError> {
        self.post("/v1/agent/heartbeat", Some(agent_token), request).await
    }

    /// Whether the service answers `/readyz` with success within `PROBE_TIMEOUT` (a cheap probe while backing off).
    pub async fn ready(&self) -> bool {
        let url = format!("{}/readyz", self.server);
        match self.http.get(&url).timeout(PROBE_TIMEOUT).send().await {
            Ok(response) => response.status().is_success(),
            Err(_) => false,
        }
    }

    /// The node's unfinished job assignments.
    pub async fn assignments(&self, agent_token: &str) -> Result<AssignmentList, CallError> {
        let url = format!("{}/v1/agent/assignments", self.server);
        self.send(self.http.get(&url).bearer_auth(agent_token), "GET", &url).await
    }

    /// Report a state transition of an assignment's process.
    pub async fn report_assignment(
        &self,
        agent_token: &str,
        job_node_id: uuid::Uuid,
        status: &AssignmentStatus,
    ) -> Result<AssignmentStatusResponse, CallError> {
        self.post(&format!("/v1/agent/assignments/{job_node_id}/status"), Some(agent_token), status).await
    }

    /// Ship a part's next lines of output.
    pub async fn report_logs(
        &self,
        agent_token: &str,
        job_node_id: uuid::Uuid,
        report: &gpuplane_protocol::logs::LogReport,
    ) -> Result<gpuplane_protocol::logs::LogReportResponse, CallError> {
        self.post(&format!("/v1/agent/assignments/{job_node_id}/logs"), Some(agent_token), report).await
    }

    /// An uploaded working directory a part of this node names: the archive's bytes.
    pub async fn upload(&self, agent_token: &str, digest: &str) -> Result<Vec<u8>, CallError> {
        let url = format!("{}/v1/agent/uploads/{digest}", self.server);
        self.answer(self.http.get(&url).bearer_auth(agent_token), "GET", &url).await.map(|(_, body)| body)
    }

    /// Report an environment's state on this node.
    pub async fn report_environment(
        &self,
        agent_token: &str,
        lease_id: uuid::Uuid,
        status: &gpuplane_protocol::environments::EnvironmentStatus,
    ) -> Result<(), CallError> {
        let url = format!("{}/v1/agent/environments/{lease_id}/status", self.server);
        let request = self.http.post(&url).json(status).bearer_auth(agent_token);
        let response = request.send().await.map_err(|err| CallError::Transient(format!("POST {url}: {err}")))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        match classify(status, Problem::from_body(&text)) {
            None => Ok(()),
            Some(err) => Err(err),
        }
    }

    async fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        bearer: Option<&str>,
        body: &B,
    ) -> Result<R, CallError> {
        let url = format!("{}{path}", self.server);
        let mut request = self.http.post(&url).json(body);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        self.send(request, "POST", &url).await
    }

    async fn send<R: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
        method: &str,
        url: &str,
    ) -> Result<R, CallError> {
        let (status, body) = self.answer(request, method, url).await?;
        serde_json::from_slice(&body)
            .map_err(|err| CallError::Transient(format!("{method} {url}: unexpected answer (HTTP {status}): {err}")))
    }

    /// Send a request and read its body; a refusal or a failure to reach the service is the error.
    async fn answer(
        &self,
        request: reqwest::RequestBuilder,
        method: &str,
        url: &str,
    ) -> Result<(StatusCode, Vec<u8>), CallError> {
        let response = request.send().await.map_err(|err| CallError::Transient(format!("{method} {url}: {err}")))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|err| CallError::Transient(format!("{method} {url}: {err}")))?;
        if let Some(error) = classify(status, Problem::default()) {
            // Only now parse the body: a success body is not a problem.
            let problem = Problem::from_body(&String::from_utf8_lossy(&body));
            return Err(match error {
                CallError::Unauthorized(_) => CallError::Unauthorized(problem),
                CallError::Rejected { status, .. } => CallError::Rejected { status, problem },
                CallError::Transient(_) => CallError::Transient(format!("{method} {url}: HTTP {} ({problem})", status)),
            });
        }
        Ok((status, body.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_what_the_agent_does() {
        let problem = Problem::default;
        assert_eq!(classify(StatusCode::OK, problem()), None);
        assert_eq!(classify(StatusCode::CREATED, problem()), None);
        assert!(matches!(classify(StatusCode::UNAUTHORIZED, problem()), Some(CallError::Unauthorized(_))));
        for status in
            [StatusCode::BAD_REQUEST, StatusCode::NOT_FOUND, StatusCode::CONFLICT, StatusCode::UNPROCESSABLE_ENTITY]
        {
            assert!(matches!(classify(status, problem()), Some(CallError::Rejected { .. })), "{status}");
        }
        for status in [StatusCode::TOO_MANY_REQUESTS, StatusCode::INTERNAL_SERVER_ERROR, StatusCode::BAD_GATEWAY] {
            assert!(matches!(classify(status, problem()), Some(CallError::Transient(_))), "{status}");
        }
    }

    #[test]
    fn problem_bodies_are_read_leniently() {
        let problem = Problem::from_body(r#"{"code": "invalid_join_token", "detail": "unknown or expired"}"#);
        assert_eq!(problem.to_string(), "invalid_join_token: unknown or expired");
        assert_eq!(Problem::from_body("bad gateway\n").to_string(), "bad gateway");
        let problem = Problem::from_body(r#"{"code":"validation_failed","detail":"bad","errors":[{"field":"x"}]}"#);
        assert!(problem.to_string().contains("\"field\":\"x\""), "{problem}");
    }
}
