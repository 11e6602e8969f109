"""`NewsSession`: one connection to a news server, opened by `NewsHosts` in the host's
turn, and the commands a kind uses (GROUP, OVER, ARTICLE).

The protocol is the standard library's `nntplib` (`standard-nntplib` from Python 3.13,
where it left the standard library): its blocking socket I/O runs in a thread of the
session's own, with the read timeout on every receive and a total limit on each
command; a command cancelled (the job stopped by SIGTERM) or out of time has its socket
shut down under it, which ends the thread's wait at once.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar, cast

from ..clock import Clock
from ..errors import PermanentError, TransientError
from .guard import refusal
from .leases import HOLD_MARGIN, HostLeases
from .news_address import NewsAddress, NewsSettings, server_url
from .news_answers import (
    NO_ARTICLE,
    ArticleSink,
    ArticleTooLarge,
    LineSink,
    Overview,
    command_error,
    parse_overview,
)
from .news_client import LINE_MAX, client_class, load_nntplib, tls_context

if TYPE_CHECKING:
    from .news_client import NewsClient

__all__ = ["NewsSession", "hold_span"]

T = TypeVar("T")


class _Hosts(Protocol):
    """What a session asks of the `NewsHosts` that opened it."""

    @property
    def clock(self) -> Clock: ...

    @property
    def leases(self) -> HostLeases | None: ...


def hold_span(settings: NewsSettings) -> float:
    # Longer than a command may take, so that a hold extended before each command
    # never runs out while one is under way.
    return settings.command_timeout + HOLD_MARGIN


class NewsSession:
    """One connection to a news server, the host's only one while it is open."""

    def __init__(
        self,
        hosts: _Hosts,
        address: NewsAddress,
        settings: NewsSettings,
        held_until: float | None,
    ) -> None:
        self.hosts = hosts
        self.address = address
        self.settings = settings
        self.held_until = held_until
        self.where = server_url(address)
        self.commands = 0  # sent, for the batches' pauses and for tests
        self.wire = 0  # bytes of articles received
        self._client: NewsClient | None = None
        self._sock: socket.socket | None = None  # while connecting, before a client
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thresher-nntp")
        self._broken = False

    # --- the commands a kind uses ---------------------------------------------------------

    async def group(self, name: str) -> tuple[int, int, int]:
        """Select `name`: its estimated count and first and last article numbers.
        PermanentError when the server has no such group."""
        client = self._need()
        _, count, first, last, _ = await self._command(f"GROUP {name}", client.group, name)
        return int(count), int(first), int(last)

    async def over(self, first: int, last: int) -> list[Overview]:
        """The articles numbered `first` to `last` that the server's overview lists,
        with their Message-IDs (OVER, or XOVER for servers older than RFC 3977)."""
        client = self._need()

        def run() -> list[Overview]:
            sink = LineSink()
            try:
                client.over((first, last), file=cast(IO[bytes], sink))
            except load_nntplib().NNTPTemporaryError as exc:
                if str(exc)[:3] in NO_ARTICLE:  # an empty range (423)
                    return []
                raise
            return parse_overview(sink.lines)

        return await self._command(f"OVER {first}-{last}", run)

    async def article(self, number: int, max_bytes: int) -> bytes | None:
        """Article `number` as stored (its lines ending in LF: CRLF is NNTP's wire
        form), None when the server has no such article (423, 430). TooLarge past
        `max_bytes` (the answer is read to its end, so the connection stays usable)."""
        client = self._need()

        def run() -> bytes | None:
            sink = ArticleSink(max_bytes)
            client.line_max = max_bytes + 2
            try:
                client.article(str(number), file=cast(IO[bytes], sink))
            except load_nntplib().NNTPTemporaryError as exc:
                if str(exc)[:3] in NO_ARTICLE:
                    return None
                raise
            finally:
                client.line_max = LINE_MAX
            size, client.oversized = sink.size + client.oversized, 0
            self.wire += size
            if sink.too_large or size > max_bytes:
                raise ArticleTooLarge(number, size, max_bytes)
            return b"".join(sink.parts)

        return await self._command(f"ARTICLE {number}", run)

    # --- connection -----------------------------------------------------------------------

    async def open(self, addresses: list[str]) -> None:
        tls = tls_context() if self.address.tls else None
        self._client = await self._run(
            "connect", lambda: self._connect(addresses, tls), self.settings.command_timeout
        )

    def _connect(self, addresses: list[str], tls: ssl.SSLContext | None) -> NewsClient:
        errors = []
        for address in addresses:
            if not self.settings.allow_private and (kind := refusal(address)) is not None:
                errors.append(f"{address} is {kind}")  # the cache refuses these already
                continue
            try:
                client = client_class()(address, self.address, self.settings, tls, self._opened)
            except ssl.SSLCertVerificationError as exc:
                raise PermanentError(
                    f"{self.where}: the server's certificate: {exc.verify_message or exc}"
                ) from None
            except TimeoutError:
                if self._sock is None:  # no connection: the next address may answer
                    errors.append(
                        f"{address}: no connection within {self.settings.connect_timeout} s"
                    )
                    continue
                raise TransientError(
                    f"{self.where}: silent for {self.settings.read_timeout} s after connecting"
                ) from None
            except OSError as exc:
                errors.append(f"{address}: {exc.strerror or exc}")
                self._sock = None
                continue
            try:
                self._login(client)
            except BaseException:
                client.drop()
                raise
            return client
        raise TransientError(f"{self.where}: cannot connect: {'; '.join(errors)}")

    def _opened(self, sock: socket.socket) -> None:
        self._sock = sock
        if self._broken:  # cancelled while it connected
            with suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def _login(self, client: NewsClient) -> None:
        s = self.settings
        if not s.user:
            return
        caps = client.getcapabilities()
        if not self.address.tls and "STARTTLS" in caps:
            client.starttls(tls_context())  # before the password crosses the network
        client.login(s.user, s.password, usenetrc=False)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            if self._broken:
                client.drop()
            else:
                try:
                    await self._run("QUIT", client.quit, self.settings.read_timeout)
                except Exception:
                    client.drop()
        self._executor.shutdown(wait=False)

    def _need(self) -> NewsClient:
        if self._client is None:
            raise TransientError(f"{self.where}: the connection was lost")
        return self._client

    async def _command(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """Send one command (in the session's thread), pausing between batches and
        keeping the host's hold in the shared store."""
        s = self.settings
        if self.commands and self.commands % s.batch == 0 and s.delay > 0:
            await self.hosts.clock.sleep(s.delay)
        await self._extend()
        self.commands += 1
        return await self._run(what, lambda: fn(*args), s.command_timeout)

    async def _extend(self) -> None:
        leases, held = self.hosts.leases, self.held_until
        if leases is None or held is None:
            return
        now = self.hosts.clock.now()
        span = hold_span(self.settings)
        if held - now > span / 2:
            return
        until = now + span
        if not await leases.extend(self.address.lease_key, now, until):
            self._broken = True
            raise TransientError(f"{self.where}: the hold on the host ran out; will resume")
        self.held_until = until

    async def _run(self, what: str, fn: Callable[[], T], limit: float) -> T:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, fn)
        try:
            async with asyncio.timeout(limit):
                return await future
        except TimeoutError:
            self._abort()
            raise TransientError(f"{self.where}: {what}: no answer within {limit:.0f} s") from None
        except asyncio.CancelledError:
            self._abort()  # the thread's wait ends now, not at the read timeout
            raise
        except (PermanentError, TransientError):
            raise
        except BaseException as exc:
            self._broken = True
            raise command_error(self.where, what, exc) from None

    def _abort(self) -> None:
        self._broken = True
        client = self._client
        if client is not None:
            client.shut_down()
        elif self._sock is not None:
            with suppress(OSError):
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
