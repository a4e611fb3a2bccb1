//! Replicas of services on this host: the only way into a lease's namespace from outside it.
//!
//! A job part whose launch spec has `serve` runs a server on a port inside the lease's network namespace. The
//! agent opens one port of `--serve-ports` on the host for it and forwards connections to that server, but only
//! connections whose first line is `GPUPLANE-REPLICA <token>` with the part's token, which the service gives the
//! agent with the assignment and its gateway presents (nobody else knows it: not the job, not other tenants).
//! Anything else is closed after at most [`PREAMBLE_TIMEOUT`], having reached nothing. The agent also probes the
//! server's health path every second and reports the port and readiness with each heartbeat (at once when
//! readiness changes), which is how the gateway learns where the ready replicas are.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use gpuplane_protocol::jobs::{REPLICA_ACK, ServeSpec, ServingReport, replica_preamble};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::args::PortRange;

/// How long a connection may take to present its token.
pub const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Between health probes.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

struct Replica {
    port: u16,
    token: Arc<std::sync::Mutex<String>>,
    ready: Arc<AtomicBool>,
    stop: CancellationToken,
}

/// This host's replicas, by job part.
pub struct ServingReplicas {
    ports: PortRange,
    replicas: HashMap<Uuid, Replica>,
    /// Set by a probe whose answer changed the replica's readiness (or by a start or stop).
    changed: Arc<AtomicBool>,
}

impl ServingReplicas {
    pub fn new(ports: PortRange) -> Self {
        Self { ports, replicas: HashMap::new(), changed: Arc::default() }
    }

    /// Open the forwarder and start probing for a part that began running, its server at `inside`.
    pub fn start(&mut self, job_node_id: Uuid, inside: SocketAddr, spec: &ServeSpec) -> anyhow::Result<()> {
        if self.replicas.contains_key(&job_node_id) {
            return Ok(());
        }
        let port = self.free_port()?;
        let listener =
            std::net::TcpListener::bind(("0.0.0.0", port)).with_context(|| format!("binding serve port {port}"))?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let replica = Replica {
            port,
            token: Arc::new(std::sync::Mutex::new(spec.token.clone())),
            ready: Arc::default(),
            stop: CancellationToken::new(),
        };
        tokio::spawn(forward(listener, inside, replica.token.clone(), replica.stop.clone()));
        tokio::spawn(probe(
            inside,
            spec.health_path.clone(),
            replica.ready.clone(),
            self.changed.clone(),
            replica.stop.clone(),
        ));
        tracing::info!(job_node.id = %job_node_id, port, %inside, "replica forwarder open");
        self.replicas.insert(job_node_id, replica);
        self.changed.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The service rotated a part's token (its signing secret changed): the forwarder takes the new one.
    pub fn refresh_token(&self, job_node_id: Uuid, token: &str) {
        if let Some(replica) = self.replicas.get(&job_node_id)
            && let Ok(mut held) = replica.token.lock()
            && *held != token
        {
            *held = token.to_owned();
        }
    }

    /// Close a part's forwarder (its process ended or is stopping): no new connection reaches it.
    pub fn stop(&mut self, job_node_id: Uuid) {
        if let Some(replica) = self.replicas.remove(&job_node_id) {
            replica.stop.cancel();
            self.changed.store(true, Ordering::Relaxed);
        }
    }

    pub fn stop_all(&mut self) {
        for (_, replica) in self.replicas.drain() {
            replica.stop.cancel();
        }
    }

    /// Every replica's port and readiness now.
    pub fn reports(&self) -> Vec<ServingReport> {
        let mut reports: Vec<ServingReport> = self
            .replicas
            .iter()
            .map(|(id, r)| ServingReport {
                job_node_id: *id,
                port: i32::from(r.port),
                ready: r.ready.load(Ordering::Relaxed),
            })
            .collect();
        reports.sort_by_key(|r| r.job_node_id);
        reports
    }

    /// Whether anything changed since the last call.
    pub fn take_changed(&self) -> bool {
        self.changed.swap(false, Ordering::Relaxed)
    }

    fn free_port(&self) -> anyhow::Result<u16> {
        self.ports.free(|port| self.replicas.values().any(|r| r.port == port), "--serve-ports")
    }
}

/// Accept connections until stopped; each must present the token before anything is forwarded.
async fn forward(
    listener: tokio::net::TcpListener,
    inside: SocketAddr,
    token: Arc<std::sync::Mutex<String>>,
    stop: CancellationToken,
) {
    loop {
        let (client, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(%err, "replica forwarder: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let expected = replica_preamble(&token.lock().map(|t| t.clone()).unwrap_or_default());
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut client = client;
            let _ = client.set_nodelay(true);
            match tokio::time::timeout(PREAMBLE_TIMEOUT, read_preamble(&mut client, expected.len())).await {
                Ok(Ok(line))
                    if expected.len() > "GPUPLANE-REPLICA \n".len() && constant_time_eq(&line, expected.as_bytes()) => {
                }
                _ => {
                    tracing::debug!(%peer, "replica forwarder: a connection without the token; closed");
                    let _ = client.shutdown().await;
                    return;
                }
            }
            let Ok(mut server) = tokio::net::TcpStream::connect(inside).await else { return };
            let _ = server.set_nodelay(true);
            // Reached: the gateway may send its request now (had the server been down, it would try another).
            if client.write_all(REPLICA_ACK).await.is_err() {
                return;
            }
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
            }
        });
    }
}

