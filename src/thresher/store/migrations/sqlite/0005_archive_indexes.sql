-- The listing pages of mail archives (a pipermail or mod_mbox index), kept with their
-- validators so that the next run asks for them conditionally: an archive where nothing
-- changed then costs a 304 for its index too, and the page is read from here.
CREATE TABLE archive_indexes (
    source          TEXT NOT NULL,
    url             TEXT NOT NULL,
    etag            TEXT,
    last_modified   TEXT,
    body            BLOB NOT NULL,
    fetched_at      REAL NOT NULL,
    PRIMARY KEY (source, url)
);
