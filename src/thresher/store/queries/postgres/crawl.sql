-- A commit's batches as JSON arrays of arrays (see crawl.sql), read with
-- jsonb_array_elements: one statement and one round trip per batch.

-- name: insert_crawl_urls
INSERT INTO crawl_urls (source, hash, url, host, depth, seq, discovered_run, hop)
SELECT :source, (e->>0)::bigint, e->>1, e->>2, (e->>3)::integer, (e->>4)::bigint, :run,
       (e->>5)::integer
FROM jsonb_array_elements(:rows::jsonb) AS e
ON CONFLICT (source, hash) DO NOTHING

-- name: set_crawl_lastmods
UPDATE crawl_urls AS u SET lastmod = m.lastmod
FROM (
    SELECT (e->>0)::bigint AS hash, e->>1 AS lastmod
    FROM jsonb_array_elements(:rows::jsonb) AS e
) AS m
WHERE u.source = :source AND u.hash = m.hash

-- name: finish_crawl_urls
UPDATE crawl_urls AS u SET
    fetched_run = :run,
    state = f.state,
    status = f.status,
    error = f.error,
    etag = CASE WHEN f.fresh = 1 THEN f.etag ELSE coalesce(f.etag, u.etag) END,
    last_modified = CASE WHEN f.fresh = 1 THEN f.last_modified
                         ELSE coalesce(f.last_modified, u.last_modified) END,
    digest = CASE WHEN f.fresh = 1 THEN f.digest ELSE u.digest END,
    capture_uri = CASE WHEN f.fresh = 1 THEN nullif(f.capture_uri, u.url) ELSE u.capture_uri END,
    capture_date = CASE WHEN f.fresh = 1 THEN f.capture_date ELSE u.capture_date END,
    capture_id = CASE WHEN f.fresh = 1 THEN f.capture_id ELSE u.capture_id END,
    fetched_at = f.fetched_at,
    warc_file = coalesce(f.warc_file, u.warc_file),
    warc_offset = coalesce(f.warc_offset, u.warc_offset)
FROM (
    SELECT (e->>0)::bigint AS hash, e->>1 AS state, (e->>2)::integer AS status,
           e->>3 AS error, (e->>4)::integer AS fresh, e->>5 AS etag,
           e->>6 AS last_modified, e->>7 AS digest, (e->>8)::double precision AS fetched_at,
           e->>9 AS warc_file, (e->>10)::bigint AS warc_offset,
           e->>11 AS capture_uri, e->>12 AS capture_date, e->>13 AS capture_id
    FROM jsonb_array_elements(:rows::jsonb) AS e
) AS f
WHERE u.source = :source AND u.hash = f.hash

-- name: send_crawl_urls
INSERT INTO crawl_inbox (run_id, shard, hash, url, depth, hop)
SELECT :run, (e->>0)::integer, (e->>1)::bigint, e->>2, (e->>3)::integer, (e->>4)::integer
FROM jsonb_array_elements(:rows::jsonb) AS e
ON CONFLICT (run_id, shard, hash) DO UPDATE SET
    depth = CASE WHEN excluded.depth < crawl_inbox.depth
                 THEN excluded.depth ELSE crawl_inbox.depth END,
    hop = CASE WHEN excluded.hop < crawl_inbox.hop THEN excluded.hop ELSE crawl_inbox.hop END
