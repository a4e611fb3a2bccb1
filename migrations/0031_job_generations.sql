-- gpuplane schema, part 31: a running job re-planned; a notice before a foreseeable stop.
--
-- A job keeps its id across plans. Each plan it runs is a generation: generation 1 is the plan it was created
-- with, each replan adds the next. A replan is a pending generation (its plan and every node's launch spec,
-- rendered when it was asked for); the running generation's processes get a stop notice, checkpoint and exit,
-- and when every one of them has ended the pending generation's parts are inserted as new job_nodes (new
-- assignment ids) and start, resuming from the checkpoint.
--
--   * job_generations_one_pending: at most one pending replan per job; a second one racing the first fails on
--     this index (409 replan_in_progress), whichever replica took it.
--   * jobs.generation names the generation its `job_nodes` rows of that number run (the job's state is that
--     generation's); older rows stay as history.
--   * job_nodes.notice_*: the stop notice the node's agent passes to the process (a file it polls, a signal),
--     with the seconds it has before it is stopped. Set once (a notice is never taken back or moved later).
--   * jobs.retune_*: what the service does with the job's measurements (off, suggest, auto above a gain).
--   * jobs.stop_grace_s: how long a notice gives the job; bounded by the service's maximum when set.
--   * job_nodes_rank_unique: one rank per node within a generation (it was per job).

ALTER TABLE jobs
    ADD COLUMN generation integer NOT NULL DEFAULT 1,
    ADD COLUMN retune text NOT NULL DEFAULT 'off',
    ADD COLUMN retune_min_gain_pct integer NOT NULL DEFAULT 20,
    ADD COLUMN stop_grace_s integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT jobs_generation_positive CHECK (generation >= 1),
    ADD CONSTRAINT jobs_retune_valid CHECK (retune IN ('off', 'suggest', 'auto')),
    ADD CONSTRAINT jobs_retune_gain_range CHECK (retune_min_gain_pct BETWEEN 1 AND 90),
    ADD CONSTRAINT jobs_stop_grace_range CHECK (stop_grace_s BETWEEN 0 AND 86400);

ALTER TABLE job_nodes
    ADD COLUMN generation integer NOT NULL DEFAULT 1,
    ADD COLUMN notice_reason text,
    ADD COLUMN notice_grace_s integer,
    ADD COLUMN notice_at timestamptz,
    ADD CONSTRAINT job_nodes_notice_whole CHECK ((notice_reason IS NULL) = (notice_at IS NULL)
        AND (notice_reason IS NULL) = (notice_grace_s IS NULL)),
    ADD CONSTRAINT job_nodes_notice_grace_range CHECK (notice_grace_s BETWEEN 0 AND 86400),
    ADD CONSTRAINT job_nodes_notice_reason_length CHECK (length(notice_reason) <= 500),
    -- When the part was created (a later generation's parts are created long after the job): the bound on an
    -- agent fetching it counts from here.
    ADD COLUMN created_at timestamptz,
    -- One rank per node in each generation.
    DROP CONSTRAINT job_nodes_rank_unique,
    ADD CONSTRAINT job_nodes_rank_unique UNIQUE (job_id, generation, node_rank);
UPDATE job_nodes jn SET created_at = j.created_at FROM jobs j WHERE j.id = jn.job_id;
ALTER TABLE job_nodes ALTER COLUMN created_at SET NOT NULL, ALTER COLUMN created_at SET DEFAULT now();

CREATE TABLE job_generations (
    job_id       uuid NOT NULL REFERENCES jobs (id),
    generation   integer NOT NULL,
    -- pending: asked for, waiting for the running one to stop; running: its parts run (or ran: the job's
    -- current generation stays `running` after the job ended); ended: a later generation replaced it;
    -- abandoned: the replan did not happen (the job ended first, or its old processes did not stop cleanly).
    state        text NOT NULL,
    plan         jsonb,
    -- Pending: [{"node_id": ..., "spec": {...}}] in rank order, inserted as job_nodes when it starts.
    specs        jsonb NOT NULL DEFAULT '[]',
    reason       text NOT NULL,
    -- The API key that asked for it; NULL when the service did (created with the job, or retune `auto`).
    requested_by uuid,
    -- What the generation measured when it ended, and how the planner was corrected for the next one.
    measured     jsonb,
    correction   jsonb,
    -- A suggestion (retune `suggest`: the reason, the correction and the split to pin) is announced once per
    -- generation, and shown as an insight while the generation runs.
    suggested_at timestamptz,
    suggestion   jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    ended_at     timestamptz,
    PRIMARY KEY (job_id, generation),
    CONSTRAINT job_generations_state_valid CHECK (state IN ('pending', 'running', 'ended', 'abandoned')),
    CONSTRAINT job_generations_positive CHECK (generation >= 1),
    CONSTRAINT job_generations_reason_length CHECK (length(reason) <= 1000)
);
CREATE UNIQUE INDEX job_generations_one_pending ON job_generations (job_id) WHERE state = 'pending';

-- Every existing job ran one generation: its plan, as created.
INSERT INTO job_generations (job_id, generation, state, plan, reason, requested_by, created_at, started_at)
SELECT id, 1, 'running', plan, 'created', created_by, created_at, started_at FROM jobs;
