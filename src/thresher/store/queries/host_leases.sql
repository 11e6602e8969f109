-- Host and address leases (migration 0008, thresher.fetch.leases).

-- name: get_host_leases
-- With the holder's worker row (an engine in a process of its own holds as its worker's
-- owner, '#' and its shard), to tell a live holder from a dead one, and the waiter
-- whose turn it is: the first to ask among those still asking (:live) that have waited
-- since :patient or longer.
SELECT l.key, l.owner, l.expires, l.next_at,
       w.hostname, w.pid, w.boot_id, w.heartbeat, w.stopped,
       (SELECT q.owner FROM host_lease_waiters q
        WHERE q.key = l.key AND q.ask_by > :live AND q.since <= :patient
        ORDER BY q.ticket LIMIT 1) AS first_waiter
FROM host_leases l LEFT JOIN workers w
    ON w.owner = l.owner OR substr(l.owner, 1, length(w.owner) + 1) = w.owner || '#'
WHERE l.key IN (SELECT value FROM json_each(:keys))

-- name: ensure_host_lease
INSERT INTO host_leases (key, owner, expires, next_at) VALUES (:key, NULL, NULL, 0)
ON CONFLICT (key) DO NOTHING

-- name: hold_host_lease
UPDATE host_leases SET owner = :owner, expires = :expires, next_at = :next_at
WHERE key = :key

-- name: extend_host_lease
-- A long hold (a news server's connection) kept while it is still this worker's.
UPDATE host_leases SET expires = :expires
WHERE key = :key AND owner = :owner AND expires > :now

-- name: give_host_lease
UPDATE host_leases SET owner = NULL, expires = NULL,
    next_at = CASE WHEN next_at > :next_at THEN next_at ELSE :next_at END
WHERE key = :key AND owner = :owner

-- name: release_host_leases
-- A worker that stops ends its holds at :now. Its name stays on them: they were not
-- given back, so the next taker waits the host's delay after :now (HostLeases.take).
UPDATE host_leases SET expires = :now WHERE owner = :owner AND expires > :now

-- name: held_host_leases
SELECT key, owner, expires, next_at FROM host_leases
WHERE owner IS NOT NULL AND expires > :now ORDER BY owner, key

-- name: bump_host_lease
-- An address is never held, only spaced: its next time moves forward, never back.
UPDATE host_leases SET next_at = CASE WHEN next_at > :next_at THEN next_at ELSE :next_at END
WHERE key = :key

-- name: wait_for_host
-- Queue for a host, or keep one's place and say when one will ask again. (The caller
-- holds the host's row, so two waiters never draw the same ticket.)
INSERT INTO host_lease_waiters (key, owner, ticket, ask_by, since)
VALUES (:key, :owner,
        (SELECT COALESCE(MAX(ticket), 0) + 1 FROM host_lease_waiters WHERE key = :key),
        :ask_by, :now)
ON CONFLICT (key, owner) DO UPDATE SET ask_by = excluded.ask_by

-- name: stop_waiting_for_host
-- The host was taken: its taker leaves the queue, and so do waiters long gone.
DELETE FROM host_lease_waiters
WHERE key = :key AND (owner = :owner OR ask_by <= :live)

-- name: stop_waiting
-- A worker that stops leaves every queue.
DELETE FROM host_lease_waiters WHERE owner = :owner

-- name: forget_gone_waiters
-- Waiters long gone from hosts no worker that queued has taken since (heartbeat sweep).
DELETE FROM host_lease_waiters WHERE ask_by <= :live

-- name: select_host_lease_waiters
SELECT key, owner, ticket, ask_by, since FROM host_lease_waiters ORDER BY key, ticket
