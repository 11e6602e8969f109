"""Fetcher.get against real servers on 127.0.0.1: what a response records, conditional
GETs, redirects, content decoding, every way a server can misbehave, and the guards."""

from __future__ import annotations

import asyncio
import gzip
import os
import socket
import time
import tracemalloc
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from aiohttp import web
from fetch_servers import Answer, RawServer, gzip_bomb, raw_server, reset, self_signed, serve

from thresher.clock import FakeClock
from thresher.errors import PermanentError, TransientError
from thresher.fetch import (
    AddressRefused,
    BadResponse,
    ConnectionFailed,
    DNSError,
    Fetcher,
    FetchError,
    FetchSettings,
    FetchTimeout,
    InvalidRequestURL,
    Response,
    TooLarge,
)
from thresher.fetch.decoding import ACCEPT_ENCODING

LOCAL = FetchSettings(allow_private=True)
UA = FetchSettings().user_agent


async def fetch(
    url: str, settings: FetchSettings = LOCAL, headers: dict[str, str] | None = None
) -> Response:
    async with Fetcher(settings) as fetcher:
        return await fetcher.get(url, headers)


def fails(url: str, settings: FetchSettings = LOCAL) -> FetchError:
    async def body() -> FetchError:
        with pytest.raises(FetchError) as caught:
            await fetch(url, settings)
        return caught.value

    error = asyncio.run(body())
    assert url in str(error) and "\n" not in str(error)
    return error


def answering(data: bytes, then: str = "close") -> Answer:
    """A raw server's answer: write `data`, then close, reset, or hang until stopped."""

    async def answer(writer: asyncio.StreamWriter, server: RawServer) -> None:
        writer.write(data)
        await writer.drain()
        if then == "reset":
            await reset(writer)
        elif then == "hang":
            await server.stop.wait()

    return answer


# -- What a response records -----------------------------------------------------------------


def test_a_200_records_the_exchange() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\n"
        b"Z-First: 1\r\n"
        b"Set-Cookie: a=1\r\n"
        b"set-cookie: b=2\r\n"
        b"X-Latin: caf\xe9\r\n"
        b"Content-Length: 5\r\n"
        b"A-Last: x\r\n"
        b"\r\n"
    )

    async def body() -> None:
        async with raw_server(answering(raw + b"hello")) as server:
            before = time.time()
            r = await fetch(server.base + "/path/x?q=1#frag")
            after = time.time()
            assert (r.status, r.reason, r.version) == (200, "OK", "1.1")
            assert r.url == server.base + "/path/x?q=1#frag"
            assert r.body == r.content == b"hello" and r.decode_error is None
            assert r.headers == (
                ("Z-First", "1"),
                ("Set-Cookie", "a=1"),
                ("set-cookie", "b=2"),
                ("X-Latin", "café"),
                ("Content-Length", "5"),
                ("A-Last", "x"),
            )
            assert r.header("SET-COOKIE") == "a=1" and r.header("nope") is None
            assert r.header_all("set-cookie") == ["a=1", "b=2"]
            assert r.http_head() == raw
            assert r.ip == "127.0.0.1"
            assert before <= r.started <= after and 0 < r.elapsed < after - before + 0.01

            [sent] = server.requests
            assert r.request_head == sent  # aiohttp writes exactly what we reconstruct
            lines = sent.decode().split("\r\n")
            assert lines[0] == "GET /path/x?q=1 HTTP/1.1"
            head = dict(line.split(": ", 1) for line in lines[1:-2])
            assert head["Host"] == server.base.removeprefix("http://")
            assert head["User-Agent"] == UA
            assert head["Accept-Encoding"] == ACCEPT_ENCODING

    asyncio.run(body())


def test_bytes_beyond_ascii_in_the_status_line_come_back_as_sent() -> None:
    raw = b"HTTP/1.0 203 \xe2\x9c\x93 caf\xe9\r\nContent-Length: 0\r\n\r\n"

    async def body() -> None:
        async with raw_server(answering(raw)) as server:
            r = await fetch(server.base + "/")
            assert (r.version, r.status, r.reason) == ("1.0", 203, "\xe2\x9c\x93 caf\xe9")
            assert r.http_head() == raw

    asyncio.run(body())


