-- Jobs that survive a lost node (docs/jobs.md, "Recovery"): a restart policy per job, the cause each failed part
-- failed of, and restarts as generations of the job, with what the failure and the healing were.

-- The job's restart policy as the service resolved it at create (`jobs::recovery::RestartPolicy`, validated
-- there), and how many restarts it has had.
ALTER TABLE jobs
    ADD COLUMN restart_policy jsonb NOT NULL DEFAULT '{"max_restarts": 0}',
    ADD COLUMN restarts integer NOT NULL DEFAULT 0 CONSTRAINT jobs_restarts_range CHECK (restarts >= 0);

-- Why a part failed, where the service detected it from outside the job (an agent's own report of a failed
-- process leaves it NULL: the process died). A stalled part keeps running until its agent stops it.
ALTER TABLE job_nodes
    ADD COLUMN failure_cause text CONSTRAINT job_nodes_failure_cause_valid
        CHECK (failure_cause IN ('node_lost', 'gpu_failed', 'process_died', 'stalled'));

-- A restart is a generation with a cause: pending (plan NULL, no specs) until every part of the one that failed
-- has ended, its backoff has passed and every node of the lease is heard from; then planned for the GPUs the
-- lease holds and started.
ALTER TABLE job_generations
    ADD COLUMN cause text CONSTRAINT job_generations_cause_valid
        CHECK (cause IN ('node_lost', 'gpu_failed', 'process_died', 'stalled')),
    ADD COLUMN failed_node_id uuid REFERENCES nodes (id),
    ADD COLUMN failed_at timestamptz,
    ADD COLUMN not_before timestamptz,
    -- What happened to the lease: {"removed_node_id", "removed_gpus", "replacement_node_id", "added_gpus"}.
    ADD COLUMN healing jsonb,
    -- The last step measured before the failure, and once the restart's first step is in: the step it resumed
    -- from (its first step - 1) and the steps run again.
    ADD COLUMN last_step bigint,
    ADD COLUMN resumed_from_step bigint,
    ADD COLUMN steps_lost bigint,
    ADD COLUMN first_step_at timestamptz,
    ADD CONSTRAINT job_generations_restart_has_cause CHECK (cause IS NOT NULL OR (failed_at IS NULL AND not_before IS NULL));

-- The restart worker's scan: pending restarts only.
CREATE INDEX job_generations_pending_restart_idx ON job_generations (not_before) WHERE state = 'pending' AND cause IS NOT NULL;
