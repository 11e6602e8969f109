"""Politeness: how often one host (and one server) may be asked for something.

A crawler that is fast for us is a burden for the site. The rules, per host:

- one fetch at a time (`Politeness.max_in_flight`, default 1);
- between two fetches at least `delay` seconds, or the site's robots.txt Crawl-delay if
  larger, counted from the end of the previous fetch (and from its start, so the spacing
  holds even with more than one fetch in flight);
- hosts on one IP address (learnt from DNS) share one more clock, `ip_delay`, so a
  thousand virtual hosts on one server are not fetched a thousand at a time;
- 429 and 503 are the server asking us to slow down: the host waits for `Retry-After`
  (or `backoff` if the server did not say) before anything else is fetched from it;
- repeated failures (no answer, 429, 5xx) mean the host is in trouble: after
  `park_after` consecutive failures of different URLs (retries do not count) the host
  is *parked* for `park_base · 2^k` seconds (k = failures beyond the threshold, capped
  at `park_max`), then tried again. One success
  clears the count.

This module holds the policy and the per-host and per-IP state, and the arithmetic of
those rules as pure functions of `now`. The `Workbench` decides which host goes next.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["HostState", "IpState", "Politeness", "is_failure", "is_slow_down"]


@dataclass(frozen=True)
class Politeness:
    """The politeness settings; times in seconds."""

    delay: float = 1.0
    ip_delay: float = 0.5
    max_in_flight: int = 1
    backoff: float = 60.0
    park_after: int = 3
    park_base: float = 300.0
    park_max: float = 6 * 3600.0
    max_attempts: int = 3
    max_per_host: int | None = None

    def __post_init__(self) -> None:
        if self.delay < 0 or self.ip_delay < 0 or self.backoff < 0:
            raise ValueError("delays must be >= 0")
        if self.max_in_flight < 1 or self.park_after < 1 or self.max_attempts < 1:
            raise ValueError("max_in_flight, park_after and max_attempts must be >= 1")
        if self.max_per_host is not None and self.max_per_host < 0:
            raise ValueError("max_per_host must be >= 0")


def is_slow_down(status: int | None) -> bool:
    """429 Too Many Requests and 503 Service Unavailable ask the client to wait."""
    return status in (429, 503)


def is_failure(status: int | None) -> bool:
    """No answer, a slow-down, or a server error: the host is not serving us well."""
    return status is None or status == 429 or status >= 500


@dataclass
class IpState:
    """The clock shared by every host on one IP address."""

    next_allowed: float = 0.0


@dataclass
class HostState:
    """One host: its FIFO of ready URLs and when it may next be fetched."""

    host: str
    # (url, key or None if the URL's own hash, depth, attempt, hop): see `Workbench.add`;
    # the hop is a `thresher.frontier.scope.Hop`
    queue: deque[tuple[str, int | None, int, int, int]] = field(default_factory=deque)
    next_allowed: float = 0.0
    parked_until: float = 0.0
    in_flight: int = 0
    failures: int = 0
    accepted: int = 0
    crawl_delay: float = 0.0
    ip: str | None = None
    # Counts the fetches started and ended: a fetch handed back unmade may undo its own
    # start's delay only if nothing has moved the host's clock since.
    moves: int = 0

    def delay(self, policy: Politeness) -> float:
        """Seconds between two fetches: the configured delay or Crawl-delay if larger."""
        return max(policy.delay, self.crawl_delay)

    def on_start(self, policy: Politeness, now: float) -> None:
        self.in_flight += 1
        self.moves += 1
        self.next_allowed = max(self.next_allowed, now + self.delay(policy))

    def on_end(
        self,
        policy: Politeness,
        now: float,
        status: int | None,
        retry_after: float | None,
        *,
        retry: bool = False,
    ) -> None:
        """Apply the delay, a requested slow-down, and failure parking.

        A failed `retry` of a URL does not count towards parking: one bad URL tried three
        times says little about the host; three different URLs failing in a row do."""
        self.in_flight = max(0, self.in_flight - 1)
        self.moves += 1
        wait = self.delay(policy)
        if is_slow_down(status):
            wait = max(wait, policy.backoff if retry_after is None else retry_after)
        self.next_allowed = max(self.next_allowed, now + wait)
        if not is_failure(status):
            self.failures = 0
            return
        if retry:
            return
        self.failures += 1
        if self.failures >= policy.park_after:
            k = self.failures - policy.park_after
            park = min(policy.park_max, policy.park_base * 2.0 ** min(k, 64))
            self.parked_until = max(self.parked_until, now + park)

    def ready_at(self, ip: IpState | None) -> float:
        """The earliest time this host may be fetched, ignoring its in-flight count."""
        t = max(self.next_allowed, self.parked_until)
        return t if ip is None else max(t, ip.next_allowed)

    def parked(self, now: float) -> bool:
        return self.parked_until > now
