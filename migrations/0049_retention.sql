-- What the service keeps, and for how long (docs/logs.md, docs/uploads.md): an ended job's log lines are deleted
-- `--job-log-retention-days` after it ended, and an upload no job that has not ended names is deleted
-- `--upload-retention-days` after its last use.

-- When the job's lines were deleted for their age (its line numbers and counts stay, so readers can say so).
ALTER TABLE job_logs ADD COLUMN expired_at timestamptz;
CREATE INDEX job_logs_unexpired ON job_logs (job_id) WHERE expired_at IS NULL;

-- When the upload was last sent or named by a new job: in the same transaction as the job, so a job and the
-- upload's expiry never cross (the row is locked).
ALTER TABLE uploads ADD COLUMN last_used_at timestamptz NOT NULL DEFAULT now();
UPDATE uploads SET last_used_at = created_at;
CREATE INDEX uploads_last_used ON uploads (last_used_at);

-- An ended job no longer holds its upload: once the upload expires, the job just stops naming it.
ALTER TABLE jobs DROP CONSTRAINT jobs_workdir_uploaded;
ALTER TABLE jobs ADD CONSTRAINT jobs_workdir_uploaded FOREIGN KEY (tenant_id, workdir)
    REFERENCES uploads (tenant_id, digest) ON DELETE SET NULL (workdir);
-- The jobs naming an upload: the expiry's check, and the foreign key's action when it deletes one.
CREATE INDEX jobs_workdir ON jobs (tenant_id, workdir) WHERE workdir IS NOT NULL;
