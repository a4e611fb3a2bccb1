-- When a failed replica's restart is due (docs/serving.md, "Replicas"), in one place: its time has come, no later
-- attempt replaced it, and its job runs in that replica's generation, is not being cancelled and has no new
-- generation pending. The recovery worker's scan and its re-check under the job's lock both read this view.

CREATE VIEW replica_restarts_due AS
SELECT jn.id AS job_node_id, jn.job_id
FROM job_nodes jn
JOIN jobs j ON j.id = jn.job_id AND j.generation = jn.generation
WHERE jn.restart_at <= now() AND jn.replaced_by IS NULL AND j.state = 'running' AND NOT j.cancel_requested
  AND NOT EXISTS (SELECT 1 FROM job_generations g WHERE g.job_id = j.id AND g.state = 'pending');
