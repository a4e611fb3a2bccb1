//! Round trips between the nodes of a lease: every agent answers UDP echo probes on its echo port (registered
//! with its node), and probes the other nodes of each multi-node lease it serves a few times per heartbeat
//! period. Each heartbeat carries p50/p99 per (lease, peer) of the probes since the previous one; a peer that has
//! answered none of the last [`UNREACHABLE_AFTER`] probes is reported with 0 answered and that count lost, which
//! the service says is unreachable (one lost probe is a lost packet, not a cut).
//!
//! A probe is 16 bytes: the magic `GPUPECHO` and a sequence number. The listener answers only that, with the
//! same 16 bytes (no amplification), after `--simulate-echo-delay-ms` when set (to test the latency alert).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use gpuplane_protocol::agent::PeerLatency;
use gpuplane_protocol::jobs::NodeLease;

const MAGIC: &[u8; 8] = b"GPUPECHO";
const PROBE_LEN: usize = 16;
/// A probe unanswered this long is lost.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Probe rounds per heartbeat period (each round probes every peer once).
pub const ROUNDS_PER_HEARTBEAT: u32 = 4;
/// Probes lost in a row, none answered, before a peer is reported unreachable.
pub const UNREACHABLE_AFTER: u32 = 3;
/// Round trips kept per peer between two heartbeats (a stalled heartbeat must not grow memory).
const MAX_SAMPLES_PER_PEER: usize = 1000;

/// Bind the echo listener on `bind` (port 0: any free port) and answer probes until `shutdown`. Returns the
/// port bound.
pub async fn serve(bind: SocketAddr, delay: Duration, shutdown: CancellationToken) -> anyhow::Result<u16> {
    let socket =
        Arc::new(UdpSocket::bind(bind).await.map_err(|e| anyhow::anyhow!("binding the echo port {bind}: {e}"))?);
    let port = socket.local_addr()?.port();
    tokio::spawn(async move {
        let mut buf = [0u8; 64];
        loop {
            let (len, from) = tokio::select! {
                _ = shutdown.cancelled() => break,
                got = socket.recv_from(&mut buf) => match got {
                    Ok(got) => got,
                    Err(err) => {
                        tracing::debug!(%err, "echo receive failed");
                        continue;
                    }
                },
            };
            if len != PROBE_LEN || &buf[..8] != MAGIC {
                continue;
            }
            let reply: [u8; PROBE_LEN] = buf[..PROBE_LEN].try_into().expect("16 bytes");
            if delay.is_zero() {
                let _ = socket.send_to(&reply, from).await;
            } else {
                let socket = socket.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = socket.send_to(&reply, from).await;
                });
            }
        }
    });
    Ok(port)
}

/// One peer to probe for one lease.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Target {
    lease_id: Uuid,
    peer_node_id: Uuid,
    address: String,
    port: u16,
}

#[derive(Default)]
struct Stats {
    rtts_us: Vec<u32>,
    lost: u32,
    /// Probes lost in a row, across reports (an answer resets it).
    lost_in_a_row: u32,
}

#[derive(Default)]
struct Shared {
    targets: Vec<Target>,
    stats: HashMap<(Uuid, Uuid), Stats>,
    /// The heartbeat interval the service last stated.
    heartbeat_interval: Option<Duration>,
}

/// Probes the peers of this node's leases in the background; heartbeats take its report.
#[derive(Clone, Default)]
pub struct Prober {
    shared: Arc<Mutex<Shared>>,
}

impl Prober {
    /// Probe the other nodes of these leases from now on (those with an echo port).
    pub fn set_leases(&self, leases: &[NodeLease]) {
        let targets: Vec<Target> = leases
            .iter()
            .flat_map(|l| {
                l.peers.iter().filter_map(move |p| {
                    let port = u16::try_from(p.echo_port?).ok().filter(|p| *p > 0)?;
                    Some(Target { lease_id: l.lease_id, peer_node_id: p.node_id, address: p.address.clone(), port })
                })
            })
            .collect();
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        // A peer now probed elsewhere (its agent restarted on another port) starts afresh: what was lost at the
        // old port says nothing of the new one.
        let before = std::mem::take(&mut shared.targets);
        shared
            .stats
            .retain(|key, _| targets.iter().any(|t| (t.lease_id, t.peer_node_id) == *key && before.contains(t)));
        shared.targets = targets;
    }

