-- Links a crawl run read on its pages but did not queue, past the max_links_per_page
-- setting (issue 20): a page of a million links is cut, and the cut is counted.
ALTER TABLE crawl_runs ADD COLUMN links_dropped BIGINT NOT NULL DEFAULT 0;
