-- Which runs a worker process serves, for `thresher status` to tell a run that a live
-- process is working on (`running`) from one whose process stopped or died with the run
-- open (`interrupted`): a JSON array of source run ids, written with each heartbeat;
-- NULL for a process that serves every open run (`thresher worker`).
ALTER TABLE workers ADD COLUMN runs TEXT;
