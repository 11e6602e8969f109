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

-- name: claim_jobs
-- = ANY(ARRAY(…)): the locking subquery runs once, before the update.
UPDATE jobs
SET state = 'leased', lease_owner = :owner, lease_expires = :expires, updated = :now
WHERE id = ANY(ARRAY(
    SELECT j.id FROM jobs j
    WHERE j.state = 'pending' AND j.not_before <= :now
      AND j.source_run_id = :run
    ORDER BY j.priority DESC, j.not_before, j.id
    LIMIT :n
    FOR UPDATE SKIP LOCKED))
RETURNING *

-- name: insert_jobs
INSERT INTO jobs (kind, key, parent_id, waits_for, source, source_run_id, payload,
                  state, max_attempts, priority, not_before, created, updated)
SELECT e->>1, e->>2, (e->>3)::bigint, (e->>4)::bigint, e->>5, (e->>6)::bigint, e->>7,
       e->>0, (e->>8)::integer, (e->>9)::integer, :now, :now, :now
FROM json_array_elements(CAST(:rows AS json)) WITH ORDINALITY AS r(e, n)
ORDER BY r.n
ON CONFLICT (key) DO NOTHING

-- name: finish_jobs
UPDATE jobs AS j
SET state = 'done', attempts = j.attempts + 1, result = f.result,
    lease_owner = NULL, lease_expires = NULL, updated = :now
FROM (SELECT (e->>0)::bigint AS id, e->>1 AS result
      FROM json_array_elements(CAST(:rows AS json)) AS e) AS f
WHERE j.id = f.id AND j.state = 'leased' AND j.lease_owner = :owner
RETURNING j.id

-- name: unclaim_jobs
UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires = NULL, updated = :now
WHERE id IN (SELECT value::bigint FROM json_array_elements_text(CAST(:ids AS json)))
  AND state = 'leased' AND lease_owner = :owner

-- name: wake_commit
-- Rows are locked with SKIP LOCKED, never waited for: the commit's row is locked only by
-- another wake or the heartbeat's sweep, which make it claimable anyway, and waiting for
-- them deadlocked against a heartbeat renewing this worker's leases. The check for
-- unfinished children is inside the locking query, so a wake that finds some does not
-- hold the row (and make another that would succeed skip it).
UPDATE jobs SET state = 'pending', not_before = :now, updated = :now
WHERE id IN (
    SELECT w.id FROM jobs w
    WHERE w.waits_for = :job AND w.state = 'waiting'
      AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_id = :job
                      AND c.state IN ('pending', 'waiting', 'leased', 'failed'))
    FOR UPDATE OF w SKIP LOCKED)

-- name: wake_ready_commits
UPDATE jobs SET state = 'pending', not_before = :now, updated = :now
WHERE id IN (
    SELECT w.id FROM jobs w
    WHERE w.source_run_id = :run AND w.state = 'waiting'
      AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_id = w.waits_for
                      AND c.state IN ('pending', 'waiting', 'leased', 'failed'))
    FOR UPDATE OF w SKIP LOCKED)

-- name: runs_progress
SELECT count(*) AS total,
       sum(CASE WHEN state IN ('done', 'failed') THEN 1 ELSE 0 END) AS finished
FROM jobs
WHERE source_run_id IN (SELECT value::bigint FROM jsonb_array_elements_text(:runs::jsonb))

-- name: lock_worker_name
SELECT pg_advisory_xact_lock(hashtext('thresher worker ' || :owner)) IS NULL AS locked
