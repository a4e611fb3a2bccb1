-- Secrets sealed at rest: webhook signing secrets and job secret values are stored encrypted (AES-256-GCM) under a
-- key of the service's keyring (`--secrets-key-file`, src/secrets), never in clear, so a dump, a backup or a read
-- replica of the database gives none of them. `*_key_id` names the key that sealed the value (rotation re-seals
-- every row whose key is not the current one); `*_sealed` is `0x01 || nonce || ciphertext || tag`.
--
-- A migration cannot encrypt (the key is not in the database), so the clear columns (`webhook_endpoints.secret`,
-- `job_secrets.value`) stay, nullable, for rows written before this migration or by a replica of the previous
-- release during a rolling upgrade: the service seals them at start (or `gpuplane rotate-secrets` does) and sets
-- them NULL. This release never writes them; a later one drops them. A row holds exactly one of the forms.

ALTER TABLE webhook_endpoints
    ALTER COLUMN secret DROP NOT NULL,
    ADD COLUMN secret_key_id text,
    ADD COLUMN secret_sealed bytea,
    ADD CONSTRAINT webhook_endpoints_secret_one_form CHECK (
        (secret_key_id IS NULL) = (secret_sealed IS NULL) AND (secret IS NULL) <> (secret_sealed IS NULL)),
    ADD CONSTRAINT webhook_endpoints_secret_key_id_format CHECK (secret_key_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$'),
    ADD CONSTRAINT webhook_endpoints_secret_sealed_length CHECK (octet_length(secret_sealed) BETWEEN 29 AND 4096);
CREATE INDEX webhook_endpoints_clear_secret_idx ON webhook_endpoints (id) WHERE secret IS NOT NULL;

ALTER TABLE job_secrets
    ALTER COLUMN value DROP NOT NULL,
    ADD COLUMN value_key_id text,
    ADD COLUMN value_sealed bytea,
    ADD CONSTRAINT job_secrets_value_one_form CHECK (
        (value_key_id IS NULL) = (value_sealed IS NULL) AND (value IS NULL) <> (value_sealed IS NULL)),
    ADD CONSTRAINT job_secrets_value_key_id_format CHECK (value_key_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$'),
    ADD CONSTRAINT job_secrets_value_sealed_length CHECK (octet_length(value_sealed) BETWEEN 29 AND 65536);
CREATE INDEX job_secrets_clear_value_idx ON job_secrets (job_id, name) WHERE value IS NOT NULL;
-- Which keys are in use (checked at every start) without reading every secret of every job.
CREATE INDEX job_secrets_value_key_id_idx ON job_secrets (value_key_id);
