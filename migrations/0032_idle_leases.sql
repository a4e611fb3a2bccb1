-- gpuplane schema, part 32: idle leases.
--
-- A lease is judged idle from its GPUs' telemetry (`leases::idle`): every GPU reported in the service's idle
-- window and even the busiest one averaged under the idle threshold. An idle spell is a run of such verdicts
-- whose windows overlap; it is announced once (`lease.idle`) and its end once (`lease.active_again`), as lease
-- events that the webhook trigger turns into tenant events. A lease may opt in to being released once a spell
-- has lasted long enough; its running jobs first get their stop notice.
--
--   * idle_release_after_minutes: the opt-in (null: never released for idleness), 10 minutes to a week.
--   * idle_since: the start of the current idle spell (null: not idle, or never judged). Setting it from null is
--     the compare-and-set that announces a spell once, whichever replica judges.
--   * idle_checked_at: a recent verdict of the current spell (written at most every half window); a verdict whose
--     window does not reach back to it (the service was away too long) starts the spell anew.
--   * idle_release_started_at / _deadline: the release began (notices given) and the latest time it ends; set
--     together, once, and never taken back (a notice is not).

ALTER TABLE leases
    ADD COLUMN idle_release_after_minutes integer,
    ADD COLUMN idle_since timestamptz,
    ADD COLUMN idle_checked_at timestamptz,
    ADD COLUMN idle_release_started_at timestamptz,
    ADD COLUMN idle_release_deadline timestamptz,
    ADD CONSTRAINT leases_idle_release_range CHECK (idle_release_after_minutes BETWEEN 10 AND 10080),
    ADD CONSTRAINT leases_idle_release_whole
        CHECK ((idle_release_started_at IS NULL) = (idle_release_deadline IS NULL));

-- The releases under way, which every round looks up.
CREATE INDEX leases_idle_release_started ON leases (idle_release_deadline)
    WHERE state = 'active' AND idle_release_started_at IS NOT NULL;

-- As in 0017, with the idle spell's two events.
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
        WHEN 'idle' THEN 'lease.idle'
        WHEN 'active_again' THEN 'lease.active_again'
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
