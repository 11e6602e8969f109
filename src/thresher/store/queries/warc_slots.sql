-- WARC slots (migration 0007, thresher.ingest.archive): file prefixes that one process
-- at a time appends to, with the committed position of each.

-- name: warc_slots_with_owners
-- With the owner's worker row (NULL columns when it has none), to tell a live owner
-- from a dead one. An engine in a process of its own owns its slot as its worker's
-- owner, '#' and its shard (thresher.ingest.archive): its worker's row says if it lives.
SELECT s.name, s.owner, s.filename, s.position, w.hostname, w.pid, w.boot_id,
       w.heartbeat, w.stopped
FROM warc_slots s LEFT JOIN workers w
    ON w.owner = s.owner OR substr(s.owner, 1, length(w.owner) + 1) = w.owner || '#'
WHERE s.name LIKE :prefix
ORDER BY s.name

-- name: claim_warc_slot
-- Compare-and-set: only if the owner is still the one we judged dead or absent.
UPDATE warc_slots SET owner = :owner, updated = :now
WHERE name = :name AND owner IS NOT DISTINCT FROM :old

-- name: insert_warc_slot
INSERT INTO warc_slots (name, owner, filename, position, updated)
VALUES (:name, :owner, NULL, 0, :now)
ON CONFLICT (name) DO NOTHING
RETURNING name, owner, filename, position

-- name: touch_warc_slot
UPDATE warc_slots SET updated = :now WHERE name = :name AND owner = :owner

-- name: set_warc_slot
UPDATE warc_slots SET filename = :filename, position = :position, updated = :now
WHERE name = :name AND owner = :owner

-- name: release_warc_slot
-- After a clean close: the file is finished, the next owner starts a new one.
UPDATE warc_slots SET owner = NULL, filename = NULL, position = 0, updated = :now
WHERE name = :name AND owner = :owner
