-- Liveness that survives outages of the control plane itself (see src/agents/liveness.rs).

-- Control-plane presence: every replica's liveness sweeper stamps this one row each second. A gap in the
-- stamps longer than the heartbeat interval means no replica was there to hear heartbeats; `resumed_at` is
-- when presence came back, and a node's silence is counted from GREATEST(last_heartbeat_at, resumed_at).
CREATE TABLE control_plane_presence (
    singleton    boolean PRIMARY KEY DEFAULT true,
    last_seen_at timestamptz NOT NULL,
    resumed_at   timestamptz NOT NULL,
    CONSTRAINT control_plane_presence_one_row CHECK (singleton)
);

-- A fleet-level liveness hold: too many of a pool's agent nodes went silent at once, which is more likely
-- the network or the control plane than the hosts, so their leases are not interrupted while it is open.
-- Open while released_at IS NULL; released by an operator or, when the pool recovers, by the system
-- (cleared_at set). At most one uncleared hold per pool; a released one that is not cleared yet keeps a new
-- one from opening until the pool has recovered.
CREATE TABLE liveness_holds (
    id           uuid PRIMARY KEY,
    pool_id      uuid NOT NULL REFERENCES pools (id),
    opened_at    timestamptz NOT NULL DEFAULT now(),
    silent_nodes integer NOT NULL,
    total_nodes  integer NOT NULL,
    released_at  timestamptz,
    released_by  text,
    cleared_at   timestamptz,
    CONSTRAINT liveness_holds_counts_valid CHECK (silent_nodes > 0 AND total_nodes >= silent_nodes),
    CONSTRAINT liveness_holds_release_complete CHECK ((released_at IS NULL) = (released_by IS NULL)),
    CONSTRAINT liveness_holds_cleared_after_release CHECK (cleared_at IS NULL OR released_at IS NOT NULL)
);
CREATE UNIQUE INDEX liveness_holds_one_uncleared_per_pool ON liveness_holds (pool_id) WHERE cleared_at IS NULL;
