//! Communication latency between the nodes of a lease: agents report p50/p99 round trips per peer with their
//! heartbeats (see `agent::echo`); the latest per (lease, node, peer) is kept in `lease_latency` and shown at
//! `GET /v1/leases/{id}/network`. When the worst p99 passes the threshold (`--comm-latency-p99-ms`, default
//! 20 ms) a `comm.latency_high` alert is raised for the tenant, once per lease until it clears
//! (`lease_alerts`, at most one open alert per lease and condition).

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

use gpuplane_store::leases::network as stored;

pub use gpuplane_store::leases::network::PairLatency;

use crate::auth::TenantAuth;
use crate::error::{ApiResult, FieldError};
use crate::extract::ApiPath;
use crate::inventory::readiness::{Audience, announce};
use crate::jobs::insights::Insight;
use crate::jobs::reachability::is_unreachable;
use crate::state::AppState;
use gpuplane_protocol::agent::PeerLatency;
use gpuplane_store::leases::events::{NewEvent, record_event};
use gpuplane_store::leases::{Actor, LeaseState};

/// The alert's condition and event type.
pub const LATENCY_HIGH: &str = "comm.latency_high";
/// Most latency rows one heartbeat may carry.
pub const MAX_REPORTS: usize = 1024;
const MAX_US: i32 = 60_000_000;

/// Range checks on a heartbeat's latency reports.
pub fn validate(reports: &[PeerLatency], errors: &mut Vec<FieldError>) {
    if reports.len() > MAX_REPORTS {
        errors.push(FieldError::new("latency", format!("at most {MAX_REPORTS} reports per heartbeat")));
        return;
    }
    for (i, r) in reports.iter().enumerate() {
        let mut bad =
            |field: &str, message: &str| errors.push(FieldError::new(format!("latency[{i}].{field}"), message));
        if !(0..=MAX_US).contains(&r.p50_us) {
            bad("p50_us", "microseconds, 0-60000000");
        }
        if !(r.p50_us..=MAX_US).contains(&r.p99_us) {
            bad("p99_us", "microseconds, at least p50_us and at most 60000000");
        }
        if !(0..=100_000).contains(&r.probes) {
            bad("probes", "0-100000");
        } else if r.probes == 0 && (r.lost < 1 || r.p99_us != 0) {
            bad("probes", "0 only when every probe was lost (lost at least 1, p50_us and p99_us 0)");
        }
        if !(0..=100_000).contains(&r.lost) {
            bad("lost", "0-100000");
        }
    }
}

/// The rule: the worst p99 of a lease's pairs against the threshold. Pure; `None` when within it.
pub fn latency_insight(pairs: &[PairLatency], threshold_us: i64) -> Option<Insight> {
    if let Some(cut) = pairs.iter().find(|p| is_unreachable(p)) {
        return Some(Insight {
            kind: "comm_unreachable".into(),
            message: format!(
                "{} cannot reach {}: every one of its last {} probes was lost, so a job across this lease's nodes \
                 cannot rendezvous (new jobs on it are refused until the nodes reach each other)",
                cut.node_hostname, cut.peer_hostname, cut.lost
            ),
            suggestion: "ask the operator to let the hosts reach each other (routes between their lease subnets, \
                         firewalls), or release this lease and take one whose GPUs are on one node"
                .into(),
            figures: json!({ "node_id": cut.node_id, "peer_node_id": cut.peer_node_id, "lost": cut.lost }),
        });
    }
    let worst = pairs.iter().max_by_key(|p| p.p99_us)?;
    if i64::from(worst.p99_us) <= threshold_us {
        return None;
    }
    let over: Vec<&PairLatency> = pairs.iter().filter(|p| i64::from(p.p99_us) > threshold_us).collect();
    let ms = |us: i32| f64::from(us) / 1000.0;
    Some(Insight {
        kind: "comm_latency_high".into(),
        message: format!(
            "round trips between this lease's nodes reach p99 {:.1} ms ({} -> {}, p50 {:.1} ms), over the {:.1} ms \
             that data-parallel training tolerates: gradient all-reduces wait on the network",
            ms(worst.p99_us),
            worst.node_hostname,
            worst.peer_hostname,
            ms(worst.p50_us),
            threshold_us as f64 / 1000.0
        ),
        suggestion: "keep tensor parallelism inside a node (tp <= GPUs per node) so only data-parallel traffic \
                     crosses the network; use a pool with RDMA (InfiniBand/RoCE); raise gradient accumulation so \
                     all-reduces happen less often"
            .into(),
        figures: json!({
            "threshold_ms": threshold_us as f64 / 1000.0,
            "worst": { "node_id": worst.node_id, "peer_node_id": worst.peer_node_id,
                       "p50_ms": ms(worst.p50_us), "p99_ms": ms(worst.p99_us) },
            "pairs_over": over.len(),
        }),
    })
}

