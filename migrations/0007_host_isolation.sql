-- gpuplane schema, part 7: what keeps tenants apart on a shared host.
--
-- Node identity: re-registering a host name that is already a node needs proof that the caller is that node
-- (its current agent credential) or an operator's explicit permission, recorded here until it is used or lapses.
-- A join token alone never takes over a registered node.
ALTER TABLE nodes ADD COLUMN reregistration_allowed_until timestamptz;

-- Secret environment values of a job. They are delivered only to the agents of the job's nodes (merged into
-- the assignment's environment), never returned by any read of the API, and masked in the output tails the
-- service stores (so they are kept as long as the job: a late report is masked too).
CREATE TABLE job_secrets (
    job_id uuid NOT NULL REFERENCES jobs (id),
    name   text NOT NULL,
    value  text NOT NULL,
    PRIMARY KEY (job_id, name)
);