def test_conditional_get_answered_304_has_no_body() -> None:
    etag, modified = '"v1"', "Wed, 21 Oct 2015 07:28:00 GMT"
    seen: list[dict[str, str]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        validators = {"ETag": etag, "Last-Modified": modified}
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=validators)
        return web.Response(body=b"page", headers=validators)

    async def body() -> None:
        async with serve(handler) as base, Fetcher(LOCAL) as fetcher:
            first = await fetcher.get(base + "/p")
            assert first.status == 200 and first.body == b"page"
            conditional = {"If-None-Match": etag, "If-Modified-Since": modified}
            second = await fetcher.get(base + "/p", conditional)
            assert (second.status, second.body, second.content) == (304, b"", b"")
            assert second.header("ETag") == etag and second.decode_error is None
        assert "If-None-Match" not in seen[0]
        assert seen[1]["If-None-Match"] == etag and seen[1]["If-Modified-Since"] == modified

    asyncio.run(body())


def test_a_304_naming_an_encoding_has_nothing_to_decode() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=304, headers={"Content-Encoding": "gzip", "ETag": '"e"'})

    async def body() -> None:
        async with serve(handler) as base:
            r = await fetch(base + "/", headers={"If-None-Match": '"e"'})
            assert (r.status, r.body, r.content, r.decode_error) == (304, b"", b"", None)

    asyncio.run(body())


def test_https_with_and_without_certificate_checks(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    if tls is None:
        pytest.skip("the openssl command is not installed")

    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=f"secure {request.secure}")

    async def body() -> None:
        async with serve(handler, tls) as base:
            assert base.startswith("https://")
            with pytest.raises(ConnectionFailed, match="TLS"):
                await fetch(base + "/")
            unchecked = FetchSettings(allow_private=True, verify_tls=False)
            r = await fetch(base + "/s?x=1", unchecked)
            assert (r.status, r.content, r.ip) == (200, b"secure True", "127.0.0.1")
            assert r.request_head.startswith(b"GET /s?x=1 HTTP/1.1\r\n")

    asyncio.run(body())


def test_caller_headers_are_sent_and_win_over_the_defaults() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=f"{request.headers['User-Agent']}|{request.headers['X-Y']}")

    async def body() -> None:
        async with serve(handler) as base:
            r = await fetch(base + "/", headers={"User-Agent": "other/1", "X-Y": "z"})
            assert r.content == b"other/1|z"
            mine = FetchSettings(allow_private=True, user_agent="mine/2")
            r = await fetch(base + "/", mine, {"X-Y": ""})
            assert r.content == b"mine/2|"

    asyncio.run(body())


def test_connections_are_reused() -> None:
    async def handler(request: web.Request) -> web.Response:
        assert request.transport is not None
        return web.Response(text=str(request.transport.get_extra_info("peername")))

    async def body() -> None:
        async with serve(handler) as base, Fetcher(LOCAL) as fetcher:
            peers = {(await fetcher.get(f"{base}/{i}")).content for i in range(5)}
            assert len(peers) == 1

    asyncio.run(body())


def test_a_large_body_arriving_in_many_chunks_is_kept_whole() -> None:
    data = os.urandom(3 * 2**20)

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(0, len(data), 100_000):
            await resp.write(data[i : i + 100_000])
        await resp.write_eof()
        return resp

    async def body() -> None:
        async with serve(handler) as base:
            r = await fetch(base + "/big")
            assert r.body == r.content == data

    asyncio.run(body())


# -- Redirects -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("../b?x=1", "{base}/b?x=1"),
        ("/abs", "{base}/abs"),
        ("http://elsewhere.example/x", "http://elsewhere.example/x"),
        ("//other.example/y", "http://other.example/y"),
    ],
)
def test_redirects_are_returned_not_followed(location: str, expected: str) -> None:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(status=301, headers={"Location": location})

    async def body() -> None:
        async with serve(handler) as base:
            r = await fetch(base + "/dir/a")
            assert r.status == 301
            assert r.location == expected.format(base=base)
        assert seen == ["/dir/a"]

    asyncio.run(body())


