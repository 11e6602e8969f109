"""`Fetcher`: the one way Thresher sends a GET, shared by every crawl and archive fetch.

One aiohttp session (one connection pool, one DNS cache) serves every request of a
process. Each `get` sends exactly one request and returns one `Response`; it never
follows a redirect (the caller sends `Response.location` through its sieve, robots and
politeness first), and it raises only `FetchError`s, so no caller deals with aiohttp.

The limits a crawler of strangers' servers needs are enforced here, once:

- addresses: private, loopback, link-local and other special addresses are refused
  unless `allow_private` (see `guard`), for IP literals, for every name resolved, and
  again on the exact address of every socket opened;
- size: `max_body` bytes on the wire (refused early from Content-Length, else as bytes
  arrive) and `max_decoded` bytes (or the caller's lower `max_body`) once
  Content-Encoding is undone, off the event loop and within `total_timeout` (see
  `decoding`); a caller's `truncate` cuts both instead of refusing;
- time: `connect_timeout` per connection attempt, silence (`stall_timeout` before any
  of the body came, growing with the body received to `read_timeout`; see `deadlines`),
  and `total_timeout` for the whole exchange. The total includes waiting for a free pooled
  connection, so callers keep their concurrency near `limit`. Name resolution is bounded
  by `connect_timeout` on its own.

On the hot path (a crawler doing about 1000 pages/s on two cores) a request costs one
dict lookup for DNS, no logging, and no re-parsing: headers are taken from aiohttp's
parser as raw bytes once.
"""

from __future__ import annotations

import asyncio
import io
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import BinaryIO

import aiohttp
from aiohttp.connector import Connection
from w3lib.url import safe_url_string
from yarl import URL

from thresher.clock import Clock
from thresher.fetch.deadlines import TOTAL_EXPIRED, Deadlines, Exchange
from thresher.fetch.decoding import (
    ACCEPT_ENCODING,
    DecodedTooLarge,
    DecodeTimeout,
    Decoding,
    Undecodable,
    decode_off_loop,
    parse_codings,
)
from thresher.fetch.dns import DNSCache, GuardedResolver, Lookup
from thresher.fetch.errors import (
    BadResponse,
    FetchError,
    FetchTimeout,
    InvalidRequestURL,
    TooLarge,
)
from thresher.fetch.guard import guarded_socket
from thresher.fetch.response import Response
from thresher.fetch.translate import translate

__all__ = ["FetchSettings", "Fetcher", "request_url"]

DEFAULT_USER_AGENT = "Thresher/0.1 (+https://github.com/thresher-crawler/thresher)"

# aiohttp's default (8190 bytes per header line) refuses real sites with long cookies or
# Content-Security-Policy headers; browsers accept far more.
_MAX_FIELD = 65536

# What cannot go on the wire as it is: anything but printable ASCII; what the URL Standard
# percent-encodes everywhere (space, '"', "<", ">"); and in the path, what it encodes
# there ("{", "}", "^", "`"; "\\" is a "/"). A URL as the Standard writes it, as every
# link of a crawl is, has none of these and is sent byte for byte: its query may hold a
# "|", "^", "{" or "\\", which is what a browser sends too.
_NEEDS_ENCODING = re.compile(r'[^\x21-\x7e]|["<>]')
_NEEDS_ENCODING_IN_PATH = re.compile(r"[{}^`\\]")

_HEADER_BREAK = re.compile(r"[\r\n\0]")


