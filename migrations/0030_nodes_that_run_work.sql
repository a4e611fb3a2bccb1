-- gpuplane schema, part 30: only a node that can run work is allocated, and a node says what it can run.
--
-- A node added by an operator (`POST /v1/admin/nodes`: an address, no agent) used to be `ready` at once: it took
-- leases, their jobs stayed `pending` for ever, and the tenant paid for GPUs nothing ran on. Now a node is
-- allocatable only when an agent runs on it and has reported (registration is its first report), or when the
-- operator created it as `external` (no agent: the platform runs no jobs there and cannot prove its liveness;
-- its leases say so and are billed start to end on the operator's word).
--
--   * liveness 'awaiting_agent': an operator's node that no agent has registered yet. It takes no leases; an
--     agent registering its host name (after `allow-reregistration`) makes it an agent node.
--   * nodes_ready_runs_work: `ready` needs an agent or the external mark.
--   * nodes_unverified_hold_nothing: a node with neither holds no GPU (its free counter is its GPU count, and
--     every allocation lowers the counter of each node it takes from under the node's lock). This is the rule
--     itself, stated where no code path can step around it: even an allocation that forgot the liveness filter
--     fails on it.
--   * external and agent_managed exclude each other: an agent registering an external node's host name turns
--     it into an agent node.
--
-- Existing nodes: an operator's node that holds GPUs now (its free counter below its GPU count) is marked external (its leases keep running and now
-- say so); one that holds none waits for its agent.
--
-- launchers: what the node's agent found on the host it runs jobs on (`{"torchrun": "2.5.1", "vllm": null}`: a
-- name per launcher found, with its version when it tells one). NULL: never reported (an agent older than this
-- part, or no agent). Validated by the API (src/agents/launchers.rs); bounded here too.
ALTER TABLE nodes ADD COLUMN external boolean NOT NULL DEFAULT false;
ALTER TABLE nodes ADD COLUMN launchers jsonb;

-- A node is not ready until something proves it can run work.
ALTER TABLE nodes ALTER COLUMN liveness SET DEFAULT 'awaiting_agent';
ALTER TABLE nodes DROP CONSTRAINT nodes_liveness_valid;
ALTER TABLE nodes ADD CONSTRAINT nodes_liveness_valid
    CHECK (liveness IN ('ready', 'not_ready', 'awaiting_agent', 'unreachable', 'offline'));

UPDATE nodes SET external = true WHERE NOT agent_managed AND free_gpus <> gpu_count;
UPDATE nodes SET liveness = 'awaiting_agent', not_ready_reason = NULL WHERE NOT agent_managed AND NOT external;

ALTER TABLE nodes ADD CONSTRAINT nodes_external_has_no_agent CHECK (NOT (external AND agent_managed));
ALTER TABLE nodes ADD CONSTRAINT nodes_ready_runs_work CHECK (liveness <> 'ready' OR agent_managed OR external);
ALTER TABLE nodes ADD CONSTRAINT nodes_unverified_hold_nothing CHECK (agent_managed OR external OR free_gpus = gpu_count);
ALTER TABLE nodes ADD CONSTRAINT nodes_launchers_bounded
    CHECK (launchers IS NULL OR (jsonb_typeof(launchers) = 'object' AND pg_column_size(launchers) <= 4096));

-- The sweeper's look for job parts no agent fetched (jobs::store::fail_unfetched_assignments), every second:
-- only the unfetched parts, few at any time.
CREATE INDEX job_nodes_unfetched_idx ON job_nodes (job_id) WHERE state = 'pending';
