"""NNTP (RFC 3977) for job handlers: one polite, guarded connection per news host.

A news server is read through one connection at a time per host, shared by every
source on it: `NewsHosts` (one per worker process) hands out `NewsSession`s, each the
host's only connection while it lasts. Within a process a host's turn is a lock; the
workers of a PostgreSQL store also hold the host in the shared `host_leases` table
(key `host:nntp:NAME`, `HostLeases`), extended while the session lasts, so no two
workers anywhere talk to one news host at once. With SQLite there is one process. A
session pauses `delay` seconds after every `batch` commands, and the host's next
session starts `delay` after the last one ended. A turn further off than `max_wait`
is not waited for: the job is handed back until then (`HostBusy`).

The host's name is resolved by Thresher's `DNSCache`, private, loopback and link-local
addresses are refused unless `allow_private` (`guard`), and the connection is made to
the address that was checked, never to the name again, so a name that changes its
answer in between (DNS rebinding) cannot slip through. TLS (`nntps://`, or STARTTLS
before a password is sent when the server offers it) checks the certificate against
the host's name with the system's trust store (`SSL_CERT_FILE` to use another).

The parts, one module each: news URLs and a session's settings (`news_address`); the
session and its commands (`news_session`), through nntplib's client (`news_client`);
what the server's answers become (`news_answers`). This module is the hosts' turns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..clock import Clock
from ..errors import HostBusy, PermanentError, TransientError
from .dns import DNSCache, Lookup
from .errors import AddressRefused, DNSError
from .leases import HostLeases
from .news_address import NEWS_SCHEMES, NewsAddress, NewsSettings, news_url, server_url
from .news_answers import Overview
from .news_session import NewsSession, hold_span

# The names job handlers use stay here, the NNTP module's face, wherever they live.
__all__ = [
    "NEWS_SCHEMES",
    "NewsAddress",
    "NewsHosts",
    "NewsSession",
    "NewsSettings",
    "Overview",
    "news_url",
]

log = logging.getLogger("thresher.fetch")


class _Turn:
    """A host's turn in this process."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.next_at = 0.0


class NewsHosts:
    """Every news host's turn in one worker process; `session` opens a connection."""

    def __init__(
        self,
        clock: Clock,
        leases: HostLeases | None = None,
        *,
        lookup: Lookup | None = None,
        dns_ttl: float = 300.0,
    ) -> None:
        self.clock = clock
        self.leases = leases
        self._dns = {
            allow: DNSCache(ttl=dns_ttl, allow_private=allow, lookup=lookup, clock=clock)
            for allow in (False, True)
        }
        self._turns: dict[str, _Turn] = {}
        self.sessions = 0  # opened: for tests and statistics

    async def aclose(self) -> None:
        """Sessions end with their jobs; nothing is left to close."""

    @asynccontextmanager
    async def session(
        self, address: NewsAddress, settings: NewsSettings
    ) -> AsyncIterator[NewsSession]:
        """The host's one connection, once its turn has come; closed (QUIT) after."""
        addresses = await self._resolve(address, settings)
        turn = self._turns.setdefault(address.lease_key, _Turn())
        await self._take(turn, address, settings)
        held_until = None
        opened = False
        try:
            if self.leases is not None:
                held_until = await self._hold(address, settings)
            session = NewsSession(self, address, settings, held_until)
            opened = True
            try:
                await session.open(addresses)
                self.sessions += 1
                yield session
            finally:
                await session.close()
        finally:
            if opened:
                turn.next_at = max(turn.next_at, self.clock.now() + settings.delay)
            turn.lock.release()
            if held_until is not None and self.leases is not None:
                try:
                    await self.leases.give(address.lease_key, turn.next_at, None, 0.0)
                except Exception as exc:  # the hold runs out by itself
                    log.warning("could not give back %s: %s", address.lease_key, exc)

    async def _resolve(self, address: NewsAddress, settings: NewsSettings) -> list[str]:
        where = server_url(address)
        dns = self._dns[settings.allow_private]
        try:
            async with asyncio.timeout(settings.connect_timeout):
                return await dns.resolve(address.host)
        except TimeoutError:
            raise TransientError(
                f"{where}: resolving {address.host} took over {settings.connect_timeout} s"
            ) from None
        except AddressRefused as exc:
            raise PermanentError(f"{where}: {exc.reason}") from None
        except DNSError as exc:
            raise TransientError(f"{where}: {exc.reason}") from None

    async def _take(self, turn: _Turn, address: NewsAddress, settings: NewsSettings) -> None:
        """Wait for the host's turn in this process (its lock, then its delay)."""
        name = address.lease_key
        now = self.clock.now()
        try:
            async with asyncio.timeout(settings.max_wait):
                await turn.lock.acquire()
        except TimeoutError:
            raise HostBusy(
                name, now + settings.max_wait, now, "another job has its connection"
            ) from None
        now = self.clock.now()
        wait = turn.next_at - now
        if wait > settings.max_wait:
            turn.lock.release()
            raise self._busy(name, turn.next_at, now, settings, "its delay")
        if wait > 0:
            try:
                await self.clock.sleep(wait)
            except BaseException:
                turn.lock.release()
                raise

    async def _hold(self, address: NewsAddress, settings: NewsSettings) -> float:
        """Hold the host in the shared store (other workers' turns); until when."""
        assert self.leases is not None
        name = address.lease_key
        deadline = self.clock.now() + settings.max_wait
        while True:
            now = self.clock.now()
            until = now + hold_span(settings)
            again = await self.leases.take(name, None, now, until, 0.0, delay=settings.delay)
            if again is None:
                return until
            if again > deadline:
                raise self._busy(name, again, now, settings, "another worker has its connection")
            await self.clock.sleep(max(0.0, again - self.clock.now()))

    def _busy(
        self, name: str, until: float, now: float, settings: NewsSettings, why: str
    ) -> TransientError:
        if until - now > settings.max_defer:
            return TransientError(f"{name} asked us to wait {until - now:.0f} s", until - now)
        return HostBusy(name, until, now, why)
