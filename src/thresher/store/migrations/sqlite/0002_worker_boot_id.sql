-- The boot id of a worker's machine: with the host name and pid it tells a process
-- that died (or a machine that rebooted) from one that is merely slow, so a restart
-- on the same machine takes a dead worker's jobs back at once instead of a lease later.
ALTER TABLE workers ADD COLUMN boot_id TEXT;
