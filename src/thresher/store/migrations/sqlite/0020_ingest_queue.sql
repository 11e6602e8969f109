-- The URLs of an ingest run (thresher.ingest.ledger): the run's selection, frozen when
-- the run starts, one row per (ingest_type, base_url), each host's URLs in one shard.
-- A row goes in the commit that writes its URL's result; `attempts` and `not_before`
-- keep a transient failure's retry across a restart. A shard reads its rows in
-- (turn, host_no) order: `turn` is the URL's place among its host's URLs, so a page of
-- rows takes the hosts in turns however the URLs were ordered.
CREATE TABLE ingest_queue (
    run_id          INTEGER NOT NULL,
    shard           INTEGER NOT NULL,
    turn            INTEGER NOT NULL,
    host_no         INTEGER NOT NULL,
    ingest_type     TEXT NOT NULL,
    base_url        TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    not_before      REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, shard, turn, host_no)
);
