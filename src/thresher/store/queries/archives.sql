-- Mailing-list archives: months (sub-lists), their messages, and what changed upstream.

-- name: archive_months
SELECT * FROM archive_months WHERE source = :source ORDER BY month

-- name: get_archive_month
SELECT * FROM archive_months WHERE source = :source AND month = :month

-- name: save_archive_month
-- Written in the same transaction as the month's messages: the state never claims a
-- message that is not stored.
INSERT INTO archive_months (source, month, url, state, expected, counted, stored, missing,
                            etag, last_modified, length, stop_offset, stop_key, tail_sha256,
                            fetches, bytes, checked_at, fetched_at, completed_at)
VALUES (:source, :month, :url, :state, :expected, :counted, :stored, :missing,
        :etag, :last_modified, :length, :stop_offset, :stop_key, :tail_sha256,
        1, :bytes, :now, :now, :completed_at)
ON CONFLICT (source, month) DO UPDATE SET
    url = excluded.url,
    state = excluded.state,
    expected = excluded.expected,
    counted = excluded.counted,
    stored = excluded.stored,
    missing = excluded.missing,
    etag = excluded.etag,
    last_modified = excluded.last_modified,
    length = excluded.length,
    stop_offset = excluded.stop_offset,
    stop_key = excluded.stop_key,
    tail_sha256 = excluded.tail_sha256,
    fetches = archive_months.fetches + 1,
    bytes = archive_months.bytes + excluded.bytes,
    checked_at = excluded.checked_at,
    fetched_at = excluded.fetched_at,
    completed_at = excluded.completed_at

-- name: checkpoint_archive_month
-- Part of a unit stored by a job still harvesting it (a git epoch, a month of thousands
-- of pages): its messages, in the same transaction, and the stop sign just past them.
-- Counts, validators and the state are the finished job's to write.
INSERT INTO archive_months (source, month, url, state, stored, stop_offset, stop_key,
                            tail_sha256, fetched_at)
VALUES (:source, :month, :url, 'open', :stored, :stop_offset, :stop_key, :tail_sha256, :now)
ON CONFLICT (source, month) DO UPDATE SET
    url = excluded.url,
    state = 'open',
    stored = excluded.stored,
    stop_offset = excluded.stop_offset,
    stop_key = excluded.stop_key,
    tail_sha256 = excluded.tail_sha256,
    fetched_at = excluded.fetched_at

-- name: check_archive_month
-- A month the archive says is unchanged (its count matches): only the check is recorded.
UPDATE archive_months
SET checked_at = :now, expected = :expected, state = :state, completed_at = :completed_at
WHERE source = :source AND month = :month

-- name: insert_message
-- One row per (list, key, normal form): a capture of a message already stored, however
-- the archive wrapped it this time, adds nothing; the first capture's bytes stay.
INSERT INTO messages (source, month, key, sha256, norm_sha256, message_id, date, date_raw,
                      date_flag, from_name, from_addr, subject, in_reply_to, refs, body,
                      raw, position, first_seen, parse_error, truncated)
VALUES (:source, :month, :key, :sha256, :norm_sha256, :message_id, :date, :date_raw,
        :date_flag, :from_name, :from_addr, :subject, :in_reply_to, :refs, :body,
        :raw, :position, :now, :parse_error, :truncated)
ON CONFLICT (source, key, norm_sha256) DO NOTHING

-- name: flag_conflicts
-- Different messages sharing a Message-ID are all kept; flag every copy of such a key.
UPDATE messages SET conflict = 1
WHERE source = :source AND conflict = 0 AND key IN (
    SELECT n.key FROM messages n
    WHERE n.source = :source AND n.month = :month AND EXISTS (
        SELECT 1 FROM messages o
        WHERE o.source = n.source AND o.key = n.key AND o.norm_sha256 <> n.norm_sha256))

-- name: count_month_messages
SELECT count(*) AS n FROM messages WHERE source = :source AND month = :month

-- name: month_message_positions
SELECT position, key FROM messages
WHERE source = :source AND month = :month AND position IS NOT NULL

-- name: source_message_positions
SELECT position, key FROM messages WHERE source = :source AND position IS NOT NULL

-- name: count_pairs_among
-- How many of :pairs (a JSON array of [key, norm_sha256]) the list holds: a unit that
-- is not a month counts what it added itself.
SELECT count(*) AS n FROM messages
WHERE source = :source AND (key, norm_sha256) IN (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:pairs))

-- name: count_source_messages
SELECT count(*) AS n FROM messages WHERE source = :source

-- name: month_message_keys
SELECT key, norm_sha256 FROM messages WHERE source = :source AND month = :month

-- name: insert_archive_event
INSERT INTO archive_events (source, month, at, kind, detail)
VALUES (:source, :month, :now, :kind, :detail)

-- name: archive_events
SELECT * FROM archive_events WHERE source = :source ORDER BY id

-- name: archive_summary
SELECT count(*) AS months,
       coalesce(sum(CASE WHEN state = 'complete' THEN 1 ELSE 0 END), 0) AS complete,
       coalesce(sum(counted), 0) AS counted,
       coalesce(sum(stored), 0) AS stored
FROM archive_months WHERE source = :source

-- name: source_message_keys
SELECT key, norm_sha256 FROM messages WHERE source = :source

-- name: last_message_id
SELECT coalesce(max(id), 0) AS n FROM messages

-- name: index_new_messages
-- SQLite: the messages stored in this transaction (ids above :after, as a write
-- transaction is the only writer) go into the FTS5 index in one statement.
INSERT INTO messages_fts (rowid, subject, from_name, from_addr, body)
SELECT id, subject, from_name, from_addr, body FROM messages WHERE id > :after

-- name: get_archive_index
SELECT * FROM archive_indexes WHERE source = :source AND url = :url

-- name: save_archive_index
INSERT INTO archive_indexes (source, url, etag, last_modified, body, fetched_at)
VALUES (:source, :url, :etag, :last_modified, :body, :now)
ON CONFLICT (source, url) DO UPDATE SET
    etag = excluded.etag,
    last_modified = excluded.last_modified,
    body = excluded.body,
    fetched_at = excluded.fetched_at

-- name: stored_keys_among
-- Which of :keys (a JSON array) the list holds: HyperKitty's listing walked a page at a time.
SELECT DISTINCT key FROM messages
WHERE source = :source AND key IN (SELECT value FROM json_each(:keys))
