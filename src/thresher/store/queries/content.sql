-- Results written by the built-in source types.

-- name: insert_synthetic_result
INSERT INTO synthetic_results (source, job_key, owner, value, written)
VALUES (:source, :job_key, :owner, :value, :now)

-- name: synthetic_results
SELECT source, job_key, owner, value FROM synthetic_results WHERE source = :source ORDER BY id

-- name: get_document
SELECT * FROM documents WHERE source = :source AND url = :url

-- name: upsert_document
INSERT INTO documents (source, url, status, sha256, length, content_type, etag,
                       last_modified, fetched, changed, fetches, error)
VALUES (:source, :url, :status, :sha256, :length, :content_type, :etag,
        :last_modified, :now, :now, 1, :error)
ON CONFLICT (source, url) DO UPDATE SET
    status = excluded.status,
    sha256 = coalesce(excluded.sha256, documents.sha256),
    length = coalesce(excluded.length, documents.length),
    content_type = CASE WHEN excluded.sha256 IS NOT NULL THEN excluded.content_type
                        ELSE documents.content_type END,
    -- A new body brings its own validators (or none); a 304 may refresh them.
    etag = CASE WHEN excluded.sha256 IS NOT NULL THEN excluded.etag
                ELSE coalesce(excluded.etag, documents.etag) END,
    last_modified = CASE WHEN excluded.sha256 IS NOT NULL THEN excluded.last_modified
                         ELSE coalesce(excluded.last_modified, documents.last_modified) END,
    changed = CASE WHEN excluded.sha256 IS NOT NULL
                    AND excluded.sha256 IS DISTINCT FROM documents.sha256
                   THEN excluded.fetched ELSE documents.changed END,
    fetched = excluded.fetched,
    fetches = documents.fetches + 1,
    error = excluded.error

-- name: list_documents
SELECT * FROM documents WHERE source = :source ORDER BY url

-- name: count_documents
SELECT count(*) AS n FROM documents WHERE source = :source

-- name: document_errors_since
-- The URLs of a `urls` source whose fetch since :since ended in an error (a 404, a
-- refused address …): what its run reports besides "ok".
SELECT url, error FROM documents
WHERE source = :source AND fetched >= :since AND error IS NOT NULL
ORDER BY url

-- name: count_documents_fetched_since
SELECT count(*) AS n FROM documents WHERE source = :source AND fetched >= :since
