-- One event log. Every lease event was written twice: the row in `lease_events` and, by the trigger
-- `lease_events_webhooks`, a copy of it in `webhook_events` for the tenant feed and the webhook deliveries (about
-- half of the outbox's cost per allocation cycle in `cargo bench --bench allocation`). Now a lease event is
-- written once: the feed and the deliveries read it through the view `event_log`, and the trigger writes only the
-- deliveries, one row per subscribed endpoint. `webhook_events` keeps the events that have no log of their own
-- (jobs, nodes, alerts, `webhook.test`).

-- A lease event's tenant, so that a tenant's feed is an ordered scan of an index like `webhook_events`'. Leases
-- never change tenant; the one writer of lease events (the store's lease module) copies it from the lease. No
-- foreign key: `lease_id`'s already ties the row to its lease, and a key on `tenants` would take a share lock
-- on the tenant's row for every event (multixacts when one tenant's leases start and end concurrently).
ALTER TABLE lease_events ADD COLUMN tenant_id uuid;
UPDATE lease_events e SET tenant_id = l.tenant_id FROM leases l WHERE l.id = e.lease_id;
ALTER TABLE lease_events ALTER COLUMN tenant_id SET NOT NULL;
CREATE INDEX lease_events_tenant_idx ON lease_events (tenant_id, id);

-- During a rolling upgrade, replicas of the previous release still write lease events without it: the lease's
-- tenant is filled in then. A later release drops this trigger, as it drops the plaintext secret columns.
CREATE FUNCTION lease_events_fill_tenant() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT l.tenant_id INTO NEW.tenant_id FROM leases l WHERE l.id = NEW.lease_id;
    RETURN NEW;
END
$$;
CREATE TRIGGER lease_events_fill_tenant BEFORE INSERT ON lease_events
    FOR EACH ROW WHEN (NEW.tenant_id IS NULL) EXECUTE FUNCTION lease_events_fill_tenant();

-- The webhook event type a lease event is published as (NULL: not published). The one statement of the mapping:
-- the trigger and the view call it; a SQL function the planner inlines.
CREATE FUNCTION lease_event_webhook_type(kind text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE kind
        WHEN 'allocated' THEN 'lease.started'
        WHEN 'queued' THEN 'lease.queued'
        WHEN 'released' THEN 'lease.ended'
        WHEN 'expired' THEN 'lease.ended'
        WHEN 'terminated' THEN 'lease.ended'
        WHEN 'interrupted' THEN 'lease.ended'
        WHEN 'node_unreachable' THEN 'lease.node_unreachable'
        WHEN 'balance_low' THEN 'balance.low'
        WHEN 'idle' THEN 'lease.idle'
        WHEN 'active_again' THEN 'lease.active_again'
        ELSE NULL END
$$;

-- Every published event: the events written for webhooks, and the lease events as the trigger used to copy them
-- (same id, type and data). Written so that PostgreSQL flattens it into the readers' queries: each branch is one
-- table with no WHERE of its own (the lease's pool is a scalar subquery, the published-kinds filter stands
-- outside the union), so a feed page is a merge of two ordered scans of the (tenant_id, id) indexes, and the
-- operators' feed skips the lease branch (its tenant_id is never NULL).
CREATE VIEW event_log AS
    SELECT * FROM (
        SELECT id, tenant_id, type, data, created_at FROM webhook_events
        UNION ALL
        SELECT e.id, e.tenant_id, lease_event_webhook_type(e.kind), jsonb_strip_nulls(jsonb_build_object(
                'lease_id', e.lease_id,
                'pool_id', (SELECT l.pool_id FROM leases l WHERE l.id = e.lease_id),
                'reason', CASE WHEN lease_event_webhook_type(e.kind) = 'lease.ended' THEN e.kind END,
                'message', e.reason,
                'detail', e.detail)),
            e.at
        FROM lease_events e
    ) published
    WHERE type IS NOT NULL;

-- A delivery's event is a row of `event_log`: of `webhook_events` or of `lease_events`. Neither is ever deleted
-- on its own (both go only with their tenant, whose endpoints and so deliveries go with it).
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_fkey;
DELETE FROM webhook_events w USING lease_events e WHERE e.id = w.id;

-- As in 0032, without the copy: the deliveries of the subscribed endpoints, in the lease event's transaction.
CREATE OR REPLACE FUNCTION webhook_lease_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_type text := lease_event_webhook_type(NEW.kind);
BEGIN
    IF v_type IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_deliveries (id, endpoint_id, event_id)
    SELECT webhook_uuid_v7(), e.id, NEW.id FROM webhook_endpoints e
    WHERE webhook_in_audience(e.tenant_id, NEW.tenant_id) AND e.enabled
        AND webhook_type_matches(e.event_types, v_type);
    RETURN NULL;
END
$$;
