-- Reading bulk ingest back out (thresher.ingest.report): results as a downstream
-- importer consumes them, and the counts behind `thresher ingest stats`. Read-only.

-- name: ingest_report_results
-- One row per (result, request naming its URL): the caller groups consecutive rows of a
-- result, so millions of results are one streamed statement rather than a query each.
-- A result no request names (yet) still comes out, once, with NULL request columns.
-- :statuses is a JSON array of statuses, empty for any; :ingest_type and :link_source
-- are NULL for any ("IS NULL OR", not coalesce: PostgreSQL then drops an unset filter
-- from the plan instead of misjudging how many rows it keeps). The source filter picks
-- results, never the requests listed.
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
  AND (json_array_length(:statuses) = 0
       OR r.status IN (SELECT value FROM json_each(:statuses)))
  AND (CAST(:link_source AS TEXT) IS NULL OR EXISTS (
        SELECT 1 FROM ingest_requests s
        WHERE s.ingest_type = r.ingest_type AND s.base_url = r.base_url
          AND s.link_source = :link_source))
ORDER BY r.ingest_type, r.base_url, q.id

-- name: ingest_report_totals
-- urls: the distinct URLs requested, whether fetched or not.
SELECT (SELECT count(*) FROM ingest_requests) AS requests,
       (SELECT count(*) FROM (SELECT DISTINCT ingest_type, base_url FROM ingest_requests) u)
           AS urls,
       (SELECT count(*) FROM ingest_results) AS results,
       (SELECT count(*) FROM ingest_results WHERE hit <> 0) AS hits

-- name: ingest_report_by_status
SELECT status, count(*) AS results FROM ingest_results
GROUP BY status ORDER BY count(*) DESC, status

-- name: ingest_report_by_source
-- Requests, not URLs: a URL two sources name counts once for each. status is NULL for a
-- request whose URL has no result yet (pending).
SELECT q.link_source, r.status, count(*) AS requests
FROM ingest_requests q
LEFT JOIN ingest_results r ON r.ingest_type = q.ingest_type AND r.base_url = q.base_url
GROUP BY q.link_source, r.status
ORDER BY q.link_source, count(*) DESC, r.status

-- name: ingest_report_by_type
-- One statement for both tables, since a type may have requests and no results yet, or
-- results that no loaded request names.
SELECT ingest_type, sum(requests) AS requests, sum(results) AS results, sum(hits) AS hits
FROM (SELECT ingest_type, count(*) AS requests, 0 AS results, 0 AS hits
      FROM ingest_requests GROUP BY ingest_type
      UNION ALL
      SELECT ingest_type, 0, count(*), count(CASE WHEN hit <> 0 THEN 1 END)
      FROM ingest_results GROUP BY ingest_type) t
GROUP BY ingest_type ORDER BY ingest_type
