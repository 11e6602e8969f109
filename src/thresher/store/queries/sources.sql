-- The source directory and the record of each source's runs.

-- name: insert_source
INSERT INTO sources (name, type, url, options, created, updated)
VALUES (:name, :type, :url, :options, :now, :now)
ON CONFLICT (name) DO NOTHING

-- name: get_source
SELECT * FROM sources WHERE name = :name

-- name: list_sources
SELECT * FROM sources ORDER BY name

-- name: delete_source
DELETE FROM sources WHERE name = :name

-- name: cancel_source_runs
UPDATE source_runs SET outcome = 'cancelled', finished = :now, error = 'source removed'
WHERE source = :name AND outcome = 'running'

-- name: cancel_source_jobs
UPDATE jobs SET state = 'failed', last_error = 'source removed', updated = :now
WHERE source = :name AND state IN ('pending', 'waiting')

-- name: open_source_run
-- Two processes starting the same source at once: one inserts, the other gets nothing
-- and resumes the run the first opened.
INSERT INTO source_runs (source, started) VALUES (:source, :now)
ON CONFLICT (source) WHERE outcome = 'running' DO NOTHING
RETURNING id

-- name: get_open_run
SELECT * FROM source_runs WHERE source = :source AND outcome = 'running'

-- name: set_run_root
UPDATE source_runs SET root_job_id = :root WHERE id = :id

-- name: set_run_shortfall
-- Written by the job that counts what the run left behind (an archive's commit job).
UPDATE source_runs SET shortfall = :shortfall WHERE id = :id

-- name: run_shortfall
SELECT shortfall FROM source_runs WHERE id = :id

-- name: close_source_run
UPDATE source_runs SET finished = :now, outcome = :outcome, counts = :counts, error = :error
WHERE id = :id AND outcome = 'running'

-- name: last_runs
SELECT r.* FROM source_runs r
WHERE r.id = (SELECT max(id) FROM source_runs WHERE source = r.source)

-- name: last_error
SELECT error, finished FROM source_runs
WHERE source = :source AND error IS NOT NULL ORDER BY id DESC LIMIT 1

-- name: upsert_worker
-- jobs_done is counted in memory and written with each heartbeat, not per job.
INSERT INTO workers (owner, hostname, pid, boot_id, started, heartbeat, jobs_done)
VALUES (:owner, :hostname, :pid, :boot_id, :now, :now, :jobs_done)
ON CONFLICT (owner) DO UPDATE SET
    -- A name given again (`worker --name w1`) once its last holder is gone: a new process.
    started = CASE WHEN workers.pid = :pid AND workers.hostname = :hostname
                   THEN workers.started ELSE :now END,
    hostname = :hostname, pid = :pid, boot_id = :boot_id,
    heartbeat = :now, stopped = NULL, jobs_done = :jobs_done

-- name: set_worker_runs
-- The runs a worker serves (JSON), or NULL: every open run.
UPDATE workers SET runs = :runs WHERE owner = :owner

-- name: get_worker
SELECT * FROM workers WHERE owner = :owner

-- name: lock_worker_name
-- Two processes taking the same name at once: SQLite's write transactions already take
-- turns (BEGIN IMMEDIATE); PostgreSQL's take a lock on the name (postgres/jobs.sql).
SELECT 1 AS locked

-- name: stop_worker
UPDATE workers SET stopped = :now, heartbeat = :now, jobs_done = :jobs_done
WHERE owner = :owner

-- name: run_touched
-- Jobs of an open run that a worker has taken (or that spawned others): none means the
-- run is only queued, its root job waiting for a first worker.
SELECT count(*) AS n FROM jobs
WHERE source_run_id = :run AND (state <> 'pending' OR updated > created)

-- name: live_workers
SELECT * FROM workers WHERE stopped IS NULL AND heartbeat >= :since ORDER BY owner

-- name: update_source
UPDATE sources SET url = :url, options = :options, updated = :now WHERE name = :name
