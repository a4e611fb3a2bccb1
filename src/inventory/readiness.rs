//! Driver/CUDA readiness: a node whose agent reports an NVIDIA driver or CUDA version below the minimum is
//! `not_ready`, with the reason, and is never allocated (allocation takes only `liveness = 'ready'` nodes).
//!
//! The minimums are the service's flags (`--min-driver-version`, `--min-cuda-version`; defaults 525.60.13 and
//! 11.8, what NCCL-based parallel frameworks need) unless the node's pool overrides them
//! (`PATCH /v1/admin/pools/{id}`). A node is evaluated when it registers, when a heartbeat reports other
//! versions than it had, and for a whole pool when the pool's minimums change. A node that reports no version
//! (an operator-created node, an agent that cannot read NVML's) is not judged.
//!
//! [`not_ready_reason`] is the one rule; the version syntax and order it uses are `agents::versions` (shared with
//! the agent, which checks its `--driver-version` flag with them).

use std::cmp::Ordering;

use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::agents::versions::{compare_versions, parse_version};
use crate::config::Settings;
use crate::leases::store::{NewEvent, record_event};
use crate::leases::{Actor, LeaseState};

/// The minimum versions that apply to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minimums {
    pub driver: String,
    pub cuda: String,
}

/// Why a node with these reported versions is not ready, or `None` when it is (or reports nothing to judge).
/// E.g. `driver 470.57.02 < 525.60.13`; both shortfalls are named, separated by `; `.
pub fn not_ready_reason(driver: Option<&str>, cuda: Option<&str>, min: &Minimums) -> Option<String> {
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
    let reasons: Vec<String> =
        [check("driver", driver, &min.driver), check("CUDA", cuda, &min.cuda)].into_iter().flatten().collect();
    if reasons.is_empty() { None } else { Some(reasons.join("; ")) }
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
    let row: Option<(Option<String>, Option<String>)> =
        sqlx::query_as("SELECT min_driver_version, min_cuda_version FROM pools WHERE id = $1")
            .bind(pool_id)
            .fetch_optional(conn)
            .await?;
    let (driver, cuda) = row.unwrap_or_default();
    Ok(Minimums {
        driver: driver.unwrap_or_else(|| settings.min_driver_version.clone()),
        cuda: cuda.unwrap_or_else(|| settings.min_cuda_version.clone()),
    })
}