/// Store the reports of `node_id` (rows for leases it does not hold, or peers not in the lease, are skipped:
/// the lease may have ended since the probes), then raise or clear the latency alert of each lease touched.
pub async fn record(state: &AppState, node_id: Uuid, reports: &[PeerLatency]) -> ApiResult<()> {
    let mut tx = state.db.begin().await?;
    let rows = stored::LatencyReports {
        lease_ids: reports.iter().map(|r| r.lease_id).collect(),
        peer_node_ids: reports.iter().map(|r| r.peer_node_id).collect(),
        p50_us: reports.iter().map(|r| r.p50_us).collect(),
        p99_us: reports.iter().map(|r| r.p99_us).collect(),
        probes: reports.iter().map(|r| r.probes).collect(),
        lost: reports.iter().map(|r| r.lost).collect(),
    };
    let leases = stored::store_reports(&mut tx, node_id, &rows).await?;
    let mut lease_ids: Vec<Uuid> = leases;
    lease_ids.sort();
    lease_ids.dedup();
    let threshold_us = state.settings.comm_latency_p99.as_micros() as i64;
    for lease_id in lease_ids {
        update_alert(&mut tx, lease_id, threshold_us).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Raise `comm.latency_high` once when the lease's worst p99 passes the threshold; clear it when back within.
async fn update_alert(conn: &mut PgConnection, lease_id: Uuid, threshold_us: i64) -> Result<(), sqlx::Error> {
    // Serialize per lease: two nodes reporting at once must not both raise (the unique index would refuse the
    // second insert anyway; the lock keeps the raise/clear decision consistent).
    let lease = stored::lock_active_lease(conn, lease_id).await?;
    let Some(tenant_id) = lease else { return Ok(()) };
    let pairs = stored::load_pairs(conn, lease_id).await?;
    match latency_insight(&pairs, threshold_us) {
        Some(insight) => {
            let data = json!({
                "lease_id": lease_id, "message": insight.message, "suggestion": insight.suggestion,
                "figures": insight.figures,
            });
            if stored::raise_alert(conn, lease_id, LATENCY_HIGH, &data).await? {
                announce(conn, Audience::Tenant(tenant_id), LATENCY_HIGH, Some(lease_id), data).await?;
            }
        }
        None => {
            if stored::clear_alert(conn, lease_id, LATENCY_HIGH).await? {
                let event = NewEvent::new(
                    "comm.latency_cleared",
                    Some(LeaseState::Active),
                    Some(LeaseState::Active),
                    &Actor::System,
                )
                .reason("round trips between the lease's nodes are back within the threshold");
                record_event(conn, lease_id, event).await?;
            }
        }
    }
    Ok(())
}

/// A lease's network: round trips between its nodes and what they mean.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LeaseNetwork {
    pub lease_id: Uuid,
    /// p99 above which `comm.latency_high` is raised, milliseconds.
    pub threshold_ms: f64,
    /// The latest measurement of each ordered pair of the lease's nodes (empty for a single-node lease).
    pub pairs: Vec<PairLatency>,
    /// `comm_latency_high` when the worst p99 is over the threshold, with the numbers and what to change.
    pub insights: Vec<Insight>,
    /// Since when the `comm.latency_high` alert has been open (absent when it is not).
    pub alert_raised_at: Option<DateTime<Utc>>,
}

/// Round trips between the lease's nodes (p50/p99 per pair, as their agents measure them), and an insight when
/// they are too slow for data-parallel training.
#[utoipa::path(
    get, path = "/v1/leases/{lease_id}/network", tag = "leases", operation_id = "get_lease_network",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    responses(
        (status = 200, description = "The lease's node-to-node latency", body = LeaseNetwork),
        (status = 404, description = "No such lease of this tenant (`not_found`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_lease_network(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
) -> ApiResult<Json<LeaseNetwork>> {
    let mut conn = state.db.acquire().await?;
    crate::access::ensure_lease_owned(&mut conn, auth.tenant_id, lease_id).await?;
    let pairs = stored::load_pairs(&mut conn, lease_id).await?;
    let threshold_us = state.settings.comm_latency_p99.as_micros() as i64;
    let insights = latency_insight(&pairs, threshold_us).into_iter().collect();
    let alert = stored::alert_raised_at(&mut conn, lease_id, LATENCY_HIGH).await?;
    Ok(Json(LeaseNetwork {
        lease_id,
        threshold_ms: threshold_us as f64 / 1000.0,
        pairs,
        insights,
        alert_raised_at: alert,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(p50_us: i32, p99_us: i32) -> PairLatency {
        PairLatency {
            node_id: Uuid::nil(),
            node_hostname: "a".into(),
            peer_node_id: Uuid::max(),
            peer_hostname: "b".into(),
            p50_us,
            p99_us,
            probes: 10,
            lost: 0,
            measured_at: Utc::now(),
        }
    }

    #[test]
    fn the_worst_p99_over_the_threshold_raises_with_numbers_and_changes() {
        assert_eq!(latency_insight(&[], 20_000), None);
        assert_eq!(latency_insight(&[pair(300, 900), pair(400, 20_000)], 20_000), None, "at the threshold is fine");
        let insight = latency_insight(&[pair(300, 900), pair(21_000, 24_500)], 20_000).unwrap();
        assert_eq!(insight.kind, "comm_latency_high");
        assert!(insight.message.contains("p99 24.5 ms") && insight.message.contains("20.0 ms"), "{}", insight.message);
        for change in ["tensor parallelism inside a node", "RDMA", "gradient accumulation"] {
            assert!(insight.suggestion.contains(change), "{change}");
        }
        assert_eq!(insight.figures["pairs_over"], 1);
    }

    #[test]
    fn a_pair_whose_every_probe_was_lost_is_said_unreachable_first() {
        let cut = PairLatency { p50_us: 0, p99_us: 0, probes: 0, lost: 12, ..pair(0, 0) };
        let insight = latency_insight(&[pair(21_000, 24_500), cut], 20_000).unwrap();
        assert_eq!(insight.kind, "comm_unreachable");
        assert!(
            insight.message.contains("a cannot reach b") && insight.message.contains("12 probes"),
            "{}",
            insight.message
        );
    }

    #[test]
    fn reports_are_range_checked() {
        let ok =
            PeerLatency { lease_id: Uuid::nil(), peer_node_id: Uuid::nil(), p50_us: 5, p99_us: 9, probes: 4, lost: 0 };
        let mut errors = Vec::new();
        validate(std::slice::from_ref(&ok), &mut errors);
        assert!(errors.is_empty());
        let bad = PeerLatency { p50_us: 10, p99_us: 9, probes: 0, lost: -1, ..ok };
        validate(&[bad], &mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["latency[0].p99_us", "latency[0].probes", "latency[0].lost"]);
        // Every probe lost is a report (the peer is unreachable), with no round trip to state.
        let mut errors = Vec::new();
        validate(&[PeerLatency { p50_us: 0, p99_us: 0, probes: 0, lost: 8, ..ok }], &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        validate(&[PeerLatency { p50_us: 0, p99_us: 5, probes: 0, lost: 8, ..ok }], &mut errors);
        assert_eq!(errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(), ["latency[0].probes"]);
    }
}
