-- gpuplane schema, part 5: job templates and jobs.
--
-- A job runs on its lease's GPUs: one `job_nodes` row per node of the lease, holding the launch spec rendered
-- for that node (argv, environment, config files) and what its agent last reported. The job's own state is an
-- aggregate of its nodes' states, recomputed in the transaction that changes a node.
--
-- Built-in templates live in code (`jobs::templates`); only operators' custom templates are stored. A custom
-- template is versioned: creating one under an existing name adds version n+1, and jobs use the latest unless
-- they name a version.

CREATE TABLE job_templates (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    version     integer NOT NULL,
    description text NOT NULL DEFAULT '',
    -- argv template: a JSON array of strings with `{placeholder}`s.
    argv        jsonb NOT NULL,
    -- typed parameters: [{"name", "type", "default", "values", "description"}].
    parameters  jsonb NOT NULL,
    created_by  uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_templates_name_version_unique UNIQUE (name, version),
    CONSTRAINT job_templates_name_format CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    CONSTRAINT job_templates_version_positive CHECK (version >= 1),
    CONSTRAINT job_templates_argv_array CHECK (jsonb_typeof(argv) = 'array' AND jsonb_array_length(argv) >= 1),
    CONSTRAINT job_templates_parameters_array CHECK (jsonb_typeof(parameters) = 'array')
);

CREATE TABLE jobs (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants (id),
    lease_id         uuid NOT NULL REFERENCES leases (id),
    template         text NOT NULL,
    -- NULL for built-in templates.
    template_version integer,
    state            text NOT NULL DEFAULT 'pending',
    cancel_requested boolean NOT NULL DEFAULT false,
    -- Why it failed or was cancelled.
    reason           text,
    -- The request as accepted, and the planner's plan it was rendered from (NULL without a model).
    request          jsonb NOT NULL,
    plan             jsonb,
    created_by       uuid,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    CONSTRAINT jobs_state_valid CHECK (state IN ('pending', 'assigned', 'running', 'succeeded', 'failed', 'cancelled')),
    CONSTRAINT jobs_finished_has_time CHECK (state IN ('pending', 'assigned', 'running') OR finished_at IS NOT NULL)
);
CREATE INDEX jobs_lease_idx ON jobs (lease_id, id);
CREATE INDEX jobs_tenant_idx ON jobs (tenant_id, id);
-- Ending a lease finds its unfinished jobs.
CREATE INDEX jobs_lease_open_idx ON jobs (lease_id) WHERE state IN ('pending', 'assigned', 'running');

CREATE TABLE job_nodes (
    id           uuid PRIMARY KEY,
    job_id       uuid NOT NULL REFERENCES jobs (id),
    node_id      uuid NOT NULL REFERENCES nodes (id),
    node_rank    integer NOT NULL,
    -- The rendered launch spec: {"argv": [...], "env": {...}, "files": [{"path", "content"}], "image"}.
    spec         jsonb NOT NULL,
    state        text NOT NULL DEFAULT 'pending',
    -- What the service wants: `run`, or `cancel` (the agent stops the process and reports `cancelled`).
    desired      text NOT NULL DEFAULT 'run',
    exit_code    integer,
    -- The last lines of output (at most 50, each at most 1000 characters).
    output_tail  jsonb NOT NULL DEFAULT '[]',
    reason       text,
    -- Every state change: [{"state", "at", "reason"}].
    history      jsonb NOT NULL DEFAULT '[]',
    started_at   timestamptz,
    finished_at  timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_nodes_rank_unique UNIQUE (job_id, node_rank),
    CONSTRAINT job_nodes_state_valid CHECK (state IN ('pending', 'assigned', 'running', 'succeeded', 'failed', 'cancelled')),
    CONSTRAINT job_nodes_desired_valid CHECK (desired IN ('run', 'cancel'))
);
CREATE INDEX job_nodes_job_idx ON job_nodes (job_id, node_rank);
-- Assignments of a node, and the heartbeat's "anything to fetch?" check.
CREATE INDEX job_nodes_node_open_idx ON job_nodes (node_id) WHERE state IN ('pending', 'assigned', 'running');