def test_a_utf8_location_is_read_as_utf8() -> None:
    raw = b"HTTP/1.1 302 Found\r\nLocation: /caf\xc3\xa9 x\r\nContent-Length: 0\r\n\r\n"

    async def body() -> None:
        async with raw_server(answering(raw)) as server:
            r = await fetch(server.base + "/")
            assert r.location == server.base + "/caf%C3%A9%20x"  # as a browser asks for it

    asyncio.run(body())


# -- Content-Encoding ------------------------------------------------------------------------

TEXT = b"The quick brown fox jumps over the lazy dog. " * 200


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _br(data: bytes) -> bytes:
    brotli = pytest.importorskip("brotli")
    compressed: bytes = brotli.compress(data)
    return compressed


ENCODED = {
    "gzip": lambda: gzip.compress(TEXT),
    "x-gzip": lambda: gzip.compress(TEXT),
    "deflate": lambda: zlib.compress(TEXT),
    "deflate-raw": lambda: _raw_deflate(TEXT),
    "br": lambda: _br(TEXT),
    "GZIP, identity": lambda: gzip.compress(TEXT),
    "deflate, gzip": lambda: gzip.compress(zlib.compress(TEXT)),
}


@pytest.mark.parametrize("coding", list(ENCODED))
def test_content_encoding_is_undone(coding: str) -> None:
    if coding == "br" and "br" not in ACCEPT_ENCODING:
        pytest.skip("no brotli module with a bounded output buffer")
    wire = ENCODED[coding]()
    header = coding.replace("deflate-raw", "deflate")

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=wire, headers={"Content-Encoding": header})

    async def body() -> None:
        async with serve(handler) as base:
            r = await fetch(base + "/")
            assert r.body == wire
            assert r.content == TEXT and r.decode_error is None

    asyncio.run(body())


def test_a_gzip_bomb_is_refused_without_using_the_memory() -> None:
    bomb = gzip_bomb(2**30)  # 1 GiB of zeros in about 1 MB
    assert len(bomb) < 2**21

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=bomb, headers={"Content-Encoding": "gzip"})

    async def body() -> None:
        async with serve(handler) as base:
            settings = FetchSettings(allow_private=True, max_decoded=16 * 2**20)
            tracemalloc.start()
            try:
                with pytest.raises(TooLarge, match="max_decoded"):
                    await fetch(base + "/bomb", settings)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert peak < 48 * 2**20

    asyncio.run(body())


def test_a_truncated_gzip_body_is_kept_with_a_decode_error() -> None:
    wire = gzip.compress(TEXT)[:-30]

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=wire, headers={"Content-Encoding": "gzip"})

    async def body() -> None:
        async with serve(handler) as base:
            r = await fetch(base + "/")
            assert r.status == 200 and r.body == wire and r.content == b""
            assert r.decode_error == "truncated gzip stream"

    asyncio.run(body())


def test_an_unknown_encoding_leaves_the_content_as_sent() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=b"\x00\x01", headers={"Content-Encoding": "compress"})

    async def body() -> None:
        async with serve(handler) as base:
            r = await fetch(base + "/")
            assert r.body == r.content == b"\x00\x01"
            assert r.decode_error == "unsupported content-encoding 'compress'"

    asyncio.run(body())


# -- Misbehaving servers ---------------------------------------------------------------------


def _raw_fails(data: bytes, then: str = "close", settings: FetchSettings = LOCAL) -> FetchError:
    async def body() -> FetchError:
        async with raw_server(answering(data, then)) as server:
            url = server.base + "/x"
            with pytest.raises(FetchError) as caught:
                await fetch(url, settings)
            assert url in str(caught.value) and "\n" not in str(caught.value)
            return caught.value

    return asyncio.run(body())


def test_a_body_shorter_than_its_content_length_is_a_bad_response() -> None:
    error = _raw_fails(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
    assert isinstance(error, BadResponse) and isinstance(error, TransientError)
    assert "100" in str(error)


def test_a_chunked_body_cut_short_is_a_bad_response() -> None:
    error = _raw_fails(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
    assert isinstance(error, BadResponse)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"HTTX/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
    ],
    ids=["bogus-length", "two-lengths", "bad-protocol", "bad-status", "bad-header"],
)
def test_malformed_answers_are_bad_responses(answer: bytes) -> None:
    error = _raw_fails(answer)
    assert isinstance(error, BadResponse)
    assert "malformed response" in str(error)


