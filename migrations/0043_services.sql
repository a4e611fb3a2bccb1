-- Services: jobs that serve on a port, reached through the gateway (docs/serving.md).
-- A service is one job's; its replicas are the job's parts that run and answer their health path.
CREATE TABLE services (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants(id),
    job_id uuid NOT NULL UNIQUE REFERENCES jobs(id),
    port integer NOT NULL CONSTRAINT services_port_range CHECK (port BETWEEN 1 AND 65535),
    health_path text NOT NULL CONSTRAINT services_health_path_valid
        CHECK (health_path LIKE '/%' AND length(health_path) <= 200),
    protocol text NOT NULL CONSTRAINT services_protocol_valid CHECK (protocol IN ('http', 'openai')),
    -- Callable without a key (rate-limited per client address).
    public boolean NOT NULL DEFAULT false,
    -- Requests per minute per key (per client address when public); NULL: unlimited.
    rate_limit_per_minute integer CONSTRAINT services_rate_limit_range
        CHECK (rate_limit_per_minute BETWEEN 1 AND 1000000),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX services_tenant_idx ON services (tenant_id, created_at);

-- Keys the tenant gives the service's callers. Only the SHA-256 of the secret is kept; a revoked key stays
-- listed (with when) and never works again.
CREATE TABLE service_keys (
    id uuid PRIMARY KEY,
    service_id uuid NOT NULL REFERENCES services(id),
    name text NOT NULL CONSTRAINT service_keys_name_length CHECK (length(name) BETWEEN 1 AND 100),
    prefix text NOT NULL,
    secret_sha256 bytea NOT NULL CONSTRAINT service_keys_secret_unique UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX service_keys_service_idx ON service_keys (service_id, created_at);

-- Where each serving part's forwarder listens and whether its server answered its last probe, as its node's
-- agent reported (a part's own node only). Gone with the part's end: the gateway reads running parts only.
CREATE TABLE service_replicas (
    job_node_id uuid PRIMARY KEY REFERENCES job_nodes(id),
    service_id uuid NOT NULL REFERENCES services(id),
    port integer NOT NULL CONSTRAINT service_replicas_port_range CHECK (port BETWEEN 1 AND 65535),
    ready boolean NOT NULL,
    reported_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX service_replicas_service_idx ON service_replicas (service_id);

-- A service's ready replicas: its parts that run, are not being stopped (no cancel, no stop notice) and answered
-- their last probe, with where their forwarder listens. The one definition the gateway and the API read.
CREATE VIEW service_ready_replicas AS
SELECT sr.service_id, sr.job_node_id, n.address, sr.port
FROM service_replicas sr
JOIN job_nodes jn ON jn.id = sr.job_node_id
JOIN nodes n ON n.id = jn.node_id
WHERE sr.ready AND jn.state = 'running' AND jn.desired = 'run' AND jn.notice_at IS NULL;
