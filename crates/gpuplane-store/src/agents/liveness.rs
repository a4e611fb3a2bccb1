//! Liveness: a node's liveness state machine ([`Liveness`], its transitions in [`Liveness::on`]), the control
//! plane's presence stamps, the sweeper's transitions of silent nodes (each one UPDATE guarded by the previous
//! state, so on several replicas exactly one performs it), fleet-level holds, and the leases that silence
//! interrupts.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;

/// A node's liveness (`nodes.liveness`): what its agent has proved. The API shows it through `NodeState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Liveness {
    /// Its agent is heard and its versions suffice: it takes leases (if its operator lets it).
    Ready,
    /// Its agent is heard, but its driver or CUDA version is below the minimum (`not_ready_reason`).
    NotReady,
    /// An operator's node that no agent has registered yet (the column's default): it takes no leases.
    AwaitingAgent,
    /// Its agent was silent for the unreachable limit: its leases are told, nothing is interrupted yet.
    Unreachable,
    /// Its agent was silent for the offline limit: its leases are interrupted at its last heartbeat.
    Offline,
}

/// What the readiness rules made of the versions on record (`nodes.not_ready_reason`: NULL when they suffice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Versions {
    /// The driver and CUDA versions meet the minimums.
    Sufficient,
    /// A version is below its minimum (or unknown where one is required).
    TooOld,
}

/// What happens to a node that can change its liveness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// Its agent registered, or re-attached: heard from, with the verdict on record.
    Registered(Versions),
    /// A heartbeat from its agent's current credential.
    Heard(Versions),
    /// Its versions were judged again (`readiness::evaluate_node`): the verdict applies only while it is alive;
    /// a silent node hears it when it is back.
    Judged(Versions),
    /// Its agent was silent for the unreachable limit (`--unreachable-after-secs`).
    UnreachableTimeout,
    /// Its agent was silent for the offline limit (`--offline-after-secs`).
    OfflineTimeout,
}

impl Versions {
    /// Both verdicts.
    pub const ALL: [Versions; 2] = [Versions::Sufficient, Versions::TooOld];

    /// The verdict a node's `not_ready_reason` records: none means its versions suffice.
    pub fn of(not_ready_reason: Option<&str>) -> Versions {
        if not_ready_reason.is_some() { Versions::TooOld } else { Versions::Sufficient }
    }

    /// Where a node that is heard from goes with this verdict.
    fn alive(self) -> Liveness {
        match self {
            Versions::Sufficient => Liveness::Ready,
            Versions::TooOld => Liveness::NotReady,
        }
    }
}

impl Event {
    /// Every event.
    pub const ALL: [Event; 8] = [
        Event::Registered(Versions::Sufficient),
        Event::Registered(Versions::TooOld),
        Event::Heard(Versions::Sufficient),
        Event::Heard(Versions::TooOld),
        Event::Judged(Versions::Sufficient),
        Event::Judged(Versions::TooOld),
        Event::UnreachableTimeout,
        Event::OfflineTimeout,
    ];
}

impl Liveness {
    /// Every state.
    pub const ALL: [Liveness; 5] =
        [Liveness::Ready, Liveness::NotReady, Liveness::AwaitingAgent, Liveness::Unreachable, Liveness::Offline];

    /// The column's text for this state.
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::Ready => "ready",
            Liveness::NotReady => "not_ready",
            Liveness::AwaitingAgent => "awaiting_agent",
            Liveness::Unreachable => "unreachable",
            Liveness::Offline => "offline",
        }
    }

    /// Its agent is heard from (within the unreachable limit).
    pub fn is_alive(self) -> bool {
        matches!(self, Liveness::Ready | Liveness::NotReady)
    }

    /// The transition rule, stated once: where a node in this state goes on `event`. Hearing from the agent
    /// (registration, a heartbeat) makes any node alive, `ready` or `not_ready` by its verdict; a new verdict
    /// moves only a live node between those two; silence makes a live node `unreachable`, then a live or
    /// unreachable one `offline`. An operator's node awaiting its agent has no agent to fall silent.
    /// `node_heard_liveness()` (migration 0035) states the hearing half in SQL; a test holds the two together.
    pub fn on(self, event: Event) -> Liveness {
        use Liveness::*;
        match (self, event) {
            (_, Event::Registered(versions) | Event::Heard(versions)) => versions.alive(),
            (Ready | NotReady, Event::Judged(versions)) => versions.alive(),
            (Ready | NotReady, Event::UnreachableTimeout) => Unreachable,
            (Ready | NotReady | Unreachable, Event::OfflineTimeout) => Offline,
            (state, _) => state,
        }
    }

    /// The states `event` moves (to another state): the guard of a statement that applies it to many nodes.
    pub fn moved_by(event: Event) -> Vec<Liveness> {
        Liveness::ALL.into_iter().filter(|state| state.on(event) != *state).collect()
    }
}

