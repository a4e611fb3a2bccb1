-- webhook_emit runs for every lease event (the lease_events_webhooks trigger): two per allocation cycle. As a
-- SQL function it was planned anew at each call; as PL/pgSQL its two statements keep their plans for the
-- session. Same signature, same statements, same behaviour: still the only writer of webhook_events.
CREATE OR REPLACE FUNCTION webhook_emit(p_id uuid, p_tenant_id uuid, p_type text, p_data jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_events (id, tenant_id, type, data) VALUES (p_id, p_tenant_id, p_type, p_data);
    INSERT INTO webhook_deliveries (id, endpoint_id, event_id)
    SELECT webhook_uuid_v7(), e.id, p_id FROM webhook_endpoints e
    WHERE e.tenant_id IS NOT DISTINCT FROM p_tenant_id AND e.enabled AND webhook_type_matches(e.event_types, p_type);
END
$$;