    /// The service stated this heartbeat interval: probe `ROUNDS_PER_HEARTBEAT` rounds per interval.
    pub fn set_heartbeat_interval(&self, interval: Duration) {
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).heartbeat_interval = Some(interval);
    }

    /// p50/p99 per (lease, peer) of the probes since the previous report; starts a new period.
    pub fn take_report(&self) -> Vec<PeerLatency> {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let mut report: Vec<PeerLatency> = shared
            .stats
            .iter_mut()
            .filter_map(|(&(lease_id, peer_node_id), stats)| {
                let mut rtts = std::mem::take(&mut stats.rtts_us);
                let lost = std::mem::take(&mut stats.lost);
                rtts.sort_unstable();
                // No answer since the last report: said only once enough probes in a row went unanswered (the
                // service says the peer is unreachable); until then, nothing to say.
                if rtts.is_empty() {
                    return (stats.lost_in_a_row >= UNREACHABLE_AFTER).then(|| PeerLatency {
                        lease_id,
                        peer_node_id,
                        p50_us: 0,
                        p99_us: 0,
                        probes: 0,
                        lost: stats.lost_in_a_row.min(100_000) as i32,
                    });
                }
                Some(PeerLatency {
                    lease_id,
                    peer_node_id,
                    p50_us: percentile(&rtts, 50.0).unwrap_or(0).min(60_000_000) as i32,
                    p99_us: percentile(&rtts, 99.0).unwrap_or(0).min(60_000_000) as i32,
                    probes: rtts.len().min(100_000) as i32,
                    lost: lost.min(100_000) as i32,
                })
            })
            .collect();
        report.sort_by_key(|r| (r.lease_id, r.peer_node_id));
        report
    }

    /// Probe every target once per round, `ROUNDS_PER_HEARTBEAT` rounds per heartbeat interval (`initial`
    /// until the service states one), until `shutdown`.
    pub async fn run(self, initial: Duration, shutdown: CancellationToken) {
        let socket = match UdpSocket::bind("0.0.0.0:0").await {
            Ok(socket) => socket,
            Err(err) => {
                tracing::warn!(%err, "cannot open a socket for latency probes; none will be measured");
                return;
            }
        };
        let mut seq: u64 = 0;
        loop {
            let (targets, interval) = {
                let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                (shared.targets.clone(), shared.heartbeat_interval.unwrap_or(initial))
            };
            let round_started = Instant::now();
            for target in targets {
                seq += 1;
                let rtt = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    rtt = probe(&socket, &target, seq) => rtt,
                };
                let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                if !shared.targets.contains(&target) {
                    continue; // the lease ended meanwhile
                }
                let stats = shared.stats.entry((target.lease_id, target.peer_node_id)).or_default();
                match rtt {
                    Some(rtt) => {
                        stats.lost_in_a_row = 0;
                        if stats.rtts_us.len() < MAX_SAMPLES_PER_PEER {
                            stats.rtts_us.push(rtt.as_micros().min(u32::MAX as u128) as u32)
                        }
                    }
                    None => {
                        stats.lost += 1;
                        stats.lost_in_a_row += 1;
                    }
                }
            }
            let period = (interval / ROUNDS_PER_HEARTBEAT).max(Duration::from_millis(100));
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(round_started + period) => {}
            }
        }
    }
}

/// One round trip to `target`, or `None` when it is not answered within `PROBE_TIMEOUT`.
async fn probe(socket: &UdpSocket, target: &Target, seq: u64) -> Option<Duration> {
    let addr = tokio::net::lookup_host((target.address.as_str(), target.port)).await.ok()?.next()?;
    let mut packet = [0u8; PROBE_LEN];
    packet[..8].copy_from_slice(MAGIC);
    packet[8..].copy_from_slice(&seq.to_be_bytes());
    let sent = Instant::now();
    socket.send_to(&packet, addr).await.ok()?;
    let deadline = sent + PROBE_TIMEOUT;
    let mut buf = [0u8; 64];
    loop {
        let (len, from) = tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await.ok()?.ok()?;
        // Late answers to earlier probes (and anything else) are skipped.
        if from == addr && len == PROBE_LEN && buf[..PROBE_LEN] == packet {
            return Some(sent.elapsed());
        }
    }
}

