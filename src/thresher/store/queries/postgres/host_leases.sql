-- name: get_host_leases
-- FOR UPDATE: two workers deciding on one host at once take turns.
SELECT l.key, l.owner, l.expires, l.next_at,
       w.hostname, w.pid, w.boot_id, w.heartbeat, w.stopped,
       (SELECT q.owner FROM host_lease_waiters q
        WHERE q.key = l.key AND q.ask_by > :live AND q.since <= :patient
        ORDER BY q.ticket LIMIT 1) AS first_waiter
FROM host_leases l LEFT JOIN workers w
    ON w.owner = l.owner OR substr(l.owner, 1, length(w.owner) + 1) = w.owner || '#'
WHERE l.key IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)))
ORDER BY l.key
FOR UPDATE OF l