def test_a_reset_in_the_middle_of_the_body_is_a_failed_connection() -> None:
    error = _raw_fails(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", "reset")
    assert isinstance(error, ConnectionFailed) and isinstance(error, TransientError)


@pytest.mark.parametrize("then", ["close", "reset"])
def test_a_server_that_closes_without_answering_is_a_failed_connection(then: str) -> None:
    assert isinstance(_raw_fails(b"", then), ConnectionFailed)


def test_a_refused_connection_is_a_failed_connection() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = fails(f"http://127.0.0.1:{port}/")
    assert isinstance(error, ConnectionFailed) and "cannot connect" in str(error)


QUICK = FetchSettings(allow_private=True, read_timeout=0.3, connect_timeout=1, total_timeout=5)


@pytest.mark.parametrize(
    "answer",
    [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome"],
    ids=["before-headers", "mid-body"],
)
def test_silence_times_out_after_read_timeout(answer: bytes) -> None:
    started = time.monotonic()
    error = _raw_fails(answer, "hang", QUICK)
    assert isinstance(error, FetchTimeout) and isinstance(error, TransientError)
    assert "read_timeout" in str(error)
    assert time.monotonic() - started < QUICK.total_timeout  # the silence ended it


def test_a_trickle_times_out_after_total_timeout() -> None:
    async def trickle(writer: asyncio.StreamWriter, server: RawServer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(100):
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.05)

    async def body() -> None:
        settings = FetchSettings(allow_private=True, read_timeout=0.3, total_timeout=0.6)
        async with raw_server(trickle) as server:
            started = time.monotonic()
            with pytest.raises(FetchTimeout, match="total_timeout"):
                await fetch(server.base + "/", settings)
            assert time.monotonic() - started < 5  # not the 5 s of the whole trickle

    asyncio.run(body())


# -- Size limits ----------------------------------------------------------------------------

SMALL = FetchSettings(allow_private=True, max_body=100_000, read_timeout=5)


def test_a_declared_length_over_max_body_is_refused_before_reading() -> None:
    started = time.monotonic()
    error = _raw_fails(b"HTTP/1.1 200 OK\r\nContent-Length: 100001\r\n\r\nabc", "hang", SMALL)
    assert isinstance(error, TooLarge) and isinstance(error, PermanentError)
    assert "Content-Length 100001" in str(error)
    # Not waiting for the body, or the read timeout.
    assert time.monotonic() - started < SMALL.read_timeout


def test_an_endless_body_is_cut_at_max_body() -> None:
    sent = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal sent
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            while sent < 100 * 2**20:
                await resp.write(bytes(16384))
                sent += 16384
        except (ConnectionError, RuntimeError):
            pass  # the client hung up, as it should
        return resp

    async def body() -> None:
        async with serve(handler) as base:
            with pytest.raises(TooLarge, match="max_body=100000"):
                await fetch(base + "/endless", SMALL)
        assert sent < 20 * 2**20

    asyncio.run(body())


# -- Addresses and names --------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "0.0.0.0", "169.254.169.254", "10.1.2.3", "127.1"],
)
def test_private_addresses_are_refused_by_default(host: str) -> None:
    error = fails(f"http://{host}:9/", FetchSettings())
    assert isinstance(error, AddressRefused) and isinstance(error, PermanentError)


def test_localhost_is_refused_by_default_and_allowed_on_request() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="local")

    async def body() -> None:
        async with serve(handler) as base:
            port = base.rsplit(":", 1)[1]
            for url in (base + "/", f"http://localhost:{port}/"):
                with pytest.raises(AddressRefused, match="loopback"):
                    await fetch(url, FetchSettings())
                assert (await fetch(url)).content == b"local"

    asyncio.run(body())


def test_the_socket_guard_stops_what_the_resolver_let_through() -> None:
    # As if the resolver had been fooled (DNS rebinding): the socket factory still
    # checks the exact address about to be connected to.
    async def lookup(host: str) -> Sequence[str]:
        return ["127.0.0.1"]

    async def handler(request: web.Request) -> web.Response:
        raise AssertionError("connected to a refused address")

    async def body() -> None:
        async with serve(handler) as base, Fetcher(lookup=lookup) as fetcher:
            fetcher.dns.allow_private = True
            url = f"http://rebound.test:{base.rsplit(':', 1)[1]}/"
            with pytest.raises(AddressRefused) as caught:
                await fetcher.get(url)
            assert str(caught.value) == (
                f"GET {url}: refused: loopback address 127.0.0.1; pass --allow-private"
                " (a source: -o allow_private=true)"
            )

    asyncio.run(body())


