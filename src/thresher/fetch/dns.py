"""Name resolution for fetches: cached, shared by concurrent requests, and guarded.

`DNSCache` answers "which addresses may this host be fetched from?". It asks the lookup
function (the system resolver by default: getaddrinfo in a thread, which honours
/etc/hosts and nsswitch), drops every address the guard refuses, and keeps the answer for
`ttl` seconds. getaddrinfo does not report the records' TTL, so one fixed lifetime is used
for every name; a host that moves is reached at its new address at most `ttl` late.
Refusals are answers too and are cached the same way; lookup failures are not (the job
system's backoff already spaces out retries).

Concurrent requests for a host that is not cached share one lookup, so a crawler starting
32 fetches to a new site asks the resolver once, not 32 times.

`GuardedResolver` plugs the cache into aiohttp, whose connector calls it for every new
connection to a host name (aiohttp skips the resolver for IP literals; the client checks
those itself and `guard.guarded_socket` checks every address before connecting).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence

from aiohttp.abc import AbstractResolver, ResolveResult

from thresher.clock import Clock, SystemClock
from thresher.fetch.errors import AddressRefused, DNSError
from thresher.fetch.guard import ALLOW_HINT, ip_literal, refusal, refused_text

__all__ = ["DNSCache", "GuardedResolver", "Lookup", "system_lookup"]

Lookup = Callable[[str], Awaitable[Sequence[str]]]
"""Resolve a host name to IP address strings; raise OSError (socket.gaierror) on failure."""

_ADDRCONFIG = getattr(socket, "AI_ADDRCONFIG", 0)
_NUMERIC = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


log = logging.getLogger("thresher.fetch")

# Failed lookups in a row, in this process, before it says it may be offline (a WARNING:
# the retries that follow are INFO lines, and a run of minutes of them said nothing).
OFFLINE_AFTER = 3


class DNSStreak:
    """Fetches that failed on DNS in a row, in this process: a machine without a network
    fails them all. The job system counts its jobs' attempts that ended in a DNSError
    (a lookup failure may be remembered and raised again: robots.txt unreachable); a
    lookup that succeeds ends the streak. The first time the streak reaches
    OFFLINE_AFTER, and each time it doubles, it warns."""

    def __init__(self) -> None:
        self.failures = 0
        self._warn_at = OFFLINE_AFTER

    def failed(self, reason: str) -> None:
        self.failures += 1
        if self.failures >= self._warn_at:
            self._warn_at *= 2
            log.warning(
                "offline? %d DNS failures in a row (the last: %s): no name resolves, so"
                " nothing can be fetched; jobs are retried a few times, then fail until"
                " the next run",
                self.failures,
                reason,
            )

    def succeeded(self) -> None:
        if self.failures >= OFFLINE_AFTER:
            log.info("DNS answers again after %d failures in a row", self.failures)
        self.failures = 0
        self._warn_at = OFFLINE_AFTER


STREAK = DNSStreak()


async def system_lookup(host: str) -> list[str]:
    """The system resolver's addresses for `host`, in its order, without duplicates."""
    loop = asyncio.get_running_loop()
    # AI_ADDRCONFIG: no IPv6 answers on a machine without IPv6, where they cannot work.
    infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=_ADDRCONFIG)
    seen: dict[str, None] = {}
    for family, _, _, _, sockaddr in infos:
        address = str(sockaddr[0])
        if family == socket.AF_INET6 and len(sockaddr) > 3 and sockaddr[3]:
            address = f"{address}%{sockaddr[3]}"  # a link-local address needs its interface
        seen[address] = None
    return list(seen)


class _Entry:
    __slots__ = ("addresses", "expires", "refused")

    def __init__(self, expires: float, addresses: tuple[str, ...], refused: str) -> None:
        self.expires = expires
        self.addresses = addresses
        self.refused = refused  # why no address is allowed; "" when some are


