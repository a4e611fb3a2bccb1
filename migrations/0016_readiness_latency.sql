-- gpuplane schema, part 16: driver/CUDA readiness and communication latency between a lease's nodes.
--
-- Readiness: a node whose agent reports an NVIDIA driver or CUDA version below the minimum (the service's
-- flags, or its pool's override) is `not_ready`, with the reason. Allocation takes only liveness = 'ready'
-- nodes, so such a node is never allocated; the reason clears, and the node turns ready, when its agent
-- reports a sufficient version. The comparison lives in src/inventory/readiness.rs, not here.

ALTER TABLE nodes DROP CONSTRAINT nodes_liveness_valid;
ALTER TABLE nodes ADD CONSTRAINT nodes_liveness_valid
    CHECK (liveness IN ('ready', 'not_ready', 'unreachable', 'offline'));
ALTER TABLE nodes ADD COLUMN not_ready_reason text;
-- A node that is not ready says why; a ready one has no reason (unreachable/offline keep the reason they had).
ALTER TABLE nodes ADD CONSTRAINT nodes_not_ready_has_reason
    CHECK (liveness <> 'not_ready' OR not_ready_reason IS NOT NULL);
ALTER TABLE nodes ADD CONSTRAINT nodes_ready_has_no_reason
    CHECK (liveness <> 'ready' OR not_ready_reason IS NULL);
-- The UDP port of the agent's echo listener, at the node's address (latency probes between a lease's nodes).
ALTER TABLE nodes ADD COLUMN echo_port integer;
ALTER TABLE nodes ADD CONSTRAINT nodes_echo_port_valid CHECK (echo_port IS NULL OR echo_port BETWEEN 1 AND 65535);

-- Per-pool overrides of the service-wide minimums (NULL: the service's flag).
ALTER TABLE pools ADD COLUMN min_driver_version text;
ALTER TABLE pools ADD COLUMN min_cuda_version text;
ALTER TABLE pools ADD CONSTRAINT pools_min_driver_version_format
    CHECK (min_driver_version IS NULL OR min_driver_version ~ '^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$');
ALTER TABLE pools ADD CONSTRAINT pools_min_cuda_version_format
    CHECK (min_cuda_version IS NULL OR min_cuda_version ~ '^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$');

-- The latest round-trip times one node of a lease measured to another (its peer), in microseconds.
-- One row per (lease, node, peer), overwritten by each report; gone with the lease.
CREATE TABLE lease_latency (
    lease_id     uuid NOT NULL REFERENCES leases (id) ON DELETE CASCADE,
    node_id      uuid NOT NULL REFERENCES nodes (id),
    peer_node_id uuid NOT NULL REFERENCES nodes (id),
    p50_us       integer NOT NULL,
    p99_us       integer NOT NULL,
    probes       integer NOT NULL,
    lost         integer NOT NULL DEFAULT 0,
    measured_at  timestamptz NOT NULL,
    PRIMARY KEY (lease_id, node_id, peer_node_id),
    CONSTRAINT lease_latency_not_self CHECK (node_id <> peer_node_id),
    CONSTRAINT lease_latency_ordered CHECK (p50_us >= 0 AND p99_us >= p50_us),
    CONSTRAINT lease_latency_counts CHECK (probes > 0 AND lost >= 0)
);

-- Alerts raised about a lease, de-duplicated: at most one open (uncleared) alert per lease and condition.
CREATE TABLE lease_alerts (
    id         uuid PRIMARY KEY,
    lease_id   uuid NOT NULL REFERENCES leases (id) ON DELETE CASCADE,
    condition  text NOT NULL,
    detail     jsonb NOT NULL,
    raised_at  timestamptz NOT NULL DEFAULT now(),
    cleared_at timestamptz,
    CONSTRAINT lease_alerts_condition_format CHECK (condition ~ '^[a-z_]+(\.[a-z_]+)*$')
);
CREATE UNIQUE INDEX lease_alerts_one_open ON lease_alerts (lease_id, condition) WHERE cleared_at IS NULL;
