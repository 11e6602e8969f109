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

The protocol is the standard library's `nntplib` (`standard-nntplib` from Python 3.13,
where it left the standard library): its blocking socket I/O runs in a thread of the
session's own, with the read timeout on every receive and a total limit on each
command; a command cancelled (the job stopped by SIGTERM) or out of time has its socket
shut down under it, which ends the thread's wait at once.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import ssl
import warnings
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeVar, cast
from urllib.parse import unquote, urlsplit

from ..clock import Clock
from ..errors import HostBusy, PermanentError, SourceError, TransientError
from .dns import DNSCache, Lookup
from .errors import AddressRefused, DNSError
from .guard import refusal
from .leases import HOLD_MARGIN, HostLeases

if TYPE_CHECKING:
    import nntplib

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

T = TypeVar("T")

# Scheme → (TLS, default port). RFC 5538 names news: and nntp:; nntps: and the older
# snews: are the same over TLS (port 563, RFC 4642).
NEWS_SCHEMES = {
    "nntp": (False, 119),
    "news": (False, 119),
    "nntps": (True, 563),
    "snews": (True, 563),
}

# RFC 3977 §4.1 newsgroup names: printable US-ASCII but for the wildmat characters.
_GROUP = re.compile(r"^[!-)+\-.0-9:-Z^-~]+$")
_LINE_MAX = 1 << 20  # a response line, but an article's (which may be up to max_bytes)
# The "no such article" family: 423 (number), 430 (message-id), 420 (none current).
_NO_ARTICLE = ("420", "423", "430")


@dataclass(frozen=True)
class NewsAddress:
    """Where a group is served: the host's name, its port, and whether over TLS."""

    host: str
    port: int
    tls: bool

    @property
    def lease_key(self) -> str:
        # The host, whatever the port: one connection to a news host at a time.
        return f"nntp:{self.host}"


def news_url(url: str) -> tuple[NewsAddress, str, str]:
    """A news URL checked: its address, its group, and the URL to keep (`nntp://` or
    `nntps://`, host in lower case, the default port left out). `nntp://host:port/group`,
    `news://host/group` (RFC 5538), `nntps://host/group` (TLS). SourceError otherwise,
    also for a user or password in the URL: they go in options, not in a URL that is
    shown everywhere."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in NEWS_SCHEMES:
        raise SourceError(f"a news URL is nntp://, news:// or nntps://HOST/GROUP, not {url!r}")
    if "@" in parts.netloc:
        raise SourceError(
            "a news URL takes no user or password: give them as options"
            " (-o user=NAME -o password=SECRET)"
        )
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise SourceError(f"bad port in {url!r}") from None
    if not host:
        raise SourceError(f"a news URL needs a host (news://HOST/GROUP), not {url!r}")
    tls, default = NEWS_SCHEMES[scheme]
    # An article number after the group (RFC 5538 nntp: URLs) names the group still.
    segments = [s for s in parts.path.split("/") if s]
    group = unquote(segments[0]) if segments else ""
    if not group or not _GROUP.match(group) or len(segments) > 2 or "@" in group:
        raise SourceError(f"a news URL names one newsgroup (HOST/GROUP), not {url!r}")
    if len(segments) == 2 and not segments[1].isdigit():
        raise SourceError(f"a news URL names one newsgroup (HOST/GROUP), not {url!r}")
    port = port or default
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if port == default else f"{shown}:{port}"
    kept = f"{'nntps' if tls else 'nntp'}://{netloc}/{group}"
    return NewsAddress(host.lower(), port, tls), group, kept


@dataclass(frozen=True)
class NewsSettings:
    """How one session behaves: the source's manners and the config's time limits."""

    connect_timeout: float = 10.0  # one connection attempt (and TLS), name resolution
    read_timeout: float = 30.0  # the longest silence while waiting for an answer
    command_timeout: float = 120.0  # one command and its whole answer
    delay: float = 1.0  # seconds between two batches of commands, and two sessions
    batch: int = 100  # commands per batch
    allow_private: bool = False
    user: str | None = None
    password: str | None = None
    max_wait: float = 30.0  # longest wait for the host's turn before handing the job back
    max_defer: float = 3600.0  # a turn further off is a failed attempt

    def __post_init__(self) -> None:
        for name in ("user", "password"):
            value = getattr(self, name)
            if value is not None and re.search(r"[\x00-\x20\x7f]", value):
                raise SourceError(f"the {name} option must not hold spaces or control characters")


class Overview(NamedTuple):
    """One line of OVER: the article's number and its Message-ID (None when empty)."""

    number: int
    message_id: str | None


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
        where = _where(address)
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
            until = now + _hold_span(settings)
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