class DNSCache:
    """Allowed addresses per host name, cached for `ttl` seconds of `clock` time."""

    def __init__(
        self,
        *,
        ttl: float = 300.0,
        allow_private: bool = False,
        lookup: Lookup | None = None,
        clock: Clock | None = None,
        max_entries: int = 100_000,
    ) -> None:
        self.ttl = ttl
        self.allow_private = allow_private
        self.max_entries = max_entries
        self._lookup: Lookup = lookup or system_lookup
        self._clock: Clock = clock or SystemClock()
        self._entries: dict[str, _Entry] = {}
        self._pending: dict[str, asyncio.Task[_Entry]] = {}
        self.lookups = 0  # calls made to the lookup function: for tests and statistics

    def cached(self, host: str) -> list[str] | None:
        """The allowed addresses of `host` if known now, without waiting; None if a lookup
        is needed. Raises AddressRefused for a refused IP literal or a cached refusal."""
        literal = ip_literal(host)
        if literal is not None:
            return [self._check_literal(host, literal)]
        entry = self._entries.get(host.lower())
        if entry is None or entry.expires <= self._clock.now():
            return None
        return self._allowed(host, entry)

    async def resolve(self, host: str) -> list[str]:
        """The addresses of `host` that may be contacted, in the resolver's order.

        IP literals are returned as they are (if allowed). Raises DNSError when the name
        does not resolve, AddressRefused when every address it has is refused.
        """
        known = self.cached(host)
        if known is not None:
            return known
        key = host.lower()
        task = self._pending.get(key)
        if task is None:
            task = asyncio.ensure_future(self._refresh(host, key))
            self._pending[key] = task
            task.add_done_callback(lambda t: self._done(key, t))
        # Shielded: one caller giving up (a timeout, a cancelled job) must not cancel the
        # lookup the others are waiting for.
        entry = await asyncio.shield(task)
        return self._allowed(host, entry)

    def clear(self) -> None:
        self._entries.clear()

    def _check_literal(self, host: str, address: str) -> str:
        if not self.allow_private:
            kind = refusal(address)
            if kind is not None:
                raise AddressRefused(host, refused_text(host, kind))
        return host

    @staticmethod
    def _allowed(host: str, entry: _Entry) -> list[str]:
        if entry.refused:
            raise AddressRefused(host, entry.refused)
        return list(entry.addresses)

    def _done(self, key: str, task: asyncio.Task[_Entry]) -> None:
        self._pending.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved here so that nobody waiting is not an error

    async def _refresh(self, host: str, key: str) -> _Entry:
        self.lookups += 1
        try:
            answer = await self._lookup(host)
        except (OSError, UnicodeError) as exc:
            # gaierror's text ("Name or service not known") is the useful part.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise DNSError(host, f"cannot resolve {host}: {reason or type(exc).__name__}") from None
        if not answer:
            raise DNSError(host, f"cannot resolve {host}: no addresses")
        STREAK.succeeded()
        if self.allow_private:
            allowed, refused = tuple(answer), ""
        else:
            allowed = tuple(a for a in answer if refusal(a) is None)
            refused = "" if allowed else self._why(host, answer)
        entry = _Entry(self._clock.now() + self.ttl, allowed, refused)
        self._store(key, entry)
        return entry

    @staticmethod
    def _why(host: str, answer: Sequence[str]) -> str:
        shown = ", ".join(f"{a} ({refusal(a)})" for a in answer[:4])
        more = f" and {len(answer) - 4} more" if len(answer) > 4 else ""
        return f"refused: {host} resolves only to refused addresses: {shown}{more}; {ALLOW_HINT}"

    def _store(self, key: str, entry: _Entry) -> None:
        entries = self._entries
        entries.pop(key, None)  # re-inserted last: the dict's order is oldest first
        entries[key] = entry
        if len(entries) > self.max_entries:
            now = self._clock.now()
            for stale in [k for k, e in entries.items() if e.expires <= now]:
                del entries[stale]
            # Still full of live answers (a very wide crawl): forget the oldest half.
            if len(entries) > self.max_entries:
                for old in list(entries)[: len(entries) // 2]:
                    del entries[old]


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver interface over a `DNSCache`."""

    def __init__(self, cache: DNSCache) -> None:
        self._cache = cache

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = await self._cache.resolve(host)
        results: list[ResolveResult] = []
        for address in addresses:
            af = socket.AF_INET6 if ":" in address else socket.AF_INET
            if family and af != family:
                continue
            results.append(
                ResolveResult(
                    hostname=host, host=address, port=port, family=af, proto=0, flags=_NUMERIC
                )
            )
        if not results:
            raise DNSError(host, f"cannot resolve {host}: no address of family {family!r}")
        return results

    async def close(self) -> None:
        pass
