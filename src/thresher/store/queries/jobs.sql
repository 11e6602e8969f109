-- The job table. A job is claimed with a lease, renewed by heartbeats, and finished
-- (done, retried or failed) only by the lease's owner, in the caller's transaction.
-- :runs is a JSON array of source_run ids that a worker serves. A claim names one run:
-- with equality the partial index jobs_claimable yields the next job in order at once,
-- where a list of runs would sort every pending job on every claim.

-- name: insert_job
INSERT INTO jobs (kind, key, parent_id, waits_for, source, source_run_id, payload,
                  state, max_attempts, priority, not_before, created, updated)
VALUES (:kind, :key, :parent_id, :waits_for, :source, :source_run_id, :payload,
        :state, :max_attempts, :priority, :now, :now, :now)
ON CONFLICT (key) DO NOTHING
RETURNING id

-- name: get_job
SELECT * FROM jobs WHERE id = :id

-- name: get_job_by_key
SELECT * FROM jobs WHERE key = :key

-- name: claim_job
-- Commit jobs are `waiting` until their last child finishes (wake_commit), so every
-- pending job is claimable and the partial index jobs_claimable yields the next at once.
UPDATE jobs
SET state = 'leased', lease_owner = :owner, lease_expires = :expires, updated = :now
WHERE id = (
    SELECT j.id FROM jobs j
    WHERE j.state = 'pending' AND j.not_before <= :now
      AND j.source_run_id = :run
    ORDER BY j.priority DESC, j.not_before, j.id
    LIMIT 1)
RETURNING *

-- name: claim_jobs
-- Up to :n jobs at once (a worker process fills its free slots, and a little more for
-- short jobs, in one statement). Rows come back in no particular order: the caller
-- sorts them by the claim's order.
UPDATE jobs
SET state = 'leased', lease_owner = :owner, lease_expires = :expires, updated = :now
WHERE id IN (
    SELECT j.id FROM jobs j
    WHERE j.state = 'pending' AND j.not_before <= :now
      AND j.source_run_id = :run
    ORDER BY j.priority DESC, j.not_before, j.id
    LIMIT :n)
RETURNING *

-- name: insert_jobs
-- Many jobs in one statement: a JSON array of [state, kind, key, parent_id, waits_for,
-- source, source_run_id, payload, max_attempts, priority], in that order; a key that
-- exists already is skipped (re-executing a parent after a crash inserts nothing twice).
INSERT INTO jobs (kind, key, parent_id, waits_for, source, source_run_id, payload,
                  state, max_attempts, priority, not_before, created, updated)
SELECT json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]'),
       json_extract(value, '$[4]'), json_extract(value, '$[5]'), json_extract(value, '$[6]'),
       json_extract(value, '$[7]'), json_extract(value, '$[0]'), json_extract(value, '$[8]'),
       json_extract(value, '$[9]'), :now, :now, :now
FROM json_each(:rows) WHERE true
ON CONFLICT (key) DO NOTHING

-- name: finish_jobs
-- Many jobs done at once: a JSON array of [id, result]; only those whose lease the
-- caller still holds, which it gets back (the others' results it must not write).
-- (Materialized: else SQLite scans the array once for each job the owner holds.)
WITH f AS MATERIALIZED (
    SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS result
    FROM json_each(:rows)
)
UPDATE jobs
SET state = 'done', attempts = attempts + 1, result = f.result,
    lease_owner = NULL, lease_expires = NULL, updated = :now
FROM f
WHERE jobs.id = f.id AND jobs.state = 'leased' AND jobs.lease_owner = :owner
RETURNING jobs.id

-- name: unclaim_jobs
-- Jobs claimed ahead and handed straight back (their kind is not known to be short):
-- pending again, as they were, no attempt counted. :ids is a JSON array.
UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires = NULL, updated = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'leased' AND lease_owner = :owner

-- name: wake_commit
-- The commit waiting for :job's children becomes claimable once none is unfinished.
-- The states are listed, not "<> 'done'": with a list the index jobs_parent
-- (parent_id, state) finds an unfinished child in a few probes, where "<> 'done'"
-- reads every done child (a page of 1000).
UPDATE jobs SET state = 'pending', not_before = :now, updated = :now
WHERE waits_for = :job AND state = 'waiting'
  AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_id = :job
                                         AND c.state IN ('pending', 'waiting', 'leased', 'failed'))

