-- Web crawls: the sieve on disk, per-run progress and robots.txt answers.
-- A URL is kept as it is fetched (as linked, resolved by the URL Standard: thresher.weburl);
-- its hash is its key, the 64-bit hash of its canonical form, as a signed BIGINT.

-- name: crawl_hashes
SELECT hash FROM crawl_urls WHERE source = :source

-- name: crawl_pending
-- With the validators, the capture they came from (see migration 0014) and its digest.
SELECT hash, url, host, depth, hop, etag, last_modified, status, digest,
       capture_uri, capture_date, capture_id
FROM crawl_urls
WHERE source = :source AND (fetched_run IS NULL OR fetched_run <> :run)
ORDER BY depth, seq

-- name: crawl_pending_hosts
-- How many URLs each host has to fetch in this run: a shard run gives owners by it.
SELECT host, count(*) AS urls FROM crawl_urls
WHERE source = :source AND (fetched_run IS NULL OR fetched_run <> :run)
GROUP BY host

-- name: crawl_pending_of_shard
-- crawl_pending, of one shard's hosts only: a shard holds none of the others' URLs.
SELECT u.hash, u.url, u.host, u.depth, u.hop, u.etag, u.last_modified, u.status, u.digest,
       u.capture_uri, u.capture_date, u.capture_id
FROM crawl_urls u JOIN crawl_hosts h ON h.host = u.host
WHERE u.source = :source AND (u.fetched_run IS NULL OR u.fetched_run <> :run)
  AND h.run_id = :run AND h.shard = :shard
ORDER BY u.depth, u.seq

-- name: crawl_max_seq
SELECT coalesce(max(seq), 0) AS seq FROM crawl_urls WHERE source = :source

-- name: crawl_digests
-- The payload digest of each page stored, and the capture that holds that payload.
SELECT digest, url, capture_uri, capture_date, capture_id FROM crawl_urls
WHERE source = :source AND digest IS NOT NULL AND state = 'done'

-- name: insert_crawl_urls
-- Each batch query (this, finish_crawl_urls, send_crawl_urls) writes a commit's rows in
-- one statement: a JSON array of arrays, one per row, in the order its comment gives.
-- (executemany would hand the GIL to the crawl's event loop and back for every row: a
-- commit in the background then cost more CPU than the stall it saved.)
-- Rows: [hash, url, host, depth, seq, hop]
INSERT INTO crawl_urls (source, hash, url, host, depth, seq, discovered_run, hop)
SELECT :source, json_extract(value, '$[0]'), json_extract(value, '$[1]'),
       json_extract(value, '$[2]'), json_extract(value, '$[3]'),
       json_extract(value, '$[4]'), :run, json_extract(value, '$[5]')
FROM json_each(:rows) WHERE true
ON CONFLICT (source, hash) DO NOTHING

-- name: set_crawl_lastmods
-- Rows: [hash, lastmod]: what a sitemap said of URLs it lists (new or known).
WITH m AS MATERIALIZED (
    SELECT json_extract(value, '$[0]') AS hash, json_extract(value, '$[1]') AS lastmod
    FROM json_each(:rows)
)
UPDATE crawl_urls SET lastmod = m.lastmod
FROM m
WHERE crawl_urls.source = :source AND crawl_urls.hash = m.hash

