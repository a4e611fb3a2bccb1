-- The webhook outbox runs for every lease event (the lease_events_webhooks trigger): two per allocation cycle.
-- Same signatures, same rows written, same behaviour; cheaper per event:
--   * webhook_emit was a SQL function, planned anew at each call; in PL/pgSQL its statement keeps its plan for
--     the session, and the event and its deliveries are written by one statement instead of two. It is still the
--     only writer of webhook_events.
--   * the trigger read the lease and then called webhook_emit in two statements; now one.
CREATE OR REPLACE FUNCTION webhook_emit(p_id uuid, p_tenant_id uuid, p_type text, p_data jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH event AS (
        INSERT INTO webhook_events (id, tenant_id, type, data) VALUES (p_id, p_tenant_id, p_type, p_data))
    INSERT INTO webhook_deliveries (id, endpoint_id, event_id)
    SELECT webhook_uuid_v7(), e.id, p_id FROM webhook_endpoints e
    WHERE e.tenant_id IS NOT DISTINCT FROM p_tenant_id AND e.enabled AND webhook_type_matches(e.event_types, p_type);
END
$$;

CREATE OR REPLACE FUNCTION webhook_lease_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_type text;
BEGIN
    v_type := CASE NEW.kind
        WHEN 'allocated' THEN 'lease.started'
        WHEN 'queued' THEN 'lease.queued'
        WHEN 'released' THEN 'lease.ended'
        WHEN 'expired' THEN 'lease.ended'
        WHEN 'terminated' THEN 'lease.ended'
        WHEN 'interrupted' THEN 'lease.ended'
        WHEN 'node_unreachable' THEN 'lease.node_unreachable'
        WHEN 'balance_low' THEN 'balance.low'
        ELSE NULL END;
    IF v_type IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM webhook_emit(NEW.id, l.tenant_id, v_type, jsonb_strip_nulls(jsonb_build_object(
        'lease_id', NEW.lease_id,
        'pool_id', l.pool_id,
        'reason', CASE WHEN v_type = 'lease.ended' THEN NEW.kind END,
        'message', NEW.reason,
        'detail', NEW.detail)))
    FROM leases l WHERE l.id = NEW.lease_id;
    RETURN NULL;
END
$$;
