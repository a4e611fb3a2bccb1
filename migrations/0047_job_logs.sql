-- Jobs' full output (docs/logs.md): every line each part's process printed, shipped by its node's agent and kept
-- with the job, numbered per job in the order the service stored them. A job's stored text is capped; past the
-- cap, its oldest lines are deleted.

CREATE TABLE job_logs (
    job_id uuid PRIMARY KEY REFERENCES jobs (id),
    -- The number the next stored line gets (lines are numbered from 1, per job).
    next_line bigint NOT NULL DEFAULT 1 CONSTRAINT job_logs_next_line_positive CHECK (next_line >= 1),
    -- The oldest line still stored: those before it went to the cap.
    first_line bigint NOT NULL DEFAULT 1 CONSTRAINT job_logs_first_line_bounded CHECK (first_line BETWEEN 1 AND next_line),
    -- Bytes of text stored now.
    bytes bigint NOT NULL DEFAULT 0 CONSTRAINT job_logs_bytes_nonnegative CHECK (bytes >= 0),
    -- Lines the agents dropped before they could ship them (their buffer's bound, during a long outage).
    lost_lines bigint NOT NULL DEFAULT 0 CONSTRAINT job_logs_lost_nonnegative CHECK (lost_lines >= 0)
);

CREATE TABLE job_log_lines (
    job_id uuid NOT NULL REFERENCES job_logs (job_id),
    line bigint NOT NULL,
    job_node_id uuid NOT NULL REFERENCES job_nodes (id),
    node_rank integer NOT NULL,
    -- The global rank that printed it, where the launcher said.
    rank integer,
    -- 'o' stdout, 'e' stderr.
    stream text NOT NULL CONSTRAINT job_log_lines_stream_known CHECK (stream IN ('o', 'e')),
    at timestamptz NOT NULL,
    text text NOT NULL,
    PRIMARY KEY (job_id, line)
);

ALTER TABLE job_nodes
    -- The highest line number (`seq`) of this part's output the service holds: a line sent again is skipped.
    ADD COLUMN log_seq bigint NOT NULL DEFAULT 0,
    -- Its process ended and the last of its output arrived.
    ADD COLUMN log_closed boolean NOT NULL DEFAULT false;
