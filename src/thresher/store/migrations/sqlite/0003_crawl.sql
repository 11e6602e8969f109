-- Web crawls (the `web` source type and `thresher crawl`): the crawl's memory.
--
-- crawl_urls is the sieve on disk: every URL a source's crawls ever discovered, once,
-- keyed by its 64-bit canonical hash. A resumed or repeated crawl rebuilds its in-memory
-- sieve from it, so no known URL is forgotten and none is emitted twice. fetched_run
-- says in which run the URL was last finished: a run fetches every URL it has not
-- finished yet, with the validators of the last fetch for a conditional GET.
CREATE TABLE crawl_urls (
    source          TEXT NOT NULL,
    hash            BIGINT NOT NULL,
    url             TEXT NOT NULL,
    host            TEXT NOT NULL,
    depth           INTEGER NOT NULL,
    seq             BIGINT NOT NULL,
    discovered_run  INTEGER NOT NULL,
    fetched_run     INTEGER,
    state           TEXT NOT NULL DEFAULT 'queued',
    status          INTEGER,
    error           TEXT,
    etag            TEXT,
    last_modified   TEXT,
    digest          TEXT,
    fetched_at      REAL,
    warc_file       TEXT,
    warc_offset     BIGINT,
    PRIMARY KEY (source, hash)
);
CREATE INDEX crawl_urls_digest ON crawl_urls (source, digest);

-- One row per crawl run: how far its WARC output is committed (everything past
-- warc_offset in warc_file was written by a process that died before committing, and is
-- cut off on resume) and the counters the progress display and the summary show.
CREATE TABLE crawl_runs (
    run_id          INTEGER PRIMARY KEY,
    source          TEXT NOT NULL,
    warc_file       TEXT,
    warc_offset     BIGINT,
    pages           INTEGER NOT NULL DEFAULT 0,
    errors          INTEGER NOT NULL DEFAULT 0,
    bytes           BIGINT NOT NULL DEFAULT 0,
    redirects       INTEGER NOT NULL DEFAULT 0,
    not_modified    INTEGER NOT NULL DEFAULT 0,
    duplicates      INTEGER NOT NULL DEFAULT 0,
    robots_excluded INTEGER NOT NULL DEFAULT 0,
    queued          INTEGER NOT NULL DEFAULT 0,
    hosts           INTEGER NOT NULL DEFAULT 0,
    started         REAL NOT NULL,
    updated         REAL NOT NULL
);

-- robots.txt answers per site (scheme://host:port), kept so a resumed crawl neither asks
-- again before they expire nor writes them to its WARC files twice.
CREATE TABLE crawl_robots (
    source          TEXT NOT NULL,
    site            TEXT NOT NULL,
    status          INTEGER,
    body            BLOB,
    fetched_at      REAL NOT NULL,
    PRIMARY KEY (source, site)
);
