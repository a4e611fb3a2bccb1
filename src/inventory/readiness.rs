//! Driver/CUDA readiness: a node whose agent reports an NVIDIA driver or CUDA version below the minimum is
//! `not_ready`, with the reason, and is never allocated (allocation takes only `liveness = 'ready'` nodes).
//!
//! The minimums are the service's flags (`--min-driver-version`, `--min-cuda-version`; defaults 525.60.13 and
//! 11.8, what NCCL-based parallel frameworks need) unless the node's pool overrides them
//! (`PATCH /v1/admin/pools/{id}`). A node is evaluated when it registers, when a heartbeat reports other
//! versions than it had or comes back from silence, and for a whole pool when the pool's minimums change (and
//! for the fleet at start-up). A node that reports no version (an operator-created node, an agent that cannot
//! read NVML's) is not judged.
//!
//! [`judge`] is the one rule (pure); [`announcement`] the one rule for what a change of verdict tells
//! operators; [`evaluate_node`] the one place that applies both, and every path above goes through it. The
//! version syntax and order are `gpuplane_protocol::versions` (shared with the agent, which checks its `--driver-version`
//! flag with them).
//!
//! Alerts are transitions, not re-evaluations: each cause (`driver_version`, `cuda_version`) raised for a node
//! is a row in `webhook_alerts` (the alert checks' table, one row per condition and subject), inserted and
//! deleted by compare-and-set in SQL in the transaction that emits the event. `node.not_ready` goes out when a
//! cause is raised that was not already; `node.ready` when the last one clears. Re-judging a node that is
//! still short for the same cause (another PATCH of the minimum, a heartbeat, a restart) changes the stored
//! reason text but announces nothing, and two replicas judging the same node at once announce once.

use std::cmp::Ordering;

use gpuplane_store::inventory::readiness as store;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::config::Settings;
use gpuplane_protocol::versions::{compare_versions, parse_version};
use gpuplane_store::leases::events::{NewEvent, record_event};
use gpuplane_store::leases::{Actor, LeaseState};
/// The minimum versions that apply to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minimums {
    pub driver: String,
    pub cuda: String,
}

/// What keeps a node from being ready: the unit an alert is deduplicated on (per node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    /// The driver version is below the minimum, or unreadable.
    DriverVersion,
    /// The CUDA version is below the minimum, or unreadable.
    CudaVersion,
}

impl Cause {
    pub const ALL: [Cause; 2] = [Cause::DriverVersion, Cause::CudaVersion];

    /// The stable name in webhook payloads (`causes`).
    pub fn code(self) -> &'static str {
        match self {
            Cause::DriverVersion => "driver_version",
            Cause::CudaVersion => "cuda_version",
        }
    }

    /// The `webhook_alerts.condition` of this cause (the subject is the node).
    fn alert_condition(self) -> &'static str {
        match self {
            Cause::DriverVersion => "node.not_ready:driver_version",
            Cause::CudaVersion => "node.not_ready:cuda_version",
        }
    }
}

/// The judgement of one node: each shortfall with its cause, in [`Cause::ALL`] order; none means ready.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verdict {
    pub shortfalls: Vec<(Cause, String)>,
}

impl Verdict {
    pub fn is_ready(&self) -> bool {
        self.shortfalls.is_empty()
    }

    pub fn causes(&self) -> Vec<Cause> {
        self.shortfalls.iter().map(|(cause, _)| *cause).collect()
    }

    /// Why the node is not ready, e.g. `driver 470.57.02 < 525.60.13`; both shortfalls are named, separated
    /// by `; `. `None` when it is ready.
    pub fn reason(&self) -> Option<String> {
        (!self.is_ready()).then(|| self.shortfalls.iter().map(|(_, r)| r.as_str()).collect::<Vec<_>>().join("; "))
    }
}

/// Judge a node by its reported versions against the minimums. A version not reported is not judged.
pub fn judge(driver: Option<&str>, cuda: Option<&str>, min: &Minimums) -> Verdict {
    let check = |what: &str, reported: Option<&str>, minimum: &str| -> Option<String> {
        let reported = reported?.trim();
        let min_parsed = parse_version(minimum)?;
        match parse_version(reported) {
            None => Some(format!("{what} version `{reported}` is unreadable (need >= {minimum})")),
            Some(v) if compare_versions(&v, &min_parsed) == Ordering::Less => {
                Some(format!("{what} {reported} < {minimum}"))
            }
            Some(_) => None,
        }
    };
    let shortfalls = [
        (Cause::DriverVersion, check("driver", driver, &min.driver)),
        (Cause::CudaVersion, check("CUDA", cuda, &min.cuda)),
    ]
    .into_iter()
    .filter_map(|(cause, reason)| Some((cause, reason?)))
    .collect();
    Verdict { shortfalls }
}

