-- Politeness shared by every worker of a PostgreSQL store (thresher.fetch.leases): one
-- row per host (`host:NAME`) and per server address (`ip:ADDR`). `next_at` is when the
-- key may next be fetched; a worker fetching a host holds its row (`owner`) until
-- `expires`, the latest its fetch can end, so a killed worker's hold runs out by itself.
CREATE TABLE host_leases (
    key         TEXT PRIMARY KEY,
    owner       TEXT,
    expires     REAL,
    next_at     REAL NOT NULL DEFAULT 0
);
CREATE INDEX host_leases_owner ON host_leases (owner) WHERE owner IS NOT NULL;
