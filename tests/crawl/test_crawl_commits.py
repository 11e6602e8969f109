"""A crawl's commits run beside its fetches: a commit kept waiting (by a sibling shard's
commit, a busy database) does not stop the crawl starting new fetches, and a commit that
fails is written by the next one."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from crawlsite import SiteServer, build_site
from fleet import scope_of
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from thresher.clock import SystemClock
from thresher.crawl import CrawlEngine, CrawlSettings
from thresher.errors import StoreUnavailable
from thresher.store import Tx, open_store
from thresher.store.aio import AsyncStore

T = TypeVar("T")

HOLD = 1.5  # seconds another connection holds the run's row (all of SQLite)


def test_fetches_go_on_while_a_commit_waits_for_the_store(store_url: str, tmp_path: Path) -> None:
    held = threading.Event()
    window: dict[str, float] = {}

    def hold_the_run() -> None:
        other = open_store(store_url)
        try:
            with other.transaction() as tx:
                tx.execute("lock_crawl_run", run=1, now=time.time())
                window["from"] = time.monotonic()
                held.set()
                time.sleep(HOLD)
                window["to"] = time.monotonic()
        finally:
            other.close()

    with SiteServer(hosts=2) as site:
        seeds = build_site(site, pages_per_host=400)
        site.latency = 0.005
        result: dict[str, Any] = {}

        async def crawl() -> None:
            store = await AsyncStore(store_url).open()
            try:
                settings = CrawlSettings(
                    seeds=tuple(seeds),
                    scope=scope_of(site),
                    delay=0.0,
                    allow_private=True,
                    concurrency=4,
                    commit_seconds=0.1,
                )
                engine = CrawlEngine(
                    settings,
                    source="web",
                    run=1,
                    store=store,
                    warc_dir=tmp_path / "warc",
                    clock=SystemClock(),
                )
                run = asyncio.ensure_future(engine.run())
                while len(site.hits) < 20 and not run.done():
                    await asyncio.sleep(0.01)
                holder = threading.Thread(target=hold_the_run, daemon=True)
                holder.start()
                result["summary"] = await run
                holder.join(10)
            finally:
                await store.close()

        thread = threading.Thread(target=lambda: asyncio.run(crawl()), daemon=True)
        thread.start()
        thread.join(120)
        assert not thread.is_alive(), "the crawl did not finish"
        assert held.is_set()
        # Well after the next commit began waiting (commits are due every 0.1 s), pages
        # were still fetched: before, the crawl started none until the commit was in.
        late = window["from"] + 0.5
        during = [h for h in site.hits if late <= h.at <= window["to"]]
        expected = site.reachable(seeds)
        hits = site.hit_counts()
        flaky = f"{site.base(0)}/flaky.html"  # a 503, then a 200

    assert len(during) >= 20, f"{len(during)} fetches in the last {HOLD - 0.5} s of the hold"
    assert set(hits) == expected
    assert {u for u, n in hits.items() if n != 1} == {flaky} and hits[flaky] == 2
    store = open_store(store_url)
    try:
        with store.transaction(write=False) as tx:
            rows = tx.all("crawl_url_states", source="web")
    finally:
        store.close()
    # Everything the crawl did made it to the store.
    assert expected <= {r["url"] for r in rows}
    assert "queued" not in {r["state"] for r in rows}
    assert result["summary"].pages == sum(1 for r in rows if r["state"] == "done")


class AwayOnce(AsyncStore):
    """A real store whose `away_at`-th transaction fails before it starts, as a store
    does that is unreachable for a moment."""

    def __init__(self, url: str, away_at: int) -> None:
        super().__init__(url)
        self.calls = 0
        self.away_at = away_at

    async def run(self, fn: Callable[[Tx], T], write: bool = True) -> T:
        self.calls += 1
        if self.calls == self.away_at:
            raise StoreUnavailable("the store is away for a moment")
        return await super().run(fn, write)


def test_a_failed_commit_is_written_by_the_next_and_nothing_is_archived_twice(
    store_url: str, tmp_path: Path
) -> None:
    """The crawl stops on the failed commit; its last commit (at the position after every
    record written) includes the failed batch, so the resumed crawl fetches none of its
    pages again."""
    with SiteServer(hosts=2) as site:
        seeds = build_site(site, pages_per_host=150)
        site.latency = 0.005
        settings = CrawlSettings(
            seeds=tuple(seeds),
            scope=scope_of(site),
            delay=0.0,
            allow_private=True,
            concurrency=4,
            commit_seconds=0.1,
        )

        async def crawl(store: AsyncStore) -> Any:
            await store.open()
            try:
                engine = CrawlEngine(
                    settings,
                    source="web",
                    run=1,
                    store=store,
                    warc_dir=tmp_path / "warc",
                    clock=SystemClock(),
                )
                return await engine.run()
            finally:
                await store.close()

        with pytest.raises(StoreUnavailable):
            asyncio.run(crawl(AwayOnce(store_url, away_at=5)))  # a commit, pages in it
        summary = asyncio.run(crawl(AsyncStore(store_url)))
        expected = site.reachable(seeds)

    uris: Counter[str] = Counter()
    for path in sorted((tmp_path / "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type in ("response", "revisit"):
                    uris[record.rec_headers.get_header("WARC-Target-URI")] += 1
    assert expected <= set(uris)
    assert max(uris.values()) == 1, [u for u, n in uris.items() if n > 1]
    store = open_store(store_url)
    try:
        with store.transaction(write=False) as tx:
            rows = tx.all("crawl_url_states", source="web")
    finally:
        store.close()
    assert "queued" not in {r["state"] for r in rows}
    assert summary.pages == sum(1 for r in rows if r["state"] == "done")