def test_a_name_that_does_not_resolve_is_a_dns_error() -> None:
    async def lookup(host: str) -> Sequence[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    async def body() -> None:
        async with Fetcher(lookup=lookup) as fetcher:
            url = "http://no-such-host.invalid/page"
            with pytest.raises(DNSError) as caught:
                await fetcher.get(url)
            assert isinstance(caught.value, TransientError)
            assert str(caught.value) == (
                f"GET {url}: cannot resolve no-such-host.invalid: Name or service not known"
            )

    asyncio.run(body())


def test_names_are_looked_up_once_per_ttl() -> None:
    asked: list[str] = []
    clock = FakeClock()

    async def lookup(host: str) -> Sequence[str]:
        asked.append(host)
        return ["127.0.0.1"]

    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=request.host)

    async def body() -> None:
        settings = FetchSettings(allow_private=True, dns_ttl=60)
        async with serve(handler) as base, Fetcher(settings, lookup=lookup, clock=clock) as f:
            port = base.rsplit(":", 1)[1]
            r = await f.get(f"http://site.test:{port}/")
            assert r.content == f"site.test:{port}".encode() and r.ip == "127.0.0.1"
            await f.get(f"http://SITE.test:{port}/other")
            clock.advance(59)
            await f.get(f"http://site.test:{port}/")
            assert asked == ["site.test"]
            clock.advance(1)
            await f.get(f"http://site.test:{port}/")
            assert asked == ["site.test", "site.test"]
            assert await f.resolve("site.test") == ["127.0.0.1"]

    asyncio.run(body())


# -- URLs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "on_the_wire"),
    [
        ("/a b", "/a%20b"),
        ("/ü", "/%C3%BC"),
        ("/enc%20x%2Fy%2f?q=%E4&r=a+b", "/enc%20x%2Fy%2f?q=%E4&r=a+b"),
        ("/x?q=a b&u=ü", "/x?q=a%20b&u=%C3%BC"),
        ("/100%", "/100%"),
        ("/a|b{c}", "/a%7Cb%7Bc%7D"),
        ("/p?a=1;b=2&c=/d", "/p?a=1;b=2&c=/d"),
        # as the URL Standard writes URLs: sent as they are, as a browser sends them
        ("/a|b?c=|^`{}\\&/x", "/a|b?c=|^`{}\\&/x"),
        ("/list.html?sort=asc&page=2", "/list.html?sort=asc&page=2"),
        ("/?/archives/1", "/?/archives/1"),
        ("/%7e%2e%2F?%41", "/%7e%2e%2F?%41"),
        ("/p#fragment", "/p"),
    ],
)
def test_urls_are_encoded_once(path: str, on_the_wire: str) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=request.raw_path)

    async def body() -> None:
        async with serve(handler) as base:
            r = await fetch(base + path)
            assert r.content.decode() == on_the_wire
            assert r.url == base + path
            assert r.request_head.startswith(f"GET {on_the_wire} HTTP/1.1\r\n".encode())

    asyncio.run(body())


def test_a_unicode_host_is_idna_encoded() -> None:
    asked: list[str] = []

    async def lookup(host: str) -> Sequence[str]:
        asked.append(host)
        return ["127.0.0.1"]

    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=request.host)

    async def body() -> None:
        async with serve(handler) as base, Fetcher(LOCAL, lookup=lookup) as fetcher:
            port = base.rsplit(":", 1)[1]
            r = await fetcher.get(f"http://bücher.test:{port}/")
            assert r.content == f"xn--bcher-kva.test:{port}".encode()
            assert asked == ["xn--bcher-kva.test"]

    asyncio.run(body())


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/file",
        "file:///etc/passwd",
        "mailto:someone@example.com",
        "javascript:alert(1)",
        "http:///no-host",
        "http://example.com:0/",
        "http://example.com:99999/",
        "example.com/relative",
    ],
)
def test_urls_that_cannot_be_requested(url: str) -> None:
    error = fails(url)
    assert isinstance(error, InvalidRequestURL) and isinstance(error, PermanentError)


