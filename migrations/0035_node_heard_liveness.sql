-- gpuplane schema, part 35: one definition of where a node's liveness goes when its agent is heard from.
--
-- "Alive again: ready, or not_ready while it holds a readiness verdict" was written out in three statements
-- (registration, the heartbeat, and the readiness verdict itself, which applies only while the node is alive).
-- It is now this function, and those statements call it. A one-line SQL function: PostgreSQL inlines it where it
-- is called, so the heartbeat's one statement stays one statement with the same plan.

CREATE FUNCTION node_heard_liveness(not_ready_reason text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN not_ready_reason IS NULL THEN 'ready' ELSE 'not_ready' END;