@dataclass(frozen=True)
class FetchSettings:
    """How every fetch of one `Fetcher` behaves: identity, time and size limits, guards."""

    user_agent: str = DEFAULT_USER_AGENT
    connect_timeout: float = 10.0
    """Seconds for one TCP (and TLS) connection attempt; also bounds name resolution."""
    read_timeout: float = 30.0
    """Longest silence between bytes from the server, once enough of the body came."""
    stall_timeout: float = 10.0
    """Longest silence before any of the body came (the request sent, the head awaited,
    or the head received); each 64 KiB of body received adds a second, up to
    `read_timeout`."""
    total_timeout: float = 120.0
    """The whole exchange, body included (and any wait for a pooled connection)."""
    max_body: int = 50 * 2**20
    """Bytes on the wire; a larger body is refused (TooLarge), nothing of it kept."""
    max_decoded: int = 200 * 2**20
    """Bytes once Content-Encoding is undone: the decompression bomb guard."""
    allow_private: bool = False
    """Allow private, loopback, link-local, multicast, reserved, unspecified addresses."""
    dns_ttl: float = 300.0
    """Seconds a name's addresses are kept. getaddrinfo gives no TTL: one for all."""
    limit: int = 100
    """Connections in the pool, in total."""
    limit_per_host: int = 0
    """Connections per (host, port, TLS); 0 means no limit besides `limit`."""
    verify_tls: bool = True
    """Check server certificates. Off, expired and self-signed sites can be archived."""

    def __post_init__(self) -> None:
        for name in (
            "connect_timeout",
            "read_timeout",
            "stall_timeout",
            "total_timeout",
            "dns_ttl",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"FetchSettings.{name} must be > 0, not {getattr(self, name)}")
        for name in ("max_body", "max_decoded", "limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"FetchSettings.{name} must be >= 1, not {getattr(self, name)}")
        if self.limit_per_host < 0:
            raise ValueError(f"FetchSettings.limit_per_host must be >= 0: {self.limit_per_host}")


def request_url(url: str) -> URL:
    """`url` as it goes on the wire: a yarl URL, percent-encoded the way browsers do it.

    Characters that cannot appear in a URL (spaces, non-ASCII, quotes, …) are
    percent-encoded as UTF-8 and a Unicode host is IDNA-encoded; escapes already present
    are left exactly as they are (never encoded twice, never decoded), as is everything
    else, so a URL that is already valid is sent unchanged. Raises InvalidRequestURL.
    """
    try:
        plain = (
            _NEEDS_ENCODING.search(url) is None
            and _NEEDS_ENCODING_IN_PATH.search(url.partition("?")[0]) is None
        )
        wire = url if plain else safe_url_string(url.strip())
        target = URL(wire, encoded=True)
        port = target.port
    except (ValueError, UnicodeError) as exc:
        raise InvalidRequestURL(url, f"malformed URL: {exc}") from None
    if target.scheme not in ("http", "https"):
        raise InvalidRequestURL(url, "not an http(s) URL")
    if not target.raw_host:
        raise InvalidRequestURL(url, "no host")
    if not port:
        raise InvalidRequestURL(url, "port 0")
    return target


class _PeerResponse(aiohttp.ClientResponse):
    """Remembers the connection's peer address: once a short body is read, aiohttp
    hands the connection back to the pool and the response no longer knows it. Tells
    its fetcher's `Deadlines` that the request is sent, so silence counts from then,
    not from a wait for a pooled connection or a slow connect."""

    peer: str | None = None
    deadlines: Deadlines | None = None  # set on each fetcher's own subclass

    async def start(self, connection: Connection) -> aiohttp.ClientResponse:
        transport = connection.transport
        if transport is not None:
            peername = transport.get_extra_info("peername")
            if peername:
                self.peer = str(peername[0])
        if self.deadlines is not None:
            self.deadlines.heard(asyncio.current_task())
        return await super().start(connection)


class Fetcher:
    """An async context manager owning one aiohttp session; `get` fetches one URL.

    `lookup` (host → IP addresses) and `clock` replace the system resolver and time,
    for tests.
    """

    def __init__(
        self,
        settings: FetchSettings | None = None,
        *,
        lookup: Lookup | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = s = settings or FetchSettings()
        self.dns = DNSCache(
            ttl=s.dns_ttl, allow_private=s.allow_private, lookup=lookup, clock=clock
        )
        self._session: aiohttp.ClientSession | None = None
        self._deadlines: Deadlines | None = None
        self._headers = {"User-Agent": s.user_agent, "Accept-Encoding": ACCEPT_ENCODING}

    async def __aenter__(self) -> Fetcher:
        s = self.settings
        connector = aiohttp.TCPConnector(
            limit=s.limit,
            limit_per_host=s.limit_per_host,
            resolver=GuardedResolver(self.dns),
            use_dns_cache=False,  # the resolver caches, and guards what it caches
            socket_factory=None if s.allow_private else guarded_socket,
            ssl=s.verify_tls,
        )
        # The read and total timeouts are kept by `Deadlines`, far cheaper than aiohttp's;
        # aiohttp times only the opening of a new connection.
        self._deadlines = deadlines = Deadlines(
            asyncio.get_running_loop(), s.read_timeout, s.total_timeout, s.stall_timeout
        )
        response_class = type("_Response", (_PeerResponse,), {"deadlines": deadlines})
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=s.connect_timeout),
            headers=self._headers,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),  # no cookies carried between fetches
            response_class=response_class,
            max_field_size=_MAX_FIELD,
            max_line_size=_MAX_FIELD,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        session, self._session = self._session, None
        if self._deadlines is not None:
            self._deadlines.close()
            self._deadlines = None
        if session is not None:
            await session.close()

    async def resolve(self, host: str) -> list[str]:
        """The addresses `host` may be fetched from (cached for dns_ttl). An IP literal is
        returned as it is. Raises DNSError, AddressRefused, FetchTimeout."""
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        known = self.dns.cached(host)
        if known is not None:
            return known
        try:
            async with asyncio.timeout(self.settings.connect_timeout):
                return await self.dns.resolve(host)
        except TimeoutError:
            raise FetchTimeout(
                host, f"resolving {host} took over {self.settings.connect_timeout} s"
            ) from None

    async def get(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        max_body: int | None = None,
        truncate: int | None = None,
    ) -> Response:
        """GET `url` once, with the User-Agent and `headers` (which win over the
        defaults). Redirects are returned, not followed. Raises only FetchErrors.
        `max_body` lowers the settings' limits for this request, on the wire and once
        decoded. `truncate`: a longer body is not refused but cut, on the wire and once
        decoded, to its first `truncate` bytes (`Response.truncated`); the rest is not
        read, nor decoded."""
        return await self.send("GET", url, headers, max_body=max_body, truncate=truncate)

    async def post(
        self,
        url: str,
        data: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        max_body: int | None = None,
        sink: BinaryIO | None = None,
    ) -> Response:
        """POST `data` to `url` once, like `get` otherwise (a git fetch's
        `git-upload-pack`). With `sink`, the body is written to that file as it arrives
        instead of being kept (`Response.streamed` bytes): a git pack of a gigabyte
        costs no memory. Such a body must not be content-encoded (`Accept-Encoding:
        identity` is asked for), its limit is `max_body` alone (the settings' limits
        guard memory), and its total timeout grows with what arrives, a second per
        `STREAM_BYTES` (a big body at a fair pace is not cut; a trickle is)."""
        return await self.send("POST", url, headers, data=data, max_body=max_body, sink=sink)

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        data: bytes | None = None,
        max_body: int | None = None,
        truncate: int | None = None,
        sink: BinaryIO | None = None,
    ) -> Response:
        """One request (`get`, `post`)."""
        if sink is not None:
            headers = {"Accept-Encoding": "identity", **(headers or {})}
        session, deadlines = self._session, self._deadlines
        if session is None or deadlines is None:
            raise RuntimeError("Fetcher.get() called outside 'async with Fetcher()'")
        target = request_url(url)
        if headers:
            _check_headers(url, headers)
        host = target.raw_host or ""
        try:
            if self.dns.cached(host) is None:
                await self.resolve(host)
        except FetchError as exc:
            raise exc.for_url(url) from None
        started = time.time()
        t0 = time.perf_counter()
        resp: aiohttp.ClientResponse | None = None
        exchange = deadlines.start()
        exchange.streaming = sink is not None
        streamed = 0
        try:
            resp = await session.request(
                method, target, headers=headers, data=data, allow_redirects=False
            )
            exchange.head = True
            exchange.hear()
            if sink is None:
                body, truncated = await self._read_body(resp, url, max_body, exchange, truncate)
            else:
                body, truncated = b"", False
                streamed = await self._stream_body(resp, url, max_body, exchange, sink)
        except BaseException as exc:
            deadlines.finish(exchange)
            if resp is not None:
                resp.close()  # unread bytes may follow: the connection cannot be reused
            # As asyncio.timeout does: the deadline's cancellation is taken back whatever
            # became of it, and is a timeout unless someone else cancelled the task too.
            if (
                exchange.expired is not None
                and exchange.task.uncancel() == 0
                and isinstance(exc, Exception | asyncio.CancelledError)
            ):
                raise FetchTimeout(url, self._expired(exchange.expired)) from None
            if isinstance(exc, FetchError):
                raise exc.for_url(url) from None
            if isinstance(exc, Exception):
                raise translate(exc, url) from exc
            raise  # cancelled: not ours to translate
        deadlines.finish(exchange)
        if exchange.expired is not None:  # expired as it ended, and the cancel was swallowed
            exchange.task.uncancel()
        if truncated:
            resp.close()  # the rest of the body is still coming: not a reusable connection
        else:
            resp.release()
        encoding = resp.headers.getall("Content-Encoding", None)
        # Decoding counts towards the total timeout too (loop time is time.monotonic()).
        deadline = exchange.started + self.settings.total_timeout
        content, decode_error, cut = await self._decode(
            body, encoding, url, max_body, deadline, truncate
        )
        reason = resp.reason or ""
        if not reason.isascii():
            # aiohttp decodes the reason as UTF-8 (surrogates for bad bytes); back to the
            # bytes and to Latin-1 like the headers, so http_head() gives them back.
            reason = reason.encode("utf-8", "surrogateescape").decode("latin-1")
        return Response(
            url=url,
            status=resp.status,
            reason=reason,
            version=f"{resp.version.major}.{resp.version.minor}" if resp.version else "1.1",
            headers=tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers),
            body=body,
            content=content,
            decode_error=decode_error,
            ip=resp.peer if isinstance(resp, _PeerResponse) else None,
            request_head=_request_head(resp),
            started=started,
            elapsed=time.perf_counter() - t0,
            truncated=truncated or cut,
            streamed=streamed,
        )

    def _expired(self, why: str) -> str:
        if why == TOTAL_EXPIRED:
            return f"{why} ({self.settings.total_timeout:g} s)"
        return why  # a silence's reason names the silence allowed

    async def _read_body(
        self,
        resp: aiohttp.ClientResponse,
        url: str,
        max_body: int | None,
        exchange: Exchange,
        truncate: int | None,
    ) -> tuple[bytes, bool]:
        """The body, and whether it was cut at `truncate` bytes."""
        limit = self.settings.max_body
        if max_body is not None:
            limit = min(limit, max_body)
        if truncate is not None:
            limit = min(limit, truncate)
        declared = resp.content_length
        if declared is not None and declared > limit and truncate is None:
            raise TooLarge(url, f"Content-Length {declared} exceeds max_body={limit}")
        # A BytesIO, not a list of chunks joined at the end: the join held the body
        # twice (a 200 MB month file cost 400 MB), and getvalue() hands the buffer over.
        buf = io.BytesIO()
        size = 0
        stream = resp.content
        while chunk := await stream.readany():
            exchange.hear(len(chunk))
            size += len(chunk)
            if size > limit:
                if truncate is None:
                    raise TooLarge(url, f"body exceeds max_body={limit}")
                buf.write(chunk[: len(chunk) - (size - limit)])
                return buf.getvalue(), True
            if size == len(chunk) and stream.at_eof():
                return chunk, False  # the whole body in one chunk: no copy at all
            buf.write(chunk)
        return buf.getvalue(), False

    async def _stream_body(
        self,
        resp: aiohttp.ClientResponse,
        url: str,
        max_body: int | None,
        exchange: Exchange,
        sink: BinaryIO,
    ) -> int:
        """The body written to `sink` as it arrives; its size."""
        limit = self.settings.max_body if max_body is None else max_body
        coding = [c for c in resp.headers.getall("Content-Encoding", []) if c.strip()]
        if any(c.strip().lower() != "identity" for c in coding):
            raise BadResponse(url, f"a streamed body must not be encoded: {', '.join(coding)}")
        declared = resp.content_length
        if declared is not None and declared > limit:
            raise TooLarge(url, f"Content-Length {declared} exceeds max_body={limit}")
        size = 0
        stream = resp.content
        while chunk := await stream.readany():
            exchange.hear(len(chunk))
            size += len(chunk)
            if size > limit:
                raise TooLarge(url, f"body exceeds max_body={limit}")
            sink.write(chunk)
        return size

    async def _decode(
        self,
        body: bytes,
        encoding: list[str] | None,
        url: str,
        max_body: int | None,
        deadline: float,
        truncate: int | None,
    ) -> tuple[bytes, str | None, bool]:
        """(content, decode_error, whether the content was cut at `truncate`)."""
        if not encoding or not body:
            # An empty body has nothing to decode, though 304s and HEADs often name the
            # encoding the full body would have had.
            return body, None, False
        limit, name = self.settings.max_decoded, "max_decoded"
        if max_body is not None and max_body < limit:
            limit, name = max_body, "max_body"
        if truncate is not None:
            # The body was read only so far: decode only so far, keep the start (robots.txt).
            limit = min(limit, truncate)
        try:
            decoding = Decoding(
                body,
                parse_codings(",".join(encoding)),
                limit,
                name,
                partial=truncate is not None,
            )
        except LookupError as exc:
            return body, f"unsupported content-encoding {exc.args[0]!r}", False
        try:
            await decode_off_loop(decoding, deadline)
        except DecodedTooLarge as exc:
            raise TooLarge(url, str(exc)) from None
        except DecodeTimeout:
            raise FetchTimeout(
                url,
                f"decoding the body ({decoding.size} bytes so far) went past"
                f" total_timeout={self.settings.total_timeout:g} s",
            ) from None
        except Undecodable as exc:
            return b"", str(exc), False
        return decoding.content(), None, decoding.truncated


def _check_headers(url: str, headers: Mapping[str, str]) -> None:
    # aiohttp refuses these too, but only once connected; a header that would split the
    # request in two is the caller's bug, found before anything is sent.
    for name, value in headers.items():
        if _HEADER_BREAK.search(name) or _HEADER_BREAK.search(value):
            raise InvalidRequestURL(url, f"invalid request: header {name!r} has CR, LF or NUL")


def _request_head(resp: aiohttp.ClientResponse) -> bytes:
    info = resp.request_info
    lines = [f"{info.method} {info.url.raw_path_qs} HTTP/1.1"]
    lines.extend(f"{key}: {value}" for key, value in info.headers.items())
    lines.append("\r\n")
    # aiohttp writes header values as UTF-8.
    return "\r\n".join(lines).encode("utf-8", "surrogateescape")
