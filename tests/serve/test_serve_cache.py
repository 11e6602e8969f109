"""What `thresher serve` remembers (thresher.serve.context): one read of an aggregate at a
time however many ask for it, and the aggregates read at start."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from thresher.serve.auth import Access
from thresher.serve.context import CACHE_SECONDS, Context
from thresher.serve.pages import warm
from thresher.store import Tx, open_store
from thresher.store.aio import AsyncStore


@asynccontextmanager
async def context(home: Path) -> AsyncIterator[Context]:
    url = f"sqlite:///{home / 'thresher.db'}"
    open_store(url).close()
    store = await AsyncStore(url, 2, readonly=True).open()
    try:
        info = {"backend": "sqlite", "url": url, "schema_version": 0}
        yield Context(store, home, 60.0, Access(None), info)
    finally:
        await store.close()


def counted(value: Any, gate: threading.Event) -> tuple[Callable[[Tx], Any], list[int]]:
    """A read that counts its calls and holds its store thread until `gate` opens."""
    calls: list[int] = []

    def read(tx: Tx) -> Any:
        calls.append(1)
        assert gate.wait(30)
        if isinstance(value, Exception):
            raise value
        return value

    return read, calls


def test_concurrent_reads_of_one_key_share_one_read(tmp_path: Path) -> None:
    async def run() -> None:
        async with context(tmp_path) as ctx:
            gate = threading.Event()
            read, calls = counted({"n": 1}, gate)
            other, other_calls = counted({"n": 2}, gate)
            waiting = [asyncio.ensure_future(ctx.read_cached(("a",), read)) for _ in range(3)]
            waiting.append(asyncio.ensure_future(ctx.read_cached(("b",), other)))
            await asyncio.sleep(0)
            gate.set()
            got = await asyncio.gather(*waiting)
            assert got == [{"n": 1}] * 3 + [{"n": 2}]
            assert got[0] is got[1] is got[2]
            assert len(calls) == 1 and len(other_calls) == 1
            assert not ctx._running

    asyncio.run(run())


def test_a_failed_read_fails_its_waiters_and_is_read_again(tmp_path: Path) -> None:
    async def run() -> None:
        async with context(tmp_path) as ctx:
            gate = threading.Event()
            read, calls = counted(ValueError("store said no"), gate)
            waiting = [asyncio.ensure_future(ctx.read_cached(("a",), read)) for _ in range(2)]
            await asyncio.sleep(0)
            gate.set()
            for future in waiting:
                with pytest.raises(ValueError, match="store said no"):
                    await future
            assert len(calls) == 1 and not ctx._running
            good, good_calls = counted("fine", gate)
            assert await ctx.read_cached(("a",), good) == "fine" and len(good_calls) == 1

    asyncio.run(run())


def test_a_cancelled_reader_leaves_the_read_to_the_others(tmp_path: Path) -> None:
    async def run() -> None:
        async with context(tmp_path) as ctx:
            gate = threading.Event()
            read, calls = counted("value", gate)
            first = asyncio.ensure_future(ctx.read_cached(("a",), read))
            second = asyncio.ensure_future(ctx.read_cached(("a",), read))
            await asyncio.sleep(0)
            first.cancel()
            await asyncio.sleep(0)
            gate.set()
            assert await second == "value" and len(calls) == 1
            with pytest.raises(asyncio.CancelledError):
                await first
            for _ in range(100):  # the shared read's done-callback runs on a later turn
                if not ctx._running:
                    break
                await asyncio.sleep(0.01)
            assert not ctx._running

    asyncio.run(run())


def test_start_up_reads_the_dashboard_and_ingest_counts(tmp_path: Path) -> None:
    async def run() -> None:
        async with context(tmp_path) as ctx:
            await warm(ctx)
            # The cache: (key, store fingerprint) -> (value, when it was read).
            cached = {cast(tuple[Any, ...], full)[0]: v[0] for full, v in ctx._cache.items()}
            assert set(cached) == {("dashboard",), ("ingest stats",)}
            dashboard = cached[("dashboard",)]
            assert set(dashboard) == {"status", "extra"} and dashboard["status"]["sources"] == []

    asyncio.run(run())


def test_a_read_is_served_again_for_the_cache_period_from_when_it_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not to the end of a fixed 10-second slot: what start-up reads is not thrown away
    by the first request because a slot happened to end in between."""
    now = [1000.0]
    monkeypatch.setattr("thresher.serve.context._clock", lambda: now[0])

    async def run() -> None:
        async with context(tmp_path) as ctx:
            gate = threading.Event()
            gate.set()
            read, calls = counted("value", gate)
            assert await ctx.read_cached(("a",), read) == "value"
            now[0] += CACHE_SECONDS - 0.1
            assert await ctx.read_cached(("a",), read) == "value" and len(calls) == 1
            now[0] += 0.2
            assert await ctx.read_cached(("a",), read) == "value" and len(calls) == 2

    asyncio.run(run())
