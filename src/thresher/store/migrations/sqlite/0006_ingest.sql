-- Bulk ingest (`thresher ingest`): claims that a URL holds the full text of a work,
-- loaded from dumps; one result per (ingest_type, base_url); files stored once by SHA-1.
--
-- A request is unique by (ingest_type, base_url, link_source, link_source_id): loading
-- the same dump twice adds nothing. Several requests (sources) may name one URL; it is
-- fetched once, and its result is shared.
CREATE TABLE ingest_requests (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    ingest_type     TEXT NOT NULL,
    base_url        TEXT NOT NULL,
    link_source     TEXT NOT NULL,
    link_source_id  TEXT NOT NULL,
    release_stage   TEXT,
    ext_ids         TEXT,
    request         TEXT,
    created         REAL NOT NULL,
    UNIQUE (ingest_type, base_url, link_source, link_source_id)
);
CREATE INDEX ingest_requests_url ON ingest_requests (ingest_type, base_url);
CREATE INDEX ingest_requests_source ON ingest_requests (link_source, id);

-- What happened when a URL was ingested: `status` from the vocabulary in
-- docs/ingest.md, `hit` when the expected kind of file was found, the terminal URL,
-- its HTTP status and the file's SHA-1, the hops taken (a JSON list), an error.
CREATE TABLE ingest_results (
    ingest_type     TEXT NOT NULL,
    base_url        TEXT NOT NULL,
    hit             INTEGER NOT NULL,
    status          TEXT NOT NULL,
    terminal_url    TEXT,
    terminal_status INTEGER,
    terminal_sha1   TEXT,
    hops            TEXT NOT NULL DEFAULT '[]',
    error           TEXT,
    attempts        INTEGER NOT NULL DEFAULT 1,
    updated         REAL NOT NULL,
    PRIMARY KEY (ingest_type, base_url)
);
CREATE INDEX ingest_results_status ON ingest_results (status);

-- Every file fetched, once however many requests lead to it, with where its WARC
-- record is.
CREATE TABLE file_meta (
    sha1            TEXT PRIMARY KEY,
    sha256          TEXT NOT NULL,
    md5             TEXT NOT NULL,
    size            BIGINT NOT NULL,
    mimetype        TEXT,
    warc_file       TEXT,
    warc_offset     BIGINT,
    first_seen      REAL NOT NULL
);
