-- gpuplane schema, part 33: every release of a lease with running jobs gives them their stop notice first.
--
-- 0032 let an idle release notice the lease's jobs and end the lease once they stopped. A tenant's release does
-- the same now (`leases::release`): a lease whose jobs run is released once they have checkpointed and stopped,
-- or at the deadline (the longest grace plus a heartbeat), and is billed until then. The columns of the release
-- under way are renamed for what they now hold, and keep what the release writes when it ends:
--
--   * release_started_at / release_deadline: the release began (notices given) and the latest time it ends;
--   * release_reason: the lease's end reason then (`released by the tenant`, `released: idle for ...`);
--   * release_actor: who asked, as lease events name actors (`tenant:<key id>`, `system`).
--
-- All four are set together, once, and never taken back (a notice is not).

ALTER TABLE leases RENAME COLUMN idle_release_started_at TO release_started_at;
ALTER TABLE leases RENAME COLUMN idle_release_deadline TO release_deadline;
ALTER INDEX leases_idle_release_started RENAME TO leases_release_started;

ALTER TABLE leases
    ADD COLUMN release_reason text,
    ADD COLUMN release_actor text;

-- An idle release under way at the upgrade ends with the reason 0032's code gave it.
UPDATE leases SET release_reason = 'released: idle for '
        || COALESCE(floor(extract(epoch FROM release_started_at - idle_since) / 60)::bigint, 0) || ' minutes',
    release_actor = 'system'
WHERE release_started_at IS NOT NULL;

ALTER TABLE leases
    DROP CONSTRAINT leases_idle_release_whole,
    ADD CONSTRAINT leases_release_whole CHECK (
        (release_started_at IS NULL) = (release_deadline IS NULL)
        AND (release_started_at IS NULL) = (release_reason IS NULL)
        AND (release_started_at IS NULL) = (release_actor IS NULL));
