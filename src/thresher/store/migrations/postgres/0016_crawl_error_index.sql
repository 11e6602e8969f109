-- The errors of a crawl run, by reason, for its summary: a partial index keeps the
-- lookup off the run's other URLs (a crawl's millions of done pages) and costs nothing
-- for them.
CREATE INDEX crawl_urls_errors ON crawl_urls (source, fetched_run) WHERE state = 'error';