-- name: finish_crawl_urls
-- Rows: [hash, state, status, error, fresh, etag, last_modified, digest, fetched_at,
-- warc_file, warc_offset, capture_uri, capture_date, capture_id]. fresh = 1: a new body
-- came (its validators and capture, or none, replace the old ones); fresh = 0: a 304 or
-- an error, which keeps what the last body said (a 304 confirms that body's capture).
WITH f AS MATERIALIZED (
    SELECT json_extract(value, '$[0]') AS hash, json_extract(value, '$[1]') AS state,
           json_extract(value, '$[2]') AS status, json_extract(value, '$[3]') AS error,
           json_extract(value, '$[4]') AS fresh, json_extract(value, '$[5]') AS etag,
           json_extract(value, '$[6]') AS last_modified,
           json_extract(value, '$[7]') AS digest, json_extract(value, '$[8]') AS fetched_at,
           json_extract(value, '$[9]') AS warc_file,
           json_extract(value, '$[10]') AS warc_offset,
           json_extract(value, '$[11]') AS capture_uri,
           json_extract(value, '$[12]') AS capture_date,
           json_extract(value, '$[13]') AS capture_id
    FROM json_each(:rows)
)
UPDATE crawl_urls SET
    fetched_run = :run,
    state = f.state,
    status = f.status,
    error = f.error,
    etag = CASE WHEN f.fresh = 1 THEN f.etag ELSE coalesce(f.etag, crawl_urls.etag) END,
    last_modified = CASE WHEN f.fresh = 1 THEN f.last_modified
                         ELSE coalesce(f.last_modified, crawl_urls.last_modified) END,
    digest = CASE WHEN f.fresh = 1 THEN f.digest ELSE crawl_urls.digest END,
    capture_uri = CASE WHEN f.fresh = 1 THEN nullif(f.capture_uri, crawl_urls.url)
                       ELSE crawl_urls.capture_uri END,
    capture_date = CASE WHEN f.fresh = 1 THEN f.capture_date ELSE crawl_urls.capture_date END,
    capture_id = CASE WHEN f.fresh = 1 THEN f.capture_id ELSE crawl_urls.capture_id END,
    fetched_at = f.fetched_at,
    warc_file = coalesce(f.warc_file, crawl_urls.warc_file),
    warc_offset = coalesce(f.warc_offset, crawl_urls.warc_offset)
FROM f
WHERE crawl_urls.source = :source AND crawl_urls.hash = f.hash

-- name: crawl_url_states
SELECT url, depth, hop, lastmod, state, status, error, fetched_run, digest, warc_file,
       warc_offset, capture_uri, capture_date, capture_id
FROM crawl_urls WHERE source = :source ORDER BY seq

-- name: open_crawl_run
INSERT INTO crawl_runs (run_id, source, started, updated)
VALUES (:run, :source, :now, :now)
ON CONFLICT (run_id) DO NOTHING

-- name: get_crawl_run
SELECT * FROM crawl_runs WHERE run_id = :run

-- name: latest_crawl_run
SELECT * FROM crawl_runs WHERE source = :source ORDER BY run_id DESC LIMIT 1

-- name: update_crawl_run
UPDATE crawl_runs SET
    warc_file = coalesce(:warc_file, warc_file),
    warc_offset = coalesce(:warc_offset, warc_offset),
    pages = pages + :pages,
    errors = errors + :errors,
    bytes = bytes + :bytes,
    redirects = redirects + :redirects,
    not_modified = not_modified + :not_modified,
    duplicates = duplicates + :duplicates,
    robots_excluded = robots_excluded + :robots_excluded,
    requisites = requisites + :requisites,
    sitemaps = sitemaps + :sitemaps,
    links_dropped = links_dropped + :links_dropped,
    queued = :queued,
    hosts = :hosts,
    updated = :now
WHERE run_id = :run

-- name: crawl_robots
SELECT site, status, body, fetched_at FROM crawl_robots WHERE source = :source

-- name: upsert_crawl_robots
INSERT INTO crawl_robots (source, site, status, body, fetched_at)
VALUES (:source, :site, :status, :body, :fetched_at)
ON CONFLICT (source, site) DO UPDATE SET
    status = excluded.status, body = excluded.body, fetched_at = excluded.fetched_at

-- name: lease_held
SELECT 1 AS held FROM jobs WHERE id = :job AND lease_owner = :owner AND state = 'leased'

-- Shards of a crawl run (crawl_shards, crawl_inbox: see migration 0011).

-- name: open_crawl_shard
-- A shard (re)starting has its pending URLs in hand: busy until it says otherwise.
INSERT INTO crawl_shards (run_id, shard, shards, idle, updated)
VALUES (:run, :shard, :shards, 0, :now)
ON CONFLICT (run_id, shard) DO UPDATE SET idle = 0, updated = excluded.updated

-- name: get_crawl_shard
SELECT * FROM crawl_shards WHERE run_id = :run AND shard = :shard

-- name: crawl_shard_rows
SELECT * FROM crawl_shards WHERE run_id = :run ORDER BY shard

-- name: update_crawl_shard
UPDATE crawl_shards SET
    warc_file = coalesce(:warc_file, warc_file),
    warc_offset = coalesce(:warc_offset, warc_offset),
    finished = finished + :finished,
    queued = :queued,
    hosts = :hosts,
    idle = :idle,
    updated = :now
WHERE run_id = :run AND shard = :shard

-- name: total_crawl_run
-- The run's queue and hosts are its shards' sums (its counters are added to directly).
UPDATE crawl_runs SET
    queued = (SELECT coalesce(sum(queued), 0) FROM crawl_shards WHERE run_id = :run),
    hosts = (SELECT coalesce(sum(hosts), 0) FROM crawl_shards WHERE run_id = :run)
WHERE run_id = :run

-- name: send_crawl_urls
-- Rows: [shard, hash, url, depth, hop] (see insert_crawl_urls). Two shards may send the
-- same URL: the owner gets it once, at the lesser depth (and as a link if either found
-- it as one).
INSERT INTO crawl_inbox (run_id, shard, hash, url, depth, hop)
SELECT :run, json_extract(value, '$[0]'), json_extract(value, '$[1]'),
       json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]')
