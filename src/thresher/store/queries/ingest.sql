-- Bulk ingest requests (thresher.ingest.requests). A batch of requests travels as one
-- JSON array in :rows (objects with the columns below; ext_ids and request already JSON
-- text or null), so a batch is one statement whose row count is the rows it added:
-- ON CONFLICT DO NOTHING skips a request already stored, or one earlier in the batch.
-- Rows go in in array order: the loader sorts each batch by key, so that concurrent
-- loads lock keys in one order (see thresher.ingest.requests._insert).

-- name: insert_ingest_requests
-- "WHERE true": SQLite's parser needs it to tell the upsert's ON from a join's ON.
INSERT INTO ingest_requests (ingest_type, base_url, link_source, link_source_id,
                             release_stage, ext_ids, request, created)
SELECT json_extract(value, '$.ingest_type'), json_extract(value, '$.base_url'),
       json_extract(value, '$.link_source'), json_extract(value, '$.link_source_id'),
       json_extract(value, '$.release_stage'), json_extract(value, '$.ext_ids'),
       json_extract(value, '$.request'), :now
FROM json_each(:rows)
WHERE true
ORDER BY key
ON CONFLICT (ingest_type, base_url, link_source, link_source_id) DO NOTHING
