-- A commit job is `waiting` until its last child finishes, then `pending`: waiting
-- commits stay out of the claim index, where every claim used to step over them (a
-- chain of ingest pages leaves one per page, so claims grew slower as a run went on).
-- SQLite cannot alter a CHECK constraint: the table is rebuilt. Renaming it first
-- makes SQLite point its own references (parent_id, waits_for) at the old copy, so
-- dropping that copy deletes nothing the new table refers to.
ALTER TABLE jobs RENAME TO jobs_before_0009;

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
                    CHECK (state IN ('pending', 'waiting', 'leased', 'done', 'failed')),
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

INSERT INTO jobs (id, kind, key, parent_id, waits_for, source, source_run_id, payload,
                  state, attempts, max_attempts, priority, lease_owner, lease_expires,
                  not_before, last_error, result, created, updated)
SELECT id, kind, key, parent_id, waits_for, source, source_run_id, payload,
       CASE WHEN state = 'pending' AND waits_for IS NOT NULL
                 AND EXISTS (SELECT 1 FROM jobs_before_0009 c
                             WHERE c.parent_id = j.waits_for
                               AND c.state IN ('pending', 'leased', 'failed'))
            THEN 'waiting' ELSE state END,
       attempts, max_attempts, priority, lease_owner, lease_expires,
       not_before, last_error, result, created, updated
FROM jobs_before_0009 j;

DROP TABLE jobs_before_0009;

CREATE INDEX jobs_claimable ON jobs (source_run_id, priority DESC, id) WHERE state = 'pending';
CREATE INDEX jobs_parent ON jobs (parent_id, state);
CREATE INDEX jobs_waits_for ON jobs (waits_for);
CREATE INDEX jobs_leases ON jobs (lease_owner, lease_expires) WHERE state = 'leased';
CREATE INDEX jobs_run_state ON jobs (source_run_id, state);
