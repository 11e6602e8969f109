"""Polite fetching for job handlers: the crawl's manners for one-off fetches.

A crawl drives the `Workbench` itself. Jobs — a URL of a `urls` list, a month of a mail
archive — fetch one URL at a time from many concurrent workers, so they share one
`PoliteFetcher` per process instead: it asks robots.txt once per site (RFC 9309, through
the frontier's `RobotsCache`), lets one request at a time reach a host, spaces requests
by the host's delay (robots.txt Crawl-delay if larger), honours Retry-After on 429/503
and parks a host that keeps failing (the frontier's `HostState` arithmetic): failures of
different URLs count, a job's retry of a URL that failed already does not, so one page
that keeps stalling does not park its host (and every job waiting for it) for minutes. A wait longer
than `max_wait` — the host's own, or its place in the queue of requests for it — is not
slept through: the job gets `HostBusy` with the time to come back, and goes back to the
job table until then, so a worker's slots are not held by one slow or parked host. A wait
past `max_defer` is a plain `TransientError`, retried (and counted) as a failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import BinaryIO, Protocol
from urllib.parse import urlsplit

from ..clock import Clock
from ..errors import Deferred, HostBusy, Interrupted, PermanentError, TransientError
from ..frontier import (
    HostState,
    InvalidURL,
    Politeness,
    RobotsCache,
    canonicalize,
    host_of,
    robots_url,
    site_of,
)
from ..frontier.politeness import IpState, is_failure
from ..frontier.robots import MAX_ROBOTS_BYTES, Site, robots_body
from .client import Fetcher, FetchSettings
from .errors import AddressRefused, DNSError, FetchError, InvalidRequestURL
from .guard import ip_literal, refusal, refused_text
from .leases import HOLD_MARGIN, HostLeases
from .response import Response

__all__ = [
    "PoliteFetcher",
    "RobotsAnswer",
    "RobotsDisallowed",
    "RobotsUnavailable",
    "fetch_robots",
]

log = logging.getLogger("thresher.fetch")


# robots.txt may redirect (RFC 9309 §2.3.1.2: follow at least five hops).
ROBOTS_REDIRECTS = 5


class RobotsDisallowed(PermanentError):
    """robots.txt does not allow this URL to us."""


class RobotsUnavailable(TransientError):
    """robots.txt answered 429 or 5xx: RFC 9309 says to keep off the site for a while."""


# URLs of a host remembered as failed since its last success (the oldest forgotten).
_FAILED_KEPT = 64


class _Host:
    def __init__(self, name: str, connections: int) -> None:
        self.state = HostState(name)
        self.slots = asyncio.Semaphore(connections)
        self.waiting = 0  # requests waiting for their turn, not yet started
        # URLs that failed since the host last answered well: failing again, a URL is
        # a retry, which does not count towards parking the host.
        self.failed: dict[str, None] = {}

    def ended(self, url: str, status: int | None) -> bool:
        """Note how a fetch of `url` ended; whether it was a retry of a failed URL."""
        if not is_failure(status):
            self.failed.clear()
            return False
        if url in self.failed:
            return True
        self.failed[url] = None
        if len(self.failed) > _FAILED_KEPT:
            del self.failed[next(iter(self.failed))]
        return False


class PoliteFetcher:
    """One per process: `get(url)` waits its turn for the host, then fetches."""

    def __init__(
        self,
        settings: FetchSettings,
        politeness: Politeness,
        clock: Clock,
        *,
        robots: bool = True,
        max_wait: float = 30.0,
        max_defer: float = 3600.0,
        leases: HostLeases | None = None,
        stopping: asyncio.Event | None = None,
    ) -> None:
        self.settings = settings
        self.policy = politeness
        self.clock = clock
        self.obey_robots = robots
        self.max_wait = max_wait
        self.max_defer = max_defer
        # Shared with the other workers of the store; None: this process alone.
        self.leases = leases
        # Set when the process is stopping (SIGINT, SIGTERM): a GET that has not started
        # yet (waiting for its host's turn, say) is not started, but handed back.
        self.stopping = stopping
        self._ips: dict[str, IpState] = {}
        self.robots = RobotsCache(settings.user_agent)
        self._fetcher = Fetcher(settings, clock=clock)
        self._hosts: dict[str, _Host] = {}
        self._robots_pending: dict[Site, asyncio.Future[None]] = {}
        # Why a site's robots.txt could not be had, while that keeps its URLs back: a
        # URL of an unreachable site fails with the site's error (DNS, refused, 503),
        # to come back later, not with RobotsDisallowed, which would be final.
        self._robots_trouble: dict[Site, TransientError] = {}

    async def __aenter__(self) -> PoliteFetcher:
        await self._fetcher.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._fetcher.__aexit__(*exc)

    def ready_at(self, host: str) -> float:
        """When this process next lets `host` (as `host_of` names it) be fetched: its
        delay, Crawl-delay, Retry-After or parking; 0 for a host it has not fetched. Other
        workers' turns (`leases`) are not known here: `get` waits for those."""
        state = self._hosts.get(host)
        return 0.0 if state is None else state.state.ready_at(None)

    async def get(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        max_body: int | None = None,
        hold: bool = True,
    ) -> Response:
        """GET `url` (no redirects followed) once robots.txt allows it and the host's
        turn has come; RobotsDisallowed, a FetchError, or TransientError to come back.

        `hold=False`: when neither the host nor its address has a delay, fetch it
        without taking its hold in the store (`leases`), so without waiting for another
        worker that holds it: an ingest walk's hop to a host of another shard, which
        holds its hosts for seconds at a time when they have no delay."""
        await self._admit(url, hold)
        return await self._polite_get(url, headers, max_body, hold=hold)

    async def post(
        self,
        url: str,
        data: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        max_body: int | None = None,
        sink: BinaryIO | None = None,
    ) -> Response:
        """POST `data` to `url` (a git fetch's `git-upload-pack`) with the same manners
        as `get`: robots.txt, the host's turn and delay, the address guard. With `sink`
        the body is written to that file as it arrives (`Fetcher.post`)."""
        await self._admit(url)
        return await self._polite_get(url, headers, max_body, data=data, sink=sink)

    async def _admit(self, url: str, hold: bool = True) -> None:
        """Raise unless `url` may be asked for: a valid URL, an address allowed,
        robots.txt agreeing (fetched with `hold`: see `get`)."""
        try:
            host = host_of(canonicalize(url))
            site_of(url)  # as given, which is how it is fetched ("http:///x" has no host)
        except InvalidURL as exc:
            raise InvalidRequestURL(url, exc.reason) from None
        literal = (
            None if self.settings.allow_private else ip_literal(urlsplit(url).hostname or host)
        )
        if literal is not None and (kind := refusal(literal)) is not None:
            # Refused before robots.txt and the host's turn: no request is made, so the
            # host neither waits nor backs off for it (later URLs of the host would be
            # refused as "host-backoff" instead of this).
            raise AddressRefused(url, refused_text(literal, kind))
        self._not_if_stopping(url)
        if self.obey_robots:
            await self._check_robots(url, hold)

    def _not_if_stopping(self, url: str) -> None:
        if self.stopping is not None and self.stopping.is_set():
            raise Interrupted(f"GET {url}: not started: stopping", self.clock.now())

    async def _polite_get(
        self,
        url: str,
        headers: Mapping[str, str] | None,
        max_body: int | None = None,
        truncate: int | None = None,
        *,
        stoppable: bool = True,
        data: bytes | None = None,
        sink: BinaryIO | None = None,
        hold: bool = True,
    ) -> Response:
        """`stoppable`: not started once the process is stopping (not robots.txt, which
        a GET already started waits for). `hold`: see `get`."""
        name = host_of(url)
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = _Host(name, self.policy.max_in_flight)
        now = self.clock.now()
        # Each request waiting ahead of this one will take a delay of the host's time.
        ahead = host.waiting // self.policy.max_in_flight
        if ahead:
            turn = max(now, host.state.ready_at(None)) + ahead * host.state.delay(self.policy)
            if turn - now > self.max_wait:
                raise self._busy(name, turn, now, f"{host.waiting} requests ahead")
        host.waiting += 1
        waiting = True
        try:
            async with host.slots:
                ip, ip_state = await self._ip_of(url, host.state)
                held = await self._wait_turn(
                    name, host.state, ip, ip_state, url if stoppable else None, hold=hold
                )
                host.waiting -= 1
                waiting = False
                return await self._fetch_now(
                    url, headers, max_body, host, ip, ip_state, truncate,
                    data=data, sink=sink, held=held,
                )  # fmt: skip
        finally:
            if waiting:
                host.waiting -= 1

    def _busy(self, name: str, until: float, now: float, why: str) -> TransientError:
        if until - now > self.max_defer:
            return TransientError(f"{name} asked us to wait {until - now:.0f} s", until - now)
        return HostBusy(name, until, now, why)

    async def _fetch_now(
        self,
        url: str,
        headers: Mapping[str, str] | None,
        max_body: int | None,
        host: _Host,
        ip: str | None,
        ip_state: IpState | None,
        truncate: int | None = None,
        *,
        data: bytes | None = None,
        sink: BinaryIO | None = None,
        held: bool = True,
    ) -> Response:
        """Fetch `url` now that its host's turn has come, and record when it ended (and
        give back the host's hold in the store, if `held`)."""
        state = host.state
        name = state.host
        now = self.clock.now()
        state.on_start(self.policy, now)
        if ip_state is not None:
            ip_state.next_allowed = max(ip_state.next_allowed, now + self.policy.ip_delay)
        status: int | None = 200  # an exception of ours, not theirs, is not a failure
        retry_after: float | None = None
        try:
            resp = await self._fetcher.send(
                "GET" if data is None else "POST",
                url,
                headers,
                data=data,
                max_body=max_body,
                truncate=truncate,
                sink=sink,
            )
            status, retry_after = resp.status, resp.retry_after
            return resp
        except FetchError as exc:
            # A refused address, a bad URL, a body too large: not the host failing; nor
            # is a name that does not resolve (our network, or the name: parking the host
            # would only hold its jobs back for minutes, past their retries).
            if not isinstance(exc, PermanentError | DNSError):
                status = None
            raise
        finally:
            end = self.clock.now()
            retry = host.ended(url, status)
            state.on_end(self.policy, end, status, retry_after, retry=retry)
            if ip_state is not None:
                ip_state.next_allowed = max(ip_state.next_allowed, end + self.policy.ip_delay)
            if self.leases is not None and held:
                await self._give(name, state, ip, ip_state)

    async def _ip_of(self, url: str, state: HostState) -> tuple[str | None, IpState | None]:
        """The address the host is fetched from, when hosts on one address are spaced."""
        if self.policy.ip_delay <= 0:
            return None, None
        hostname = urlsplit(url).hostname or ""
        try:
            addresses = await self._fetcher.resolve(hostname)
        except FetchError as exc:
            # Neither a refused address nor a name that does not resolve is the host
            # failing (see _fetch_now).
            if not isinstance(exc, PermanentError | DNSError):
                state.on_end(self.policy, self.clock.now(), None, None)
            raise exc.for_url(url) from None
        ip = addresses[0]
        return ip, self._ips.setdefault(ip, IpState())

    async def _wait_turn(
        self,
        name: str,
        state: HostState,
        ip: str | None,
        ip_state: IpState | None,
        stoppable: str | None = None,
        *,
        hold: bool = True,
    ) -> bool:
        """Sleep until this process, and the workers sharing the store, let `name` go;
        Interrupted if the process is stopping first (`stoppable`: the URL to say so of).
        Whether the host's hold in the store was taken (`hold`: see `get`)."""
        deadline = self.clock.now() + self.max_wait
        shared = self.leases is not None and (
            hold or state.delay(self.policy) > 0 or self.policy.ip_delay > 0
        )
        while True:
            if stoppable is not None:
                self._not_if_stopping(stoppable)  # before a host lease is taken
            now = self.clock.now()
            wait = state.ready_at(ip_state) - now
            if wait <= 0 and shared:
                assert self.leases is not None
                until = now + self.settings.total_timeout + HOLD_MARGIN
                again = await self.leases.take(
                    name, ip, now, until, self.policy.ip_delay, delay=state.delay(self.policy)
                )
                if again is None:
                    return True
                now = self.clock.now()
                wait = again - now
            if wait <= 0:
                if not shared:
                    return False
                continue
            if now + wait > deadline:
                raise self._busy(name, now + wait, now, "its delay, Retry-After or parking")
            await self.clock.sleep(wait)

    async def _give(
        self, name: str, state: HostState, ip: str | None, ip_state: IpState | None
    ) -> None:
        assert self.leases is not None
        try:
            await self.leases.give(
                name,
                state.ready_at(None),
                ip,
                ip_state.next_allowed if ip_state is not None else 0.0,
            )
        except Exception as exc:  # the hold runs out by itself; the fetch stands
            log.warning("could not give back %s: %s", name, exc)

    async def _check_robots(self, url: str, hold: bool = True) -> None:
        allowed = self.robots.allowed(url, self.clock.now())
        site = site_of(url)
        while allowed is None:
            pending = self._robots_pending.get(site)
            if pending is None:
                pending = asyncio.get_running_loop().create_future()
                self._robots_pending[site] = pending
                try:
                    await self._fetch_robots(url, hold)  # its Deferred is this request's
                finally:
                    del self._robots_pending[site]
                    pending.set_result(None)
                allowed = bool(self.robots.allowed(url, self.clock.now()))
            else:
                # Another request is asking: its answer, or (it was deferred: the host
                # busy) this request asks in turn, never taking "no answer" for "no".
                await asyncio.shield(pending)
                allowed = self.robots.allowed(url, self.clock.now())
        if not allowed:
            trouble = self._robots_trouble.get(site_of(url))
            if isinstance(trouble, FetchError):
                raise trouble.for_url(url)
            if trouble is not None:
                raise RobotsUnavailable(f"GET {url}: {trouble}", trouble.retry_after)
            raise RobotsDisallowed(f"GET {url}: disallowed by robots.txt")
        delay = self.robots.crawl_delay(url, self.clock.now())
        if delay is not None:
            name = host_of(url)
            host = self._hosts.get(name)
            if host is None:
                host = self._hosts[name] = _Host(name, self.policy.max_in_flight)
            host.state.crawl_delay = delay

    async def _fetch_robots(self, url: str, hold: bool = True) -> None:
        answer = await fetch_robots(
            lambda target, truncate: self._polite_get(
                target, None, truncate=truncate, stoppable=False, hold=hold
            ),
            url,
        )
        now = self.clock.now()
        self.robots.on_robots(url, answer.status, answer.body, now)
        site = site_of(url)
        if answer.failure is not None:
            self._robots_trouble[site] = answer.failure
        elif answer.status is not None and (answer.status == 429 or answer.status >= 500):
            expires = self.robots.expires(url)
            self._robots_trouble[site] = TransientError(
                f"robots.txt answered {answer.status}",
                None if expires is None else max(0.0, expires - now),
            )
        else:
            self._robots_trouble.pop(site, None)


