-- Console sessions (issue #33): the server-side state of a signed-in browser. The console's access token names
-- its row in the `sid` claim, and every request's key check (`auth::key_check_cte`) looks the row up in the same
-- statement as the key: sign-out deletes the row, suspending the tenant deletes its keys' rows, and a revoked or
-- expired key fails the check itself. A copied cookie (or the same token as a bearer) stops working at once, not
-- at the token's expiry. Rows past `expires_at` are swept by the service (`auth::sessions`).
CREATE TABLE console_sessions (
    id         uuid PRIMARY KEY,
    key_id     uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    CONSTRAINT console_sessions_expire_after_creation CHECK (expires_at > created_at)
);
-- Suspension ends the sessions of a tenant's keys; a key's deletion cascades.
CREATE INDEX console_sessions_key_idx ON console_sessions (key_id);
-- The sweep of expired rows.
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);
