-- Claims take, within a priority, the job that has been due longest (then the oldest).
-- Ordered by id alone, the index put jobs waiting out a retry's backoff at its head,
-- where every claim stepped over them: a host down in a long ingest left thousands.
DROP INDEX jobs_claimable;
CREATE INDEX jobs_claimable ON jobs (source_run_id, priority DESC, not_before, id)
    WHERE state = 'pending';