-- name: wake_ready_commits
-- The sweep for wake-ups lost with a killed worker: every waiting commit of the run
-- whose children are all done.
UPDATE jobs SET state = 'pending', not_before = :now, updated = :now
WHERE source_run_id = :run AND state = 'waiting'
  AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_id = jobs.waits_for
                                         AND c.state IN ('pending', 'waiting', 'leased', 'failed'))

-- name: finish_job
-- A job done after a failed attempt keeps that attempt's error: it is its history.
UPDATE jobs
SET state = :state, attempts = attempts + 1, result = :result,
    last_error = coalesce(:error, last_error),
    lease_owner = NULL, lease_expires = NULL, updated = :now
WHERE id = :id AND state = 'leased' AND lease_owner = :owner

-- name: retry_job
UPDATE jobs
SET state = 'pending', attempts = attempts + 1, not_before = :not_before, last_error = :error,
    lease_owner = NULL, lease_expires = NULL, updated = :now
WHERE id = :id AND state = 'leased' AND lease_owner = :owner

-- name: defer_job
-- Back to pending until :not_before, the attempt not counted: the job did not fail, its
-- host's turn is later (HostBusy).
UPDATE jobs
SET state = 'pending', not_before = :not_before, lease_owner = NULL, lease_expires = NULL,
    updated = :now
WHERE id = :id AND state = 'leased' AND lease_owner = :owner

-- name: hold_lease
-- A handler's checkpoint commits only while its job is still leased to it; the update
-- (of nothing) keeps the row locked until then, so the lease cannot expire in between.
UPDATE jobs SET lease_expires = lease_expires
WHERE id = :id AND state = 'leased' AND lease_owner = :owner

-- name: renew_leases
UPDATE jobs SET lease_expires = :expires
WHERE state = 'leased' AND lease_owner = :owner

-- name: release_leases
UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires = NULL, updated = :now
WHERE state = 'leased' AND lease_owner = :owner

-- name: expire_leases
UPDATE jobs
SET state = CASE WHEN attempts + 1 >= max_attempts THEN 'failed' ELSE 'pending' END,
    attempts = attempts + 1,
    last_error = 'lease expired: worker ' || lease_owner || ' stopped without finishing',
    lease_owner = NULL, lease_expires = NULL, not_before = :now, updated = :now
WHERE state = 'leased' AND lease_expires < :now
RETURNING id, state, parent_id, key

-- name: leased_owners
SELECT DISTINCT w.owner, w.hostname, w.pid, w.boot_id
FROM jobs j JOIN workers w ON w.owner = j.lease_owner
WHERE j.state = 'leased'

-- name: expire_owner_leases
UPDATE jobs
SET state = CASE WHEN attempts + 1 >= max_attempts THEN 'failed' ELSE 'pending' END,
    attempts = attempts + 1,
    last_error = 'worker ' || lease_owner || ' died without finishing',
    lease_owner = NULL, lease_expires = NULL, not_before = :now, updated = :now
WHERE state = 'leased' AND lease_owner = :owner
RETURNING id, state, parent_id, key

-- name: fail_waiting_commits
UPDATE jobs SET state = 'failed', last_error = :error, updated = :now
WHERE waits_for = :parent_id AND state IN ('waiting', 'pending')
RETURNING id, parent_id, key

-- name: run_job_counts
SELECT state, count(*) AS n FROM jobs WHERE source_run_id = :run GROUP BY state

-- name: job_counts
SELECT state, count(*) AS n FROM jobs GROUP BY state

