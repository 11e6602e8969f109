-- PostgreSQL versions of the ingest queries in ../ingest.sql.

-- name: insert_ingest_requests
-- json, not jsonb: the array is read once, in order, and never stored as such.
INSERT INTO ingest_requests (ingest_type, base_url, link_source, link_source_id,
                             release_stage, ext_ids, request, created)
SELECT r.e ->> 'ingest_type', r.e ->> 'base_url', r.e ->> 'link_source',
       r.e ->> 'link_source_id', r.e ->> 'release_stage', r.e ->> 'ext_ids',
       r.e ->> 'request', :now
FROM json_array_elements(:rows::json) WITH ORDINALITY AS r(e, n)
ORDER BY r.n
ON CONFLICT (ingest_type, base_url, link_source, link_source_id) DO NOTHING

-- name: ingest_page
SELECT DISTINCT r.ingest_type, r.base_url
FROM ingest_requests r
LEFT JOIN ingest_results s ON s.ingest_type = r.ingest_type AND s.base_url = r.base_url
WHERE (r.ingest_type, r.base_url) > (CAST(:after_type AS TEXT), CAST(:after_url AS TEXT))
  AND (CAST(:ingest_type AS TEXT) IS NULL OR r.ingest_type = :ingest_type)
  AND (CAST(:link_source AS TEXT) IS NULL OR r.link_source = :link_source)
  AND (:force = 1 OR s.status IS NULL
       OR s.status IN (SELECT json_array_elements_text(CAST(:retry AS json))))
ORDER BY r.ingest_type, r.base_url
LIMIT :page

-- name: insert_files_meta
INSERT INTO file_meta (sha1, sha256, md5, size, mimetype, first_seen)
SELECT r.e ->> 0, r.e ->> 1, r.e ->> 2, CAST(r.e ->> 3 AS BIGINT), r.e ->> 4, :now
FROM json_array_elements(CAST(:rows AS json)) WITH ORDINALITY AS r(e, n)
ORDER BY r.n
ON CONFLICT (sha1) DO NOTHING
RETURNING sha1

-- name: insert_ingest_queue
INSERT INTO ingest_queue (run_id, shard, turn, host_no, ingest_type, base_url)
SELECT :run, (e->>0)::integer, (e->>1)::bigint, (e->>2)::bigint, e->>3, e->>4
FROM json_array_elements(CAST(:rows AS json)) AS e
ON CONFLICT (run_id, shard, turn, host_no) DO NOTHING

-- name: ingest_queue_page
SELECT turn, host_no, ingest_type, base_url, attempts, not_before FROM ingest_queue
WHERE run_id = :run AND shard = :shard
  AND (turn, host_no) > (CAST(:after_turn AS BIGINT), CAST(:after_host AS BIGINT))
ORDER BY turn, host_no
LIMIT :page

-- name: finish_ingest_queue
DELETE FROM ingest_queue AS q
USING (SELECT (e->>0)::bigint AS turn, (e->>1)::bigint AS host_no
       FROM json_array_elements(CAST(:rows AS json)) AS e) AS f
WHERE q.run_id = :run AND q.shard = :shard AND q.turn = f.turn AND q.host_no = f.host_no

-- name: retry_ingest_queue
UPDATE ingest_queue AS q SET attempts = r.attempts, not_before = r.not_before
FROM (SELECT (e->>0)::bigint AS turn, (e->>1)::bigint AS host_no,
             (e->>2)::integer AS attempts, (e->>3)::double precision AS not_before
      FROM json_array_elements(CAST(:rows AS json)) AS e) AS r
WHERE q.run_id = :run AND q.shard = :shard AND q.turn = r.turn AND q.host_no = r.host_no

-- name: upsert_ingest_results
INSERT INTO ingest_results (ingest_type, base_url, hit, status, terminal_url, terminal_status,
                            terminal_sha1, hops, error, attempts, updated)
SELECT e->>0, e->>1, (e->>2)::integer, e->>3, e->>4, (e->>5)::integer, e->>6, e->>7,
       e->>8, 1, (e->>9)::double precision
FROM json_array_elements(CAST(:rows AS json)) AS e
ON CONFLICT (ingest_type, base_url) DO UPDATE SET
    hit = excluded.hit, status = excluded.status, terminal_url = excluded.terminal_url,
    terminal_status = excluded.terminal_status, terminal_sha1 = excluded.terminal_sha1,
    hops = excluded.hops, error = excluded.error,
    attempts = ingest_results.attempts + 1, updated = excluded.updated

-- name: locate_files_meta
UPDATE file_meta AS m SET warc_file = r.warc_file, warc_offset = r.warc_offset
FROM (SELECT e->>0 AS sha1, e->>1 AS warc_file, (e->>2)::bigint AS warc_offset
      FROM json_array_elements(CAST(:rows AS json)) AS e) AS r
WHERE m.sha1 = r.sha1
