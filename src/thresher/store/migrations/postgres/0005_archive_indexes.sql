-- The listing pages of mail archives, kept with their validators (see the SQLite
-- migration of the same number).
CREATE TABLE archive_indexes (
    source          TEXT NOT NULL,
    url             TEXT NOT NULL,
    etag            TEXT,
    last_modified   TEXT,
    body            BYTEA NOT NULL,
    fetched_at      DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (source, url)
);
