"""`thresher crawl --shards N` runs one shard in its own process and forks the processes of
the others first thing, before it has threads or a store (`thresher.jobs.child.prewarm`),
and so does `thresher run` for its sharded web sources: they start crawling with every
module imported. Forks no crawl takes are
stopped, a dead one is replaced by a spawned process, and a test's own process is never
forked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from subprocess import Popen

import pytest
from crawlsite import SiteServer, build_site
from fleet import crawled, descendants, scope_of, wait_for_pages
from test_crawl_cli import make_home

from cli_proc import Home
from thresher.jobs.child import prewarm, release_prewarmed


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def gone(pids: list[int], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while any(Path(f"/proc/{p}").exists() for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def probe(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def start_sharded_crawl(home: Home, site: SiteServer, seeds: list[str]) -> Popen[str]:
    return home.start(
        "crawl", *seeds, "--allow-private", "--delay", "0", "--concurrency", "4",
        "--json", "--scope", scope_of(site), "--shards", "2",
    )  # fmt: skip


def forked_shards(proc: Popen[str], count: int) -> list[int]:
    """The `count` shard processes of the command `proc`, once started; each a fork: the
    command's own command line, not `python -m thresher.jobs.child`."""
    deadline = time.monotonic() + 60
    while len(children := descendants(proc.pid)) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert [cmdline(c) for c in children] == [cmdline(proc.pid)] * count
    return children


def most_children(proc: Popen[str]) -> int:
    """The most processes `proc` had below it at once, until it ends."""
    most = 0
    while proc.poll() is None:
        most = max(most, len(descendants(proc.pid)))
        time.sleep(0.005)
    return most


