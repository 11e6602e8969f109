-- Workers waiting for a host another worker holds (or that is not yet due), in the
-- order they first asked (thresher.fetch.leases): when the host is free, the first
-- waiter still asking that has waited a while (`since`) takes it, not whichever worker
-- happens to ask first. `ask_by` is when the waiter said it would ask again; a waiter
-- that has not asked a few seconds past it has gone, and no longer keeps its place.
CREATE TABLE host_lease_waiters (
    key         TEXT NOT NULL,
    owner       TEXT NOT NULL,
    ticket      BIGINT NOT NULL,
    ask_by      DOUBLE PRECISION NOT NULL,
    since       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (key, owner)
);
CREATE INDEX host_lease_waiters_owner ON host_lease_waiters (owner);
