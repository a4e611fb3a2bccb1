-- A service's replicas outlive their processes (docs/serving.md, "Replicas"): a replica that fails while the others
-- serve runs again on its node as the next attempt of its part (the failed one kept, `replaced_by` the next), after
-- its backoff; and a replan of a service rolls over its nodes one at a time, so some replicas always serve.

ALTER TABLE job_nodes
    -- The attempt of this rank in its generation (1 for every part but a service's restarted replicas).
    ADD COLUMN attempt integer NOT NULL DEFAULT 1 CONSTRAINT job_nodes_attempt_positive CHECK (attempt >= 1),
    -- The attempt that took this failed one's place.
    ADD COLUMN replaced_by uuid REFERENCES job_nodes (id),
    -- When this failed replica runs again (its backoff), set when its failure is seen and its job's policy allows.
    ADD COLUMN restart_at timestamptz,
    -- When its server first answered its health probe (a replica that became ready and failed later starts its
    -- backoff over).
    ADD COLUMN ready_at timestamptz,
    DROP CONSTRAINT job_nodes_rank_unique,
    ADD CONSTRAINT job_nodes_rank_unique UNIQUE (job_id, generation, node_rank, attempt),
    ADD CONSTRAINT job_nodes_restart_when_failed CHECK (restart_at IS NULL OR state = 'failed');

-- The recovery worker's scan: replicas whose restart is due.
CREATE INDEX job_nodes_replica_restart_idx ON job_nodes (restart_at) WHERE restart_at IS NOT NULL AND replaced_by IS NULL;
