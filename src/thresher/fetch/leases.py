"""Politeness across processes and machines: hosts leased through the shared store.

In one process, `PoliteFetcher` keeps each host's turn and delay in memory. Workers of a
PostgreSQL store share the hosts they fetch, so they also share that state, in the
`host_leases` table (migration 0008):

- A host's row is **held** by the one worker fetching it, until `expires` — the latest
  that fetch can end (the fetch's total timeout and a margin). No other worker starts a
  fetch of the host meanwhile; a killed worker's hold runs out by itself.
- The row carries the host's **next allowed fetch time** (`next_at`): the fetching
  worker sets it when the fetch ends (its delay, Crawl-delay, Retry-After, parking), and
  the next worker to take the host, wherever it runs, waits for it.
- A server address (`ip:ADDR`) is never held, only spaced: taking a host also moves the
  address's `next_at` to now plus the address delay, in the same transaction, so hosts
  on one server are not started together by different workers.

A hold also ends when its worker is known to be gone: stopped, silent for a lease
period, or (on this machine) a process that no longer exists. Such a hold was never given
back, so its fetch may have reached the server as late as the hold ended, or as late as
it was found broken: the next worker to take the host waits the host's delay after that.

**Turns come in the order asked** (`host_lease_waiters`, migration 0012). A worker told
to wait queues for the host, keeping its place each time it asks again; when the host is
free, only the first waiter still asking may take it. Without the queue the host went to
whichever worker asked first after it came free, mostly the one that had just given it
back (it knew the time to the millisecond; the others polled every `HELD_POLL`), and a
crawl could wait seconds for its first turn on a busy host. A place counts once its
waiter has waited `WAITER_PATIENCE`: a host without a delay is handed over every half
second, not after every fetch, as each handover costs up to a `HELD_POLL` with the host
idle (three workers taking one such host in turns after every fetch took 20 times as
long). A waiter more than `WAITER_GRACE` late to ask again has gone (its job ended, its
worker died) and loses its place; a worker that stops leaves every queue. Such places
are deleted when the host is next taken by a worker that queued for it, and by every
worker's heartbeat (`forget_gone_waiters`), so none lingers after its job ended.

Taking is one short transaction (`SELECT … FOR UPDATE` of the two rows on PostgreSQL),
giving back another. A worker that is told to wait sleeps until the time it was given
and asks again; its own in-process state keeps it from asking before that.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from ..store import Row, Tx
from ..store.aio import AsyncStore

log = logging.getLogger("thresher.fetch")

__all__ = [
    "HELD_POLL",
    "HOLD_MARGIN",
    "STICKY_SECONDS",
    "WAITER_GRACE",
    "WAITER_PATIENCE",
    "HostLeases",
    "StickyLeases",
    "forget_gone_waiters",
]

HELD_POLL = 0.05
"""Seconds between two asks for a host another worker is fetching."""

HOLD_MARGIN = 30.0
"""Seconds a host is held past its fetch's total timeout, before the hold runs out."""

WAITER_GRACE = 2.0
"""Seconds a waiter may be late to ask again before it loses its place in the queue."""

WAITER_PATIENCE = 0.5
"""Seconds a waiter waits before its place in the queue counts: a host without a delay
stays with the worker fetching it that long, not handed over after every fetch."""