/// What the sweeper's statement for a silence timeout sets and guards on: the states the event moves, and the
/// one state it moves them all to.
fn silence(event: Event) -> (Vec<Liveness>, Liveness) {
    let from = Liveness::moved_by(event);
    // With nothing to move, the statement matches no node and its target is moot.
    let to = from.first().map_or(Liveness::Offline, |state| state.on(event));
    debug_assert!(from.iter().all(|state| state.on(event) == to), "a silence timeout has one target");
    (from, to)
}

/// Stamp the control plane's presence: a gap since the last stamp longer than `outage_gap_s` seconds moves
/// `resumed_at` to now. Returns `resumed_at`: since when it has been present without a gap.
pub async fn stamp_presence(conn: &mut PgConnection, outage_gap_s: f64) -> StoreResult<DateTime<Utc>> {
    Ok(sqlx::query_scalar!(
        "INSERT INTO control_plane_presence AS p (singleton, last_seen_at, resumed_at) VALUES (true, now(), now()) \
         ON CONFLICT (singleton) DO UPDATE SET last_seen_at = GREATEST(p.last_seen_at, now()), \
             resumed_at = CASE WHEN p.last_seen_at < now() - make_interval(secs => $1) THEN now() ELSE p.resumed_at END \
         RETURNING resumed_at",
        outage_gap_s
    )
    .fetch_one(conn)
    .await?)
}

/// A node the sweeper just marked unreachable.
pub struct UnreachableNode {
    pub id: Uuid,
    pub hostname: String,
    pub last_heartbeat_at: DateTime<Utc>,
}

/// Apply [`Event::UnreachableTimeout`] to the agent nodes silent for more than `after_s` seconds, silence
/// counted from GREATEST(last heartbeat, `resumed_at`): the live ones become unreachable.
pub async fn mark_unreachable(
    conn: &mut PgConnection,
    after_s: f64,
    resumed_at: DateTime<Utc>,
) -> StoreResult<Vec<UnreachableNode>> {
    let (from, to) = silence(Event::UnreachableTimeout);
    Ok(sqlx::query_as!(
        UnreachableNode,
        r#"UPDATE nodes SET liveness = $3, updated_at = now()
         WHERE agent_managed AND liveness = ANY($4)
             AND GREATEST(last_heartbeat_at, $2) < now() - make_interval(secs => $1)
         RETURNING id, hostname, last_heartbeat_at AS "last_heartbeat_at!""#,
        after_s,
        resumed_at,
        to as Liveness,
        &from as &[Liveness]
    )
    .fetch_all(conn)
    .await?)
}

/// A node the sweeper just marked offline.
pub struct OfflineNode {
    pub id: Uuid,
    pub pool_id: Uuid,
    pub hostname: String,
    pub last_heartbeat_at: DateTime<Utc>,
    /// Its pool holds interruptions (an unreleased liveness hold).
    pub held: bool,
}

/// Apply [`Event::OfflineTimeout`] to the agent nodes silent for more than `after_s` seconds, silence counted
/// from GREATEST(last heartbeat, `resumed_at`): the live and unreachable ones become offline.
pub async fn mark_offline(
    conn: &mut PgConnection,
    after_s: f64,
    resumed_at: DateTime<Utc>,
) -> StoreResult<Vec<OfflineNode>> {
    let (from, to) = silence(Event::OfflineTimeout);
    Ok(sqlx::query_as!(
        OfflineNode,
        r#"UPDATE nodes n SET liveness = $3, updated_at = now()
         WHERE agent_managed AND liveness = ANY($4)
             AND GREATEST(last_heartbeat_at, $2) < now() - make_interval(secs => $1)
         RETURNING id, pool_id, hostname, last_heartbeat_at AS "last_heartbeat_at!",
             EXISTS (SELECT 1 FROM liveness_holds h WHERE h.pool_id = n.pool_id AND h.released_at IS NULL) AS "held!""#,
        after_s,
        resumed_at,
        to as Liveness,
        &from as &[Liveness]
    )
    .fetch_all(conn)
    .await?)
}

/// A liveness hold just opened.
pub struct OpenedHold {
    pub pool_id: Uuid,
    pub silent_nodes: i32,
    pub total_nodes: i32,
}

/// Open a hold for every pool where at least `threshold` of the agent nodes (and at least `min_nodes`) are
/// silent, and clear the holds of pools that recovered (releasing them if no operator did). Returns the holds
/// opened.
pub async fn update_holds(conn: &mut PgConnection, threshold: f64, min_nodes: i32) -> StoreResult<Vec<OpenedHold>> {
    Ok(sqlx::query_as!(
        OpenedHold,
        "WITH silence AS ( \
             SELECT pool_id, count(*) FILTER (WHERE liveness IN ('unreachable', 'offline'))::int AS silent, count(*)::int AS total \
             FROM nodes WHERE agent_managed GROUP BY pool_id), \
         cleared AS ( \
             UPDATE liveness_holds h SET cleared_at = now(), released_at = COALESCE(h.released_at, now()), \
                 released_by = COALESCE(h.released_by, 'system: the pool recovered') \
             WHERE h.cleared_at IS NULL AND NOT EXISTS (SELECT 1 FROM silence s \
                 WHERE s.pool_id = h.pool_id AND s.silent >= $2 AND s.silent >= $1::float8 * s.total) \
             RETURNING h.pool_id) \
         INSERT INTO liveness_holds (id, pool_id, silent_nodes, total_nodes) \
         SELECT gen_random_uuid(), pool_id, silent, total FROM silence \
         WHERE silent >= $2 AND silent >= $1 * total \
         ON CONFLICT (pool_id) WHERE cleared_at IS NULL DO NOTHING \
         RETURNING pool_id, silent_nodes, total_nodes",
        threshold,
        min_nodes
    )
    .fetch_all(conn)
    .await?)
}

