-- Bulk ingest requests (thresher.ingest.requests). A batch of requests travels as one
-- JSON array in :rows (objects with the columns below; ext_ids and request already JSON
-- text or null), so a batch is one statement whose row count is the rows it added:
-- ON CONFLICT DO NOTHING skips a request already stored, or one earlier in the batch.
-- Rows go in in array order: the loader sorts each batch by key, so that concurrent
-- loads lock keys in one order (see thresher.ingest.requests._insert).

-- name: insert_ingest_requests
-- "WHERE true": SQLite's parser needs it to tell the upsert's ON from a join's ON.
INSERT INTO ingest_requests (ingest_type, base_url, link_source, link_source_id,
                             release_stage, ext_ids, request, created)
SELECT json_extract(value, '$.ingest_type'), json_extract(value, '$.base_url'),
       json_extract(value, '$.link_source'), json_extract(value, '$.link_source_id'),
       json_extract(value, '$.release_stage'), json_extract(value, '$.ext_ids'),
       json_extract(value, '$.request'), :now
FROM json_each(:rows)
WHERE true
ORDER BY key
ON CONFLICT (ingest_type, base_url, link_source, link_source_id) DO NOTHING

-- name: ingest_page
-- The next URLs to ingest after the cursor (:after_type, :after_url), in key order: those
-- without a result, or whose result's status is in :retry (a JSON array), or all with
-- :force = 1. Filters are NULL when not asked for.
SELECT DISTINCT r.ingest_type, r.base_url
FROM ingest_requests r
LEFT JOIN ingest_results s ON s.ingest_type = r.ingest_type AND s.base_url = r.base_url
WHERE (r.ingest_type, r.base_url) > (:after_type, :after_url)
  AND (CAST(:ingest_type AS TEXT) IS NULL OR r.ingest_type = :ingest_type)
  AND (CAST(:link_source AS TEXT) IS NULL OR r.link_source = :link_source)
  AND (:force = 1 OR s.status IS NULL OR s.status IN (SELECT value FROM json_each(:retry)))
ORDER BY r.ingest_type, r.base_url
LIMIT :page

-- name: ingest_status_counts
-- Results by status, of those written since :since (a run's start).
SELECT status, count(*) AS n FROM ingest_results WHERE updated >= :since
GROUP BY status ORDER BY status

-- name: insert_files_meta
-- Files not known yet, from a JSON array of [sha1, sha256, md5, size, mimetype]: the rows
-- returned are the ones this transaction added, whose bodies it must now write.
INSERT INTO file_meta (sha1, sha256, md5, size, mimetype, first_seen)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), :now
FROM json_each(:rows)
WHERE true
ON CONFLICT (sha1) DO NOTHING
RETURNING sha1

-- name: get_file_meta
SELECT * FROM file_meta WHERE sha1 = :sha1

-- name: source_run_started
SELECT started FROM source_runs WHERE id = :id

-- The ingest engine's queue (thresher.ingest.ledger, migration 0020). Batch queries take
-- a JSON array of arrays in :rows, one per row, in the order their comment gives: a
-- commit writes each kind of row in one statement.

-- name: insert_ingest_queue
-- Rows: [shard, turn, host_no, ingest_type, base_url]. A selection filled again after a
-- crash finds its rows already there.
INSERT INTO ingest_queue (run_id, shard, turn, host_no, ingest_type, base_url)
SELECT :run, json_extract(value, '$[0]'), json_extract(value, '$[1]'),
       json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]')
FROM json_each(:rows) WHERE true
ON CONFLICT (run_id, shard, turn, host_no) DO NOTHING

-- name: ingest_queue_page
-- A shard's next URLs after the cursor (:after_turn, :after_host), hosts in turns.
SELECT turn, host_no, ingest_type, base_url, attempts, not_before FROM ingest_queue
WHERE run_id = :run AND shard = :shard AND (turn, host_no) > (:after_turn, :after_host)
ORDER BY turn, host_no
LIMIT :page

-- name: ingest_queue_left
SELECT count(*) AS n FROM ingest_queue WHERE run_id = :run

-- name: finish_ingest_queue
-- Rows: [turn, host_no] of URLs whose result this commit writes.
DELETE FROM ingest_queue
WHERE run_id = :run AND shard = :shard
  AND (turn, host_no) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                          FROM json_each(:rows))

-- name: retry_ingest_queue
-- Rows: [turn, host_no, attempts, not_before] of URLs to try again later.
WITH r AS MATERIALIZED (
    SELECT json_extract(value, '$[0]') AS turn, json_extract(value, '$[1]') AS host_no,
           json_extract(value, '$[2]') AS attempts, json_extract(value, '$[3]') AS not_before
    FROM json_each(:rows)
)
UPDATE ingest_queue SET attempts = r.attempts, not_before = r.not_before
FROM r
WHERE ingest_queue.run_id = :run AND ingest_queue.shard = :shard
  AND ingest_queue.turn = r.turn AND ingest_queue.host_no = r.host_no

-- name: delete_closed_ingest_queues
-- What runs that ended without finishing (a shard failed for good) left: the next run
-- selects those URLs again.
DELETE FROM ingest_queue
WHERE run_id IN (SELECT id FROM source_runs WHERE outcome <> 'running')

-- name: upsert_ingest_results
-- Rows: [ingest_type, base_url, hit, status, terminal_url, terminal_status,
-- terminal_sha1, hops, error, updated].
INSERT INTO ingest_results (ingest_type, base_url, hit, status, terminal_url, terminal_status,
                            terminal_sha1, hops, error, attempts, updated)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]'),
       json_extract(value, '$[6]'), json_extract(value, '$[7]'), json_extract(value, '$[8]'),
       1, json_extract(value, '$[9]')
FROM json_each(:rows) WHERE true
ON CONFLICT (ingest_type, base_url) DO UPDATE SET
    hit = excluded.hit, status = excluded.status, terminal_url = excluded.terminal_url,
    terminal_status = excluded.terminal_status, terminal_sha1 = excluded.terminal_sha1,
    hops = excluded.hops, error = excluded.error,
    attempts = ingest_results.attempts + 1, updated = excluded.updated

-- name: locate_files_meta
-- Rows: [sha1, warc_file, warc_offset].
WITH r AS MATERIALIZED (
    SELECT json_extract(value, '$[0]') AS sha1, json_extract(value, '$[1]') AS warc_file,
           json_extract(value, '$[2]') AS warc_offset
    FROM json_each(:rows)
)
UPDATE file_meta SET warc_file = r.warc_file, warc_offset = r.warc_offset
FROM r WHERE file_meta.sha1 = r.sha1

-- name: ingest_run_progress
-- URLs of a run in its queue, and what its root job queued (its result, once done).
SELECT (SELECT count(*) FROM ingest_queue WHERE run_id = :run) AS queued,
       (SELECT result FROM jobs WHERE source_run_id = :run AND kind = 'ingest.run') AS root
