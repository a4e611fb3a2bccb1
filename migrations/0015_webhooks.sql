-- Signed webhooks (Standard Webhooks) with a transactional outbox.
--
-- An event is written in the same transaction as the change it reports, together with one delivery row per
-- subscribed endpoint (`webhook_emit`), so a committed change is never without its deliveries, whatever process
-- dies afterwards. Delivery workers on any replica claim due deliveries with FOR UPDATE SKIP LOCKED.
-- tenant_id NULL on an endpoint or event means the operators' audience (fleet events).

CREATE TABLE webhook_endpoints (
    id               uuid PRIMARY KEY,
    tenant_id        uuid REFERENCES tenants (id) ON DELETE CASCADE,
    url              text NOT NULL,
    event_types      text[] NOT NULL,
    description      text NOT NULL DEFAULT '',
    enabled          boolean NOT NULL DEFAULT true,
    -- `whsec_<base64 key>`: the service signs with it, so it is kept (shown to the client once, at creation).
    secret           text NOT NULL,
    disabled_reason  text,
    -- Start of the current run of failed attempts; NULL after a success.
    failing_since    timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_endpoints_url_length CHECK (char_length(url) BETWEEN 1 AND 2048),
    CONSTRAINT webhook_endpoints_event_types_count CHECK (cardinality(event_types) BETWEEN 1 AND 50),
    CONSTRAINT webhook_endpoints_description_length CHECK (char_length(description) <= 500)
);
CREATE INDEX webhook_endpoints_tenant_idx ON webhook_endpoints (tenant_id, id);

CREATE TABLE webhook_events (
    id          uuid PRIMARY KEY,
    tenant_id   uuid REFERENCES tenants (id) ON DELETE CASCADE,
    type        text NOT NULL,
    data        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_tenant_idx ON webhook_events (tenant_id, id);

CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id         uuid NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    state            text NOT NULL DEFAULT 'pending',
    -- Attempts made so far (the retry schedule is indexed by it).
    attempts         integer NOT NULL DEFAULT 0,
    -- When the next attempt is due; while a worker holds the delivery, when its claim lapses.
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    -- The claim of the worker attempting it now; a worker only records the outcome under its own claim.
    claim            uuid,
    last_attempt_at  timestamptz,
    last_status_code integer,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_deliveries_state_valid CHECK (state IN ('pending', 'succeeded', 'failed')),
    CONSTRAINT webhook_deliveries_once UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id);

-- Every attempt: the delivery log.
CREATE TABLE webhook_attempts (
    id             uuid PRIMARY KEY,
    delivery_id    uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempted_at   timestamptz NOT NULL DEFAULT now(),
    succeeded      boolean NOT NULL,
    response_code  integer,
    latency_ms     integer NOT NULL,
    error          text
);
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, id);

-- Conditions raised by the background checks (lease.expiring, utilization.low, queue.stalled): one alert per
-- condition and subject until it clears.
CREATE TABLE webhook_alerts (
    condition   text NOT NULL,
    subject_id  uuid NOT NULL,
    raised_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (condition, subject_id)
);

-- A UUIDv7 made in the database (PostgreSQL 15 has no uuidv7()), for the delivery rows the outbox writes:
-- time-ordered like every other id, so keyset pagination holds.
CREATE FUNCTION webhook_uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
        substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
        52, 1), 53, 1), 'hex')::uuid
$$;

-- Whether an endpoint's subscription pattern (`*`, `lease.*`, `lease.ended`) covers an event type.
CREATE FUNCTION webhook_type_matches(patterns text[], event_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest(patterns) p
                   WHERE p = '*' OR p = event_type
                      OR (right(p, 2) = '.*' AND starts_with(event_type, left(p, -1))))
$$;

-- The outbox: record an event and a pending delivery for each enabled endpoint of its audience that wants it.
-- The only writer of webhook_events (the Rust `webhooks::emit` calls it too).
CREATE FUNCTION webhook_emit(p_id uuid, p_tenant_id uuid, p_type text, p_data jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO webhook_events (id, tenant_id, type, data) VALUES (p_id, p_tenant_id, p_type, p_data);
    INSERT INTO webhook_deliveries (id, endpoint_id, event_id)
    SELECT webhook_uuid_v7(), e.id, p_id FROM webhook_endpoints e
    WHERE e.tenant_id IS NOT DISTINCT FROM p_tenant_id AND e.enabled AND webhook_type_matches(e.event_types, p_type);
$$;

-- Lease transitions become tenant events in the transaction that records them, whichever path wrote the lease
-- event (the general path, the one-statement fast path of 0006, expiry, liveness, metering). The event id is the
-- lease event's id: stable, and time-ordered like every id.
CREATE FUNCTION webhook_lease_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_type text;
    v_tenant uuid;
    v_pool uuid;
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
    SELECT tenant_id, pool_id INTO v_tenant, v_pool FROM leases WHERE id = NEW.lease_id;
    PERFORM webhook_emit(NEW.id, v_tenant, v_type, jsonb_strip_nulls(jsonb_build_object(
        'lease_id', NEW.lease_id,
        'pool_id', v_pool,
        'reason', CASE WHEN v_type = 'lease.ended' THEN NEW.kind END,
        'message', NEW.reason,
        'detail', NEW.detail)));
    RETURN NULL;
END
$$;

CREATE TRIGGER lease_events_webhooks AFTER INSERT ON lease_events
    FOR EACH ROW EXECUTE FUNCTION webhook_lease_event();
