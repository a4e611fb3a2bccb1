//! One request through the gateway: the caller checked, a replica chosen, the request forwarded, the answer
//! streamed back and measured.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use gpuplane_protocol::jobs::{REPLICA_ACK, replica_preamble};
use gpuplane_store::services::{self as store, ReadyReplica, Route};

use super::connections::Sender;

use super::shared::Gateway;
use crate::error::Problem;

/// The largest request body the gateway takes (it is held to be sent again to another replica if the first
/// cannot be reached).
pub const MAX_REQUEST_BYTES: usize = 32 << 20;
/// The largest JSON answer of an OpenAI-compatible server read whole to count its tokens (larger ones stream
/// uncounted).
const MAX_COUNTED_ANSWER_BYTES: u64 = 4 << 20;
/// Reaching a replica's forwarder and its server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A refusal of the gateway's own, as problem+json.
fn refuse(status: StatusCode, code: &str, detail: impl Into<String>) -> Response {
    let problem = Problem {
        type_: format!("https://gpuplane.dev/problems/{}", code.replace('_', "-")),
        title: status.canonical_reason().unwrap_or("Error").to_string(),
        status: status.as_u16(),
        detail: detail.into(),
        code: code.to_string(),
        errors: Vec::new(),
        context: None,
    };
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let mut response = (status, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(r#"Bearer realm="gpuplane-service""#));
    }
    response
}

fn with_retry_after(mut response: Response, secs: u64) -> Response {
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    response
}

pub async fn not_a_service() -> Response {
    refuse(StatusCode::NOT_FOUND, "not_found", "the gateway serves /s/{service_id}/...")
}

/// The service id and the path to forward (with the query), from `/s/{id}` or `/s/{id}/rest`.
fn split_path(uri: &axum::http::Uri) -> Option<(Uuid, String)> {
    let rest = uri.path().strip_prefix("/s/")?;
    let (id, path) = match rest.split_once('/') {
        Some((id, path)) => (id, format!("/{path}")),
        None => (rest, "/".to_string()),
    };
    let id = Uuid::parse_str(id).ok()?;
    Some((
        id,
        match uri.query() {
            Some(query) => format!("{path}?{query}"),
            None => path,
        },
    ))
}

/// The key a caller presents: `Authorization: Bearer ...` or `X-Api-Key`.
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
}

/// Who a request counts against: its key, or on a public service without one, its address.
fn caller(route: &Route, peer: Option<SocketAddr>) -> String {
    match (route.key_id, peer) {
        (Some(key), _) => key.to_string(),
        (None, Some(peer)) => peer.ip().to_string(),
        (None, None) => "unknown".into(),
    }
}

