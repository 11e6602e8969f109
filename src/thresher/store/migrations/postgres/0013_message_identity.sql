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
-- list, key and normal form of an earlier row goes; the first capture stays.
DELETE FROM messages m
WHERE EXISTS (SELECT 1 FROM messages o
              WHERE o.source = m.source AND o.key = m.key
                AND o.norm_sha256 = m.norm_sha256 AND o.id < m.id);

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

ALTER TABLE messages ALTER COLUMN norm_sha256 SET NOT NULL;
ALTER TABLE messages DROP CONSTRAINT messages_source_key_sha256_key;
ALTER TABLE messages ADD CONSTRAINT messages_identity UNIQUE (source, key, norm_sha256);
