-- Optimizer steps the gpuplane runtime measured in a job, as the job's agents report them with their heartbeats.
-- A retried heartbeat reports the same steps again: the primary key makes the second insert a no-op.
CREATE TABLE job_steps (
    job_id            uuid NOT NULL REFERENCES jobs (id),
    step              bigint NOT NULL,
    -- The assignment (and so the node) whose process measured it.
    job_node_id       uuid NOT NULL REFERENCES job_nodes (id),
    step_time_s       double precision NOT NULL,
    tokens            bigint NOT NULL,
    loss              double precision NOT NULL,
    peak_memory_bytes bigint NOT NULL,
    at                timestamptz NOT NULL,
    PRIMARY KEY (job_id, step),
    CONSTRAINT job_steps_step_range CHECK (step BETWEEN 1 AND 1000000000),
    CONSTRAINT job_steps_time_range CHECK (step_time_s >= 0 AND step_time_s <= 86400),
    CONSTRAINT job_steps_counts CHECK (tokens >= 0 AND peak_memory_bytes >= 0)
);
