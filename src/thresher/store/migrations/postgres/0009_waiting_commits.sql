-- A commit job is `waiting` until its last child finishes, then `pending`: waiting
-- commits stay out of the claim index, where every claim used to step over them (a
-- chain of ingest pages leaves one per page, so claims grew slower as a run went on).
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('pending', 'waiting', 'leased', 'done', 'failed'));

UPDATE jobs SET state = 'waiting'
WHERE state = 'pending' AND waits_for IS NOT NULL
  AND EXISTS (SELECT 1 FROM jobs c WHERE c.parent_id = jobs.waits_for
                                     AND c.state IN ('pending', 'leased', 'failed'));
