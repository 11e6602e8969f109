"""A listing page that stalls (issue 18): the server accepts the connection and then
sends nothing, or the head and half the page, and holds the connection open. The run
retries within seconds, gives each stalled attempt up after the short silence allowed
to a connection that delivered (almost) nothing, and ends well within a bound, leaving
what still fails to the next run with its reason; the next run, the server healthy,
completes. Real parts: the built-in archive behind a small aiohttp server on 127.0.0.1
that stalls on request, a real store of each backend, the real plan and workers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from thresher.archives.demo import ArchiveList, DemoArchive
from thresher.archives.demo_messages import generate_messages
from thresher.clock import SystemClock
from thresher.config import Config
from thresher.plan import ExecutionPlan, RunReport
from thresher.sources import add_source
from thresher.status import collect_status
from thresher.store.aio import AsyncStore

ADDR = "dev@example.org"
LISTING = "/pipermail/dev/"
# Request headers a harvest's conditional and Range requests carry, passed through.
FORWARDED = ("Range", "If-None-Match", "If-Modified-Since", "If-Range", "User-Agent")
# Response headers that describe the connection or the framing, not the resource.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "server"}


class StallingFront:
    """An aiohttp server on 127.0.0.1 in front of `upstream`: the next requests for
    `path` stall, one per entry of `stalls` (``silent``: nothing at all; ``partial``:
    the head and half the body, announced whole), holding the connection open until
    the client gives up; every other request is passed through as it is."""

    def __init__(self, upstream: str, path: str, stalls: list[str]) -> None:
        self.upstream = upstream
        self.path = path
        self.stalls = list(stalls)
        self.stalled = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._release: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> StallingFront:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    async def _start(self) -> None:
        self._release = asyncio.Event()
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _stop(self) -> None:
        assert self._release is not None and self._runner is not None and self._session
        self._release.set()
        await self._runner.cleanup()
        await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        status, headers, body = await self._upstream(request)
        if request.path != self.path or not self.stalls:
            return web.Response(status=status, headers=headers, body=body)
        how = self.stalls.pop(0)
        self.stalled += 1
        response = web.StreamResponse(status=status, headers=headers)
        if how == "partial":
            response.content_length = len(body)
            await response.prepare(request)
            await response.write(body[: len(body) // 2])
        assert self._release is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._release.wait(), 120)
        return response

    async def _upstream(self, request: web.Request) -> tuple[int, dict[str, str], bytes]:
        assert self._session is not None
        sent = {k: v for k, v in request.headers.items() if k in FORWARDED}
        url = self.upstream + request.path_qs
        async with self._session.get(url, headers=sent, allow_redirects=False) as answer:
            body = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
            return answer.status, kept, body


@pytest.fixture
def archive() -> Iterator[tuple[DemoArchive, ArchiveList]]:
    with DemoArchive() as server:
        months = generate_messages(ADDR, ["2024-01", "2024-02"], 15, seed=18)
        yield server, server.add_list(ADDR, "2024-01", months)


def config_for(store_url: str, home: Path, **kw: Any) -> Config:
    db = None if store_url.startswith("sqlite") else store_url
    quick: dict[str, Any] = dict(
        home=home,
        db=db,
        # The defaults' shape (the silence allowed short until the body comes, retries
        # within seconds, a few attempts), scaled down twentyfold.
        stall_timeout=0.5,
        read_timeout=2.0,
        http_timeout=10.0,
        backoff_base=0.1,
        backoff_max=3.0,
        max_attempts=4,
    )
    return Config(**{**quick, **kw})


def run_once(config: Config, url: str | None = None) -> tuple[RunReport, dict[str, Any], float]:
    """One `thresher run` (adding the source first if `url`): its report, what `status`
    says of the source afterwards, and how long it took."""

    async def go() -> tuple[RunReport, dict[str, Any], float]:
        store = await AsyncStore(config.store_url).open()
        try:
            if url is not None:
                raw = {"allow_private": "true", "delay": "0"}
                await store.run(lambda tx: add_source(tx, "dev", url, None, raw, time.time()))
            started = time.monotonic()
            report = await ExecutionPlan(config, store, SystemClock()).run_once()
            took = time.monotonic() - started
            status = await store.run(
                lambda tx: collect_status(tx, time.time(), config.lease_seconds, {}), write=False
            )
            return report, status["sources"][0], took
        finally:
            await store.close()

    return asyncio.run(go())


def stored_messages(config: Config) -> int:
    async def go() -> int:
        store = await AsyncStore(config.store_url).open()
        try:
            row = await store.run(lambda tx: tx.one("count_source_messages", source="dev"))
            return int(row["n"]) if row else 0
        finally:
            await store.close()

    return asyncio.run(go())


# Generous for a loaded 2-core machine: the four stalls cost about 3 s here (0.5 s of
# silence each, retries from 0.1 s); before issue 18, the fetcher's fixed 30 s of
# silence alone made each stall cost 30 s.
BOUND = 30.0


def test_a_listing_that_keeps_stalling_ends_the_run_then_the_next_run_completes(
    archive: tuple[DemoArchive, ArchiveList], store_url: str, tmp_path: Path
) -> None:
    server, model = archive
    config = config_for(store_url, tmp_path)
    stalls = ["silent", "partial", "silent", "partial", "silent"]
    with StallingFront(server.base, LISTING, stalls) as front:
        report, status, took = run_once(config, front.base + LISTING)
        [source] = report.sources
        assert took < BOUND, took
        assert front.stalled == config.max_attempts  # each attempt stalled, none more
        # Left to the next run, with its reason, where `thresher status` shows it.
        assert source.outcome == "failed"
        assert source.error is not None
        assert "no data from the server" in source.error
        assert f"gave up after {config.max_attempts} attempts" in source.error
        assert status["last_run"]["outcome"] == "failed"
        assert status["last_run"]["error"] == source.error == status["last_error"]
        assert stored_messages(config) == 0

        # The server healthy again (one stall left over: a first retry takes it).
        report, status, took = run_once(config)
        [source] = report.sources
        assert source.outcome == "ok", source.error
        assert took < BOUND, took
        assert stored_messages(config) == sum(len(m) for m in model.months.values())


def test_a_listing_that_stalls_a_few_times_is_fetched_in_the_same_run(
    archive: tuple[DemoArchive, ArchiveList], store_url: str, tmp_path: Path
) -> None:
    server, model = archive
    config = config_for(store_url, tmp_path, max_attempts=5)
    with StallingFront(server.base, LISTING, ["partial", "silent", "partial"]) as front:
        report, status, took = run_once(config, front.base + LISTING)
    [source] = report.sources
    assert source.outcome == "ok", source.error
    assert took < BOUND, took
    assert stored_messages(config) == sum(len(m) for m in model.months.values())
    assert status["last_run"]["error"] is None
