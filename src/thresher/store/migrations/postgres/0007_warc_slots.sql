-- WARC slots (see the SQLite migration of the same number): the WARC files that concurrent jobs append to (ingest bodies). A slot is a
-- file prefix one process writes at a time (`owner`, a worker of the `workers` table);
-- `filename` and `position` point just past the last record whose file_meta
-- rows were committed, set in the same transaction. A process that takes over the slot
-- of a dead owner cuts the file back to that position; a clean stop leaves filename NULL,
-- so the next owner starts a new file.
CREATE TABLE warc_slots (
    name        TEXT PRIMARY KEY,
    owner       TEXT,
    filename    TEXT,
    position    BIGINT NOT NULL DEFAULT 0,
    updated     DOUBLE PRECISION NOT NULL
);
