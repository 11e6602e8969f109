"""The workbench: which URL to fetch next, and when.

Hosts that have ready URLs wait in a heap ordered by the earliest time each may be
fetched (BUbiNG's workbench). `next_fetch(now)` is a decision and nothing else: a
`Fetch` to start now, the time at which something will be ready, or ``None`` when no URL
is queued. The caller does the fetching and reports back with `on_done`; DNS answers come
in through `on_resolved`, robots.txt Crawl-delays through `set_crawl_delay`. No I/O, no
clock: every method takes `now`, so tests drive it with plain floats.

The heap holds lower bounds. A host's real ready time can move later after it was pushed
(another host on its IP was fetched, it got parked), so a popped entry is checked against
the host's current state and pushed back if it is early. Each host has at most one live
entry; stale ones are recognised by a per-host sequence number and skipped.

URLs are taken as given, to be fetched as they are: check scope and pass their keys (the
hash of the canonical form) through the sieve first. Each URL carries its key, handed back
in its `Fetch`.
A page requisite (`Hop.EMBED`) goes to the head of its host's queue, as Heritrix
schedules embeds: a page's images and stylesheets are fetched soon after it (the
archive holds the page as it looked), before the host's other pages.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from thresher.frontier.canonical import host_of, url_hash
from thresher.frontier.politeness import HostState, IpState, Politeness, is_failure
from thresher.frontier.scope import Hop

__all__ = ["Fetch", "Workbench", "WorkbenchStats"]


@dataclass(frozen=True)
class Fetch:
    """A URL handed out to be fetched now; give it back to `Workbench.on_done`."""

    url: str
    host: str
    depth: int
    attempt: int = 1
    key: int = 0  # the URL's key (`url_hash` of its canonical form), as given to `add`
    # When the host could next be fetched before this fetch was handed out, and its
    # `moves` after: that time comes back if the fetch is handed back unmade (on_cancel,
    # on_held) and nothing else moved the host's clock meanwhile.
    host_was_ready_at: float = 0.0
    host_moves: int = 0
    hop: Hop = Hop.LINK


@dataclass(frozen=True)
class WorkbenchStats:
    queued: int
    hosts: int
    active_hosts: int
    in_flight: int
    parked: int
    dropped: int
    capped: int


class Workbench:
    """Per-host FIFOs of ready URLs, and a heap of hosts by when they may next be fetched."""

    def __init__(self, policy: Politeness | None = None, not_before: float = 0.0) -> None:
        self.policy = policy or Politeness()
        # No host is fetched before this: a crawl resumed after a crash holds back one
        # delay, since the process that died may have fetched any host just before.
        self.not_before = not_before
        self._hosts: dict[str, HostState] = {}
        self._ips: dict[str, IpState] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._entry: dict[str, int] = {}  # host -> sequence number of its live heap entry
        self._seq = 0
        self._queued = 0
        self._in_flight = 0
        self.dropped = 0  # given up after max_attempts
        self.capped = 0  # refused by max_per_host

    # -- events ---------------------------------------------------------------------------

    def add(
        self, url: str, depth: int, now: float, key: int | None = None, hop: Hop = Hop.LINK
    ) -> bool:
        """Queue `url` (to be fetched as given) with its `key`, the hash of its canonical
        form (by default the hash of `url` itself: a canonical URL is its own key);
        False if its host already had `max_per_host` URLs. A requisite (`hop`
        `Hop.EMBED`) goes to the head of the queue, any other URL to its tail.

        `now` is not used yet: a URL is ready as soon as it is added. It is taken so that
        callers need not change when URLs get a not-before time (a scheduled revisit).
        """
        host = host_of(url)
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = HostState(host, next_allowed=self.not_before)
        cap = self.policy.max_per_host
        if cap is not None and state.accepted >= cap:
            self.capped += 1
            return False
        state.accepted += 1
        # Most URLs are their own key (a canonical URL as linked): None is kept for them
        # instead of a second 64-bit int (36 bytes, a third more per queued URL).
        if key is not None and key == url_hash(url):
            key = None
        if hop is Hop.EMBED:
            state.queue.appendleft((url, key, depth, 1, hop))
        else:
            state.queue.append((url, key, depth, 1, hop))
        self._queued += 1
        self._schedule(state)
        return True

    def on_resolved(self, host: str, ip: str) -> None:
        """Attach the IP address DNS gave for `host`: from now on it shares that IP's clock."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = HostState(host, next_allowed=self.not_before)
        state.ip = ip
        self._ips.setdefault(ip, IpState(next_allowed=self.not_before))

    def on_side_fetch(self, host: str, now: float) -> None:
        """A fetch of `host` made beside the workbench (its robots.txt) ended at `now`:
        the host's next fetch waits its delay too."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = HostState(host, next_allowed=self.not_before)
        state.next_allowed = max(state.next_allowed, now + state.delay(self.policy))
        state.moves += 1
        if state.queue:
            self._schedule(state)

    def set_crawl_delay(self, host: str, delay: float | None) -> None:
        """robots.txt's Crawl-delay for `host` (used when larger than the configured delay)."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = HostState(host, next_allowed=self.not_before)
        state.crawl_delay = max(0.0, delay or 0.0)

    def on_done(
        self,
        fetch: Fetch,
        now: float,
        status: int | None,
        retry_after: float | None = None,
        ip: str | None = None,
        *,
        final: bool = False,
    ) -> bool:
        """`fetch` ended with HTTP `status` (``None``: no answer) at `now`.

        A failed fetch (no answer, 429, 5xx) goes back to the head of its host's queue
        until it has been tried `max_attempts` times, then it is dropped. `final` says a
        retry cannot help (the address is refused, the body is too large): the host still
        counts the failure, the URL is not queued again. Returns whether it was requeued.
        """
        state = self._hosts.get(fetch.host)
        if state is None or state.in_flight < 1:
            raise ValueError(f"{fetch.url} is not in flight: on_done once per fetch")
        if ip is not None and state.ip != ip:
            self.on_resolved(fetch.host, ip)
        state.on_end(self.policy, now, status, retry_after, retry=fetch.attempt > 1)
        self._in_flight -= 1
        if state.ip is not None:
            ip_state = self._ips[state.ip]
            ip_state.next_allowed = max(ip_state.next_allowed, now + self.policy.ip_delay)
        requeued = False
        if is_failure(status):
            if fetch.attempt < self.policy.max_attempts and not final:
                state.queue.appendleft(
                    (fetch.url, fetch.key, fetch.depth, fetch.attempt + 1, fetch.hop)
                )
                self._queued += 1
                requeued = True
            else:
                self.dropped += 1
        self._schedule(state)
        return requeued

    def on_cancel(self, fetch: Fetch) -> None:
        """`fetch` was handed out but not started (its site's robots.txt is not known yet):
        put it back at the head of its queue with no politeness cost."""
        state = self._hosts.get(fetch.host)
        if state is None or state.in_flight < 1:
            raise ValueError(f"{fetch.url} is not in flight: on_cancel once per fetch")
        state.in_flight -= 1
        self._in_flight -= 1
        if state.moves == fetch.host_moves:
            state.next_allowed = fetch.host_was_ready_at
        state.queue.appendleft((fetch.url, fetch.key, fetch.depth, fetch.attempt, fetch.hop))
        self._queued += 1
        self._schedule(state)

    def on_withdraw(self, fetch: Fetch) -> None:
        """`fetch` was handed out but will not be made, and its URL leaves the workbench
        (its site's robots.txt expired, or now forbids it): no politeness cost, and its
        place under `max_per_host` is given back, so the URL may be added again."""
        state = self._hosts.get(fetch.host)
        if state is None or state.in_flight < 1:
            raise ValueError(f"{fetch.url} is not in flight: on_withdraw once per fetch")
        state.in_flight -= 1
        self._in_flight -= 1
        state.accepted -= 1
        if state.moves == fetch.host_moves:
            state.next_allowed = fetch.host_was_ready_at
        self._schedule(state)

    def on_held(self, fetch: Fetch, until: float) -> None:
        """`fetch` was handed out but its host (or its address) is another worker's turn
        until `until`: put it back at the head of its queue, and the host waits for that."""
        self.on_cancel(fetch)
        state = self._hosts[fetch.host]
        state.next_allowed = max(state.next_allowed, until)
        self._entry.pop(state.host, None)  # its heap entry is now too early
        self._schedule(state)

    def turns(self, host: str) -> tuple[float, str | None, float]:
        """When `host` may next be fetched by its own clock (delay, Crawl-delay, backoff),
        its address, and when that address may: what other workers must wait for."""
        state = self._hosts.get(host)
        if state is None:
            return self.not_before, None, 0.0
        ip = self._ip_of(state)
        return state.ready_at(None), state.ip, ip.next_allowed if ip is not None else 0.0

    # -- decisions ------------------------------------------------------------------------

    def next_fetch(self, now: float) -> Fetch | float | None:
        """A URL to fetch now; else when one will be ready; else ``None`` if none is queued.

        ``math.inf`` means URLs are queued but only behind fetches in flight: wait for an
        `on_done`.
        """
        while self._heap:
            when, seq, host = self._heap[0]
            if self._entry.get(host) != seq:
                heapq.heappop(self._heap)
                continue
            state = self._hosts[host]
            ready = state.ready_at(self._ip_of(state))
            if ready > when:  # the bound was stale: requeue at the real time
                heapq.heapreplace(self._heap, self._push_entry(host, ready))
                continue
            if when > now:
                return when
            heapq.heappop(self._heap)
            del self._entry[host]
            return self._start(state, now)
        return math.inf if self._queued else None

    def stats(self, now: float) -> WorkbenchStats:
        return WorkbenchStats(
            queued=self._queued,
            hosts=len(self._hosts),
            active_hosts=sum(1 for s in self._hosts.values() if s.queue or s.in_flight),
            in_flight=self._in_flight,
            parked=sum(1 for s in self._hosts.values() if s.parked(now)),
            dropped=self.dropped,
            capped=self.capped,
        )

    def host(self, host: str) -> HostState | None:
        """The state of `host` (read it, do not change it)."""
        return self._hosts.get(host)

    # -- internals ------------------------------------------------------------------------

    def _ip_of(self, state: HostState) -> IpState | None:
        return None if state.ip is None else self._ips[state.ip]

    def _start(self, state: HostState, now: float) -> Fetch:
        url, own_key, depth, attempt, hop = state.queue.popleft()
        key = url_hash(url) if own_key is None else own_key
        self._queued -= 1
        self._in_flight += 1
        was_ready_at = state.next_allowed
        state.on_start(self.policy, now)
        ip = self._ip_of(state)
        if ip is not None:
            ip.next_allowed = max(ip.next_allowed, now + self.policy.ip_delay)
        self._schedule(state)
        return Fetch(url, state.host, depth, attempt, key, was_ready_at, state.moves, Hop(hop))

    def _push_entry(self, host: str, when: float) -> tuple[float, int, str]:
        self._seq += 1
        self._entry[host] = self._seq
        return (when, self._seq, host)

    def _schedule(self, state: HostState) -> None:
        """Put `state` in the heap if it has work and a free connection, else take it out."""
        if state.queue and state.in_flight < self.policy.max_in_flight:
            if state.host not in self._entry:
                heapq.heappush(
                    self._heap, self._push_entry(state.host, state.ready_at(self._ip_of(state)))
                )
        else:
            self._entry.pop(state.host, None)
