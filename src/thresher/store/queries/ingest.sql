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

-- name: upsert_ingest_result
INSERT INTO ingest_results (ingest_type, base_url, hit, status, terminal_url, terminal_status,
                            terminal_sha1, hops, error, attempts, updated)
VALUES (:ingest_type, :base_url, :hit, :status, :terminal_url, :terminal_status,
        :terminal_sha1, :hops, :error, 1, :now)
ON CONFLICT (ingest_type, base_url) DO UPDATE SET
    hit = excluded.hit, status = excluded.status, terminal_url = excluded.terminal_url,
    terminal_status = excluded.terminal_status, terminal_sha1 = excluded.terminal_sha1,
    hops = excluded.hops, error = excluded.error,
    attempts = ingest_results.attempts + 1, updated = excluded.updated

-- name: ingest_status_counts
-- Results by status, of those written since :since (a run's start).
SELECT status, count(*) AS n FROM ingest_results WHERE updated >= :since
GROUP BY status ORDER BY status

-- name: insert_file_meta
-- Files not known yet, from a JSON array of {sha1, sha256, md5, size, mimetype}: the rows
-- returned are the ones this transaction added, whose bodies it must now write.
INSERT INTO file_meta (sha1, sha256, md5, size, mimetype, first_seen)
SELECT json_extract(value, '$.sha1'), json_extract(value, '$.sha256'),
       json_extract(value, '$.md5'), json_extract(value, '$.size'),
       json_extract(value, '$.mimetype'), :now
FROM json_each(:rows)
WHERE true
ON CONFLICT (sha1) DO NOTHING
RETURNING sha1

-- name: locate_file_meta
UPDATE file_meta SET warc_file = :warc_file, warc_offset = :warc_offset WHERE sha1 = :sha1

-- name: get_file_meta
SELECT * FROM file_meta WHERE sha1 = :sha1

-- name: source_run_started
SELECT started FROM source_runs WHERE id = :id
