-- How far each part of a job is through its work, as it says in its progress file (the runtime's batch
-- generation keeps one): its node's agent reports it. The job's progress is its current parts' sum.
ALTER TABLE job_nodes
    ADD COLUMN progress_done bigint,
    ADD COLUMN progress_total bigint,
    ADD CONSTRAINT job_nodes_progress_valid CHECK (
        (progress_done IS NULL) = (progress_total IS NULL) AND 0 <= progress_done AND progress_done <= progress_total
    );