class HostLeases:
    """The store's host leases, as seen by one worker (`owner`)."""

    def __init__(
        self,
        store: AsyncStore,
        owner: str,
        *,
        lease_seconds: float = 60.0,
        is_dead: Callable[[Row], bool] = lambda worker: False,
    ) -> None:
        self.store = store
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.is_dead = is_dead
        self._queued: set[str] = set()  # hosts this worker waits for, as far as it knows

    async def take(
        self,
        host: str,
        ip: str | None,
        now: float,
        hold_until: float,
        ip_delay: float,
        *,
        delay: float,
    ) -> float | None:
        """Hold `host` until `hold_until` and space `ip` by `ip_delay` from `now`, if both
        may be fetched at `now` and no other worker waiting for `host` comes first: None.
        Otherwise wait for `host` (keeping any earlier place) and return when to ask
        again. `delay` is the host's own: what a hold never given back costs it."""
        keys = [f"host:{host}"] + ([f"ip:{ip}"] if ip else [])
        live = now - WAITER_GRACE
        params = {"keys": json.dumps(sorted(keys)), "live": live, "patient": now - WAITER_PATIENCE}
        queued = host in self._queued

        def take(tx: Tx) -> float | None:
            rows = {r["key"]: r for r in tx.all("get_host_leases", **params)}
            if len(rows) < len(keys):  # a host or address not seen before
                for key in keys:
                    if key not in rows:
                        tx.execute("ensure_host_lease", key=key)
                rows = {r["key"]: r for r in tx.all("get_host_leases", **params)}
            held = rows[keys[0]]
            next_at = float(held["next_at"])
            expires = held["expires"]
            due = next_at
            if self._holding(held, now):
                # Held: the holder gives it back when its fetch ends, mostly long before
                # its hold runs out; ask again soon.
                due = max(due, min(float(expires), now + HELD_POLL))
            elif held["owner"] is not None:
                # A hold never given back: its fetch may have reached the server as late
                # as the hold ended (ran out, or handed back by a stopping worker) or, its
                # worker killed, now. Ended here, so that later asks count from this one.
                ended = now if expires is None else min(float(expires), now)
                next_at = due = max(next_at, ended + delay)
                tx.execute("give_host_lease", key=keys[0], owner=held["owner"], next_at=due)
            if len(keys) > 1:
                due = max(due, float(rows[keys[1]]["next_at"]))
            first = held["first_waiter"]
            if due <= now and first is not None and first != self.owner:
                due = now + HELD_POLL  # free, but another worker asked first
            if due > now:
                tx.execute("wait_for_host", key=keys[0], owner=self.owner, ask_by=due, now=now)
                return due
            tx.execute(
                "hold_host_lease",
                key=keys[0],
                owner=self.owner,
                expires=hold_until,
                next_at=next_at,
            )
            if queued:  # else there is no place of ours to leave
                tx.execute("stop_waiting_for_host", key=keys[0], owner=self.owner, live=live)
            if len(keys) > 1:
                tx.execute("bump_host_lease", key=keys[1], next_at=now + ip_delay)
            return None

        answer = await self.store.run(take)
        if answer is None:
            self._queued.discard(host)
        else:
            self._queued.add(host)
        return answer

    def _holding(self, lease: Row, now: float) -> bool:
        """Whether another worker holds `lease`: not when its hold ran out, nor when the
        worker stopped, went silent for a lease period, or is a process of this machine
        that no longer exists (a `kill -9` need not block its hosts until the hold ends)."""
        expires = lease["expires"]
        if lease["owner"] is None or expires is None or float(expires) <= now:
            return False
        if lease["hostname"] is None:
            return True  # no worker row yet: trust the hold
        if lease["stopped"] is not None or float(lease["heartbeat"]) < now - self.lease_seconds:
            return False
        return not self.is_dead(lease)

    async def extend(self, host: str, now: float, hold_until: float) -> bool:
        """Keep holding `host` until `hold_until` (a session of many requests, such as a
        news server's connection); False when the hold is no longer this worker's (it
        ran out, or the worker was taken for gone)."""
        key = f"host:{host}"
        changed = await self.store.run(
            lambda tx: tx.execute(
                "extend_host_lease", key=key, owner=self.owner, expires=hold_until, now=now
            )
        )
        return changed > 0

    async def give(self, host: str, next_at: float, ip: str | None, ip_next_at: float) -> None:
        """The fetch of `host` ended: it may next be fetched at `next_at` (and its
        address at `ip_next_at`)."""

        def give(tx: Tx) -> None:
            tx.execute("give_host_lease", key=f"host:{host}", owner=self.owner, next_at=next_at)
            if ip:
                tx.execute("bump_host_lease", key=f"ip:{ip}", next_at=ip_next_at)

        await self.store.run(give)

    async def release_all(self, now: float) -> int:
        """Hand back every host this worker holds at `now`, and stop waiting for any (when
        it stops); the number of hosts it held. A fetch may still have been under way:
        the next worker to take such a host waits its delay after `now`."""

        def release(tx: Tx) -> int:
            tx.execute("stop_waiting", owner=self.owner)
            return tx.execute("release_host_leases", owner=self.owner, now=now)

        self._queued.clear()
        return await self.store.run(release)


