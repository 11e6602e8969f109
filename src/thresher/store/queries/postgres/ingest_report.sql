-- PostgreSQL versions of the ingest report queries in ../ingest_report.sql.

-- name: ingest_report_results
-- Only the status list differs: a JSON array read with jsonb functions.
SELECT r.ingest_type, r.base_url, r.hit, r.status, r.terminal_url, r.terminal_status,
       r.terminal_sha1, r.hops, r.error, r.attempts, r.updated,
       f.sha1 AS file_sha1, f.sha256 AS file_sha256, f.md5 AS file_md5,
       f.size AS file_size, f.mimetype AS file_mimetype, f.warc_file AS file_warc_file,
       f.warc_offset AS file_warc_offset,
       q.id AS request_id, q.link_source, q.link_source_id, q.release_stage, q.ext_ids,
       q.request
FROM ingest_results r
LEFT JOIN file_meta f ON f.sha1 = r.terminal_sha1
LEFT JOIN ingest_requests q ON q.ingest_type = r.ingest_type AND q.base_url = r.base_url
WHERE (CAST(:ingest_type AS TEXT) IS NULL OR r.ingest_type = :ingest_type)
  AND (jsonb_array_length(CAST(:statuses AS jsonb)) = 0
       OR r.status IN (SELECT jsonb_array_elements_text(CAST(:statuses AS jsonb))))
  AND (CAST(:link_source AS TEXT) IS NULL OR EXISTS (
        SELECT 1 FROM ingest_requests s
        WHERE s.ingest_type = r.ingest_type AND s.base_url = r.base_url
          AND s.link_source = :link_source))
ORDER BY r.ingest_type, r.base_url, q.id