/// The event a judgement announces, given which of its causes were newly raised and which raised causes
/// cleared (what the compare-and-set in SQL found): `node.not_ready` when a cause is new, `node.ready` when
/// the node is ready and something cleared, else nothing (the same verdict again, or one cause of several
/// gone).
pub fn announcement(verdict: &Verdict, newly_raised: &[Cause], cleared: &[Cause]) -> Option<&'static str> {
    if !newly_raised.is_empty() {
        Some("node.not_ready")
    } else if verdict.is_ready() && !cleared.is_empty() {
        Some("node.ready")
    } else {
        None
    }
}

pub use crate::webhooks::Audience;

/// Tell the audience that something happened: a webhook event (`crate::webhooks::emit`) and, when `lease_id` is
/// given, a lease event the tenant also reads in the lease's history. Runs in the caller's transaction, so both
/// commit with the change they report.
pub async fn announce(
    conn: &mut PgConnection,
    audience: Audience,
    event_type: &str,
    lease_id: Option<Uuid>,
    data: serde_json::Value,
) -> Result<(), sqlx::Error> {
    crate::webhooks::emit(conn, audience, event_type, data.clone()).await?;
    if let Some(lease_id) = lease_id {
        let reason = data.get("message").and_then(|m| m.as_str()).map(str::to_owned);
        let mut event = NewEvent::new(event_type, Some(LeaseState::Active), Some(LeaseState::Active), &Actor::System)
            .detail(data.clone());
        if let Some(reason) = reason.as_deref() {
            event = event.reason(reason);
        }
        record_event(conn, lease_id, event).await?;
    }
    Ok(())
}

/// The minimums for nodes of `pool_id`: the pool's overrides, else the service's.
pub async fn minimums_for_pool(
    conn: &mut PgConnection,
    pool_id: Uuid,
    settings: &Settings,
) -> Result<Minimums, sqlx::Error> {
    let (driver, cuda) = store::pool_minimums(conn, pool_id).await?.unwrap_or_default();
    Ok(Minimums {
        driver: driver.unwrap_or_else(|| settings.min_driver_version.clone()),
        cuda: cuda.unwrap_or_else(|| settings.min_cuda_version.clone()),
    })
}

/// Judge the node by the versions in its facts ([`judge`]) and store the verdict: its reason, and its
/// liveness `ready` <-> `not_ready` (a silent node keeps `unreachable`/`offline`, with the reason for when it is
/// back). A live node's change of verdict is then announced per [`announcement`] to operators (`node.ready` /
/// `node.not_ready`) and to the tenants of leases on the node. Returns the reason.
pub async fn evaluate_node(
    conn: &mut PgConnection,
    node_id: Uuid,
    settings: &Settings,
) -> Result<Option<String>, sqlx::Error> {
    let Some(row) = store::lock_node_versions(conn, node_id).await? else { return Ok(None) };
    let store::NodeVersions { pool_id, hostname, liveness, driver_version: driver, cuda_version: cuda } = row;
    let minimums = minimums_for_pool(conn, pool_id, settings).await?;
    let verdict = judge(driver.as_deref(), cuda.as_deref(), &minimums);
    let reason = verdict.reason();
    store::set_verdict(conn, node_id, liveness, reason.as_deref()).await?;
    if !liveness.is_alive() {
        // A silent node's silence is what operators hear about now; its verdict is announced when it is back
        // (the heartbeat that ends the silence judges it again).
        return Ok(reason);
    }
    let node = JudgedNode { id: node_id, hostname: &hostname, driver: driver.as_deref(), cuda: cuda.as_deref() };
    announce_transition(conn, &node, &verdict, &minimums).await?;
    Ok(reason)
}

struct JudgedNode<'a> {
    id: Uuid,
    hostname: &'a str,
    driver: Option<&'a str>,
    cuda: Option<&'a str>,
}

/// Raise each cause of the verdict and clear the others, each a compare-and-set on `webhook_alerts` (an
/// insert that conflicts, a delete that finds nothing, changes nothing and reports false), then announce what
/// [`announcement`] makes of what changed, in the same transaction.
async fn announce_transition(
    conn: &mut PgConnection,
    node: &JudgedNode<'_>,
    verdict: &Verdict,
    minimums: &Minimums,
) -> Result<(), sqlx::Error> {
    let causes = verdict.causes();
    let (mut newly_raised, mut cleared) = (Vec::new(), Vec::new());
    for cause in Cause::ALL {
        if causes.contains(&cause) {
            if crate::webhooks::alerts::raise(conn, cause.alert_condition(), node.id).await? {
                newly_raised.push(cause);
            }
        } else if crate::webhooks::alerts::clear(conn, cause.alert_condition(), node.id).await? {
            cleared.push(cause);
        }
    }
    let Some(event_type) = announcement(verdict, &newly_raised, &cleared) else { return Ok(()) };
    let (hostname, reason) = (node.hostname, verdict.reason());
    let codes = |causes: &[Cause]| causes.iter().map(|c| c.code()).collect::<Vec<_>>();
    let data = json!({
        "node_id": node.id, "hostname": hostname, "reason": reason,
        "causes": codes(&causes), "new_causes": codes(&newly_raised),
        "driver_version": node.driver, "cuda_version": node.cuda,
        "min_driver_version": minimums.driver, "min_cuda_version": minimums.cuda,
        "message": match &reason {
            Some(r) => format!("node {hostname} is not ready: {r}"),
            None => format!("node {hostname} is ready: driver and CUDA meet the minimums"),
        },
    });
    announce(conn, Audience::Operators, event_type, None, data.clone()).await?;
    // Leases already on the node keep running; their tenants learn why the node takes no new work.
    let leases = store::active_leases_on_node(conn, node.id).await?;
    for (lease_id, tenant_id) in leases {
        announce(conn, Audience::Tenant(tenant_id), event_type, Some(lease_id), data.clone()).await?;
    }
    Ok(())
}