pub async fn forward(State(gateway): State<Gateway>, request: Request) -> Response {
    let started = Instant::now();
    let Some((service_id, path)) = split_path(request.uri()) else {
        return refuse(StatusCode::NOT_FOUND, "not_found", "no such service");
    };
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let key = presented_key(request.headers()).map(str::to_owned);
    let key_hash = key.as_deref().and_then(crate::services::keys::presented_hash);
    let route = match lookup(&gateway, service_id, key_hash.as_deref()).await {
        Ok(Some(route)) => route,
        Ok(None) => return refuse(StatusCode::NOT_FOUND, "not_found", "no such service"),
        Err(response) => return response,
    };
    let refused = |status: StatusCode, code: &str, detail: String| {
        record(&gateway.tally, service_id, status, started.elapsed(), 0);
        refuse(status, code, detail)
    };
    if !route.public && route.key_id.is_none() {
        let (code, detail) = match key {
            None => ("service_key_required", "this service needs a key: `Authorization: Bearer gps_...`"),
            Some(_) => ("service_key_invalid", "the key is not one of this service's, or it was revoked"),
        };
        return refused(StatusCode::UNAUTHORIZED, code, detail.into());
    }
    if let Some(limit) = route.rate_limit_per_minute
        && let Err(wait) = gateway.limits.check(service_id, caller(&route, peer), u32::try_from(limit).unwrap_or(0))
    {
        let detail = format!("over the service's {limit} requests a minute; retry in {wait} s");
        return with_retry_after(refused(StatusCode::TOO_MANY_REQUESTS, "rate_limited", detail), wait);
    }
    let replicas = route.replicas.clone();
    if replicas.is_empty() {
        let detail = "no replica of the service is ready (starting, or its job ended)".to_string();
        return with_retry_after(refused(StatusCode::SERVICE_UNAVAILABLE, "no_ready_replica", detail), 1);
    }

    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(body) => body,
        Err(_) => {
            let detail = format!("the request body is over {MAX_REQUEST_BYTES} bytes, or was cut off");
            return refused(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", detail);
        }
    };
    let Ok(uri) = path.parse::<axum::http::Uri>() else {
        return refused(StatusCode::BAD_REQUEST, "bad_request", "the path cannot be forwarded".into());
    };
    let method = parts.method;
    let headers = forwarded_headers(&parts.headers, key_hash.is_some(), peer, service_id);
    let request = || {
        let mut outgoing = hyper::Request::new(Full::new(body.clone()));
        *outgoing.method_mut() = method.clone();
        *outgoing.uri_mut() = uri.clone();
        *outgoing.headers_mut() = headers.clone();
        outgoing
    };
    // A request sent on an idle connection that closed under it before any answer (its server had just died)
    // goes out again where that cannot have done harm: an idempotent method, or an OpenAI-compatible server's
    // (inference keeps no state between requests).
    let resendable = method.is_idempotent() || route.protocol == "openai";

    // The replicas in order; one that cannot be reached is passed over (nothing was sent to it). On each, an idle
    // connection first, then a new one: a request an idle connection could not send (it had just closed) is
    // given back, and goes out on the next.
    let ids: Vec<Uuid> = replicas.iter().map(|r| r.job_node_id).collect();
    gateway.connections.retain(&ids);
    let order = gateway.balancer.order(&ids, Instant::now());
    let mut resent = false;
    for replica in order.iter().filter_map(|id| replicas.iter().find(|r| r.job_node_id == *id)) {
        let id = replica.job_node_id;
        let mut fresh_tried = false;
        while !fresh_tried {
            let (mut sender, reused) = match gateway.connections.take(id) {
                Some(sender) => (sender, true),
                None => {
                    fresh_tried = true;
                    match connect(replica, &gateway.state.tokens.replica_token(id)).await {
                        Ok(sender) => (sender, false),
                        Err(err) => {
                            tracing::info!(service.id = %service_id, job_node.id = %id, err = format!("{err:#}"), "replica unreachable; passed over");
                            metrics::counter!("gpuplane_service_replica_unreachable_total", "service" => service_id.to_string())
                                .increment(1);
                            gateway.balancer.eject(id, Instant::now());
                            break;
                        }
                    }
                }
            };
            let outstanding = gateway.balancer.begin(id, Instant::now());
            match sender.try_send_request(request()).await {
                Ok(answer) => {
                    gateway.balancer.reached(id);
                    let done = Finished {
                        service_id,
                        status: answer.status(),
                        started,
                        connection: Some((gateway.connections.clone(), id, sender)),
                        complete: false,
                        output_tokens: 0,
                        tally: gateway.tally.clone(),
                        _outstanding: outstanding,
                    };
                    return answer_back(answer, &route, done).await;
                }
                Err(mut failed) => {
                    if failed.take_message().is_some() {
                        // Not sent: it goes out again.
                        continue;
                    }
                    if reused && !resent && resendable && failed.error().is_incomplete_message() {
                        tracing::info!(service.id = %service_id, job_node.id = %id, "an idle connection closed before any answer; sending again");
                        resent = true;
                        gateway.balancer.eject(id, Instant::now());
                        break;
                    }
                    // Sent, or partly: it is not sent again (it may have had effects).
                    tracing::warn!(service.id = %service_id, job_node.id = %id, err = %failed.error(), "replica failed while answering");
                    gateway.balancer.eject(id, Instant::now());
                    let detail = "the replica failed while answering the request".to_string();
                    return refused(StatusCode::BAD_GATEWAY, "replica_failed", detail);
                }
            }
        }
    }
    let detail = "no replica of the service could be reached".to_string();
    with_retry_after(refused(StatusCode::BAD_GATEWAY, "replica_unreachable", detail), 1)
}