FROM json_each(:rows) WHERE true
ON CONFLICT (run_id, shard, hash) DO UPDATE SET
    depth = CASE WHEN excluded.depth < crawl_inbox.depth
                 THEN excluded.depth ELSE crawl_inbox.depth END,
    hop = CASE WHEN excluded.hop < crawl_inbox.hop THEN excluded.hop ELSE crawl_inbox.hop END

-- name: drain_crawl_inbox
DELETE FROM crawl_inbox WHERE run_id = :run AND shard = :shard
RETURNING hash, url, depth, hop

-- name: crawl_shards_state
-- One statement, so one snapshot: the run is over when all its shards have started,
-- none is busy and no URL waits for one. `waiting`: sibling shard jobs not running
-- (an idle shard holding a worker's slot would keep them from starting).
SELECT
    (SELECT count(*) FROM crawl_shards WHERE run_id = :run) AS started,
    (SELECT count(*) FROM crawl_shards WHERE run_id = :run AND idle = 0) AS busy,
    (SELECT count(*) FROM (SELECT 1 FROM crawl_inbox WHERE run_id = :run LIMIT 1) AS m) AS mail,
    (SELECT count(*) FROM jobs AS j JOIN jobs AS me ON j.parent_id = me.parent_id
     WHERE me.id = :job AND j.kind = me.kind AND j.state = 'pending') AS waiting

-- name: lock_crawl_run
-- Taken first by every shard transaction: owners of hosts are given out one at a time.
UPDATE crawl_runs SET updated = :now WHERE run_id = :run

-- name: crawl_host_owners
SELECT host, shard FROM crawl_hosts WHERE run_id = :run

-- name: crawl_host_counts
SELECT shard, count(*) AS hosts FROM crawl_hosts WHERE run_id = :run GROUP BY shard

-- name: get_crawl_host
SELECT shard FROM crawl_hosts WHERE run_id = :run AND host = :host

-- name: assign_crawl_host
INSERT INTO crawl_hosts (run_id, host, shard) VALUES (:run, :host, :shard)
ON CONFLICT (run_id, host) DO NOTHING

-- name: crawl_run_errors
-- Sitemaps (hop 2) that failed are not the crawl's errors: they are not counted either.
-- In the order the URLs were found, so the first is a seed's when a seed failed.
SELECT url, status, error FROM crawl_urls
WHERE source = :source AND fetched_run = :run AND state = 'error' AND hop <> 2
ORDER BY seq
