"""Fetching robots.txt: at most the first 500 KiB (and a byte) are read, whatever the
file's size or Content-Encoding, and what they hold is obeyed (RFC 9309 §2.5: "The
parsing limit MUST be at least 500 kibibytes"). Against real loopback servers."""

from __future__ import annotations

import asyncio
import base64
import gzip
import random
import zlib

import pytest
from aiohttp import web
from fetch_servers import gzip_bomb, serve

from thresher.clock import FakeClock
from thresher.fetch import Fetcher, FetchSettings, TooLarge
from thresher.fetch.decoding import decode_content
from thresher.fetch.polite import ROBOTS_FETCH_BYTES, PoliteFetcher, RobotsDisallowed, fetch_robots
from thresher.frontier import Politeness
from thresher.frontier.robotstxt import MAX_ROBOTS_BYTES

SETTINGS = FetchSettings(allow_private=True)
HEAD = b"User-agent: *\nDisallow: /private/\n"
LATE = b"User-agent: *\nDisallow: /late\n"  # past the first 500 KiB: ignored


def _filler(size: int, *, compressible: bool = True) -> bytes:
    """Comment lines of about `size` bytes; random letters (which gzip barely shrinks)
    unless `compressible`."""
    if compressible:
        line = b"# " + b"x" * 97 + b"\n"
        return line * (size // len(line))
    rng = random.Random(9)
    lines = [b"# " + base64.b64encode(rng.randbytes(72)) + b"\n" for _ in range(size // 99)]
    return b"".join(lines)


class BigRobots:
    """Serves a robots.txt of `total` bytes in 64 KiB writes, counting what it wrote."""

    def __init__(self, body: bytes, *, encoding: str | None = None, length: bool = True):
        self.body = body
        self.encoding = encoding
        self.length = length
        self.written = 0
        self.pages: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path != "/robots.txt":
            self.pages.append(request.path)
            return web.Response(text="page")
        headers = {"Content-Type": "text/plain"}
        if self.encoding:
            headers["Content-Encoding"] = self.encoding
        resp = web.StreamResponse(headers=headers)
        if self.length:
            resp.content_length = len(self.body)
        await resp.prepare(request)
        try:
            for at in range(0, len(self.body), 65536):
                await resp.write(self.body[at : at + 65536])
                self.written += len(self.body[at : at + 65536])
        except (ConnectionError, RuntimeError):
            pass  # the client stopped reading: what the test wants
        return resp


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
def test_a_54_mb_robots_txt_is_read_to_500_kib_and_obeyed(length: bool) -> None:
    """Issue 19: "a 54 MB robots.txt skips the site" (larger than max_body, it was refused
    whole). Now its first 500 KiB are the rules, and the rest is neither read nor obeyed."""
    body = HEAD + _filler(54 * 2**20) + LATE
    server = BigRobots(body, length=length)

    async def run() -> None:
        polite = PoliteFetcher(SETTINGS, Politeness(delay=0.0), FakeClock())
        async with serve(server.handle) as base, polite:
            with pytest.raises(RobotsDisallowed):
                await polite.get(f"{base}/private/x")
            assert (await polite.get(f"{base}/late")).status == 200
            assert (await polite.get(f"{base}/page")).status == 200

    asyncio.run(run())
    assert server.pages == ["/late", "/page"]
    # The client hung up after its 500 KiB: the server wrote far less than the file
    # (what fits in the sockets' buffers at most).
    assert server.written < 20 * 2**20


@pytest.mark.parametrize("compressible", [True, False], ids=["compressible", "random"])
def test_a_gzipped_robots_txt_is_decoded_to_500_kib(compressible: bool) -> None:
    """Content-Encoding does not change the limit: the decoded file is read to 500 KiB,
    whether its first 500 KiB on the wire decode to more (text) or to less (noise)."""
    text = HEAD + _filler(3 * 2**20, compressible=compressible) + LATE
    server = BigRobots(gzip.compress(text), encoding="gzip")

    async def run() -> tuple[int | None, bytes, bool]:
        async with serve(server.handle) as base, Fetcher(SETTINGS) as fetcher:
            answer = await fetch_robots(fetcher.get, f"{base}/any")
            return answer.status, answer.body, answer.response is None

    status, body, not_archived = asyncio.run(run())
    assert status == 200 and not_archived
    assert body.startswith(HEAD) and body.endswith(b"\n")
    assert MAX_ROBOTS_BYTES - 200 < len(body) <= MAX_ROBOTS_BYTES
    assert text.startswith(body)


def test_a_small_robots_txt_is_read_whole_and_archived() -> None:
    server = BigRobots(HEAD + LATE)

    async def run() -> tuple[bytes, bool]:
        async with serve(server.handle) as base, Fetcher(SETTINGS) as fetcher:
            answer = await fetch_robots(fetcher.get, f"{base}/any")
            assert answer.response is not None and not answer.response.truncated
            return answer.body, answer.response.content == HEAD + LATE

    assert asyncio.run(run()) == (HEAD + LATE, True)


def test_truncate_cuts_the_body_and_says_so() -> None:
    """`Fetcher.get(truncate=N)`: a longer body is cut to N bytes, not refused, even past
    max_body; the connection is not reused (the rest of the body is still on it)."""
    body = bytes(range(256)) * 4096  # 1 MiB
    settings = FetchSettings(allow_private=True, max_body=2**18)

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=body)

    async def run() -> None:
        async with serve(handle) as base, Fetcher(settings) as fetcher:
            resp = await fetcher.get(f"{base}/x", truncate=ROBOTS_FETCH_BYTES)
            # max_body (256 KiB) is under the truncation: the body is cut there instead.
            assert resp.truncated and resp.body == body[: 2**18]
            again = await fetcher.get(f"{base}/x", truncate=10)
            assert again.truncated and again.content == body[:10]
        async with serve(handle) as base, Fetcher(SETTINGS) as fetcher:
            whole = await fetcher.get(f"{base}/x", truncate=len(body))
            assert not whole.truncated and whole.body == body
            cut = await fetcher.get(f"{base}/x", truncate=ROBOTS_FETCH_BYTES)
            assert cut.truncated and cut.body == body[:ROBOTS_FETCH_BYTES]

    asyncio.run(run())


def test_truncate_cuts_a_bomb_once_decoded_and_says_so() -> None:
    """A body whole on the wire that decodes past `truncate` (a gzip bomb as robots.txt)
    is decoded only that far, cut, not refused; `Response.truncated` says so. The same
    body without `truncate` is refused at the caller's cap."""
    bomb = gzip_bomb(2**27)  # 128 MiB of zeros in about 128 KiB: whole on the wire

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=bomb, headers={"Content-Encoding": "gzip"})

    async def run() -> None:
        async with serve(handle) as base, Fetcher(SETTINGS) as fetcher:
            resp = await fetcher.get(f"{base}/robots.txt", truncate=ROBOTS_FETCH_BYTES)
            assert len(bomb) < ROBOTS_FETCH_BYTES and resp.body == bomb and resp.truncated
            assert resp.content == bytes(ROBOTS_FETCH_BYTES) and resp.decode_error is None
            with pytest.raises(TooLarge, match="max_body=1048576"):
                await fetcher.get(f"{base}/robots.txt", max_body=2**20)

    asyncio.run(run())


def test_partial_decoding_keeps_what_a_cut_stream_holds() -> None:
    text = b"".join(b"line %d\n" % i for i in range(100_000))
    for name, data in (
        ("gzip", gzip.compress(text)),
        ("deflate", zlib.compress(text)),
    ):
        cut = data[: len(data) // 2]
        content, error = decode_content(cut, name, 10**9, partial=True)
        assert error is None and 0 < len(content) < len(text) and text.startswith(content)
        assert decode_content(cut, name, 10**9)[1] is not None  # not partial: an error
        content, error = decode_content(data, name, 1000, partial=True)
        assert error is None and content == text[:1000]


def test_redirects_are_followed_to_another_host_and_obeyed_for_the_first() -> None:
    """RFC 9309 §2.3.1.2: "crawlers SHOULD follow at least five consecutive redirects,
    even across authorities [...] If a robots.txt file is reached within five
    consecutive redirects, the robots.txt file MUST be fetched, parsed, and its rules
    followed in the context of the initial authority." """
    seen: list[str] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(f"elsewhere {request.path}")
        if request.path == "/hop5":
            return web.Response(text="User-agent: *\nDisallow: /private/\n")
        return web.Response(status=404)

    async def run() -> None:
        async with serve(elsewhere) as other:

            async def first(request: web.Request) -> web.Response:
                seen.append(f"first {request.path}")
                if request.path == "/robots.txt":
                    return web.Response(status=301, headers={"Location": "/hop1"})
                if request.path.startswith("/hop"):
                    n = int(request.path[4:])
                    # The fifth redirect goes to another host.
                    target = f"{other}/hop5" if n == 4 else f"/hop{n + 1}"
                    return web.Response(status=302, headers={"Location": target})
                return web.Response(text="page")

            polite = PoliteFetcher(SETTINGS, Politeness(delay=0.0), FakeClock())
            async with serve(first) as base, polite:
                with pytest.raises(RobotsDisallowed):
                    await polite.get(f"{base}/private/x")
                assert (await polite.get(f"{base}/public")).status == 200

    asyncio.run(run())
    assert seen == [
        "first /robots.txt",
        "first /hop1",
        "first /hop2",
        "first /hop3",
        "first /hop4",
        "elsewhere /hop5",
        "first /public",
    ]