-- name: run_lull
-- Why a claim of :run took nothing, read in the claim's transaction: whether a job is
-- unfinished; when the earliest pending job is due (the least not_before, whatever its
-- priority: one probe of the claim index per priority in use, a handful, where a plain
-- min() read every pending job, 29 ms with 200 000 of them backing off); and whether
-- another worker holds a lease (its job may add or free others at any moment).
WITH RECURSIVE priorities(p) AS (
    SELECT max(priority) FROM jobs WHERE source_run_id = :run AND state = 'pending'
    UNION ALL
    SELECT (SELECT max(j.priority) FROM jobs j
            WHERE j.source_run_id = :run AND j.state = 'pending' AND j.priority < priorities.p)
    FROM priorities WHERE priorities.p IS NOT NULL
)
SELECT EXISTS (SELECT 1 FROM jobs WHERE source_run_id = :run
                                    AND state IN ('pending', 'waiting', 'leased')) AS unfinished,
       (SELECT min((SELECT j.not_before FROM jobs j
                    WHERE j.source_run_id = :run AND j.state = 'pending'
                      AND j.priority = priorities.p
                    ORDER BY j.not_before LIMIT 1))
        FROM priorities WHERE priorities.p IS NOT NULL) AS next_due,
       EXISTS (SELECT 1 FROM jobs WHERE source_run_id = :run AND state = 'leased'
                                    AND lease_owner <> :owner) AS elsewhere

-- name: other_workers_alive
-- Whether a worker of another process may be at work (one killed without stopping
-- counts until its heartbeats are three leases old).
SELECT EXISTS (SELECT 1 FROM workers WHERE owner <> :owner AND stopped IS NULL
                                       AND heartbeat >= :since) AS alive

-- name: runs_progress
SELECT count(*) AS total,
       sum(CASE WHEN state IN ('done', 'failed') THEN 1 ELSE 0 END) AS finished
FROM jobs WHERE source_run_id IN (SELECT value FROM json_each(:runs))

-- name: first_failure
SELECT key, kind, last_error FROM jobs
WHERE source_run_id = :run AND state = 'failed' AND last_error NOT LIKE 'not committed:%'
ORDER BY id LIMIT 1

-- name: leased_jobs
SELECT id, kind, key, source, lease_owner, lease_expires, attempts, updated FROM jobs
WHERE state = 'leased' ORDER BY id

-- name: list_jobs
SELECT id, kind, key, parent_id, waits_for, source, source_run_id, state, attempts,
       max_attempts, lease_owner, not_before, last_error, result
FROM jobs WHERE source_run_id = :run ORDER BY id

-- name: open_runs_jobs
-- The open runs a serving worker (`thresher worker`) claims from, oldest first, and
-- whether any of their jobs is unfinished (none: the run is over and can be closed).
SELECT r.id, r.source,
       EXISTS (SELECT 1 FROM jobs j
               WHERE j.source_run_id = r.id AND j.state IN ('pending', 'waiting', 'leased'))
         AS open_jobs
FROM source_runs r
WHERE r.outcome = 'running'
ORDER BY r.id

-- name: prunable_runs
-- Finished runs before :before that still have jobs. Their jobs are done with: the run's
-- row keeps the counts, and results live in their own tables.
SELECT r.id FROM source_runs r
WHERE r.outcome <> 'running' AND r.finished < :before
  AND EXISTS (SELECT 1 FROM jobs j WHERE j.source_run_id = r.id)
ORDER BY r.id

-- name: delete_run_jobs
-- One statement: a job and the jobs that name it (parent_id, waits_for) go together, and
-- both databases check those references at the statement's end.
DELETE FROM jobs WHERE source_run_id = :run

-- name: shard_spread
-- How many of its sibling shards a worker holds, how many workers are alive, and how
-- old the shard job is: a worker does not take more than its share of a new run.
-- Siblings leased in the same claim as this job (the same `updated`) count only when
-- their id is lower: of a claim of all the shards, the first is kept, not none.
SELECT
    (SELECT count(*) FROM jobs AS j JOIN jobs AS me ON j.parent_id = me.parent_id
     WHERE me.id = :job AND j.id <> me.id AND j.kind = me.kind AND j.state = 'leased'
       AND j.lease_owner = :owner
       AND (j.updated <> me.updated OR j.id < me.id)) AS held,
    (SELECT count(*) FROM workers WHERE stopped IS NULL AND heartbeat >= :alive) AS workers,
    (SELECT created FROM jobs WHERE id = :job) AS created
