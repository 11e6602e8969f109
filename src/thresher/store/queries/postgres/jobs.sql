-- PostgreSQL claims with FOR UPDATE SKIP LOCKED: many workers, no two on one job,
-- and none waiting on another's row lock.

-- name: claim_job
UPDATE jobs
SET state = 'leased', lease_owner = :owner, lease_expires = :expires, updated = :now
WHERE id = (
    SELECT j.id FROM jobs j
    WHERE j.state = 'pending' AND j.not_before <= :now
      AND j.source_run_id = :run
    ORDER BY j.priority DESC, j.not_before, j.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING *

-- name: open_jobs
SELECT count(*) AS n, min(CASE WHEN state = 'pending' THEN not_before END) AS next_due
FROM jobs
WHERE source_run_id IN (SELECT value::bigint FROM jsonb_array_elements_text(:runs::jsonb))
  AND state IN ('pending', 'waiting', 'leased')

-- name: runs_progress
SELECT count(*) AS total,
       sum(CASE WHEN state IN ('done', 'failed') THEN 1 ELSE 0 END) AS finished
FROM jobs
WHERE source_run_id IN (SELECT value::bigint FROM jsonb_array_elements_text(:runs::jsonb))
