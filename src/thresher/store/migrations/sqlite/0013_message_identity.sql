-- A message's identity no longer depends on how the archive wrapped it (issue 18):
-- messages are told apart by the digest of their normal form (thresher.archives.normal:
-- headers unfolded and decoded, bodies decoded, MIME boundaries, trailing blank lines and
-- envelope lines ignored), not by the digest of their raw bytes. One row per (list,
-- key, normal form); the raw bytes of the first capture are kept.
--
-- `norm_sha256` is that digest; the key of a message without a Message-ID becomes
-- 'sha256:' + it, so a re-serialised copy keeps its key. `parse_error` says why a
-- header, the text or the normal form of a message could not be read (its raw bytes
-- are kept all the same).
ALTER TABLE messages ADD COLUMN norm_sha256 TEXT;
ALTER TABLE messages ADD COLUMN parse_error TEXT;

-- Python: the normal form of every stored message, and the new keys.
-- step: thresher.archives.identity

-- The copies stored today because an archive re-wrapped a message: a row with the
-- list, key and normal form of an earlier row goes (the delete trigger takes it out of
-- the search index); the first capture stays.
DELETE FROM messages WHERE id IN (
    SELECT m.id FROM messages m
    WHERE EXISTS (SELECT 1 FROM messages o
                  WHERE o.source = m.source AND o.key = m.key
                    AND o.norm_sha256 = m.norm_sha256 AND o.id < m.id));

-- Conflicts are now messages that really differ under one key.
UPDATE messages SET conflict = CASE WHEN EXISTS (
    SELECT 1 FROM messages o
    WHERE o.source = messages.source AND o.key = messages.key
      AND o.norm_sha256 <> messages.norm_sha256) THEN 1 ELSE 0 END;

-- `stored` counts distinct messages: per month, or per list for a plain mbox ('all').
UPDATE archive_months SET stored = (
    SELECT count(*) FROM messages m
    WHERE m.source = archive_months.source
      AND (archive_months.month = 'all' OR m.month = archive_months.month));

-- SQLite cannot swap a table's UNIQUE constraint: the table is built again with
-- UNIQUE (source, key, norm_sha256), same ids (the search index refers to them), and
-- its AUTOINCREMENT counter carried over so that no id is ever given twice.
CREATE TABLE messages_0013 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    source          TEXT NOT NULL,
    month           TEXT NOT NULL,
    key             TEXT NOT NULL,
    sha256          TEXT NOT NULL,
    norm_sha256     TEXT NOT NULL,
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
    parse_error     TEXT,
    UNIQUE (source, key, norm_sha256)
);
INSERT INTO messages_0013 (id, source, month, key, sha256, norm_sha256, message_id, date,
                           date_raw, date_flag, from_name, from_addr, subject, in_reply_to,
                           refs, body, raw, position, conflict, first_seen, parse_error)
SELECT id, source, month, key, sha256, norm_sha256, message_id, date, date_raw, date_flag,
       from_name, from_addr, subject, in_reply_to, refs, body, raw, position, conflict,
       first_seen, parse_error
FROM messages ORDER BY id;
CREATE TABLE messages_0013_seq AS SELECT seq FROM sqlite_sequence WHERE name = 'messages';
DROP TABLE messages;
ALTER TABLE messages_0013 RENAME TO messages;
UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT max(seq) FROM messages_0013_seq), 0))
WHERE name = 'messages';
DROP TABLE messages_0013_seq;
CREATE INDEX messages_month ON messages (source, month, position);
CREATE INDEX messages_message_id ON messages (message_id);
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, subject, from_name, from_addr, body)
    VALUES ('delete', old.id, old.subject, old.from_name, old.from_addr, old.body);
END;
