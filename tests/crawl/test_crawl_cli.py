"""`thresher crawl` as users run it: a real subprocess, killed with SIGKILL in the middle
and run again, against loopback hosts. Runs over both backends."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from crawlsite import SiteServer, build_site
from fleet import crawled, descendants, scope_of, stop_workers, wait_for_pages

from cli_proc import Home
from conftest import new_pg_database
from thresher.cli.crawl import _line


def make_home(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Home:
    db = None
    if backend == "postgres":
        db = new_pg_database(request.getfixturevalue("pg_admin_url"))
    return Home(tmp_path / "home", db)


def test_crawl_command_json_summary(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = make_home(backend, tmp_path, request)
    with SiteServer(hosts=2) as site:
        seeds = build_site(site, pages_per_host=5)
        proc = home.run(
            "crawl", *seeds, "--allow-private", "--delay", "0", "--json", "--scope", scope_of(site)
        )
        summary = json.loads(proc.stdout)
        expected = site.reachable(seeds)
    assert summary["status"] == "ok"
    assert summary["pages"] == len(
        [
            u
            for u in expected
            if not u.endswith(("/missing", "/redirect", "/loop-a", "/loop-b", "/sitemap.xml"))
        ]
    )
    assert summary["errors"] == 1  # /missing
    assert summary["redirects"] == 3
    assert summary["queued"] == 0
    assert summary["warc_files"] and summary["source"].startswith("crawl-127.0.0.1-")
    # Every field is documented in docs/crawling.md, and every documented one is there.
    doc = (Path(__file__).parents[2] / "docs" / "crawling.md").read_text()
    table = doc.split("## The summary (`--json`)", 1)[1].split("\n## ", 1)[0]
    documented = set(
        re.findall(
            r"`([a-z_]+)`",
            "".join(line.split("|")[1] for line in table.splitlines() if line.startswith("| `")),
        )
    )
    assert documented == set(summary)
    assert set(crawled(home.path, "*")) == expected | {f"{site.base(i)}/robots.txt" for i in (0, 1)}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shards", "stop", "again"),
    [
        ("1", signal.SIGKILL, "1"),
        ("3", signal.SIGKILL, "3"),
        ("3", signal.SIGINT, "3"),
        ("1", signal.SIGKILL, "3"),
    ],
    ids=["kill", "kill-shards", "ctrl-c-shards", "kill-then-shards"],
)
def test_kill_9_then_the_same_command_finishes_the_crawl_exactly_once(
    backend: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    shards: str,
    stop: int,
    again: str,
) -> None:
    """Killed, or stopped with Ctrl-C (SIGINT: the shards commit what they did and
    stop), then run again: every page stored once, none fetched again once stored. A
    run begun in one job ends in one job, even if run again with --shards."""
    home = make_home(backend, tmp_path, request)
    home.env["THRESHER_GRACE_SECONDS"] = "0"  # no time to finish: the shards are stopped
    with SiteServer(hosts=3) as site:
        seeds = build_site(site, pages_per_host=120)
        site.latency = 0.02  # about 2.5 s in all: the kill lands mid-crawl
        expected = site.reachable(seeds)
        args = (
            "crawl",
            *seeds,
            "--allow-private",
            "--delay",
            "0",
            "--concurrency",
            "6",
            "--json",
            "--scope",
            scope_of(site),
            "--shards",
            shards,
        )
        proc = home.start(*args)
        deadline = time.monotonic() + 120
        wait_for_pages(home, proc, 60, deadline)
        children = descendants(proc.pid)
        assert len(children) >= (3 if shards == "3" else 0)  # a process per shard
        os.kill(proc.pid, stop)
        out, err = proc.communicate(timeout=60)
        if stop == signal.SIGINT:
            assert proc.returncode == 0, err
            assert json.loads(out)["status"] == "interrupted"
        # The shards' processes die with the command: none goes on writing WARC files.
        while (alive := [c for c in children if Path(f"/proc/{c}").exists()]) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert not alive
        done_before = {
            r["url"] for r in home.query("SELECT url FROM crawl_urls WHERE warc_file IS NOT NULL")
        }
        assert 60 <= len(done_before) < len(expected)

        rerun = home.run(*args[:-1], again)
        summary = json.loads(rerun.stdout)
        hits = site.hit_counts()

    assert summary["status"] == "ok"
    assert summary["queued"] == 0
    assert "will be retried" not in rerun.stderr  # e.g. shards' commits deadlocked
    runs = home.query("SELECT id, outcome FROM source_runs")
    assert [r["outcome"] for r in runs] == ["ok"]  # the same run, resumed
    assert set(hits) == expected
    # A URL whose response was committed is not fetched again …
    assert all(hits[u] == 1 for u in done_before if not u.endswith("/flaky.html"))
    # … and the WARC files hold every fetched URL exactly once.
    uris = crawled(home.path, "*")
    assert set(uris) == expected | {f"{site.base(i)}/robots.txt" for i in range(3)}
    assert max(uris.values()) == 1
    states = home.query("SELECT state, count(*) AS n FROM crawl_urls GROUP BY state")
    assert "queued" not in {r["state"] for r in states}
    # (The seed host's /sitemap.xml, a 404, is recorded but not counted.)
    assert summary["pages"] + summary["errors"] + summary["redirects"] == len(expected) - 1
    assert summary["shards"] == int(shards)
    if shards == "3":
        assert not home.query("SELECT * FROM crawl_inbox")
        assert len({name.split("-")[4] for name in summary["warc_files"]}) == 3


def test_crawl_detach_queues_the_crawl_for_workers(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = make_home(backend, tmp_path, request)
    with SiteServer(hosts=2) as site:
        seeds = build_site(site, pages_per_host=5)
        args = ("crawl", *seeds, "--allow-private", "--delay", "0", "--scope", scope_of(site))
        queued = json.loads(home.run(*args, "--detach", "--json").stdout)
        assert queued["status"] == "queued" and queued["run"] == 1
        assert not site.hits, "queued only: nothing fetched yet"
        worker = home.start("worker", "--name", "w1", "-c", "2")
        try:
            deadline = time.monotonic() + 60
            while home.query("SELECT outcome FROM source_runs") != [{"outcome": "ok"}]:
                assert worker.poll() is None, worker.communicate()
                assert time.monotonic() < deadline, "the worker did not crawl"
                time.sleep(0.1)
        finally:
            stop_workers([worker])
        expected = site.reachable(seeds)
    assert set(crawled(home.path, "*")) == expected | {f"{site.base(i)}/robots.txt" for i in (0, 1)}
    assert max(crawled(home.path, "*").values()) == 1


def test_the_progress_rate_counts_this_commands_pages_only() -> None:
    """A resumed crawl's line: 120 pages in all, 20 of them in the last 10 s."""
    row = {"pages": 120, "bytes": 0, "queued": 5, "hosts": 2, "errors": 0}
    line = _line(row, time.time() - 10, before=100)
    assert line.startswith("pages 120 (2/s)"), line