async fn lookup(gateway: &Gateway, service_id: Uuid, key_hash: Option<&[u8]>) -> Result<Option<Route>, Response> {
    let mut conn = gateway.state.db.acquire().await.map_err(unavailable)?;
    store::route(&mut conn, service_id, key_hash).await.map_err(|e| unavailable(e.into()))
}

fn unavailable(err: sqlx::Error) -> Response {
    tracing::error!(%err, "gateway: the database failed");
    with_retry_after(
        refuse(StatusCode::SERVICE_UNAVAILABLE, "service_unavailable", "the gateway cannot reach its database"),
        5,
    )
}

/// Headers that belong to one connection (RFC 9110 7.6.1), never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// What the replica is sent: the caller's headers but the hop-by-hop ones, the service key (the platform's
/// credential, never the tenant's server's business) and the platform's cookies; plus where the request came from.
fn forwarded_headers(
    incoming: &HeaderMap,
    carried_service_key: bool,
    peer: Option<SocketAddr>,
    service_id: Uuid,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in incoming {
        let lower = name.as_str();
        if HOP_BY_HOP.contains(&lower) || lower.starts_with("x-forwarded-") || lower == "forwarded" {
            continue;
        }
        if carried_service_key && (name == header::AUTHORIZATION || lower == "x-api-key") {
            continue;
        }
        if name == header::COOKIE {
            if let Some(kept) = value.to_str().ok().map(without_platform_cookies).filter(|c| !c.is_empty())
                && let Ok(value) = HeaderValue::from_str(&kept)
            {
                headers.append(header::COOKIE, value);
            }
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    if let Some(peer) = peer
        && let Ok(value) = HeaderValue::from_str(&peer.ip().to_string())
    {
        headers.insert(HeaderName::from_static("x-forwarded-for"), value);
    }
    if let Ok(prefix) = HeaderValue::from_str(&format!("/s/{service_id}")) {
        headers.insert(HeaderName::from_static("x-forwarded-prefix"), prefix);
    }
    headers
}

/// A `Cookie` header without the console's cookies (should the gateway share a host with the console).
fn without_platform_cookies(cookies: &str) -> String {
    let platform = [crate::auth::cookie::SESSION_COOKIE, crate::auth::cookie::CSRF_COOKIE];
    cookies
        .split(';')
        .map(str::trim)
        .filter(|c| !c.is_empty() && !platform.iter().any(|p| c.split('=').next() == Some(*p)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A connection to the replica's server through its forwarder: the token presented and acknowledged (the
/// forwarder reached the server), then HTTP/1.1.
async fn connect(replica: &ReadyReplica, token: &str) -> anyhow::Result<Sender> {
    let address = format!("{}:{}", replica.address, replica.port);
    let reach = async {
        let mut stream = tokio::net::TcpStream::connect(&address).await?;
        stream.set_nodelay(true)?;
        stream.write_all(replica_preamble(token).as_bytes()).await?;
        let mut ack = [0u8; REPLICA_ACK.len()];
        stream.read_exact(&mut ack).await?;
        anyhow::ensure!(ack == REPLICA_ACK, "the forwarder did not acknowledge");
        anyhow::Ok(stream)
    };
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, reach)
        .await
        .map_err(|_| anyhow::anyhow!("no answer from {address} within {CONNECT_TIMEOUT:?}"))??;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::debug!(%err, "replica connection ended");
        }
    });
    Ok(sender)
}

/// The replica's answer to the caller, streamed; measured (and its connection kept for the next request) when
/// its body ends. An OpenAI-compatible server's JSON answer is read whole to count the tokens it reports.
async fn answer_back(answer: hyper::Response<hyper::body::Incoming>, route: &Route, mut done: Finished) -> Response {
    let (mut parts, body) = answer.into_parts();
    for name in HOP_BY_HOP {
        parts.headers.remove(*name);
    }
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let (is_json, is_stream) =
        (content_type.starts_with("application/json"), content_type.starts_with("text/event-stream"));
    let small = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n <= MAX_COUNTED_ANSWER_BYTES);
    if route.protocol == "openai" && is_json && small {
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => {
                tracing::warn!(service.id = %done.service_id, %err, "replica failed while answering");
                done.status = StatusCode::BAD_GATEWAY;
                return refuse(StatusCode::BAD_GATEWAY, "replica_failed", "the replica failed while answering");
            }
        };
        done.output_tokens = completion_tokens(&bytes).unwrap_or(0);
        done.complete = true;
        drop(done);
        return Response::from_parts(parts, Body::from(bytes));
    }
    let tokens = (route.protocol == "openai" && is_stream).then(StreamedTokens::default);
    Response::from_parts(parts, Body::new(Tracked { inner: body, done: Some(done), tokens }))
}

