-- What gpuplane last saw of a job (the insights the alerts worker evaluates for every running job), kept with the
-- job when it ends, so a finished job still says what slowed it.
ALTER TABLE jobs
    ADD COLUMN insights    jsonb,
    ADD COLUMN insights_at timestamptz;
