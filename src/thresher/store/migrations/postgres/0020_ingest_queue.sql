-- The URLs of an ingest run: see the SQLite migration of the same number.
CREATE TABLE ingest_queue (
    run_id          BIGINT NOT NULL,
    shard           INTEGER NOT NULL,
    turn            BIGINT NOT NULL,
    host_no         BIGINT NOT NULL,
    ingest_type     TEXT NOT NULL,
    base_url        TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    not_before      DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, shard, turn, host_no)
);
