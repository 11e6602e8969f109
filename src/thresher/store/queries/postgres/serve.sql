-- PostgreSQL versions of the queries in ../serve.sql (JSON arrays, the thread index's
-- expression as migration 0017 wrote it).

-- name: serve_thread_members
SELECT id, month, message_id, in_reply_to, refs, subject, from_name, from_addr, date,
       date_flag, conflict
FROM messages
WHERE source = :source AND (
    message_id IN (SELECT jsonb_array_elements_text(:ids::jsonb))
    OR in_reply_to IN (SELECT jsonb_array_elements_text(:ids::jsonb))
    OR split_part(refs, ' ', 1) IN (SELECT jsonb_array_elements_text(:ids::jsonb)))
ORDER BY id LIMIT :limit
