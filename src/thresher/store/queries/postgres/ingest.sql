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

-- name: insert_file_meta
INSERT INTO file_meta (sha1, sha256, md5, size, mimetype, first_seen)
SELECT r.e ->> 'sha1', r.e ->> 'sha256', r.e ->> 'md5', CAST(r.e ->> 'size' AS BIGINT),
       r.e ->> 'mimetype', :now
FROM json_array_elements(CAST(:rows AS json)) WITH ORDINALITY AS r(e, n)
ORDER BY r.n
ON CONFLICT (sha1) DO NOTHING
RETURNING sha1
