-- Tenants' uploaded working directories (docs/uploads.md): gzip-compressed tar archives, each kept once per tenant
-- under its SHA-256, checked when uploaded (plain paths, no links or devices, bounded) and unpacked by the agents into
-- the working directory of every part of a job that names it.

CREATE TABLE uploads (
    tenant_id uuid NOT NULL REFERENCES tenants (id),
    -- `sha256:` and the archive's SHA-256 in hex.
    digest text NOT NULL CONSTRAINT uploads_digest_format CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    size_bytes bigint NOT NULL CONSTRAINT uploads_size_positive CHECK (size_bytes > 0),
    files bigint NOT NULL CONSTRAINT uploads_files_nonnegative CHECK (files >= 0),
    unpacked_bytes bigint NOT NULL CONSTRAINT uploads_unpacked_nonnegative CHECK (unpacked_bytes >= 0),
    content bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, digest)
);

-- The upload a job's parts unpack into their working directory.
ALTER TABLE jobs ADD COLUMN workdir text;
ALTER TABLE jobs ADD CONSTRAINT jobs_workdir_uploaded FOREIGN KEY (tenant_id, workdir) REFERENCES uploads (tenant_id, digest);