def _where(address: NewsAddress) -> str:
    host = f"[{address.host}]" if ":" in address.host else address.host
    return f"{'nntps' if address.tls else 'nntp'}://{host}:{address.port}"


def _hold_span(settings: NewsSettings) -> float:
    # Longer than a command may take, so that a hold extended before each command
    # never runs out while one is under way.
    return settings.command_timeout + HOLD_MARGIN


class NewsSession:
    """One connection to a news server, the host's only one while it is open."""

    def __init__(
        self,
        hosts: NewsHosts,
        address: NewsAddress,
        settings: NewsSettings,
        held_until: float | None,
    ) -> None:
        self.hosts = hosts
        self.address = address
        self.settings = settings
        self.held_until = held_until
        self.where = _where(address)
        self.commands = 0  # sent, for the batches' pauses and for tests
        self.wire = 0  # bytes of articles received
        self._client: _Client | None = None
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
            sink = _Lines()
            try:
                client.over((first, last), file=cast(IO[bytes], sink))
            except _nntplib().NNTPTemporaryError as exc:
                if str(exc)[:3] in _NO_ARTICLE:  # an empty range (423)
                    return []
                raise
            return _parse_overview(sink.lines)

        return await self._command(f"OVER {first}-{last}", run)

    async def article(self, number: int, max_bytes: int) -> bytes | None:
        """Article `number` as stored (its lines ending in LF: CRLF is NNTP's wire
        form), None when the server has no such article (423, 430). TooLarge past
        `max_bytes` (the answer is read to its end, so the connection stays usable)."""
        client = self._need()

        def run() -> bytes | None:
            sink = _Article(max_bytes)
            client.line_max = max_bytes + 2
            try:
                client.article(str(number), file=cast(IO[bytes], sink))
            except _nntplib().NNTPTemporaryError as exc:
                if str(exc)[:3] in _NO_ARTICLE:
                    return None
                raise
            finally:
                client.line_max = _LINE_MAX
            size, client.oversized = sink.size + client.oversized, 0
            self.wire += size
            if sink.too_large or size > max_bytes:
                raise ArticleTooLarge(number, size, max_bytes)
            return b"".join(sink.parts)

        return await self._command(f"ARTICLE {number}", run)

    # --- connection -----------------------------------------------------------------------

    async def open(self, addresses: list[str]) -> None:
        tls = _tls_context() if self.address.tls else None
        self._client = await self._run(
            "connect", lambda: self._connect(addresses, tls), self.settings.command_timeout
        )

    def _connect(self, addresses: list[str], tls: ssl.SSLContext | None) -> _Client:
        errors = []
        for address in addresses:
            if not self.settings.allow_private and (kind := refusal(address)) is not None:
                errors.append(f"{address} is {kind}")  # the cache refuses these already
                continue
            try:
                client = _client_class()(address, self.address, self.settings, tls, self._opened)
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

    def _login(self, client: _Client) -> None:
        s = self.settings
        if not s.user:
            return
        caps = client.getcapabilities()
        if not self.address.tls and "STARTTLS" in caps:
            client.starttls(_tls_context())  # before the password crosses the network
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

    def _need(self) -> _Client:
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
        span = _hold_span(self.settings)
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
            raise _error(self.where, what, exc) from None

    def _abort(self) -> None:
        self._broken = True
        client = self._client
        if client is not None:
            client.shut_down()
        elif self._sock is not None:
            with suppress(OSError):
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)


class ArticleTooLarge(PermanentError):
    """An article larger than the source's max_bytes: skipped, and said so."""

    def __init__(self, number: int, size: int, limit: int) -> None:
        super().__init__(f"article {number} is over {limit} bytes ({size} read)")
        self.number = number


def _error(where: str, what: str, exc: BaseException) -> Exception:
    """The job system's error for a failed command."""
    nntp = _nntplib()
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, nntp.NNTPTemporaryError):
        code = text[:3]
        if code == "411":
            return PermanentError(f"{where}: {what}: {text} (no such newsgroup)")
        if code == "480":
            return PermanentError(
                f"{where}: {what}: {text} (the server asks for a user name and password:"
                " -o user=… -o password=…)"
            )
        if code == "481":
            return PermanentError(f"{where}: {what}: {text} (the user name or password)")
        if code == "483":
            return PermanentError(f"{where}: {what}: {text} (use nntps://)")
        return TransientError(f"{where}: {what}: {text}")
    if isinstance(exc, nntp.NNTPPermanentError):
        return PermanentError(f"{where}: {what}: {text}")
    if isinstance(exc, TimeoutError):
        return TransientError(f"{where}: {what}: silent for the read timeout")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return PermanentError(f"{where}: {what}: {exc.verify_message or text}")
    if isinstance(exc, EOFError):
        return TransientError(f"{where}: {what}: the server closed the connection")
    if isinstance(exc, OSError):
        return TransientError(f"{where}: {what}: {exc.strerror or text}")
    # A reply that is not NNTP, a reply code out of place: the server, or the path to
    # it, is confused; another attempt, on a new connection, may go better.
    return TransientError(f"{where}: {what}: {type(exc).__name__}: {text}")