/// The tokens of an OpenAI-compatible streamed answer (server-sent events): the `usage` an engine sends last when
/// asked (`stream_options.include_usage`), else one per chunk that carries content (engines stream a token a
/// chunk).
#[derive(Default)]
struct StreamedTokens {
    line: Vec<u8>,
    chunks: u64,
    usage: Option<u64>,
}

impl StreamedTokens {
    /// Longest event line read whole (a longer one is skipped).
    const MAX_LINE: usize = 64 * 1024;

    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte != b'\n' {
                if self.line.len() < Self::MAX_LINE {
                    self.line.push(byte);
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let Some(data) = line.strip_prefix(b"data:") else { continue };
            let Ok(event) = serde_json::from_slice::<serde_json::Value>(data.trim_ascii()) else { continue };
            if let Some(tokens) = event.get("usage").and_then(|u| u.get("completion_tokens")).and_then(|t| t.as_u64()) {
                self.usage = Some(tokens);
            }
            let content = event.pointer("/choices/0/delta/content").and_then(|c| c.as_str());
            if content.is_some_and(|c| !c.is_empty()) {
                self.chunks += 1;
            }
        }
    }

    fn tokens(&self) -> u64 {
        self.usage.unwrap_or(self.chunks)
    }
}

/// An answer's body on its way to the caller: when it ends, [`Finished`] records it and keeps the connection.
struct Tracked {
    inner: hyper::body::Incoming,
    done: Option<Finished>,
    tokens: Option<StreamedTokens>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, hyper::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                if let (Some(tokens), Some(data)) = (self.tokens.as_mut(), frame.data_ref()) {
                    tokens.feed(data);
                }
            }
            std::task::Poll::Ready(None) => {
                let tokens = self.tokens.as_ref().map_or(0, StreamedTokens::tokens);
                if let Some(mut done) = self.done.take() {
                    done.output_tokens = tokens;
                    done.complete = true;
                }
            }
            std::task::Poll::Ready(Some(Err(_))) => {
                if let Some(done) = self.done.as_mut() {
                    done.status = StatusCode::BAD_GATEWAY;
                }
                self.done.take();
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Recorded when dropped: the answer's body ended (or the caller left); a connection whose answer was read to
/// its end goes back to the idle ones.
struct Finished {
    service_id: Uuid,
    status: StatusCode,
    started: Instant,
    connection: Option<(std::sync::Arc<super::connections::Connections>, Uuid, Sender)>,
    complete: bool,
    output_tokens: u64,
    tally: std::sync::Arc<super::tally::Tally>,
    _outstanding: super::balancer::Outstanding,
}

impl Drop for Finished {
    fn drop(&mut self) {
        record(&self.tally, self.service_id, self.status, self.started.elapsed(), self.output_tokens);
        if self.complete
            && let Some((connections, replica, sender)) = self.connection.take()
        {
            connections.put(replica, sender);
        }
    }
}

/// `usage.completion_tokens` of an OpenAI-style answer.
fn completion_tokens(body: &[u8]) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value.get("usage")?.get("completion_tokens")?.as_u64()
}

