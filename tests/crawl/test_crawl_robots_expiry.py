"""A crawl longer than robots.txt's lifetime (a day): the rules are fetched again when
they expire, and the new ones apply to the URLs already queued."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from crawlsite import SiteServer, build_site
from fleet import scope_of

from thresher.clock import SystemClock
from thresher.crawl import CrawlEngine, CrawlSettings
from thresher.store import open_store
from thresher.store.aio import AsyncStore

DAY = 24 * 3600.0


class JumpingClock(SystemClock):
    """The system's clock, moved forward by `jump` seconds when a test says so."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.time() + self.offset


def test_rules_that_expire_mid_crawl_are_fetched_again_and_obeyed(
    store_url: str, tmp_path: Path
) -> None:
    clock = JumpingClock()
    with SiteServer(hosts=2) as site:
        seeds = build_site(site, pages_per_host=40)
        site.latency = 0.02
        result: dict[str, Any] = {}

        async def crawl() -> None:
            store = await AsyncStore(store_url).open()
            try:
                settings = CrawlSettings(
                    seeds=tuple(seeds),
                    scope=scope_of(site),
                    delay=0.0,
                    allow_private=True,
                    # One at a time: a host's queued URLs are still queued when its new
                    # rules come (the other host's fetch took the slot meanwhile).
                    concurrency=1,
                )
                engine = CrawlEngine(
                    settings,
                    source="web",
                    run=1,
                    store=store,
                    warc_dir=tmp_path / "warc",
                    clock=clock,
                )
                run = asyncio.ensure_future(engine.run())
                while len(site.hits) < 15 and not run.done():
                    await asyncio.sleep(0.01)
                # A day later, the sites forbid their pages.
                for ip in site.ips:
                    site.robots[ip] = "User-agent: *\nDisallow: /p/\n"
                clock.offset += DAY + 60
                result["summary"] = await run
            finally:
                await store.close()

        # In a thread: a crawl that spins without yielding would block a test's own loop.
        thread = threading.Thread(target=lambda: asyncio.run(crawl()), daemon=True)
        thread.start()
        thread.join(60)
        assert not thread.is_alive(), "the crawl hung once robots.txt expired"
        hits = [h.url for h in site.hits]

    for i in range(2):
        base = site.base(i)
        mine = [u for u in hits if u.startswith(base + "/")]
        robots = [n for n, u in enumerate(mine) if u == f"{base}/robots.txt"]
        assert len(robots) == 2  # at the start, and once the first rules expired
        after = mine[robots[1] + 1 :]
        assert not [u for u in after if "/p/" in u], f"a forbidden page was fetched: {after}"
    store = open_store(store_url)
    try:
        with store.transaction(write=False) as tx:
            states = {r["url"]: r["state"] for r in tx.all("crawl_url_states", source="web")}
    finally:
        store.close()
    assert states and "queued" not in states.values()
    assert "robots" in states.values()
    assert result["summary"].robots_excluded == list(states.values()).count("robots")
