-- A crawl split over shards (the web source's `shards` option): each shard job owns some
-- hosts (crawl_hosts), and has its own WARC files, committed position and page count
-- here. `idle` says the shard has nothing in hand: the run is over once, in one
-- statement, every shard is idle and no URL waits in an inbox.
CREATE TABLE crawl_shards (
    run_id          INTEGER NOT NULL,
    shard           INTEGER NOT NULL,
    shards          INTEGER NOT NULL,
    warc_file       TEXT,
    warc_offset     BIGINT,
    finished        INTEGER NOT NULL DEFAULT 0,
    queued          INTEGER NOT NULL DEFAULT 0,
    hosts           INTEGER NOT NULL DEFAULT 0,
    idle            INTEGER NOT NULL DEFAULT 0,
    updated         DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, shard)
);

-- URLs one shard discovered on another shard's hosts. The discoverer writes the URL to
-- crawl_urls and a row here in one commit; the owner deletes its rows in the commit
-- that marks it busy, and finds the URLs again in crawl_urls if it dies before
-- fetching them.
CREATE TABLE crawl_inbox (
    run_id          INTEGER NOT NULL,
    shard           INTEGER NOT NULL,
    hash            BIGINT NOT NULL,
    url             TEXT NOT NULL,
    depth           INTEGER NOT NULL,
    PRIMARY KEY (run_id, shard, hash)
);

-- Which shard fetches a host, this run. A host gets an owner when a shard first meets it
-- (the shard owning the fewest hosts then), in a transaction that holds the run's row,
-- so owners are given out one at a time and never change during the run.
CREATE TABLE crawl_hosts (
    run_id          INTEGER NOT NULL,
    host            TEXT NOT NULL,
    shard           INTEGER NOT NULL,
    PRIMARY KEY (run_id, host)
);