/// Count a request: in this process's metrics, and in the counts the service's API shows (added up in the
/// database).
fn record(tally: &super::tally::Tally, service_id: Uuid, status: StatusCode, took: Duration, output_tokens: u64) {
    tally.record(service_id, status.as_u16(), took, output_tokens);
    let service = service_id.to_string();
    if output_tokens > 0 {
        metrics::counter!("gpuplane_service_output_tokens_total", "service" => service.clone())
            .increment(output_tokens);
    }
    metrics::counter!("gpuplane_service_requests_total", "service" => service.clone(), "status" => status.as_u16().to_string())
        .increment(1);
    metrics::histogram!("gpuplane_service_request_duration_seconds", "service" => service).record(took.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_service_and_keep_the_rest() {
        let id = Uuid::from_u128(7);
        let uri = |s: &str| s.parse::<axum::http::Uri>().unwrap();
        assert_eq!(split_path(&uri(&format!("/s/{id}"))), Some((id, "/".into())));
        assert_eq!(split_path(&uri(&format!("/s/{id}/v1/chat?x=1"))), Some((id, "/v1/chat?x=1".into())));
        assert_eq!(split_path(&uri("/s/not-a-uuid/v1")), None);
        assert_eq!(split_path(&uri("/v1/leases")), None);
    }

    #[test]
    fn the_service_key_and_the_consoles_cookies_never_reach_the_replica() {
        let mut incoming = HeaderMap::new();
        incoming.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer gps_x"));
        incoming.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
        incoming.insert(header::COOKIE, HeaderValue::from_static("gp_session=abc; theme=dark"));
        incoming.insert("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
        incoming.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let peer = Some(SocketAddr::from(([10, 0, 0, 9], 5555)));
        let out = forwarded_headers(&incoming, true, peer, Uuid::from_u128(1));
        assert!(out.get(header::AUTHORIZATION).is_none());
        assert!(out.get(header::CONNECTION).is_none());
        assert_eq!(out.get(header::CONTENT_TYPE).unwrap(), "application/json");
        assert_eq!(out.get("x-forwarded-for").unwrap(), "10.0.0.9", "the caller's claim is replaced");
        let cookie = out.get(header::COOKIE).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        assert!(!cookie.contains(crate::auth::cookie::SESSION_COOKIE), "{cookie}");
        // A public service's caller may send its own Authorization to the tenant's server.
        let out = forwarded_headers(&incoming, false, peer, Uuid::from_u128(1));
        assert_eq!(out.get(header::AUTHORIZATION).unwrap(), "Bearer gps_x");
    }

    #[test]
    fn streamed_tokens_are_the_usage_when_sent_else_the_chunks_with_content() {
        let mut tokens = StreamedTokens::default();
        let events = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n\
                      data: [DONE]\n\n";
        // Frames split anywhere, mid-line included.
        for piece in events.as_bytes().chunks(7) {
            tokens.feed(piece);
        }
        assert_eq!(tokens.tokens(), 2);
        tokens.feed(b"data: {\"choices\":[],\"usage\":{\"completion_tokens\":5}}\n");
        assert_eq!(tokens.tokens(), 5, "the engine's own count wins");
    }

    #[test]
    fn tokens_are_read_from_an_openai_usage_block() {
        assert_eq!(completion_tokens(br#"{"usage": {"prompt_tokens": 3, "completion_tokens": 12}}"#), Some(12));
        assert_eq!(completion_tokens(b"{}"), None);
        assert_eq!(completion_tokens(b"not json"), None);
    }
}
