-- The capture each URL's validators (etag, last_modified) came from: the record that
-- holds the payload a later 304 confirms, so that the 304 is archived as a revisit naming
-- it (WARC-Refers-To-Target-URI, -Date and WARC-Refers-To). Set with the validators by a
-- new 2xx body, kept by a 304 or an error. capture_uri is NULL when it is the row's url
-- (nearly always); capture_date is the record's WARC-Date as written, capture_id its
-- WARC-Record-ID. URLs fetched before this migration have none: their 304s name only
-- the URL, and the payload digest where it is known.
ALTER TABLE crawl_urls ADD COLUMN capture_uri TEXT;
ALTER TABLE crawl_urls ADD COLUMN capture_date TEXT;
ALTER TABLE crawl_urls ADD COLUMN capture_id TEXT;
