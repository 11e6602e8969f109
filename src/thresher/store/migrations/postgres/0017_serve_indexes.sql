-- What `thresher serve` reads (queries/serve.sql), each page through an index and a page
-- of rows at a time, so that a page costs the same with a million messages as with ten.
--
-- Threads: a message's replies are found by their In-Reply-To, and the messages of a
-- thread by the first Message-ID of their References (the thread's root, which clients
-- keep when they shorten the header); the expression is the one serve.sql queries by.
CREATE INDEX messages_reply ON messages (source, in_reply_to);
CREATE INDEX messages_thread ON messages (source, (split_part(refs, ' ', 1)));
-- A list's events, newest first, a page at a time.
CREATE INDEX archive_events_recent ON archive_events (source, id);
-- A crawl's URLs by state in discovery order (pages, errors, queued), and its hosts.
CREATE INDEX crawl_urls_state ON crawl_urls (source, state, seq);
CREATE INDEX crawl_urls_host ON crawl_urls (source, host, state);
-- Ingest results of one status, in key order.
CREATE INDEX ingest_results_status_key ON ingest_results (status, ingest_type, base_url);
DROP INDEX ingest_results_status;
