-- gpuplane schema, part 12: interactive access to a lease.
--
-- Tenants register SSH public keys; a lease's environment is an SSH server in the lease's sandbox on each of
-- its nodes (the same sandbox as its jobs, kept open), accepting the tenant's current keys only.

CREATE TABLE ssh_keys (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    name        text NOT NULL,
    -- `<type> <base64 blob>`, as validated: no comment, no options.
    public_key  text NOT NULL,
    -- OpenSSH's `SHA256:<unpadded base64 of the blob's SHA-256>`.
    fingerprint text NOT NULL,
    created_by  uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ssh_keys_fingerprint_unique UNIQUE (tenant_id, fingerprint)
);

-- At most one environment per lease. `requested`: the lease's nodes run it while the lease is active;
-- `stopped`: the tenant stopped it (a new request starts it again).
CREATE TABLE lease_environments (
    lease_id   uuid PRIMARY KEY REFERENCES leases (id),
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    image      text,
    state      text NOT NULL DEFAULT 'requested',
    created_at timestamptz NOT NULL DEFAULT now(),
    stopped_at timestamptz,
    CONSTRAINT lease_environments_state_valid CHECK (state IN ('requested', 'stopped'))
);

-- What each node's agent last reported of the environment.
CREATE TABLE environment_nodes (
    lease_id              uuid NOT NULL REFERENCES lease_environments (lease_id),
    node_id               uuid NOT NULL REFERENCES nodes (id),
    state                 text NOT NULL,
    port                  integer,
    host_key_fingerprints jsonb NOT NULL DEFAULT '[]',
    reason                text,
    updated_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (lease_id, node_id),
    CONSTRAINT environment_nodes_state_valid CHECK (state IN ('starting', 'ready', 'failed', 'stopped')),
    CONSTRAINT environment_nodes_port_valid CHECK (port IS NULL OR port BETWEEN 1 AND 65535)
);
