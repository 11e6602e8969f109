-- PostgreSQL versions of the message queries in ../messages.sql.

-- name: export_messages_by_id
SELECT id, source, month, key, sha256, message_id, date, date_raw, date_flag, from_name,
       from_addr, subject, in_reply_to, refs, raw, position, conflict, first_seen, parse_error,
       truncated
FROM messages
WHERE id IN (SELECT value::bigint FROM jsonb_array_elements_text(:ids::jsonb))

-- name: search_messages
-- Each term of the JSON array :terms, non-alphanumerics made spaces as in the indexed
-- text (see migration 0004), goes through phraseto_tsquery, as each FTS5 string goes
-- through the FTS5 tokenizer, so a term is split the way the indexed text was; the terms are AND-ed. A term without lexemes
-- is dropped rather than turned into an invalid query. Only the newest :ranked matches
-- are ranked, as on SQLite (ts_rank reads each match's tsvector). The snippet is
-- computed for the page of hits only (ts_headline re-parses the body), marking matches
-- with STX/ETX.
WITH query AS (
    SELECT string_agg('(' || t.q::text || ')', ' & ')::tsquery AS q
    FROM (SELECT phraseto_tsquery('simple', regexp_replace(value, '[^[:alnum:]]+', ' ', 'g')) AS q
          FROM jsonb_array_elements_text(:terms::jsonb)) AS t
    WHERE numnode(t.q) > 0
), newest AS (
    SELECT m.id FROM messages m, query
    WHERE m.search @@ query.q AND m.source = coalesce(:source, m.source)
    ORDER BY m.id DESC
    LIMIT :ranked
), hits AS (
    SELECT m.id, m.source, m.month, m.date, m.from_name, m.from_addr, m.subject,
           m.message_id, m.body, ts_rank(m.search, query.q) AS rank
    FROM newest JOIN messages m ON m.id = newest.id, query
    ORDER BY rank DESC, m.date DESC NULLS LAST, m.id DESC
    LIMIT :limit
)
SELECT hits.id, hits.source, hits.month, hits.date, hits.from_name, hits.from_addr,
       hits.subject, hits.message_id,
       ts_headline('simple', coalesce(hits.body, ''), query.q,
                   'MaxFragments=1, MaxWords=16, MinWords=6, StartSel=' || chr(2)
                   || ', StopSel=' || chr(3)) AS snippet
FROM hits, query
ORDER BY hits.rank DESC, hits.date DESC NULLS LAST, hits.id DESC
