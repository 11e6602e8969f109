-- How many messages a source run left behind, by the archive's own count: HyperKitty's
-- total minus the messages its month files held after the run. NULL when the source
-- gives no total. A run with a shortfall is closed as 'incomplete', not 'ok'.
ALTER TABLE source_runs ADD COLUMN shortfall BIGINT;
