-- PostgreSQL versions of the archive queries in ../archives.sql.

-- name: index_new_messages
-- The generated `search` column is the index here: nothing to add.
SELECT 1 WHERE :after IS NULL

-- name: stored_keys_among
SELECT DISTINCT key FROM messages
WHERE source = :source AND key IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)))

-- name: count_pairs_among
SELECT count(*) AS n FROM messages
WHERE source = :source AND (key, norm_sha256) IN (
    SELECT e ->> 0, e ->> 1 FROM jsonb_array_elements(CAST(:pairs AS jsonb)) AS e)
