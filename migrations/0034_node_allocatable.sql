-- gpuplane schema, part 34: one definition of a node that new leases may draw from.
--
-- "An operator has not taken it out of service and its agent is alive" was written out in seven statements and
-- in the partial index of best fit. It is now this function, and every statement calls it. It is a one-line
-- SQL function, so PostgreSQL inlines it where it is called, before planning: the index predicate and the
-- statements' conditions are the same expression, and best fit stays an index lookup (tests/api/inventory.rs
-- checks the plan with EXPLAIN).

CREATE FUNCTION node_allocatable(admin_state text, liveness text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN admin_state = 'active' AND liveness = 'ready';

DROP INDEX nodes_allocatable_free_idx;
CREATE INDEX nodes_allocatable_free_idx ON nodes (pool_id, free_gpus, id)
    WHERE node_allocatable(admin_state, liveness);
