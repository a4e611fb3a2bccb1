-- gpuplane schema, part 3: node agents, telemetry, GPU health.
--
-- Agents join a pool with a join token (operator-minted, expiring, limited uses; stored hashed). A node
-- registered by an agent is `agent_managed`: its liveness follows its heartbeats. The agent's credential
-- is a JWT naming the node and `agent_generation`; re-registering bumps the generation, which revokes
-- the previous credential.

CREATE TABLE join_tokens (
    id          uuid PRIMARY KEY,
    pool_id     uuid NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    prefix      text NOT NULL,
    secret_hash bytea NOT NULL,
    max_uses    integer NOT NULL,
    uses        integer NOT NULL DEFAULT 0,
    expires_at  timestamptz NOT NULL,
    created_by  uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    CONSTRAINT join_tokens_secret_hash_unique UNIQUE (secret_hash),
    CONSTRAINT join_tokens_uses_range CHECK (max_uses BETWEEN 1 AND 100000 AND uses BETWEEN 0 AND max_uses)
);
CREATE INDEX join_tokens_pool_idx ON join_tokens (pool_id, id);

ALTER TABLE nodes ADD COLUMN agent_managed boolean NOT NULL DEFAULT false;
ALTER TABLE nodes ADD COLUMN agent_generation bigint NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN facts jsonb;
-- No index on last_heartbeat_at on purpose: every heartbeat updates it, and an index on it would turn each
-- of those updates from an in-place (HOT) update into one that writes every index of the table. The
-- liveness sweeper's scan of the nodes table is cheap next to that (milliseconds at 10,000 nodes).

ALTER TABLE gpus ADD COLUMN name text;
ALTER TABLE gpus ADD COLUMN memory_bytes bigint;
ALTER TABLE gpus ADD COLUMN unhealthy_reason text;
ALTER TABLE gpus ADD COLUMN unhealthy_since timestamptz;

-- Telemetry: one row per GPU per sample, named after the DCGM fields. The primary key makes a resent
-- sample (an agent retrying after an ambiguous failure) a no-op. Rows older than the retention are
-- deleted by the sweeper. No foreign keys: ingest resolves GPU ids from the node's own GPU rows, and a
-- per-row FK check would be most of the cost of the hottest insert in the system.
CREATE TABLE gpu_samples (
    gpu_id                uuid NOT NULL,
    at                    timestamptz NOT NULL,
    node_id               uuid NOT NULL,
    gpu_util              real NOT NULL,
    mem_copy_util         real NOT NULL,
    fb_used_mib           integer NOT NULL,
    fb_free_mib           integer NOT NULL,
    power_w               real NOT NULL,
    energy_mj             bigint NOT NULL,
    gpu_temp_c            real NOT NULL,
    mem_temp_c            real,
    sm_clock_mhz          integer NOT NULL,
    nvlink_bandwidth_gbps real,
    xid_count             integer NOT NULL DEFAULT 0,
    xid_codes             integer[],
    PRIMARY KEY (gpu_id, at)
);
CREATE INDEX gpu_samples_node_at_idx ON gpu_samples (node_id, at);
CREATE INDEX gpu_samples_at_idx ON gpu_samples (at);