/// Nearest-rank percentile of ascending `sorted` values; `None` when empty.
pub fn percentile(sorted: &[u32], p: f64) -> Option<u32> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuplane_protocol::jobs::LeasePeer;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7], 99.0), Some(7));
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(
            (percentile(&v, 50.0), percentile(&v, 99.0), percentile(&v, 100.0)),
            (Some(50), Some(99), Some(100))
        );
        assert_eq!(percentile(&[1, 2, 3, 1000], 99.0), Some(1000), "one slow probe of four is the p99");
    }

    #[tokio::test]
    async fn probes_measure_the_listeners_delay_and_report_per_peer() {
        let shutdown = CancellationToken::new();
        let fast = serve("127.0.0.1:0".parse().unwrap(), Duration::ZERO, shutdown.clone()).await.unwrap();
        let slow = serve("127.0.0.1:0".parse().unwrap(), Duration::from_millis(30), shutdown.clone()).await.unwrap();
        let (lease, fast_node, slow_node) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let peer = |node_id, port: u16| LeasePeer {
            node_id,
            address: "127.0.0.1".into(),
            echo_port: Some(port.into()),
            lease_address: None,
        };
        let prober = Prober::default();
        prober.set_leases(&[NodeLease {
            lease_id: lease,
            gpu_indices: vec![0],
            volumes: Vec::new(),
            peers: vec![
                peer(fast_node, fast),
                peer(slow_node, slow),
                LeasePeer {
                    node_id: Uuid::new_v4(),
                    address: "127.0.0.1".into(),
                    echo_port: None,
                    lease_address: None,
                },
            ],
        }]);
        tokio::spawn(prober.clone().run(Duration::from_millis(400), shutdown.clone()));
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen: HashMap<Uuid, PeerLatency> = HashMap::new();
        while seen.len() < 2 {
            assert!(Instant::now() < deadline, "no report for both peers: {seen:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
            for r in prober.take_report() {
                seen.insert(r.peer_node_id, r);
            }
        }
        shutdown.cancel();
        assert!(seen[&slow_node].p50_us >= 30_000, "{:?}", seen[&slow_node]);
        assert!(seen[&fast_node].p99_us < 30_000, "{:?}", seen[&fast_node]);
        assert!(seen.values().all(|r| r.lease_id == lease && r.p99_us >= r.p50_us && r.probes >= 1));
    }

    #[tokio::test]
    async fn a_peer_that_answers_nothing_is_reported_with_every_probe_lost() {
        let shutdown = CancellationToken::new();
        // A bound socket that never answers: probes to it go unanswered (rather than refused).
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let (lease, node) = (Uuid::new_v4(), Uuid::new_v4());
        let prober = Prober::default();
        prober.set_leases(&[NodeLease {
            lease_id: lease,
            gpu_indices: vec![0],
            volumes: Vec::new(),
            peers: vec![LeasePeer {
                node_id: node,
                address: "127.0.0.1".into(),
                echo_port: Some(port.into()),
                lease_address: None,
            }],
        }]);
        tokio::spawn(prober.clone().run(Duration::from_millis(400), shutdown.clone()));
        let deadline = Instant::now() + Duration::from_secs(10);
        let report = loop {
            assert!(Instant::now() < deadline, "no report of the silent peer");
            tokio::time::sleep(Duration::from_millis(200)).await;
            if let Some(r) = prober.take_report().into_iter().find(|r| r.peer_node_id == node) {
                break r;
            }
        };
        shutdown.cancel();
        assert_eq!((report.probes, report.p50_us, report.p99_us), (0, 0, 0), "{report:?}");
        assert!(report.lost >= UNREACHABLE_AFTER as i32, "said only after {UNREACHABLE_AFTER} in a row: {report:?}");
    }
}
