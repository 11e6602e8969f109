-- What `thresher serve` reads (thresher.serve.data): read-only, each query through an
-- index (migration 0017) and at most a page of rows, so a page costs the same however
-- big the store. Keyset paging (`after`/`before` a key) rather than OFFSET, which reads
-- and skips every row before the page.

-- name: serve_archive_summaries
-- Per mail archive: its months and what they add up to (a few hundred rows per list).
SELECT source, count(*) AS months,
       coalesce(sum(CASE WHEN state = 'complete' THEN 1 ELSE 0 END), 0) AS complete,
       coalesce(sum(CASE WHEN expected IS NOT NULL AND expected > stored THEN 1 ELSE 0 END),
                0) AS short,
       coalesce(sum(stored), 0) AS stored,
       coalesce(sum(missing), 0) AS missing,
       max(checked_at) AS checked_at
FROM archive_months GROUP BY source

-- name: serve_crawl_latest
-- The latest crawl run of every crawl.
SELECT c.* FROM crawl_runs c
WHERE c.run_id = (SELECT max(run_id) FROM crawl_runs WHERE source = c.source)

-- name: serve_source_runs
-- A source's runs, newest first, a page before run :before.
SELECT id, source, started, finished, outcome, counts, error, shortfall FROM source_runs
WHERE source = :source AND id < :before ORDER BY id DESC LIMIT :limit