/// Re-judge every node that reports versions, e.g. at start-up, when the service's minimums may have changed
/// since the nodes were last judged. Returns how many are not ready.
pub async fn evaluate_all(db: &sqlx::PgPool, settings: &Settings) -> Result<u64, sqlx::Error> {
    let pools = store::pools_with_reported_versions(&mut *db.acquire().await?).await?;
    let mut not_ready = 0;
    for pool_id in pools {
        let mut tx = db.begin().await?;
        not_ready += evaluate_pool(&mut tx, pool_id, settings).await?;
        tx.commit().await?;
    }
    Ok(not_ready)
}

/// Re-judge every agent node of a pool (its minimums changed). Returns how many are not ready.
pub async fn evaluate_pool(conn: &mut PgConnection, pool_id: Uuid, settings: &Settings) -> Result<u64, sqlx::Error> {
    let nodes = store::pool_node_ids(conn, pool_id).await?;
    let mut not_ready = 0;
    for node_id in nodes {
        if evaluate_node(conn, node_id, settings).await?.is_some() {
            not_ready += 1;
        }
    }
    Ok(not_ready)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn defaults() -> Minimums {
        Minimums { driver: "525.60.13".into(), cuda: "11.8".into() }
    }

    fn reason(driver: Option<&str>, cuda: Option<&str>) -> Option<String> {
        judge(driver, cuda, &defaults()).reason()
    }

    #[test]
    fn reasons_name_what_is_short_and_of_what() {
        assert_eq!(reason(Some("550.54.15"), Some("12.4")), None);
        assert_eq!(reason(Some("525.60.13"), Some("11.8")), None, "the minimum itself is enough");
        assert_eq!(reason(Some("470.57.02"), Some("12.4")).as_deref(), Some("driver 470.57.02 < 525.60.13"));
        assert_eq!(
            reason(Some("470.57.02"), Some("11.4")).as_deref(),
            Some("driver 470.57.02 < 525.60.13; CUDA 11.4 < 11.8")
        );
        assert_eq!(reason(None, None), None, "nothing reported, nothing judged");
        let unreadable = reason(Some("banana"), None).unwrap();
        assert!(unreadable.contains("unreadable"), "{unreadable}");
    }

    #[test]
    fn each_shortfall_has_its_cause() {
        let both = judge(Some("470.57.02"), Some("11.4"), &defaults());
        assert_eq!(both.causes(), [Cause::DriverVersion, Cause::CudaVersion]);
        assert_eq!(judge(Some("banana"), Some("12.4"), &defaults()).causes(), [Cause::DriverVersion]);
        assert_eq!(judge(Some("550.54.15"), Some("11.4"), &defaults()).causes(), [Cause::CudaVersion]);
        assert!(judge(Some("550.54.15"), Some("12.4"), &defaults()).is_ready());
    }

    #[test]
    fn only_a_new_cause_or_the_last_one_clearing_is_announced() {
        let driver_short = judge(Some("470.57.02"), Some("12.4"), &defaults());
        let ready = judge(Some("550.54.15"), Some("12.4"), &defaults());
        let (driver, cuda) = (Cause::DriverVersion, Cause::CudaVersion);
        assert_eq!(announcement(&driver_short, &[driver], &[]), Some("node.not_ready"));
        assert_eq!(announcement(&driver_short, &[], &[]), None, "the same cause again: already told");
        assert_eq!(announcement(&driver_short, &[], &[cuda]), None, "one of two causes gone: still not ready");
        assert_eq!(announcement(&ready, &[], &[driver]), Some("node.ready"));
        assert_eq!(announcement(&ready, &[], &[]), None, "ready and never told otherwise");
    }

    proptest! {
        #[test]
        fn text_round_trips_and_agrees_with_the_numbers(a in prop::collection::vec(0u32..100000, 1..=4),
                                                         b in prop::collection::vec(0u32..100000, 1..=4)) {
            let text = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(".");
            prop_assert_eq!(parse_version(&text(&a)), Some(a.clone()));
            let min = Minimums { driver: text(&b), cuda: "0".into() };
            let verdict = judge(Some(&text(&a)), None, &min);
            prop_assert_eq!(verdict.reason().is_some(), compare_versions(&a, &b).is_lt());
        }
    }
}
