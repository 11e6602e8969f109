"""A crawl's commits run beside its fetches: a commit kept waiting (by a sibling shard's
commit, a busy database) does not stop the crawl starting new fetches, and a commit that
fails is written by the next one."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from crawlsite import SiteServer, build_site
from fleet import scope_of
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from thresher.clock import SystemClock
from thresher.crawl import CrawlEngine, CrawlSettings, CrawlSummary
from thresher.crawl.ledger import Batch, CrawlLedger
from thresher.errors import StoreUnavailable
from thresher.store import Row, Tx, open_store
from thresher.store.aio import AsyncStore

T = TypeVar("T")

HOLD = 1.5  # seconds another connection holds the run's row (all of SQLite)


def crawl(
    site: SiteServer,
    seeds: list[str],
    store: AsyncStore,
    warc_dir: Path,
    meanwhile: Callable[[asyncio.Future[CrawlSummary]], Awaitable[None]] | None = None,
) -> CrawlSummary:
    """Run one crawl of `site` on `store` (opened and closed here), with `meanwhile`
    awaited once it has started, in a thread: a crawl that spins without yielding
    would block a test's own loop."""
    settings = CrawlSettings(
        seeds=tuple(seeds),
        scope=scope_of(site),
        delay=0.0,
        allow_private=True,
        concurrency=4,
        commit_seconds=0.1,
    )
    result: list[CrawlSummary | BaseException] = []

    async def main() -> CrawlSummary:
        await store.open()
        try:
            engine = CrawlEngine(
                settings, source="web", run=1, store=store, warc_dir=warc_dir, clock=SystemClock()
            )
            run = asyncio.ensure_future(engine.run())
            if meanwhile is not None:
                await meanwhile(run)
            return await run
        finally:
            await store.close()

    def target() -> None:
        try:
            result.append(asyncio.run(main()))
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the crawl did not finish"
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def url_rows(store_url: str) -> list[Row]:
    store = open_store(store_url)
    try:
        with store.transaction(write=False) as tx:
            return tx.all("crawl_url_states", source="web")
    finally:
        store.close()


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
        holder = threading.Thread(target=hold_the_run, daemon=True)

        async def hold_once_under_way(run: asyncio.Future[CrawlSummary]) -> None:
            while len(site.hits) < 20 and not run.done():
                await asyncio.sleep(0.01)
            holder.start()

        summary = crawl(site, seeds, AsyncStore(store_url), tmp_path / "warc", hold_once_under_way)
        holder.join(10)
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
    rows = url_rows(store_url)
    # Everything the crawl did made it to the store.
    assert expected <= {r["url"] for r in rows}
    assert "queued" not in {r["state"] for r in rows}
    assert summary.pages == sum(1 for r in rows if r["state"] == "done")


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
        with pytest.raises(StoreUnavailable):  # the 5th transaction: a commit, pages in it
            crawl(site, seeds, AwayOnce(store_url, away_at=5), tmp_path / "warc")
        summary = crawl(site, seeds, AsyncStore(store_url), tmp_path / "warc")
        expected = site.reachable(seeds)

    uris: Counter[str] = Counter()
    for path in sorted((tmp_path / "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type in ("response", "revisit"):
                    uris[record.rec_headers.get_header("WARC-Target-URI")] += 1
    assert expected <= set(uris)
    assert max(uris.values()) == 1, [u for u, n in uris.items() if n > 1]
    rows = url_rows(store_url)
    assert "queued" not in {r["state"] for r in rows}
    assert summary.pages == sum(1 for r in rows if r["state"] == "done")


def test_a_taken_batch_goes_back_before_what_came_since() -> None:
    """The engine's batch is one object for the engine's life (admission and fetches
    record in it): a commit takes what it holds, and one that failed puts it back first."""
    ledger = CrawlLedger("web", 1, job=None, owner=None)
    batch = Batch()
    ledger.finish(batch, 1, "done", now=1.0)
    batch.counts["pages"] += 1
    taken = batch.take()
    assert len(taken) == 1 and taken.counts["pages"] == 1
    assert len(batch) == 0 and batch.counts["pages"] == 0
    ledger.finish(batch, 2, "done", now=2.0)
    batch.counts["pages"] += 1
    batch.put_back(taken)
    assert [f[0] for f in batch.finishes] == [1, 2] and batch.counts["pages"] == 2
