"""Three `thresher worker` processes on one PostgreSQL store, one of them killed with
`kill -9` in the middle: a crawl of a multi-host site (split over three shards, which
the workers share), a URL list on another site and a mail archive are each stored
exactly once, the same as with one worker, and (from the servers' own request logs) no
host is ever fetched twice within its delay."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from crawlsite import SiteServer, build_site
from fleet import add_sources, crawled, scope_of, stop_workers, too_close, watch_workers

from cli_proc import Home
from conftest import new_pg_database
from thresher.archives.demo import DemoArchive
from thresher.archives.demo_messages import generate_messages

DELAY = 0.2
ADDR = "team@example.org"
MONTHS = [f"2024-{m:02d}" for m in range(1, 13)]


def harvest(home: Home, workers: int, kill: bool) -> dict[str, Any]:
    """Queue a run of every source, let `workers` workers do it (killing the one that
    holds the crawl once work is under way), and return what was stored."""
    home.run("run", "--detach")
    procs = {
        f"w{i}": home.start("worker", "--name", f"w{i}", "-c", "4", "--grace", "5")
        for i in range(workers)
    }
    crawlers: set[str] = set()  # workers seen holding a shard of the crawl

    def victim() -> int | None:
        owners = home.query(
            "SELECT lease_owner FROM jobs WHERE kind = 'web.shard' AND state = 'leased'"
        )
        crawlers.update(str(o["lease_owner"]).split(":")[0] for o in owners)
        if not kill or not owners:
            return None
        # Once pages, documents and messages are all coming in, kill -9 a worker that
        # holds a shard of the crawl (its pid is in its row of the workers table).
        progress = home.query(
            "SELECT (SELECT count(*) FROM documents) AS docs,"
            " (SELECT count(*) FROM messages) AS msgs,"
            " (SELECT coalesce(max(pages), 0) FROM crawl_runs) AS pages"
        )[0]
        if progress["docs"] and progress["msgs"] and progress["pages"] >= 10:
            owner = str(owners[0]["lease_owner"])
            [row] = home.query(f"SELECT pid FROM workers WHERE owner = '{owner}'")
            return int(row["pid"])
        return None

    killed, _ = watch_workers(home, procs, 240, victim)
    assert not kill or killed is not None, "the crawl finished before a worker could be killed"
    return {
        "outcomes": sorted(r["outcome"] for r in home.query("SELECT outcome FROM source_runs")),
        "pages": crawled(home.path),
        "docs": {r["url"]: r["sha256"] for r in home.query("SELECT url, sha256 FROM documents")},
        "messages": Counter(r["message_id"] for r in home.query("SELECT message_id FROM messages")),
        "workers": home.query("SELECT owner, jobs_done FROM workers"),
        "crawlers": crawlers,
        "shards": home.query("SELECT shard, idle FROM crawl_shards ORDER BY shard"),
    }


@pytest.mark.slow
def test_three_workers_and_a_kill_9_store_everything_once_and_stay_polite(
    pg_admin_url: str, tmp_path: Path
) -> None:
    with (
        SiteServer(hosts=3) as crawl,
        SiteServer(hosts=2) as docs,
        DemoArchive() as archive,
    ):
        seeds = build_site(crawl, pages_per_host=25)
        build_site(docs, pages_per_host=15, seed=11)
        expected_pages = crawl.reachable(seeds)
        archive.add_list(ADDR, MONTHS[0], generate_messages(ADDR, MONTHS, 30, seed=5))
        url = archive.url("pipermail", ADDR)

        single = Home(tmp_path / "single", new_pg_database(pg_admin_url))
        add_sources(single, crawl, seeds, docs, DELAY, url, shards=3)
        one = harvest(single, workers=1, kill=False)

        crawl.hits.clear()
        docs.hits.clear()
        archive.requests.clear()
        fleet = Home(tmp_path / "fleet", new_pg_database(pg_admin_url), THRESHER_LEASE_SECONDS="3")
        add_sources(fleet, crawl, seeds, docs, DELAY, url, shards=3)
        three = harvest(fleet, workers=3, kill=True)

        hits: dict[str, list[float]] = defaultdict(list)
        for server in (crawl, docs):
            for hit in server.hits:
                hits[hit.url.split("/")[2]].append(hit.at)
        for req in archive.requests:
            hits[req.headers.get("Host", "archive")].append(
                time.monotonic() - time.time() + req.time
            )

    assert one["outcomes"] == three["outcomes"] == ["ok", "ok", "ok"]
    # Each page, document and message stored once, and the same set as one worker's.
    assert set(three["pages"]) >= expected_pages
    assert set(three["pages"]) == set(one["pages"])
    assert max(three["pages"].values()) == 1
    assert three["docs"] == one["docs"] and len(three["docs"]) == len(docs.pages)
    assert three["messages"] == one["messages"]
    assert max(three["messages"].values()) == 1 and len(three["messages"]) == 12 * 30
    # The work was shared: at least two workers did jobs (the killed one's count may
    # not have reached its last heartbeat).
    assert sum(1 for w in three["workers"] if w["jobs_done"]) >= 2
    # The crawl itself was shared: its shards ran in more than one worker.
    assert len(three["crawlers"]) >= 2, three["crawlers"]
    assert three["shards"] == [{"shard": i, "idle": 1} for i in range(3)]
    assert too_close(hits, DELAY) == {}


@pytest.mark.slow
def test_workers_spread_a_new_crawls_shards(pg_admin_url: str, tmp_path: Path) -> None:
    """Three idle workers, a crawl in three shards: each worker takes one."""
    home = Home(tmp_path / "home", new_pg_database(pg_admin_url))
    with SiteServer(hosts=3) as site:
        seeds = build_site(site, pages_per_host=40)
        # Long enough that no shard ends before every worker has had its turn to claim
        # (a worker whose shard is done may take another), and that a shard run is seen
        # held for over 1.5 s (about three here).
        site.latency = 0.05
        home.run("source", "list")  # creates the store before the workers race to
        procs = [home.start("worker", "--name", f"w{i}", "-c", "4") for i in range(3)]
        try:
            deadline = time.monotonic() + 60
            while len(home.query("SELECT owner FROM workers")) < 3:
                assert time.monotonic() < deadline, "the workers did not start"
                time.sleep(0.05)
            args = ("crawl", *seeds, "--allow-private", "--delay", "0", "--shards", "3")
            home.run(*args, "--scope", scope_of(site), "--detach")
            # When each worker was seen holding each shard: a worker that claims a shard
            # and hands it back (it holds its share) holds it for a moment only.
            seen: dict[tuple[int, str], list[float]] = {}
            while home.query("SELECT outcome FROM source_runs") != [{"outcome": "ok"}]:
                assert time.monotonic() < deadline, "the crawl did not finish"
                rows = home.query(
                    "SELECT id, lease_owner FROM jobs WHERE kind = 'web.shard' AND state = 'leased'"
                )
                for r in rows:
                    key = (int(r["id"]), str(r["lease_owner"]).split(":")[0])
                    seen.setdefault(key, []).append(time.monotonic())
                time.sleep(0.05)
        finally:
            stop_workers(procs)
        assert set(crawled(home.path, "*")) >= site.reachable(seeds)
    # (A worker whose shard is done, or any once the shards are SPREAD_SECONDS old, as
    # on a loaded machine, may run a second.)
    ran = {owner for (_, owner), at in seen.items() if at[-1] - at[0] >= 1.5}
    assert ran == {"w0", "w1", "w2"}, seen