def forget_gone_waiters(tx: Tx, now: float) -> int:
    """Delete the places of waiters more than `WAITER_GRACE` late to ask again: they count
    no more, and a worker whose job ended without `release_all` never comes back for them."""
    return tx.execute("forget_gone_waiters", live=now - WAITER_GRACE)


STICKY_SECONDS = 5.0
"""Longest a host without delays stays held across fetches (`StickyLeases`)."""


class StickyLeases(HostLeases):
    """`HostLeases` for a fetcher that fetches its hosts without delays, many times a
    second: a host taken stays held across its fetches, for up to `STICKY_SECONDS`, instead
    of being taken and given back in two store transactions around each fetch (more than
    the fetch costs). The hold in the store lasts that much longer, so it covers every
    fetch started under it. A host with a delay (or its address with one) is taken and
    given back around each fetch, as by `HostLeases`. Call `release` now and then: it gives
    back the holds that are old or unused."""

    def __init__(
        self,
        store: AsyncStore,
        owner: str,
        *,
        lease_seconds: float = 60.0,
        is_dead: Callable[[Row], bool] = lambda worker: False,
    ) -> None:
        super().__init__(store, owner, lease_seconds=lease_seconds, is_dead=is_dead)
        self._held: dict[str, float] = {}  # host -> when taken
        self._in_flight: dict[str, int] = {}
        self._given: dict[str, tuple[float, str | None, float]] = {}  # its last give's times

    @property
    def holding(self) -> int:
        return len(self._held)

    async def take(
        self,
        host: str,
        ip: str | None,
        now: float,
        hold_until: float,
        ip_delay: float,
        *,
        delay: float,
    ) -> float | None:
        since = self._held.get(host)
        if since is not None and now - since < STICKY_SECONDS:
            self._in_flight[host] = self._in_flight.get(host, 0) + 1
            return None
        if since is not None:  # held long enough: others may be waiting for it
            if self._in_flight.get(host, 0):
                return now + HELD_POLL  # once its fetch ends
            await self._hand_back(host)
        sticky = delay <= 0 and ip_delay <= 0
        extra = STICKY_SECONDS if sticky else 0.0
        answer = await super().take(host, ip, now, hold_until + extra, ip_delay, delay=delay)
        if answer is None and sticky:
            self._held[host] = now
            self._in_flight[host] = self._in_flight.get(host, 0) + 1
        return answer

    async def give(self, host: str, next_at: float, ip: str | None, ip_next_at: float) -> None:
        if host in self._held:
            self._in_flight[host] -= 1
            self._given[host] = (next_at, ip, ip_next_at)
            return  # kept: `release` gives it back
        await super().give(host, next_at, ip, ip_next_at)

    async def release(self, now: float, *, every: bool = False) -> None:
        """Give back the holds with no fetch in flight that are `STICKY_SECONDS` old (all
        of them with `every`)."""
        for host, since in list(self._held.items()):
            if self._in_flight.get(host, 0) == 0 and (every or now - since >= STICKY_SECONDS):
                await self._hand_back(host)

    async def _hand_back(self, host: str) -> None:
        self._held.pop(host, None)
        self._in_flight.pop(host, None)
        next_at, ip, ip_next_at = self._given.pop(host, (0.0, None, 0.0))
        try:
            await super().give(host, next_at, ip, ip_next_at)
        except Exception as exc:  # the hold runs out by itself
            log.warning("could not give back %s: %s", host, exc)
