-- Stored list messages read back: `thresher export` and `thresher search`.
-- (Written by the harvest with the queries in archives.sql.)

-- name: export_message_ids
-- The export reads the ids in order first, then the messages a batch at a time, so a
-- list of any size is never held in memory. Messages without a byte position (archives
-- that are not mbox files) come after the others of their month.
SELECT id, length(raw) AS size FROM messages WHERE source = :source
ORDER BY month, position IS NULL, position, id

-- name: export_month_message_ids
-- The same for one month, a query of its own: `month = coalesce(:month, month)` read
-- every entry of the list in the index (18 ms for a month of a 250,000-message list,
-- against 0.6 ms seeking to the month).
SELECT id, length(raw) AS size FROM messages WHERE source = :source AND month = :month
ORDER BY position IS NULL, position, id

-- name: export_messages_by_id
-- :ids is a JSON array of message ids.
SELECT id, source, month, key, sha256, message_id, date, date_raw, date_flag, from_name,
       from_addr, subject, in_reply_to, refs, raw, position, conflict, first_seen, parse_error,
       truncated
FROM messages
WHERE id IN (SELECT value FROM json_each(:ids))

-- name: search_messages
-- :fts is an FTS5 expression of quoted strings only (see archives/search.py), :terms
-- the same terms as a JSON array (used by PostgreSQL). bm25: lower is better. Only the
-- newest :ranked matches (of list :source, if given) are scored, in rowid order through
-- the index, so a word in most messages costs :ranked scores, not one per match. Of
-- those, only the ones scoring at least as well as the :limit-th best are looked up for
-- their date (the tie-break: no other can be in the first :limit), and only the :limit
-- shown get a snippet, which marks matches with STX/ETX (char 2 and 3).
WITH hits AS MATERIALIZED (
    SELECT f.rowid AS id, bm25(messages_fts) AS score FROM messages_fts f
    WHERE messages_fts MATCH :fts
      AND (:source IS NULL OR (SELECT source FROM messages WHERE id = f.rowid) = :source)
    ORDER BY f.rowid DESC LIMIT :ranked
), top AS MATERIALIZED (
    SELECT m.id, hits.score, m.date FROM hits JOIN messages m ON m.id = hits.id
    WHERE hits.score <= (SELECT max(score) FROM (SELECT score FROM hits ORDER BY score
                                                 LIMIT :limit))
    ORDER BY hits.score, m.date IS NULL, m.date DESC, m.id DESC LIMIT :limit
)
SELECT m.id, m.source, m.month, m.date, m.from_name, m.from_addr, m.subject, m.message_id,
       snippet(messages_fts, 3, char(2), char(3), '…', 16) AS snippet
FROM top JOIN messages_fts ON messages_fts.rowid = top.id JOIN messages m ON m.id = top.id
WHERE messages_fts MATCH :fts
ORDER BY top.score, top.date IS NULL, top.date DESC, top.id DESC
