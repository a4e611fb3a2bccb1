-- A lease across pools (issue #37): one lease whose GPUs come from two to four pools, a part per pool.
--
-- The lease row stays what every reader knows: its GPUs (gpu_ids, gpus.held_by), its term, state, period and
-- events, one currency. Its pool_id and placement are the first part's, its gpu_count the sum of its parts'.
-- A lease with parts has one row here per part; a lease without (every lease before this migration, and every
-- single-pool lease after it) has none.
--
-- Each part is billed at its own pool's price: metering keeps each part's exact cost and what was charged for
-- it here, so each part is charged floor(its exact cost), as a single-pool lease is.
CREATE TABLE lease_parts (
    lease_id uuid NOT NULL REFERENCES leases (id) ON DELETE CASCADE,
    part smallint NOT NULL CONSTRAINT lease_parts_part_range CHECK (part BETWEEN 0 AND 3),
    pool_id uuid NOT NULL REFERENCES pools (id),
    gpu_count integer NOT NULL CONSTRAINT lease_parts_gpu_count_range CHECK (gpu_count BETWEEN 1 AND 4096),
    placement text NOT NULL CONSTRAINT lease_parts_placement_valid
        CHECK (placement IN ('pack', 'single_node', 'spread')),
    cost_units numeric(40, 0) NOT NULL DEFAULT 0,
    charged_minor bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (lease_id, part),
    CONSTRAINT lease_parts_one_per_pool UNIQUE (lease_id, pool_id)
);

-- Quotas and queues look a pool's parts up.
CREATE INDEX lease_parts_pool_idx ON lease_parts (pool_id, lease_id);

-- The one statement of "how many GPUs of which pool a lease holds": a single-pool lease is one share (its own
-- row), a lease with parts one share per part. Quotas, balance burn, up-front amounts and metering read it.
CREATE VIEW lease_shares AS
    SELECT l.id AS lease_id, 0::smallint AS part, l.pool_id, l.gpu_count, l.placement, l.cost_units, l.charged_minor
    FROM leases l
    WHERE NOT EXISTS (SELECT 1 FROM lease_parts p WHERE p.lease_id = l.id)
    UNION ALL
    SELECT p.lease_id, p.part, p.pool_id, p.gpu_count, p.placement, p.cost_units, p.charged_minor
    FROM lease_parts p;
