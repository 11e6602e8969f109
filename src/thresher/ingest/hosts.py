"""A shard's URLs in the engine: read and not started, by host, the hosts taken in turn.

An ingest engine (`thresher.ingest.engine`) keeps several walks going and never two of
one host at once: its polite fetcher would only make the second wait for the first. So
the URLs it has read from its shard's queue wait here by host, and a host with URLs and
no walk in flight is offered to the engine in turn (`ready`). A host whose fetcher delay
has not passed yet is not taken but offered again once it has, and a URL to try again
later (a retry, a host's far turn) comes back at the front of its host's URLs when its
time comes (`later`).

The engine takes a host, walks one of its URLs, and says when that walk ended; these are
its per-request steps, so the engine holds the queue's `ready` deque and its methods
without looking them up again for every URL.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable

from .ledger import Entry

__all__ = ["HostQueue"]


class HostQueue:
    """The URLs read and not started, by host; `ready_at(host)` is when the fetcher lets
    `host` go (its delay)."""

    def __init__(self, ready_at: Callable[[str], float]) -> None:
        self.ready_at = ready_at
        # URLs read and not started, by host; hosts with URLs and no walk, in turn.
        self.queued: dict[str, deque[Entry]] = {}
        self.ready: deque[str] = deque()
        self.offered: set[str] = set()  # the hosts in ready
        self.busy: set[str] = set()  # hosts with a walk in flight
        self.waiting = 0  # entries in queued
        # Later: (when, tie, what): a URL to queue again (a retry, a host's far turn), or
        # a host to offer again once the fetcher lets it go (its delay).
        self.later: list[tuple[float, int, Entry | str]] = []
        self._tie = itertools.count()

    def queue(self, entry: Entry, first: bool = False) -> None:
        queued = self.queued.get(entry.host)
        if queued is None:
            queued = self.queued[entry.host] = deque()
        if first:
            queued.appendleft(entry)
        else:
            queued.append(entry)
        self.waiting += 1
        self.offer(entry.host)

    def offer(self, host: str) -> None:
        """`host` may start a walk, if it has URLs and none in flight."""
        if host not in self.busy and host not in self.offered and host in self.queued:
            self.ready.append(host)
            self.offered.add(host)

    def defer(self, what: Entry | str, until: float) -> None:
        heapq.heappush(self.later, (until, next(self._tie), what))

    def release_due(self, now: float) -> None:
        later = self.later
        while later and later[0][0] <= now:
            what = heapq.heappop(later)[2]
            if isinstance(what, str):
                self.offer(what)
            else:
                self.queue(what, first=True)

    def take(self, host: str, now: float) -> Entry | None:
        """The next URL of `host`, taken off the ready deque, now busy; None if its delay
        has not passed (it is offered again then)."""
        self.offered.discard(host)
        turn = self.ready_at(host)
        if turn > now:  # its delay: a walk would hold a slot only to wait
            self.defer(host, turn)
            return None
        queued = self.queued[host]
        entry = queued.popleft()
        self.waiting -= 1
        if not queued:
            del self.queued[host]
        self.busy.add(host)
        return entry

    def ended(self, host: str) -> None:
        """`host`'s walk is over: it is offered again if it has URLs."""
        self.busy.discard(host)
        # offer(host), inline: once per URL, and host is no longer busy.
        if host not in self.offered and host in self.queued:
            self.ready.append(host)
            self.offered.add(host)
