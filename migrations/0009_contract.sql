-- gpuplane schema, part 9: API key lifecycle and its audit trail.

-- A rotated key stays valid until `expires_at` (the grace period that lets its users switch to the new key);
-- NULL means it does not expire. A key is usable while `revoked_at IS NULL AND (expires_at IS NULL OR
-- expires_at > now())`; a background sweep also sets `revoked_at` once `expires_at` has passed.
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
-- Rotation hands over to exactly one successor.
ALTER TABLE api_keys ADD COLUMN replaced_by uuid REFERENCES api_keys (id);
CREATE INDEX api_keys_expiring_idx ON api_keys (expires_at) WHERE revoked_at IS NULL AND expires_at IS NOT NULL;
CREATE INDEX api_keys_operator_idx ON api_keys (id) WHERE role = 'operator';

-- Who did what to which credential, when. Rows are only ever inserted, and outlive what they name (no foreign
-- keys: deleting a tenant must not erase its history).
CREATE TABLE audit_events (
    id             uuid PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT now(),
    -- The API key whose token made the request; NULL for the command line (`gpuplane bootstrap`).
    actor_key_id   uuid,
    -- The tenant the subject belongs to; NULL for operator keys.
    tenant_id      uuid,
    action         text NOT NULL,
    subject_key_id uuid NOT NULL,
    detail         jsonb NOT NULL DEFAULT '{}',
    CONSTRAINT audit_events_action_valid
        CHECK (action IN ('api_key.created', 'api_key.revoked', 'api_key.rotated'))
);
CREATE INDEX audit_events_tenant_idx ON audit_events (tenant_id, id);
