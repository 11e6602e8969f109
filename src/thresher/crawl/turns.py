"""A crawl's turns on its hosts, shared with every worker through the store.

Workers sharing a PostgreSQL store take turns on hosts in `host_leases`
(`thresher.fetch.leases`): a fetch holds its host there, and the hold given back carries
the host's next allowed time (from the crawl's `Workbench`) for every other worker. A host
another worker holds, or fetched less than a delay ago, is not this crawl's turn: the
caller puts the fetch back on its workbench until the time it is given.

Without a delay between fetches (`--delay 0`) a host taken stays held across fetches,
for up to `STICKY_SECONDS` while the crawl has URLs of it queued. Taking and giving it
for each fetch costs two store transactions, more than the fetch: a 20-host crawl ran
five times slower on PostgreSQL than on SQLite, its concurrent fetches of one host
(`--host-connections`) waiting for each other's holds. A crawl's own fetches of a host
share its hold.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..clock import Clock
from ..fetch import FetchError
from ..fetch.leases import HELD_POLL, HOLD_MARGIN, HostLeases
from ..frontier import Workbench

__all__ = ["STICKY_SECONDS", "HostTurns"]

log = logging.getLogger("thresher.crawl")

STICKY_SECONDS = 5.0
"""Longest a crawl without delays holds a host across fetches."""


@dataclass
class _Hold:
    """A host held in the store, and this crawl's fetches of it under the hold."""

    since: float
    in_flight: int = 0


class HostTurns:
    """One crawl's holds on hosts in the shared store."""

    def __init__(
        self,
        leases: HostLeases,
        workbench: Workbench,
        resolve: Callable[[str], Awaitable[list[str]]],
        clock: Clock,
        *,
        fetch_seconds: float,
        sticky: bool,
    ) -> None:
        self.leases = leases
        self.workbench = workbench
        self.resolve = resolve
        self.clock = clock
        self.fetch_seconds = fetch_seconds
        self.sticky = sticky
        self._holds: dict[str, _Hold] = {}

    @property
    def holding(self) -> bool:
        return bool(self._holds)

    async def take(self, host: str, url: str) -> float | None:
        """Hold `host` for one fetch of `url`: None, or when to ask again."""
        hold = self._holds.get(host)
        now = self.clock.now()
        if hold is not None:
            if now - hold.since < STICKY_SECONDS:
                hold.in_flight += 1
                return None
            return now + HELD_POLL  # ours, to be handed back once its fetches end
        policy = self.workbench.policy
        _, ip, _ = self.workbench.turns(host)
        if ip is None and policy.ip_delay > 0:
            try:
                ip = (await self.resolve(urlsplit(url).hostname or ""))[0]
            except FetchError:
                pass  # the fetch itself fails with the reason
            else:
                self.workbench.on_resolved(host, ip)
        now = self.clock.now()
        # Past the latest a fetch started under the hold can end: a killed worker's
        # hold runs out by itself.
        until = now + self.fetch_seconds + HOLD_MARGIN + (STICKY_SECONDS if self.sticky else 0)
        state = self.workbench.host(host)
        delay = policy.delay if state is None else state.delay(policy)
        answer = await self.leases.take(host, ip, now, until, policy.ip_delay, delay=delay)
        if answer is None:
            self._holds.setdefault(host, _Hold(since=now)).in_flight += 1
        return answer

    async def give(self, host: str) -> None:
        """A fetch of `host` ended (or was not made)."""
        hold = self._holds.get(host)
        if hold is not None:
            hold.in_flight -= 1
            if hold.in_flight > 0 or self._keep(host, hold, self.clock.now()):
                return
        await self._hand_back(host)

    async def release(self, *, every: bool = False) -> None:
        """Hand back the hosts held with no fetch in flight that are not worth keeping
        (with `every`, all of them: the crawl stops)."""
        now = self.clock.now()
        idle = [
            host
            for host, hold in self._holds.items()
            if every or (hold.in_flight == 0 and not self._keep(host, hold, now))
        ]
        for host in idle:
            await self._hand_back(host)

    def _keep(self, host: str, hold: _Hold, now: float) -> bool:
        """Whether to go on holding `host` with no fetch of it in flight."""
        state = self.workbench.host(host)
        return (
            self.sticky
            and now - hold.since < STICKY_SECONDS
            and state is not None
            and bool(state.queue)
        )

    async def _hand_back(self, host: str) -> None:
        self._holds.pop(host, None)
        next_at, ip, ip_next_at = self.workbench.turns(host)
        try:
            await self.leases.give(host, next_at, ip, ip_next_at)
        except Exception as exc:  # the hold runs out by itself; the fetch stands
            log.warning("could not give back %s: %s", host, exc)
