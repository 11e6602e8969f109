-- PostgreSQL claims with FOR UPDATE SKIP LOCKED: many workers, no two on one job,
-- and none waiting on another's row lock.

-- name: claim_job
UPDATE jobs
SET state = 'leased', lease_owner = :owner, lease_expires = :expires, updated = :now
WHERE id = (
    SELECT j.id FROM jobs j
    WHERE j.state = 'pending' AND j.not_before <= :now
      AND j.source_run_id = :run
      -- OFFSET 0 keeps this a per-row index probe: once ANALYZE has run, the planner
      -- would otherwise hash every unfinished job of the table on every claim.
      AND (j.waits_for IS NULL OR NOT EXISTS (
            SELECT 1 FROM jobs c WHERE c.parent_id = j.waits_for
                             AND c.state IN ('pending', 'leased', 'failed')
            OFFSET 0))
    ORDER BY j.priority DESC, j.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING *

-- name: open_jobs
SELECT count(*) AS n,
       min(CASE WHEN state = 'pending' AND waits_for IS NULL THEN not_before END) AS next_due
FROM jobs
WHERE source_run_id IN (SELECT value::bigint FROM jsonb_array_elements_text(:runs::jsonb))
  AND state IN ('pending', 'leased')

-- name: runs_progress
SELECT count(*) AS total,
       sum(CASE WHEN state IN ('done', 'failed') THEN 1 ELSE 0 END) AS finished
FROM jobs
WHERE source_run_id IN (SELECT value::bigint FROM jsonb_array_elements_text(:runs::jsonb))
