"""Hostile answers to one fetch (`Fetcher.get` against a loopback server): decoding that
would run for ever, headers at a crawl, special-use addresses. Each fails fast with a
message that says what happened."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest
from aiohttp import web
from hostile_server import Hostile, gzip_bomb, gzip_members
from scenarios import fetch_brotli_bomb

from thresher.fetch import AddressRefused, Fetcher, FetchSettings, FetchTimeout, TooLarge
from thresher.fetch.deadlines import HEAD_EXPIRED

MiB = 2**20


def _fetch(url: str, settings: FetchSettings, max_body: int | None = None) -> BaseException:
    async def main() -> BaseException:
        async with Fetcher(settings) as fetcher:
            try:
                await fetcher.get(url, max_body=max_body)
            except Exception as exc:
                return exc
        raise AssertionError("the fetch succeeded")

    return asyncio.run(main())


def test_a_response_head_sent_a_byte_at_a_time_is_cut_at_read_timeout() -> None:
    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: " + b"a" * 10_000:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.05)

    with Hostile() as server:
        base = server.raw(drip)
        settings = FetchSettings(allow_private=True, read_timeout=1, total_timeout=60)
        started = time.monotonic()
        error = _fetch(base + "/", settings)
        took = time.monotonic() - started
    assert isinstance(error, FetchTimeout)
    # Not "no data" alone: bytes kept coming, the head just never ended.
    assert HEAD_EXPIRED in str(error) and "within 1 s of sending the request" in str(error)
    assert took < 30  # read_timeout, not the total


def test_decoding_endless_gzip_members_stops_at_the_total_timeout() -> None:
    body = gzip_members(48 * MiB, b"page")

    async def members(request: web.Request) -> web.Response:
        return web.Response(body=body, headers={"Content-Encoding": "gzip"})

    with Hostile() as server:
        server.routes["/"] = members
        settings = FetchSettings(allow_private=True, total_timeout=2, read_timeout=2)
        started = time.monotonic()
        error = _fetch(server.url("/"), settings)
        took = time.monotonic() - started
    # 2.5 million members take seconds to decode: the total timeout ends it (or, on a
    # very busy machine, already the download).
    assert isinstance(error, FetchTimeout), error
    assert "total_timeout" in str(error)
    assert took < 30


def test_the_callers_cap_is_the_decoded_cap() -> None:
    bomb = gzip_bomb(1024 * MiB)

    async def serve_bomb(request: web.Request) -> web.Response:
        return web.Response(body=bomb, headers={"Content-Encoding": "gzip"})

    with Hostile() as server:
        server.routes["/"] = serve_bomb
        # The settings would allow 1 GiB decoded; the request's max_body says 8 MiB.
        settings = FetchSettings(allow_private=True, max_body=2**30, max_decoded=2**30)
        error = _fetch(server.url("/"), settings, max_body=8 * MiB)
    assert isinstance(error, TooLarge)
    assert f"gzip-decoded content exceeds max_body={8 * MiB}" in str(error)


@pytest.mark.parametrize(
    "url",
    [
        "http://192.88.99.1/",
        "http://[fec0::1]/",
        "http://[3fff::1]/",
        "http://192.0.0.8/",
        "http://[5f00::1]/",
        "http://[2002:c058:6301::]/",
    ],
)
def test_special_use_addresses_are_refused(url: str) -> None:
    error = _fetch(url, FetchSettings(connect_timeout=2))
    assert isinstance(error, AddressRefused), error
    assert "reserved" in str(error)


def test_a_brotli_bomb_does_not_stall_the_event_loop(tmp_path: Path) -> None:
    # 405 bytes that decode to 256 MiB, refused at the default 200 MiB: before, all of
    # it was decoded on the event loop (bodies under 256 KB were), a stall of 2 s.
    with Hostile() as server:
        probe = fetch_brotli_bomb(server, tmp_path, None).probe
    assert probe.returncode == 0, probe.stderr
    found = re.search(r"longest loop stall (\d+) ms; (\w+)", probe.stdout)
    assert found is not None, probe.stdout
    assert found.group(2) == "TooLarge"
    assert int(found.group(1)) < 1000