/// An active lease that an offline node interrupts, with that node's host and last heartbeat.
pub struct DueInterruption {
    pub id: Uuid,
    pub node_id: Uuid,
    pub hostname: String,
    pub last_heartbeat_at: DateTime<Utc>,
}

/// The active leases on offline agent nodes of pools without an unreleased hold; when several nodes of a lease
/// are offline, the one with the earliest last heartbeat.
pub async fn due_interruptions(conn: &mut PgConnection) -> StoreResult<Vec<DueInterruption>> {
    Ok(sqlx::query_as!(
        DueInterruption,
        r#"SELECT DISTINCT ON (l.id) l.id, n.id AS node_id, n.hostname, n.last_heartbeat_at AS "last_heartbeat_at!"
         FROM nodes n JOIN gpus g ON g.node_id = n.id AND g.held_by IS NOT NULL
         JOIN leases l ON l.id = g.held_by AND l.state = 'active'
         WHERE n.agent_managed AND n.liveness = 'offline'
             AND NOT EXISTS (SELECT 1 FROM liveness_holds h WHERE h.pool_id = n.pool_id AND h.released_at IS NULL)
         ORDER BY l.id, n.last_heartbeat_at"#
    )
    .fetch_all(conn)
    .await?)
}

/// The active leases holding GPUs of a node, by id.
pub async fn active_leases_on(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar!(
        "SELECT DISTINCT l.id FROM leases l JOIN gpus g ON g.held_by = l.id \
         WHERE g.node_id = $1 AND l.state = 'active' ORDER BY l.id",
        node_id
    )
    .fetch_all(conn)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::Liveness::{self, *};
    use super::{Event, Versions};

    /// The whole table, written out: row = state, column = event, in `Event::ALL`'s order (registered
    /// ok / too old, heard ok / too old, judged ok / too old, unreachable timeout, offline timeout).
    const TABLE: [(Liveness, [Liveness; 8]); 5] = [
        (Ready, [Ready, NotReady, Ready, NotReady, Ready, NotReady, Unreachable, Offline]),
        (NotReady, [Ready, NotReady, Ready, NotReady, Ready, NotReady, Unreachable, Offline]),
        (AwaitingAgent, [Ready, NotReady, Ready, NotReady, AwaitingAgent, AwaitingAgent, AwaitingAgent, AwaitingAgent]),
        (Unreachable, [Ready, NotReady, Ready, NotReady, Unreachable, Unreachable, Unreachable, Offline]),
        (Offline, [Ready, NotReady, Ready, NotReady, Offline, Offline, Offline, Offline]),
    ];

    #[test]
    fn every_state_on_every_event_goes_where_the_table_says() {
        assert_eq!(TABLE.map(|(state, _)| state), Liveness::ALL, "the table covers every state once");
        for (state, row) in TABLE {
            for (event, expected) in Event::ALL.into_iter().zip(row) {
                assert_eq!(state.on(event), expected, "{state:?} on {event:?}");
            }
        }
    }

    #[test]
    fn the_sweepers_statements_guard_on_the_states_the_table_moves() {
        assert_eq!(Liveness::moved_by(Event::UnreachableTimeout), [Ready, NotReady]);
        assert_eq!(Liveness::moved_by(Event::OfflineTimeout), [Ready, NotReady, Unreachable]);
        assert_eq!(super::silence(Event::UnreachableTimeout), (vec![Ready, NotReady], Unreachable));
        assert_eq!(super::silence(Event::OfflineTimeout), (vec![Ready, NotReady, Unreachable], Offline));
    }

    #[test]
    fn only_ready_and_not_ready_are_alive_and_the_column_text_is_snake_case() {
        let alive: Vec<Liveness> = Liveness::ALL.into_iter().filter(|s| s.is_alive()).collect();
        assert_eq!(alive, [Ready, NotReady]);
        let names = Liveness::ALL.map(Liveness::as_str);
        assert_eq!(names, ["ready", "not_ready", "awaiting_agent", "unreachable", "offline"]);
        assert_eq!(Versions::of(None), Versions::Sufficient);
        assert_eq!(Versions::of(Some("driver 470 < 535")), Versions::TooOld);
    }
}
