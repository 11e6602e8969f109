"""A crawl shares its hosts' turns with every other fetch of the fleet: a `web` crawl
and a `urls` list over the same hosts, done by two `thresher worker` processes on one
PostgreSQL store, never fetch a host twice within its delay (from the server's log); and
a crawl without delays holds its hosts across fetches instead of per fetch."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from crawlsite import SiteServer, build_site
from fleet import scope_of, stop_workers, too_close

from cli_proc import Home
from conftest import new_pg_database
from thresher.clock import SystemClock
from thresher.crawl import CrawlEngine, CrawlSettings
from thresher.fetch.leases import HostLeases
from thresher.store.aio import AsyncStore

DELAY = 0.3


@pytest.mark.slow
def test_a_crawl_and_a_list_of_the_same_hosts_take_turns(pg_admin_url: str, tmp_path: Path) -> None:
    with SiteServer(hosts=2) as site:
        seeds = build_site(site, pages_per_host=12)
        home = Home(tmp_path, new_pg_database(pg_admin_url))
        polite = ["-o", "allow_private=true", "-o", f"delay={DELAY}"]
        home.run(
            "source", "add", "web", seeds[0], "--type", "web",
            "-o", "seeds=" + " ".join(seeds[1:]),
            "-o", f"scope={scope_of(site)}", *polite,
        )  # fmt: skip
        listing = tmp_path / "pages.txt"
        pages = site.reachable(seeds)
        listing.write_text("\n".join(sorted(pages)) + "\n")
        home.run("source", "add", "docs", str(listing), "--type", "urls", *polite)
        home.run("run", "--detach")
        workers = [home.start("worker", "--name", f"w{i}", "-c", "4") for i in range(2)]
        try:
            deadline = time.monotonic() + 180
            while True:
                assert time.monotonic() < deadline, "the workers did not finish"
                for w in workers:
                    assert w.poll() is None, w.communicate()
                runs = home.query("SELECT source, outcome FROM source_runs")
                if len(runs) == 2 and all(r["outcome"] != "running" for r in runs):
                    break
                time.sleep(0.2)
        finally:
            stop_workers(workers)
        assert sorted(r["outcome"] for r in runs) == ["ok", "ok"]
        assert len(site.hits) >= 2 * len(pages), "both sources fetched every page"
        times: dict[str, list[float]] = defaultdict(list)
        for hit in site.hits:
            times[hit.url.split("/")[2]].append(hit.at)
        assert too_close(times, DELAY) == {}


class CountingLeases(HostLeases):
    """Real host leases in the store, counting the engine's takes."""

    takes = 0

    async def take(self, *args: Any, **kwargs: Any) -> float | None:
        answer = await super().take(*args, **kwargs)
        self.takes += answer is None
        return answer


@pytest.mark.parametrize(("delay", "sticky"), [(0.0, True), (0.01, False)])
def test_without_a_delay_a_crawl_holds_its_hosts_across_fetches(
    store_url: str, tmp_path: Path, delay: float, sticky: bool
) -> None:
    """Two store transactions per fetch cost more than a fetch without delays: such a
    crawl takes each host once and hands it back at the end. With a delay, a host is
    taken for each fetch, and another worker may fetch it in between."""
    with SiteServer(hosts=3) as site:
        seeds = build_site(site, pages_per_host=20)
        expected = site.reachable(seeds)

        async def crawl() -> tuple[int, int, list[Any], float]:
            store = await AsyncStore(store_url).open()
            try:
                leases = CountingLeases(store, "w:1:test")
                settings = CrawlSettings(
                    seeds=tuple(seeds),
                    scope=scope_of(site),
                    delay=delay,
                    allow_private=True,
                    concurrency=8,
                    # A crawl's fetches of a host in flight at once share one hold: with
                    # a delay, one at a time, so that each fetch is a take (under load,
                    # fetches 0.01 s apart overlapped and shared holds).
                    host_connections=4 if sticky else 1,
                )
                engine = CrawlEngine(
                    settings,
                    source="web",
                    run=1,
                    store=store,
                    warc_dir=tmp_path / "warc",
                    clock=SystemClock(),
                    leases=leases,
                )
                started = time.monotonic()
                summary = await engine.run()
                seconds = time.monotonic() - started
                held = await store.run(lambda tx: tx.all("held_host_leases", now=time.time()))
                done = summary.pages + summary.errors + summary.redirects
                return done, leases.takes, held, seconds
            finally:
                await store.close()

        finished, takes, held, seconds = asyncio.run(crawl())
    assert finished == len(expected) - 1  # the seed host's /sitemap.xml, a 404, not counted
    assert held == []  # every host handed back
    fetches = len(site.hits)  # pages, robots.txt and the flaky page's retry
    if sticky:
        # Each host: robots.txt, then its pages under one hold, taken again when its queue
        # ran dry for a moment (early on, before its links are found) or after
        # STICKY_SECONDS (a crawl under load): far fewer takes than fetches either way.
        assert takes * 5 <= fetches, (takes, fetches, seconds)
    else:
        assert takes == fetches