# --- nntplib ----------------------------------------------------------------------------


def _nntplib() -> Any:
    """The module, imported on first use (most processes never read news). It warns
    that it is deprecated (3.11, 3.12) or separately installed (3.13 on); Thresher
    knows, and depends on `standard-nntplib` where the standard library lacks it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r".*nntplib", DeprecationWarning)
        import nntplib
    return nntplib


_CLIENT: type[_Client] | None = None


def _client_class() -> type[_Client]:
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = _make_client(_nntplib())
    return _CLIENT


if TYPE_CHECKING:

    class _Client(nntplib.NNTP):
        line_max: int
        oversized: int

        def __init__(
            self,
            address: str,
            where: NewsAddress,
            settings: NewsSettings,
            tls: ssl.SSLContext | None,
            opened: Callable[[socket.socket], None],
        ) -> None: ...

        def shut_down(self) -> None: ...

        def drop(self) -> None: ...


def _make_client(nntp: Any) -> type[_Client]:
    class Client(nntp.NNTP):  # type: ignore[misc]
        """nntplib's client, connected to an address already checked (the name kept
        for TLS and for the server), with a larger limit on the lines of an article."""

        def __init__(
            self,
            address: str,
            where: NewsAddress,
            settings: NewsSettings,
            tls: ssl.SSLContext | None,
            opened: Callable[[socket.socket], None],
        ) -> None:
            self._address = address
            self._opened = opened
            self._connect_timeout = settings.connect_timeout
            self._tls = tls
            self.line_max = _LINE_MAX
            self.oversized = 0  # bytes of lines too long, read and dropped
            super().__init__(where.host, where.port, readermode=True, timeout=settings.read_timeout)

        def _create_socket(self, timeout: float) -> socket.socket:
            sock = socket.create_connection((self._address, self.port), self._connect_timeout)
            self._opened(sock)  # so that a cancelled session can shut it down
            sock.settimeout(timeout)
            if self._tls is None:
                return sock
            try:
                return self._tls.wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise

        def _getline(self, strip_crlf: bool = True) -> bytes:
            # nntplib refuses lines over 2048 bytes, which mail has (long HTML lines):
            # an article's line may be as long as the article may be. A longer one is
            # read to its end and dropped, the article marked too large, so the
            # connection stays in step with the server.
            line: bytes = self.file.readline(self.line_max + 1)
            if len(line) > self.line_max:
                self.oversized += len(line)
                while line and not line.endswith(b"\n"):
                    line = self.file.readline(self.line_max + 1)
                    self.oversized += len(line)
                line = b"\r\n"
            if not line:
                raise EOFError
            if strip_crlf:
                if line.endswith(b"\r\n"):
                    line = line[:-2]
                elif line[-1:] in b"\r\n":
                    line = line[:-1]
            return line

        def shut_down(self) -> None:
            # From the event loop's thread, while the session's thread may be blocked
            # in a read: shutdown(2) on the descriptor wakes it. The socket class's own
            # method, not SSLSocket's, which would pull the TLS state from under it.
            with suppress(OSError):
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

        def drop(self) -> None:
            with suppress(OSError):
                self._close()

    return Client


def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


class _Lines:
    """A file for nntplib to write an answer's lines to (OVER's, a few hundred bytes
    each)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write(self, line: bytes) -> None:
        self.lines.append(line)


class _Article:
    """A file for nntplib to write an article to, up to a size."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.too_large = False
        self.parts: list[bytes] = []

    def write(self, line: bytes) -> None:
        self.size += len(line)
        if self.too_large:
            return
        if self.size > self.limit:
            self.too_large = True
            self.parts.clear()
            return
        if line.endswith(b"\r\n"):
            line = line[:-2] + b"\n"
        self.parts.append(line)


def _parse_overview(lines: list[bytes]) -> list[Overview]:
    """OVER's lines: the number, then (RFC 3977 §8.4) Subject, From, Date, Message-ID,
    References, :bytes, :lines, in that order whatever else follows. A line without a
    number is skipped (a server's garbage cannot stop the harvest)."""
    found = []
    for line in lines:
        fields = line.rstrip(b"\r\n").split(b"\t")
        try:
            number = int(fields[0])
        except ValueError:
            continue
        message_id = fields[4].decode("utf-8", "replace").strip() if len(fields) > 4 else ""
        found.append(Overview(number, message_id or None))
    return found