@dataclass(frozen=True)
class RobotsAnswer:
    """What asking for a site's robots.txt gave, ready for `RobotsCache.on_robots`."""

    status: int | None  # None: no answer (RFC 9309: assume disallowed for a while)
    body: bytes  # decoded, and no more than is parsed (`robots_body`): what to store
    response: Response | None  # the last response, to archive (None: not to archive)
    error: str | None
    failure: TransientError | None = None  # why there is no answer


class RobotsGet(Protocol):
    """How `fetch_robots` sends a request: one GET, its body cut after `truncate` bytes."""

    def __call__(self, url: str, *, truncate: int) -> Awaitable[Response]: ...


# A byte more than is parsed: enough to tell whether the last line parsed was whole.
ROBOTS_FETCH_BYTES = MAX_ROBOTS_BYTES + 1


async def fetch_robots(get: RobotsGet, url: str) -> RobotsAnswer:
    """robots.txt for `url`'s site, following up to five redirects (RFC 9309 §2.3.1.2;
    more count as "unavailable", like a 404). Only the first 500 KiB and a byte are
    read: a larger file is parsed that far (RFC 9309 §2.5), never refused as too large.
    A PermanentError (a refused address) is raised: the site's URLs get the same answer.
    Any other failure is no answer."""
    target = robots_url(url)
    resp: Response | None = None
    try:
        for _ in range(ROBOTS_REDIRECTS + 1):
            resp = await get(target, truncate=ROBOTS_FETCH_BYTES)
            if resp.location is None or not 300 <= resp.status < 400:
                body = robots_body(resp.content)
                if resp.truncated or len(body) < len(resp.content):
                    # Not archived: a WARC record of part of a body would need
                    # WARC-Truncated, which the writer does not do yet.
                    log.info(
                        "%s: %d bytes or more, parsed the first %d",
                        target,
                        len(resp.content),
                        len(body),
                    )
                    return RobotsAnswer(resp.status, body, None, None)
                return RobotsAnswer(resp.status, body, resp, None)
            target = resp.location
    except (PermanentError, Deferred):
        # Deferred: the host's turn is later (another worker holds it, or the process is
        # stopping): not an answer, nor its absence; asked again then.
        raise
    except TransientError as exc:
        return RobotsAnswer(None, b"", None, str(exc), exc)
    return RobotsAnswer(404, b"", resp, None)