/// Read up to and including the first `\n`, at most `max` bytes, one byte at a time (nothing past the line is
/// consumed: the HTTP request that follows is forwarded whole).
async fn read_preamble(stream: &mut tokio::net::TcpStream, max: usize) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::with_capacity(max);
    let mut byte = [0u8; 1];
    while line.len() < max {
        if stream.read(&mut byte).await? == 0 {
            break;
        }
        line.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    Ok(line)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Probe `GET health_path` every second; flag a change of readiness.
async fn probe(
    inside: SocketAddr,
    health_path: String,
    ready: Arc<AtomicBool>,
    changed: Arc<AtomicBool>,
    stop: CancellationToken,
) {
    loop {
        let ok = tokio::time::timeout(PROBE_TIMEOUT, probe_once(inside, &health_path)).await.is_ok_and(|ok| ok);
        if ready.swap(ok, Ordering::Relaxed) != ok {
            tracing::info!(%inside, ready = ok, "replica readiness changed");
            changed.store(true, Ordering::Relaxed);
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(PROBE_EVERY) => {}
        }
    }
}

/// One `GET`, HTTP/1.1, `Connection: close`: whether the status is 2xx.
async fn probe_once(inside: SocketAddr, health_path: &str) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(inside).await else { return false };
    let request = format!(
        "GET {health_path} HTTP/1.1\r\nHost: {inside}\r\nUser-Agent: gpuplane-agent\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    let mut read = 0;
    while read < head.len() {
        match stream.read(&mut head[read..]).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => read += n,
        }
    }
    // "HTTP/1.1 200"
    head.starts_with(b"HTTP/1.") && head[9] == b'2'
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny HTTP server: `/health` answers 200 while `healthy`, anything else echoes the request line.
    async fn server(healthy: Arc<AtomicBool>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let healthy = healthy.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 1024];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let text = String::from_utf8_lossy(&buf[..n]).to_string();
                    let first = text.lines().next().unwrap_or("").to_string();
                    let status = if first.contains("/health") && !healthy.load(Ordering::Relaxed) { 503 } else { 200 };
                    let body = format!("saw {first}");
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(reply.as_bytes()).await;
                });
            }
        });
        addr
    }

    async fn call(port: u16, preamble: &[u8]) -> String {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(preamble).await.unwrap();
        let _ = s.write_all(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        let mut out = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out)).await;
        out
    }

    #[tokio::test]
    async fn only_the_token_reaches_the_server_and_readiness_follows_the_health_path() {
        let healthy = Arc::new(AtomicBool::new(false));
        let inside = server(healthy.clone()).await;
        let mut replicas = ServingReplicas::new(PortRange { first: 23100, last: 23199 });
        let id = Uuid::new_v4();
        let spec = ServeSpec { port: inside.port(), health_path: "/health".into(), token: "s3cret-token".into() };
        replicas.start(id, inside, &spec).unwrap();
        let port = replicas.reports()[0].port as u16;

        let answer = call(port, b"GPUPLANE-REPLICA s3cret-token\n").await;
        assert!(answer.starts_with("OK\nHTTP/1.1 200"), "{answer}");
        assert!(answer.contains("saw GET /v1/models"));
        // A wrong token, none, or a bare HTTP request: closed, nothing forwarded.
        assert_eq!(call(port, b"GPUPLANE-REPLICA s3cret-tokem\n").await, "");
        assert_eq!(call(port, b"").await, "");
        assert_eq!(call(port, b"GPUPLANE-REPLICA \n").await, "");

        assert!(replicas.take_changed());
        assert!(!replicas.reports()[0].ready);
        healthy.store(true, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(replicas.reports()[0].ready, "a 2xx health answer makes it ready");
        assert!(replicas.take_changed());

        // The token can be rotated; the old one stops working.
        replicas.refresh_token(id, "next-token");
        assert_eq!(call(port, b"GPUPLANE-REPLICA s3cret-token\n").await, "");
        assert!(call(port, b"GPUPLANE-REPLICA next-token\n").await.contains("saw GET"));

        replicas.stop(id);
        assert!(replicas.reports().is_empty());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err(), "the port is closed");
    }
}
