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
