-- Mailing-list archives (the pipermail, modmbox, ponymail, hyperkitty and mbox types).
--
-- archive_months is the harvest's memory, one row per sub-list (a month; 'all' for a
-- plain mbox file). It is written in the same transaction as the month's messages, so it
-- never claims a message that is not stored. `expected` is what the archive itself
-- counted (Pony Mail stats, the mod_mbox index, HyperKitty), `counted` the messages in
-- the month file as last harvested (an identical copy listed twice counts twice: like
-- with like), `stored` the distinct messages kept for the month. The stop sign is
-- `stop_offset`, the byte offset just past the newest harvested message in the archive's
-- own order (never a Date header); `tail_sha256` is the digest of the bytes before it,
-- checked against the overlap of a Range request. A month is 'complete' once it matches
-- and its grace period after month end is over; complete months are never asked again.
CREATE TABLE archive_months (
    source          TEXT NOT NULL,
    month           TEXT NOT NULL,
    url             TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'open',
    expected        INTEGER,
    counted         INTEGER NOT NULL DEFAULT 0,
    stored          INTEGER NOT NULL DEFAULT 0,
    missing         INTEGER NOT NULL DEFAULT 0,
    etag            TEXT,
    last_modified   TEXT,
    length          BIGINT,
    stop_offset     BIGINT,
    stop_key        TEXT,
    tail_sha256     TEXT,
    fetches         INTEGER NOT NULL DEFAULT 0,
    bytes           BIGINT NOT NULL DEFAULT 0,
    checked_at      REAL,
    fetched_at      REAL,
    completed_at    REAL,
    PRIMARY KEY (source, month)
);

-- What changed upstream and what went wrong, per month: a month that shrank or was
-- rewritten, a truncated download, two different messages sharing a Message-ID.
-- Nothing is ever deleted from `messages`; the difference is recorded here.
CREATE TABLE archive_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    source          TEXT NOT NULL,
    month           TEXT NOT NULL,
    at              REAL NOT NULL,
    kind            TEXT NOT NULL,
    detail          TEXT NOT NULL
);
CREATE INDEX archive_events_source ON archive_events (source, month, id);

-- One row per distinct message of a list. The key is the normalised Message-ID, or
-- 'sha256:' + the digest of the raw bytes when there is none, so a re-run never adds a
-- second copy; (source, key, sha256) is unique, so identical copies are stored once and
-- different messages sharing a Message-ID are all kept, flagged by `conflict`.
-- `month` is the archive month it was first found in, `position` its byte offset there.
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    source          TEXT NOT NULL,
    month           TEXT NOT NULL,
    key             TEXT NOT NULL,
    sha256          TEXT NOT NULL,
    message_id      TEXT,
    date            REAL,
    date_raw        TEXT,
    date_flag       TEXT,
    from_name       TEXT,
    from_addr       TEXT,
    subject         TEXT,
    in_reply_to     TEXT,
    refs            TEXT,
    body            TEXT,
    raw             BLOB NOT NULL,
    position        BIGINT,
    conflict        INTEGER NOT NULL DEFAULT 0,
    first_seen      REAL NOT NULL,
    UNIQUE (source, key, sha256)
);
CREATE INDEX messages_month ON messages (source, month, position);
CREATE INDEX messages_message_id ON messages (message_id);

-- Full-text search (`thresher search`): FTS5 over subject, sender and body text.
-- unicode61 without stemming and with accents kept, like PostgreSQL's 'simple'
-- configuration over the text with non-alphanumerics made spaces, so both backends find
-- the same messages. Rows are added by the month job in bulk, in the transaction that
-- stores them (query index_new_messages): an insert trigger cost four times as much
-- (about 300 µs a message against 80). The delete trigger keeps the index exact.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    subject, from_name, from_addr, body,
    content='messages', content_rowid='id',
    tokenize='unicode61 remove_diacritics 0'
);
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, subject, from_name, from_addr, body)
    VALUES ('delete', old.id, old.subject, old.from_name, old.from_addr, old.body);
END;
