"""`thresher crawl --shards N` forks its shard processes first thing, before it has threads
or a store (`thresher.crawl.process.prewarm`): they start crawling with every module
imported. Forks no crawl takes are stopped, a dead one is replaced by a spawned process,
and a test's own process is never forked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from crawlsite import SiteServer, build_site
from fleet import crawled, descendants, scope_of, wait_for_pages
from test_crawl_cli import make_home

from thresher.crawl.process import prewarm, release_prewarmed


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


def test_the_crawl_command_runs_its_shards_in_processes_forked_from_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = make_home(backend, tmp_path, request)
    with SiteServer(hosts=3) as site:
        seeds = build_site(site, pages_per_host=30)
        site.latency = 0.02
        expected = site.reachable(seeds)
        proc = home.start(
            "crawl", *seeds, "--allow-private", "--delay", "0", "--concurrency", "4",
            "--json", "--scope", scope_of(site), "--shards", "2",
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(children := descendants(proc.pid)) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # Forked: the command's own command line, not `python -m thresher.crawl.process`.
        assert [cmdline(c) for c in children] == [cmdline(proc.pid)] * 2
        out, err = proc.communicate(timeout=120)
        hits = site.hit_counts()
    assert proc.returncode == 0, err
    summary = json.loads(out)
    assert (summary["status"], summary["shards"], summary["queued"]) == ("ok", 2, 0)
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
        from thresher.crawl import process
        from thresher.runtime import tune_process
        tune_process()
        process.prewarm(2)
        first = [c.pid for c in process._forked]
        process.release_prewarmed()
        # Reaped: not even a zombie is left.
        left = [p for p in first if Path(f"/proc/{p}").exists()]
        process.prewarm(2)
        at_exit = [c.pid for c in process._forked]
        print(json.dumps({"first": first, "left": left, "at_exit": at_exit}))
        sys.stdout.flush()
    """
    got = json.loads(probe(script).stdout)
    assert len(got["first"]) == 2 and got["left"] == []
    assert len(got["at_exit"]) == 2 and gone(got["at_exit"])


def test_a_fork_that_died_waiting_is_replaced_by_a_spawned_process(tmp_path: Path) -> None:
    """`thresher run` takes the forks a sharded crawl left; here they were killed."""
    script = """
        import json, os, signal, sys
        from thresher.cli.main import main
        from thresher.crawl import process
        from thresher.runtime import tune_process
        home, url, scope = sys.argv[1:4]
        tune_process()
        process.prewarm(2)
        for child in process._forked:
            os.kill(child.pid, signal.SIGKILL)
        args = ["--home", home, "source", "add", "site", url, "--type", "web"]
        for option in ("shards=2", "allow_private=true", "delay=0", f"scope={scope}"):
            args += ["--option", option]
        assert main(args) == 0
        code = main(["--home", home, "run", "site", "--json"])
        print(json.dumps({"code": code, "forks_left": len(process._forked)}))
    """
    with SiteServer(hosts=2) as site:
        seeds = build_site(site, pages_per_host=10)
        expected = site.reachable(seeds[:1])
        done = probe(script, str(tmp_path / "home"), seeds[0], scope_of(site))
        hits = site.hit_counts()
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"code": 0, "forks_left": 0}
    assert "will be retried" not in done.stderr  # replaced at once, not by a job's retry
    assert set(hits) == expected  # robots.txt not counted
    assert all(n == 1 for u, n in hits.items() if not u.endswith("/flaky.html"))
    uris = crawled(tmp_path / "home", "site")
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
    """`kill -9` of one shard's process: its job is retried in a spawned process, which
    resumes the shard from its last commit; the crawl ends complete and stored once."""
    home = make_home("sqlite", tmp_path, request)
    home.env["THRESHER_BACKOFF_BASE"] = "0.5"  # the retry comes soon
    with SiteServer(hosts=4) as site:
        seeds = build_site(site, pages_per_host=60)
        site.latency = 0.02
        expected = site.reachable(seeds)
        proc = home.start(
            "crawl", *seeds, "--allow-private", "--delay", "0", "--concurrency", "4",
            "--json", "--scope", scope_of(site), "--shards", "2",
        )  # fmt: skip
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
