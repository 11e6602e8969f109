-- Sources, runs, jobs and workers: the foundation every harvester builds on.
-- Times are REAL seconds since the epoch (UTC), set by the caller's clock.

CREATE TABLE sources (
    name        TEXT PRIMARY KEY,
    type        TEXT NOT NULL,
    url         TEXT NOT NULL,
    options     TEXT NOT NULL DEFAULT '{}',
    created     REAL NOT NULL,
    updated     REAL NOT NULL
);

CREATE TABLE source_runs (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    started     REAL NOT NULL,
    finished    REAL,
    outcome     TEXT NOT NULL DEFAULT 'running',
    root_job_id INTEGER,
    counts      TEXT NOT NULL DEFAULT '{}',
    error       TEXT
);
CREATE INDEX source_runs_source ON source_runs (source, id);
CREATE UNIQUE INDEX source_runs_one_open ON source_runs (source) WHERE outcome = 'running';

CREATE TABLE jobs (
    id              INTEGER PRIMARY KEY,
    kind            TEXT NOT NULL,
    key             TEXT NOT NULL UNIQUE,
    parent_id       INTEGER REFERENCES jobs (id),
    waits_for       INTEGER REFERENCES jobs (id),
    source          TEXT,
    source_run_id   INTEGER REFERENCES source_runs (id),
    payload         TEXT NOT NULL DEFAULT '{}',
    state           TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'leased', 'done', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    priority        INTEGER NOT NULL DEFAULT 0,
    lease_owner     TEXT,
    lease_expires   REAL,
    not_before      REAL NOT NULL,
    last_error      TEXT,
    result          TEXT,
    created         REAL NOT NULL,
    updated         REAL NOT NULL
);
CREATE INDEX jobs_claimable ON jobs (source_run_id, priority DESC, id) WHERE state = 'pending';
CREATE INDEX jobs_parent ON jobs (parent_id, state);
CREATE INDEX jobs_waits_for ON jobs (waits_for);
CREATE INDEX jobs_leases ON jobs (lease_owner, lease_expires) WHERE state = 'leased';
CREATE INDEX jobs_run_state ON jobs (source_run_id, state);

CREATE TABLE workers (
    owner       TEXT PRIMARY KEY,
    hostname    TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    started     REAL NOT NULL,
    heartbeat   REAL NOT NULL,
    stopped     REAL,
    jobs_done   INTEGER NOT NULL DEFAULT 0
);

-- What synthetic (benchmark and self-test) sources write: one row per committed job
-- execution and deliberately no unique key, so a result committed twice would show.
CREATE TABLE synthetic_results (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    job_key     TEXT NOT NULL,
    owner       TEXT NOT NULL,
    value       TEXT NOT NULL,
    written     REAL NOT NULL
);
CREATE INDEX synthetic_results_source ON synthetic_results (source, job_key);

-- Snapshots of URLs (the `urls` source type): the newest fetch of each URL per source.
CREATE TABLE documents (
    source          TEXT NOT NULL,
    url             TEXT NOT NULL,
    status          INTEGER,
    sha256          TEXT,
    length          INTEGER,
    content_type    TEXT,
    etag            TEXT,
    last_modified   TEXT,
    fetched         REAL NOT NULL,
    changed         REAL NOT NULL,
    fetches         INTEGER NOT NULL DEFAULT 1,
    error           TEXT,
    PRIMARY KEY (source, url)
);