-- name: serve_message_months
-- The months a list's messages are filed under, with how many: a loose index scan (one
-- seek per month) instead of reading every message (a plain mbox has one file, 'all',
-- and its messages are filed by their Date's month).
WITH RECURSIVE m(month) AS (
    SELECT (SELECT min(month) FROM messages WHERE source = :source)
    UNION ALL
    SELECT (SELECT min(x.month) FROM messages x WHERE x.source = :source AND x.month > m.month)
    FROM m WHERE m.month IS NOT NULL
)
SELECT m.month,
       (SELECT count(*) FROM messages c WHERE c.source = :source AND c.month = m.month) AS n
FROM m WHERE m.month IS NOT NULL

-- name: serve_events
-- A list's events (late mail, shrinking months, conflicts), newest first.
SELECT id, month, at, kind, detail FROM archive_events
WHERE source = :source AND id < :before ORDER BY id DESC LIMIT :limit

-- name: serve_month_heads
-- The headers a month's thread view needs (never the raw message), at most :limit.
SELECT id, message_id, in_reply_to, refs, subject, from_name, from_addr, date, date_flag,
       conflict
FROM messages WHERE source = :source AND month = :month
ORDER BY date IS NULL, date, id LIMIT :limit

-- name: serve_month_count
SELECT count(*) AS n FROM messages WHERE source = :source AND month = :month

-- name: serve_message_head
SELECT id, source, month, message_id, in_reply_to, refs, subject, from_name, from_addr,
       date, date_flag, conflict
FROM messages WHERE id = :id

-- name: serve_message_by_message_id
SELECT id, source, month, message_id, in_reply_to, refs, subject, from_name, from_addr,
       date, date_flag, conflict
FROM messages WHERE message_id = :message_id AND source = :source ORDER BY id LIMIT 1

-- name: serve_thread_members
-- Messages of list :source that name one of the Message-IDs :ids (a JSON array) as
-- their own, as the message they reply to, or as the first of their References (the
-- thread's root): one step of walking a thread, through three indexes.
SELECT id, month, message_id, in_reply_to, refs, subject, from_name, from_addr, date,
       date_flag, conflict
FROM messages
WHERE source = :source AND (
    message_id IN (SELECT value FROM json_each(:ids))
    OR in_reply_to IN (SELECT value FROM json_each(:ids))
    OR (CASE WHEN instr(refs, ' ') > 0 THEN substr(refs, 1, instr(refs, ' ') - 1)
             ELSE refs END) IN (SELECT value FROM json_each(:ids)))
ORDER BY id LIMIT :limit

-- name: serve_message
SELECT id, source, month, key, sha256, message_id, date, date_raw, date_flag, from_name,
       from_addr, subject, in_reply_to, refs, body, raw, position, conflict, first_seen,
       parse_error, truncated
FROM messages WHERE id = :id

-- name: serve_crawl_runs
SELECT * FROM crawl_runs WHERE source = :source AND run_id < :before
ORDER BY run_id DESC LIMIT :limit

-- name: serve_crawl_urls
-- A crawl's URLs in one state (done, error, redirect, robots, capped, queued), in the
-- order they were found, a page after :after (a seq).
SELECT hash, url, host, depth, seq, state, status, error, fetched_run, fetched_at, digest,
       warc_file, warc_offset
FROM crawl_urls WHERE source = :source AND state = :state AND seq > :after
ORDER BY seq LIMIT :limit

-- name: serve_crawl_state_count
-- How many URLs are in a state, counted up to :cap (a page says "10000+" beyond).
SELECT count(*) AS n FROM (
    SELECT 1 AS one FROM crawl_urls WHERE source = :source AND state = :state LIMIT :cap
) t

-- name: serve_crawl_hosts
-- A page of a crawl's hosts after :after in name order (a loose index scan, one seek per
-- host), each with its URLs, pages and errors counted through the index.
WITH RECURSIVE h(host, n) AS (
    SELECT (SELECT min(host) FROM crawl_urls WHERE source = :source AND host > :after), 1
    UNION ALL
    SELECT (SELECT min(x.host) FROM crawl_urls x WHERE x.source = :source AND x.host > h.host),
           h.n + 1
    FROM h WHERE h.host IS NOT NULL AND h.n < :limit
)
SELECT h.host,
       (SELECT count(*) FROM crawl_urls c WHERE c.source = :source AND c.host = h.host)
           AS urls,
       (SELECT count(*) FROM crawl_urls c
        WHERE c.source = :source AND c.host = h.host AND c.state = 'done') AS done,
       (SELECT count(*) FROM crawl_urls c
        WHERE c.source = :source AND c.host = h.host AND c.state = 'error') AS errors
FROM h WHERE h.host IS NOT NULL ORDER BY h.host

-- name: serve_capture
SELECT hash, url, host, depth, state, status, error, fetched_run, fetched_at, digest,
       warc_file, warc_offset, etag, last_modified
FROM crawl_urls WHERE source = :source AND hash = :hash

-- name: serve_ingest_results
-- A page of ingest results in key order after (:after_type, :after_url).
SELECT ingest_type, base_url, hit, status, terminal_url, terminal_status, terminal_sha1,
       error, attempts, updated
FROM ingest_results
WHERE (ingest_type > :after_type OR (ingest_type = :after_type AND base_url > :after_url))
ORDER BY ingest_type, base_url LIMIT :limit

-- name: serve_ingest_results_of_status
-- The same, of one status only (through the index on status and key).
SELECT ingest_type, base_url, hit, status, terminal_url, terminal_status, terminal_sha1,
       error, attempts, updated
FROM ingest_results
WHERE status = :status
  AND (ingest_type > :after_type OR (ingest_type = :after_type AND base_url > :after_url))
ORDER BY ingest_type, base_url LIMIT :limit

-- name: serve_failed_jobs
-- Failed jobs by kind (the job table keeps a finished run's jobs keep_jobs_days).
SELECT kind, count(*) AS n FROM jobs WHERE state = 'failed' GROUP BY kind ORDER BY kind

-- name: serve_crawl_totals
SELECT source, sum(pages) AS pages, sum(errors) AS errors, sum(bytes) AS bytes,
       sum(redirects) AS redirects, sum(not_modified) AS not_modified,
       sum(duplicates) AS duplicates, sum(robots_excluded) AS robots_excluded
FROM crawl_runs GROUP BY source ORDER BY source

-- name: serve_archive_totals
SELECT source, sum(fetches) AS fetches, sum(bytes) AS bytes, sum(stored) AS stored,
       sum(counted) AS counted, sum(missing) AS missing
FROM archive_months GROUP BY source ORDER BY source

-- name: serve_archive_event_kinds
SELECT source, kind, count(*) AS n FROM archive_events GROUP BY source, kind
ORDER BY source, kind

-- name: serve_files_total
SELECT count(*) AS files, coalesce(sum(size), 0) AS bytes FROM file_meta

-- name: serve_fingerprint
-- What changes when anything a page shows does: a server-sent event goes out when this
-- row does, and pages computed under an equal row are served again (thresher.serve.
-- context). Messages, crawl URLs and ingest results are only written by jobs, whose
-- workers beat while they run. Cheap: indexed maxima and small tables.
SELECT (SELECT max(id) FROM source_runs) AS runs,
       (SELECT count(*) FROM sources) AS sources,
       (SELECT max(updated) FROM sources) AS sources_updated,
       (SELECT max(id) FROM ingest_requests) AS requests,
       (SELECT count(*) FROM source_runs WHERE outcome = 'running') AS running,
       (SELECT max(heartbeat) FROM workers) AS heartbeat,
       (SELECT max(updated) FROM crawl_runs) AS crawled,
       (SELECT max(id) FROM archive_events) AS events