def test_the_crawl_command_runs_one_shard_itself_and_the_other_in_a_fork(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = make_home(backend, tmp_path, request)
    with SiteServer(hosts=3) as site:
        seeds = build_site(site, pages_per_host=30)
        site.latency = 0.02
        expected = site.reachable(seeds)
        proc = start_sharded_crawl(home, site, seeds)
        children = forked_shards(proc, 1)
        most = most_children(proc)
        out, err = proc.communicate(timeout=120)
        hits = site.hit_counts()
    assert proc.returncode == 0, err
    summary = json.loads(out)
    assert (summary["status"], summary["shards"], summary["queued"]) == ("ok", 2, 0)
    assert most == 1  # two shards, one process beside the command's own
    assert set(hits) == expected
    assert all(n == 1 for u, n in hits.items() if not u.endswith("/flaky.html"))  # a 503 first
    uris = crawled(home.path, "*")
    assert set(uris) == expected | {f"{site.base(i)}/robots.txt" for i in range(3)}
    assert max(uris.values()) == 1
    assert gone(children)


def test_forks_no_crawl_took_stop_when_released_or_when_the_command_ends() -> None:
    script = """
        import json, sys
        from pathlib import Path
        from thresher.jobs import child
        from thresher.runtime import tune_process
        tune_process()
        child.prewarm(2)
        first = [c.pid for c in child._forked]
        child.release_prewarmed()
        # Reaped: not even a zombie is left.
        left = [p for p in first if Path(f"/proc/{p}").exists()]
        child.prewarm(2)
        at_exit = [c.pid for c in child._forked]
        print(json.dumps({"first": first, "left": left, "at_exit": at_exit}))
        sys.stdout.flush()
    """
    got = json.loads(probe(script).stdout)
    assert len(got["first"]) == 2 and got["left"] == []
    assert len(got["at_exit"]) == 2 and gone(got["at_exit"])


def test_a_fork_that_died_waiting_is_replaced_by_a_spawned_process(
    store_url: str, tmp_path: Path
) -> None:
    """The crawl goes to a spawned process at once, not to a job's retry."""
    script = """
        import asyncio, json, os, signal, sys
        from pathlib import Path
        from thresher.crawl import CrawlSettings
        from thresher.crawl import process
        from thresher.jobs import child
        from thresher.runtime import tune_process
        from thresher.store import open_store
        store_url, warc, seed, scope = sys.argv[1:5]
        open_store(store_url).close()  # made and migrated, and closed before forking
        tune_process()
        child.prewarm(1)
        pid = child._forked[0].pid
        os.kill(pid, signal.SIGKILL)
        while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            pass  # until it is dead (a zombie: not reaped yet)
        settings = CrawlSettings(seeds=(seed,), scope=scope, delay=0.0, allow_private=True)
        spec = process.ChildCrawl(
            settings=settings, source="web", run=1, store_url=store_url, warc_dir=Path(warc),
            job=None, owner=None, shard=None, shared_leases=False, lease_seconds=60.0,
            log_level=20,
        )
        summary = asyncio.run(child.run_in_child(spec))
        print(json.dumps({"pages": summary.pages, "forks_left": len(child._forked)}))
    """
    with SiteServer(hosts=2) as site:
        seeds = build_site(site, pages_per_host=10)
        expected = site.reachable(seeds[:1])
        warc = str(tmp_path / "warc" / "web")
        done = probe(script, store_url, warc, seeds[0], scope_of(site))
        hits = site.hit_counts()
    uris = crawled(tmp_path, "web")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["forks_left"] == 0
    assert set(hits) == expected  # robots.txt not counted
    assert all(n == 1 for u, n in hits.items() if not u.endswith("/flaky.html"))
    robots = {f"{site.base(i)}/robots.txt" for i in range(2)}
    assert set(uris) - robots == expected and max(uris.values()) == 1


def test_a_process_that_is_not_the_thresher_program_is_never_forked() -> None:
    before = set(descendants(os.getpid()))
    try:
        prewarm(2)
        assert set(descendants(os.getpid())) == before
    finally:
        release_prewarmed()


@pytest.mark.slow
def test_a_forked_shard_killed_mid_crawl_is_resumed_and_nothing_is_stored_twice(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`kill -9` of the forked shard's process: its job is retried (in a spawned process,
    or in the command's own once its shard is done), which resumes the shard from its last
    commit; the crawl ends complete and stored once."""
    home = make_home("sqlite", tmp_path, request)
    home.env["THRESHER_BACKOFF_BASE"] = "0.5"  # the retry comes soon
    with SiteServer(hosts=4) as site:
        seeds = build_site(site, pages_per_host=60)
        site.latency = 0.02
        expected = site.reachable(seeds)
        proc = start_sharded_crawl(home, site, seeds)
        deadline = time.monotonic() + 60
        wait_for_pages(home, proc, 40, deadline)
        victim = descendants(proc.pid)[0]
        assert cmdline(victim) == cmdline(proc.pid)  # a fork
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        hits = site.hit_counts()
    assert proc.returncode == 0, err
    summary = json.loads(out)
    assert (summary["status"], summary["queued"]) == ("ok", 0), err
    assert set(hits) == expected
    uris = crawled(home.path, "*")
    assert set(uris) == expected | {f"{site.base(i)}/robots.txt" for i in range(4)}
    assert max(uris.values()) == 1  # the killed shard's uncommitted tail was cut off


def test_thresher_run_forks_the_shards_of_its_web_sources_too(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = make_home(backend, tmp_path, request)
    with SiteServer(hosts=3) as site:
        seeds = build_site(site, pages_per_host=30)
        site.latency = 0.02
        expected = site.reachable(seeds[:1])
        options = ("shards=2", "allow_private=true", "delay=0", f"scope={scope_of(site)}")
        home.run("source", "add", "site", seeds[0], "--type", "web",
                 *(x for o in options for x in ("--option", o)))  # fmt: skip
        proc = home.start("run", "site", "--json")
        children = forked_shards(proc, 1)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["sources"][0]["outcome"] == "ok"
    uris = crawled(home.path, "site")
    assert set(uris) - {f"{site.base(i)}/robots.txt" for i in range(3)} == expected
    assert max(uris.values()) == 1
    assert gone(children)
