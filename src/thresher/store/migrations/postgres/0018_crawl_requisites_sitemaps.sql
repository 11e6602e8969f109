-- Page requisites and sitemaps (issue 19).
--
-- hop: how a URL was reached (thresher.frontier.Hop): 0 a link, redirect or seed;
-- 1 a page requisite (fetched in scope or not, its links followed only in scope); 2 a
-- sitemap, read for the URLs it lists. A resumed or repeated crawl treats each known
-- URL as the hop that found it; a URL sent to another shard carries its hop along.
-- lastmod: the W3C Datetime a sitemap gave for the URL, as written (the latest read).
ALTER TABLE crawl_urls ADD COLUMN hop INTEGER NOT NULL DEFAULT 0;
ALTER TABLE crawl_urls ADD COLUMN lastmod TEXT;
ALTER TABLE crawl_inbox ADD COLUMN hop INTEGER NOT NULL DEFAULT 0;
-- Counted apart from pages: requisites stored (2xx) and sitemap files read.
ALTER TABLE crawl_runs ADD COLUMN requisites INTEGER NOT NULL DEFAULT 0;
ALTER TABLE crawl_runs ADD COLUMN sitemaps INTEGER NOT NULL DEFAULT 0;
