-- Who holds a GPU is a column of the GPU, not a row of its own.
--
-- Until now a holding was a lease_gpus row (lease, GPU, node, released_at) under a partial unique index: every
-- allocation inserted one row per GPU (three index entries and two foreign-key checks each), every release
-- updated each of them again (a new row version and index entry each), and finding a node's free GPUs probed that
-- index once per GPU. That was the largest per-GPU cost of an allocation cycle.
--
--   * gpus.held_by: the lease holding the GPU now, NULL when it is free. One column holds one value, so a GPU
--     cannot be held by two leases: double booking is impossible by the shape of the data, not by an index. It
--     is not indexed, so taking and giving back a GPU are heap-only (HOT) updates; fillfactor leaves room on each
--     page for them. Every change of it happens under the lock of the GPU's node, as the free counters do.
--   * leases.gpu_ids: the GPUs a lease was given when it started, kept after it ends (what it held, for its
--     jobs, its bill and its history). A lease's current GPUs are those of its gpu_ids whose held_by is the
--     lease.
ALTER TABLE leases ADD COLUMN gpu_ids uuid[] NOT NULL DEFAULT '{}';
ALTER TABLE gpus ADD COLUMN held_by uuid REFERENCES leases (id);
ALTER TABLE gpus SET (fillfactor = 70);

UPDATE leases l SET gpu_ids = h.gpu_ids
FROM (SELECT lease_id, array_agg(gpu_id ORDER BY gpu_id) AS gpu_ids FROM lease_gpus GROUP BY lease_id) h
WHERE h.lease_id = l.id;

UPDATE gpus g SET held_by = lg.lease_id
FROM lease_gpus lg WHERE lg.gpu_id = g.id AND lg.released_at IS NULL;

DROP TABLE lease_gpus;
-- Only lease_gpus referenced it (migration 0018).
ALTER TABLE gpus DROP CONSTRAINT gpus_id_node_unique;
