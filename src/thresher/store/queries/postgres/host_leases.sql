-- name: get_host_leases
-- FOR UPDATE: two workers deciding on one host at once take turns.
SELECT key, owner, expires, next_at FROM host_leases
WHERE key IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)))
ORDER BY key
FOR UPDATE