def test_a_header_with_a_line_break_is_refused() -> None:
    async def body() -> None:
        async with Fetcher(LOCAL) as fetcher:
            with pytest.raises(InvalidRequestURL, match="invalid request"):
                await fetcher.get("http://127.0.0.1:9/", {"X-Evil": "a\r\nHost: other"})

    asyncio.run(body())


def test_get_needs_the_context_manager() -> None:
    with pytest.raises(RuntimeError, match="async with"):
        asyncio.run(Fetcher().get("http://example.com/"))


# -- POST, and bodies streamed to a file ---------------------------------------------------


def test_a_post_sends_its_body_and_a_streamed_answer_goes_to_the_file(tmp_path: Path) -> None:
    seen: list[tuple[str, bytes, str | None]] = []
    payload = os.urandom(3 * 2**20)

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append((request.method, await request.read(), request.headers.get("Accept-Encoding")))
        resp = web.StreamResponse(headers={"Content-Type": "application/x-git-upload-pack-result"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for at in range(0, len(payload), 65536):
            await resp.write(payload[at : at + 65536])
        return resp

    async def body() -> None:
        async with serve(handler) as base, Fetcher(LOCAL) as fetcher:
            with open(tmp_path / "pack", "wb") as sink:
                resp = await fetcher.post(base + "/x/git-upload-pack", b"0009done\n", sink=sink)
            assert (resp.status, resp.body, resp.content, resp.streamed) == (
                200,
                b"",
                b"",
                len(payload),
            )
            assert resp.request_head.startswith(b"POST /x/git-upload-pack HTTP/1.1")
            plain = await fetcher.post(base + "/y", b"abc")
            assert plain.content == payload and plain.streamed == 0

    asyncio.run(body())
    assert (tmp_path / "pack").read_bytes() == payload
    assert seen[0] == ("POST", b"0009done\n", "identity")
    assert seen[1][:2] == ("POST", b"abc") and seen[1][2] == ACCEPT_ENCODING


def test_a_streamed_body_is_cut_at_its_own_limit_and_refused_encoded(tmp_path: Path) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        headers = {"Content-Encoding": "gzip"} if request.path == "/gz" else {}
        resp = web.StreamResponse(headers=headers)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            for _ in range(400):
                await resp.write(bytes(16384))
        except (ConnectionError, RuntimeError):
            pass
        return resp

    async def body() -> None:
        # The settings' max_body guards memory; a streamed body has the caller's limit.
        settings = FetchSettings(allow_private=True, max_body=1000)
        async with serve(handler) as base, Fetcher(settings) as fetcher:
            with open(tmp_path / "a", "wb") as sink:
                resp = await fetcher.post(base + "/a", b"", sink=sink, max_body=2**30)
            assert resp.streamed == 400 * 16384
            with open(tmp_path / "b", "wb") as sink, pytest.raises(TooLarge, match="100000"):
                await fetcher.post(base + "/b", b"", sink=sink, max_body=100_000)
            with open(tmp_path / "c", "wb") as sink, pytest.raises(BadResponse, match="gzip"):
                await fetcher.post(base + "/gz", b"", sink=sink, max_body=2**30)

    asyncio.run(body())


def test_a_streamed_body_gets_more_time_as_it_arrives_but_a_trickle_does_not(
    tmp_path: Path,
) -> None:
    async def steady(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        size = 2**20 if request.path == "/steady" else 1
        for _ in range(12):  # 12 times 0.1 s: twice the total timeout
            await resp.write(bytes(size))
            await asyncio.sleep(0.1)
        return resp

    async def body() -> None:
        settings = FetchSettings(allow_private=True, read_timeout=0.5, total_timeout=0.6)
        async with serve(steady) as base, Fetcher(settings) as fetcher:
            with open(tmp_path / "s", "wb") as sink:
                resp = await fetcher.post(base + "/steady", b"", sink=sink, max_body=2**30)
            assert resp.streamed == 12 * 2**20
            with open(tmp_path / "t", "wb") as sink, pytest.raises(FetchTimeout, match="total"):
                await fetcher.post(base + "/trickle", b"", sink=sink, max_body=2**30)

    asyncio.run(body())