/// Judge the node by the versions in its facts and set its readiness: `ready` <-> `not_ready` (a silent node
/// keeps `unreachable`/`offline`, with the reason for when it is back). A change is announced to operators
/// (`node.ready` / `node.not_ready`) and to the tenants of leases on the node. Returns the reason.
pub async fn evaluate_node(
    conn: &mut PgConnection,
    node_id: Uuid,
    settings: &Settings,
) -> Result<Option<String>, sqlx::Error> {
    let row: Option<(Uuid, String, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT pool_id, hostname, facts->>'driver_version', facts->>'cuda_version' FROM nodes WHERE id = $1 FOR UPDATE",
    )
    .bind(node_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((pool_id, hostname, driver, cuda)) = row else { return Ok(None) };
    let minimums = minimums_for_pool(conn, pool_id, settings).await?;
    let reason = not_ready_reason(driver.as_deref(), cuda.as_deref(), &minimums);
    set_readiness(conn, node_id, &hostname, reason.as_deref(), &minimums, driver.as_deref(), cuda.as_deref()).await?;
    Ok(reason)
}

/// Store the verdict; announce a transition between `ready` and `not_ready`.
async fn set_readiness(
    conn: &mut PgConnection,
    node_id: Uuid,
    hostname: &str,
    reason: Option<&str>,
    minimums: &Minimums,
    driver: Option<&str>,
    cuda: Option<&str>,
) -> Result<(), sqlx::Error> {
    let changed: Option<(String,)> = sqlx::query_as(
        "WITH prev AS (SELECT liveness FROM nodes WHERE id = $1) \
         UPDATE nodes SET not_ready_reason = $2, updated_at = now(), \
             liveness = CASE WHEN liveness IN ('ready', 'not_ready') \
                 THEN (CASE WHEN $2::text IS NULL THEN 'ready' ELSE 'not_ready' END) ELSE liveness END \
         WHERE id = $1 AND not_ready_reason IS DISTINCT FROM $2 \
         RETURNING (SELECT liveness FROM prev)",
    )
    .bind(node_id)
    .bind(reason)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((was,)) = changed else { return Ok(()) };
    if !matches!(was.as_str(), "ready" | "not_ready") {
        // A silent node keeps the reason for when it is back; its silence is what operators hear about now.
        return Ok(());
    }
    let event_type = if reason.is_some() { "node.not_ready" } else { "node.ready" };
    let data = json!({
        "node_id": node_id, "hostname": hostname, "reason": reason,
        "driver_version": driver, "cuda_version": cuda,
        "min_driver_version": minimums.driver, "min_cuda_version": minimums.cuda,
        "message": match reason {
            Some(r) => format!("node {hostname} is not ready: {r}"),
            None => format!("node {hostname} is ready: driver and CUDA meet the minimums"),
        },
    });
    announce(conn, Audience::Operators, event_type, None, data.clone()).await?;
    // Leases already on the node keep running; their tenants learn why the node takes no new work.
    let leases: Vec<(Uuid, Uuid)> = sqlx::query_as(
        "SELECT DISTINCT l.id, l.tenant_id FROM leases l JOIN gpus g ON g.held_by = l.id \
         WHERE g.node_id = $1 AND l.state = 'active' ORDER BY l.id",
    )
    .bind(node_id)
    .fetch_all(&mut *conn)
    .await?;
    for (lease_id, tenant_id) in leases {
        announce(conn, Audience::Tenant(tenant_id), event_type, Some(lease_id), data.clone()).await?;
    }
    Ok(())
}

/// Re-judge every node that reports versions, e.g. at start-up, when the service's minimums may have changed
/// since the nodes were last judged. Returns how many are not ready.
pub async fn evaluate_all(db: &sqlx::PgPool, settings: &Settings) -> Result<u64, sqlx::Error> {
    let pools: Vec<(Uuid,)> = sqlx::query_as(
        "SELECT DISTINCT pool_id FROM nodes WHERE facts ?| array['driver_version', 'cuda_version'] ORDER BY pool_id",
    )
    .fetch_all(db)
    .await?;
    let mut not_ready = 0;
    for (pool_id,) in pools {
        let mut tx = db.begin().await?;
        not_ready += evaluate_pool(&mut tx, pool_id, settings).await?;
        tx.commit().await?;
    }
    Ok(not_ready)
}

/// Re-judge every agent node of a pool (its minimums changed). Returns how many are not ready.
pub async fn evaluate_pool(conn: &mut PgConnection, pool_id: Uuid, settings: &Settings) -> Result<u64, sqlx::Error> {
    let nodes: Vec<(Uuid,)> = sqlx::query_as("SELECT id FROM nodes WHERE pool_id = $1 ORDER BY id")
        .bind(pool_id)
        .fetch_all(&mut *conn)
        .await?;
    let mut not_ready = 0;
    for (node_id,) in nodes {
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

    #[test]
    fn reasons_name_what_is_short_and_of_what() {
        assert_eq!(not_ready_reason(Some("550.54.15"), Some("12.4"), &defaults()), None);
        assert_eq!(
            not_ready_reason(Some("525.60.13"), Some("11.8"), &defaults()),
            None,
            "the minimum itself is enough"
        );
        assert_eq!(
            not_ready_reason(Some("470.57.02"), Some("12.4"), &defaults()).as_deref(),
            Some("driver 470.57.02 < 525.60.13")
        );
        assert_eq!(
            not_ready_reason(Some("470.57.02"), Some("11.4"), &defaults()).as_deref(),
            Some("driver 470.57.02 < 525.60.13; CUDA 11.4 < 11.8")
        );
        assert_eq!(not_ready_reason(None, None, &defaults()), None, "nothing reported, nothing judged");
        let unreadable = not_ready_reason(Some("banana"), None, &defaults()).unwrap();
        assert!(unreadable.contains("unreadable"), "{unreadable}");
    }

    proptest! {
        #[test]
        fn text_round_trips_and_agrees_with_the_numbers(a in prop::collection::vec(0u32..100000, 1..=4),
                                                         b in prop::collection::vec(0u32..100000, 1..=4)) {
            let text = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(".");
            prop_assert_eq!(parse_version(&text(&a)), Some(a.clone()));
            let min = Minimums { driver: text(&b), cuda: "0".into() };
            let reason = not_ready_reason(Some(&text(&a)), None, &min);
            prop_assert_eq!(reason.is_some(), compare_versions(&a, &b).is_lt());
        }
    }
}
