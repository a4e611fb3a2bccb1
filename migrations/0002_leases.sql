-- gpuplane schema, part 2: leases and allocation.
--
-- Invariants the database enforces, whatever the code does:
--   * A GPU is in at most one current allocation: lease_gpus_one_current_holder (partial unique index).
--   * A node's free_gpus counter never goes below zero or above its GPU count (CHECK constraint).
--   * An active lease has its start and end; an ended lease has its end time and reason.
--
-- Allocation takes row locks on the nodes it draws from (SELECT ... FOR UPDATE), so several gpuplane
-- processes on one database serialize per node, not globally. free_gpus is a counter kept in the same
-- transaction as lease_gpus, so choosing a node is an index lookup whatever the inventory size.

-- gpu_count is fixed when the node is created (its GPUs are registered with it); kept on the row so that
-- capacity summaries never count GPU rows.
ALTER TABLE nodes ADD COLUMN gpu_count integer NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN free_gpus integer NOT NULL DEFAULT 0;
UPDATE nodes n SET gpu_count = (SELECT count(*) FROM gpus g WHERE g.node_id = n.id),
                   free_gpus = (SELECT count(*) FROM gpus g WHERE g.node_id = n.id AND g.healthy);
ALTER TABLE nodes ADD CONSTRAINT nodes_free_gpus_range CHECK (free_gpus BETWEEN 0 AND gpu_count);
-- Best fit: the node with the smallest sufficient free block, among allocatable nodes of a pool.
CREATE INDEX nodes_allocatable_free_idx ON nodes (pool_id, free_gpus, id)
    WHERE admin_state = 'active' AND liveness = 'ready';

CREATE TABLE leases (
    id             uuid PRIMARY KEY,
    tenant_id      uuid NOT NULL REFERENCES tenants (id),
    pool_id        uuid NOT NULL REFERENCES pools (id),
    gpu_count      integer NOT NULL,
    placement      text NOT NULL,
    term           text NOT NULL,
    duration_hours integer,
    months         integer,
    state          text NOT NULL,
    starts_at      timestamptz,
    ends_at        timestamptz,
    ended_at       timestamptz,
    end_reason     text,
    generation     bigint NOT NULL DEFAULT 1,
    created_by     uuid,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT leases_gpu_count_range CHECK (gpu_count BETWEEN 1 AND 4096),
    CONSTRAINT leases_placement_valid CHECK (placement IN ('pack', 'single_node', 'spread')),
    CONSTRAINT leases_term_valid CHECK (
        (term = 'hourly' AND duration_hours BETWEEN 1 AND 8784 AND months IS NULL)
        OR (term = 'monthly' AND months BETWEEN 1 AND 36 AND duration_hours IS NULL)),
    CONSTRAINT leases_state_valid CHECK (state IN ('queued', 'active', 'released', 'expired', 'terminated', 'interrupted')),
    CONSTRAINT leases_active_has_period CHECK (state <> 'active' OR (starts_at IS NOT NULL AND ends_at IS NOT NULL)),
    CONSTRAINT leases_ended_has_end CHECK (state IN ('queued', 'active') OR ended_at IS NOT NULL)
);
CREATE INDEX leases_tenant_idx ON leases (tenant_id, id);
CREATE INDEX leases_tenant_live_idx ON leases (tenant_id, pool_id) WHERE state IN ('queued', 'active');
CREATE INDEX leases_active_ends_idx ON leases (ends_at) WHERE state = 'active';
CREATE INDEX leases_queued_idx ON leases (pool_id, id) WHERE state = 'queued';

-- Which GPUs a lease holds (released_at NULL) or held. Rows are kept after release: they are the lease's history.
CREATE TABLE lease_gpus (
    lease_id    uuid NOT NULL REFERENCES leases (id),
    gpu_id      uuid NOT NULL REFERENCES gpus (id),
    node_id     uuid NOT NULL REFERENCES nodes (id),
    released_at timestamptz,
    PRIMARY KEY (lease_id, gpu_id)
);
CREATE UNIQUE INDEX lease_gpus_one_current_holder ON lease_gpus (gpu_id) WHERE released_at IS NULL;
CREATE INDEX lease_gpus_node_current_idx ON lease_gpus (node_id) WHERE released_at IS NULL;

-- Every transition of a lease: who, when, what, why.
CREATE TABLE lease_events (
    id         uuid PRIMARY KEY,
    lease_id   uuid NOT NULL REFERENCES leases (id),
    at         timestamptz NOT NULL DEFAULT now(),
    kind       text NOT NULL,
    from_state text,
    to_state   text,
    actor      text NOT NULL,
    reason     text,
    detail     jsonb
);
CREATE INDEX lease_events_lease_idx ON lease_events (lease_id, id);

-- Idempotency-Key records (Stripe semantics): the first result for a key is replayed for 24 h.
CREATE TABLE idempotency_keys (
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    scope         text NOT NULL,
    key           text NOT NULL,
    request_hash  bytea NOT NULL,
    status_code   integer NOT NULL,
    response_body jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, scope, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
