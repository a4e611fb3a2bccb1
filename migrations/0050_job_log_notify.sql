-- A job's log followers are woken by NOTIFY, not by polling (docs/logs.md): the channel `gpuplane_job_logs`
-- carries the job's id whenever its log moved (lines stored or deleted, a part's last output in) or the job ended.
-- Sent at commit, so a woken follower reads what woke it.

CREATE FUNCTION notify_job_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The trigger's argument names the column that holds the job's id.
    PERFORM pg_notify('gpuplane_job_logs', to_jsonb(NEW) ->> TG_ARGV[0]);
    RETURN NULL;
END
$$;

CREATE TRIGGER job_logs_moved AFTER INSERT OR UPDATE ON job_logs
    FOR EACH ROW EXECUTE FUNCTION notify_job_log('job_id');
CREATE TRIGGER job_nodes_log_closed AFTER UPDATE OF log_closed ON job_nodes
    FOR EACH ROW WHEN (NEW.log_closed AND NOT OLD.log_closed) EXECUTE FUNCTION notify_job_log('job_id');
CREATE TRIGGER jobs_ended_for_logs AFTER UPDATE OF finished_at ON jobs
    FOR EACH ROW WHEN (NEW.finished_at IS NOT NULL AND OLD.finished_at IS NULL) EXECUTE FUNCTION notify_job_log('id');
