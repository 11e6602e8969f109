"""A crawl shares its hosts' turns with every other fetch of the fleet: a `web` crawl
and a `urls` list over the same hosts, done by two `thresher worker` processes on one
PostgreSQL store, never fetch a host twice within its delay (from the server's log)."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest
from crawlsite import SiteServer, build_site
from fleet import scope_of, stop_workers, too_close

from cli_proc import Home
from conftest import new_pg_database

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
