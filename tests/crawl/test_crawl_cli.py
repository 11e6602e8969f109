"""`thresher crawl` as users run it: a real subprocess, killed with SIGKILL in the middle
and run again, against loopback hosts. Runs over both backends."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from crawlsite import Page, SiteServer, _html, build_site
from fleet import crawled, descendants, scope_of, stop_workers, wait_for_pages

from cli_proc import Home
from conftest import new_pg_database
from thresher.cli.crawl import _line
from thresher.config import Config
from thresher.crawl import CrawlSettings
from thresher.sources.web import crawl_settings


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
        assert len(children) >= (2 if shards == "3" else 0)  # a process per shard but one
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
        # The run is open and its process gone: `status` says so, on the same machine at
        # once (the pid is gone), without waiting for a heartbeat to grow old.
        left = json.loads(home.run("status", "--json").stdout)
        assert [s["last_run"]["outcome"] for s in left["sources"]] == ["interrupted"]
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


@pytest.mark.parametrize("shards", ["1", "2"])
def test_ctrl_c_stops_a_crawl_in_seconds_and_the_rerun_fetches_nothing_twice(
    tmp_path: Path, shards: str
) -> None:
    """SIGINT (the default grace period): no fetch starts after it, those in flight
    finish and are committed, the command exits 0 within seconds saying how to go on;
    the same command then fetches only what the first did not (the server's log). In
    shards, each in a process of its own, the same."""
    home = Home(tmp_path / "home")
    with SiteServer(hosts=2) as site:
        seeds = build_site(site, pages_per_host=150)
        site.latency = 0.02  # about 2 s in all, at 4 fetches at once
        expected = site.reachable(seeds)
        args = ("crawl", *seeds, "--allow-private", "--delay", "0", "-c", "4")
        args += ("--scope", scope_of(site), "--no-progress", "--shards", shards)
        proc = home.start(*args)
        wait_for_pages(home, proc, 30, time.monotonic() + 120)
        os.kill(proc.pid, signal.SIGINT)
        signalled = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - signalled
        hits_before = len(site.hits)
        time.sleep(0.5)
        assert len(site.hits) == hits_before, "nothing is fetched once the command ended"
        first = site.hit_counts()
        left = json.loads(home.run("status", "--json").stdout)
        rerun = home.run(*args)
        hits = site.hit_counts()
    assert proc.returncode == 0, err
    assert took < 5, f"exited {took:.1f} s after SIGINT"
    assert "Traceback" not in err
    last = out.strip().splitlines()[-1]
    assert last.startswith("interrupted:") and "resume with the same command" in last, out
    assert ": interrupted:" in out
    # Left open, with no process working on it: not `running`.
    assert [s["last_run"]["outcome"] for s in left["sources"]] == ["interrupted"]
    assert left["sources"][0]["last_run"]["finished"] is None and not left["workers"]
    assert len(first) < len(expected), "the crawl was stopped half-way"
    assert "ok:" in rerun.stdout
    assert set(hits) == expected
    # No URL fetched twice, in either command (but the page that answers 503 first).
    assert {u: n for u, n in hits.items() if n > 1 and not u.endswith("/flaky.html")} == {}
    status = json.loads(home.run("status", "--json").stdout)
    assert [s["last_run"]["outcome"] for s in status["sources"]] == ["ok"]


def test_the_delay_setting_is_a_crawls_delay(tmp_path: Path) -> None:
    """THRESHER_DELAY applies to `thresher crawl` as to every fetch (it used to keep a
    fixed second); --delay still wins. Gaps between one host's fetches are at least the
    delay: a lower bound, safe on a busy machine."""
    home = Home(tmp_path / "home", THRESHER_DELAY="1.5")
    with SiteServer(hosts=1) as site:
        b = site.base(0)
        site.pages[f"{b}/"] = Page(body=_html("seed", [f"{b}/a"]), links=(f"{b}/a",))
        site.pages[f"{b}/a"] = Page(body=_html("a", [f"{b}/b"]), links=(f"{b}/b",))
        site.pages[f"{b}/b"] = Page(body=_html("b", []))
        home.run("crawl", f"{b}/", "--allow-private", "--no-sitemaps", "--no-progress")
        times = [h.at for h in site.hits]
    assert len(times) == 4  # robots.txt and the three pages
    assert min(b - a for a, b in itertools.pairwise(times)) >= 1.5 * 0.95


def test_crawl_settings_fill_in_from_the_config() -> None:
    config = Config(delay=0.25, http_timeout=7.0, stall_timeout=3.0, read_timeout=4.0)
    settings = crawl_settings("http://h/", {"delay": None, "timeout": None}, config)
    assert (settings.delay, settings.timeout) == (0.25, 7.0)
    assert (settings.stall_timeout, settings.read_timeout) == (3.0, 4.0)
    assert settings.user_agent == config.user_agent
    assert crawl_settings("http://h/", {"delay": 2.0}, config).delay == 2.0
    # The built-in defaults are the config's: one place says what they are.
    assert CrawlSettings(seeds=("http://h/",)).delay == Config().delay
    assert CrawlSettings(seeds=("http://h/",)).timeout == Config().http_timeout


def test_a_crawl_whose_every_address_is_refused_fails_saying_what_to_pass(
    tmp_path: Path,
) -> None:
    """Not "ok: 0 pages", exit 0: failed (exit 4), the reason and the flag to pass; the
    same command with --allow-private then crawls."""
    home = Home(tmp_path / "home")
    with SiteServer(hosts=1) as site:
        seeds = build_site(site, pages_per_host=3)
        proc = home.run("crawl", *seeds, "--delay", "0", "--no-progress", check=False)
        assert not site.hits
        allowed = json.loads(
            home.run("crawl", *seeds, "--delay", "0", "--allow-private", "--json").stdout
        )
    assert proc.returncode == 4, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert ": failed: 0 pages" in first and "(address refused 1)" in first
    assert first.endswith(
        ": refused: loopback address 127.0.0.1; pass --allow-private"
        " (a source: -o allow_private=true); nothing was fetched (1 URL refused)"
    )
    assert allowed["status"] == "ok" and allowed["pages"] > 0


@pytest.mark.parametrize("shards", [1, 2])
def test_a_crawl_whose_every_fetch_fails_fails_naming_the_first(
    tmp_path: Path, shards: int
) -> None:
    """A seed answered 403 (a site that turns crawlers away) is not "ok: 0 pages", exit
    0, which a script or a schedule takes for success: the crawl failed (exit 4), naming
    the answer and the URL. Once the site answers, the same command crawls."""
    home = Home(tmp_path / "home")
    args = ("--delay", "0", "--allow-private", "--no-progress", "--shards", str(shards))
    with SiteServer(hosts=1) as site:
        seeds = build_site(site, pages_per_host=3)
        site.pages[seeds[0]].status = 403
        proc = home.run("crawl", *seeds, *args, check=False)
        site.pages[seeds[0]].status = 200
        again = json.loads(home.run("crawl", *seeds, *args, "--json").stdout)
    assert proc.returncode == 4, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert ": failed: 0 pages" in first and "(HTTP 403 1)" in first
    assert first.endswith(f": HTTP 403 for {seeds[0]}; nothing was fetched (1 URL failed)")
    assert again["status"] == "ok" and again["pages"] > 0
