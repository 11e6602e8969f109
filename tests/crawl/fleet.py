"""What the tests of many workers share: their sources over the loopback sites, the
pages their WARC files hold, the check of each host's delay in a server's log, watching
workers until their runs end, killing one on the way, and a crawl command's processes
and progress."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from crawlsite import SiteServer
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from cli_proc import Home


def scope_of(site: SiteServer) -> str:
    return rf"^http://127\.0\.0\.\d+:{site.port}/"


def crawled(home: Path, source: str = "web") -> Counter[str]:
    """How many times each URL is in the WARC files of `source` (a glob: "*" for all)."""
    uris: Counter[str] = Counter()
    for path in sorted(home.glob(f"warc/{source}/*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit"):
                    uris[rec.rec_headers.get_header("WARC-Target-URI")] += 1
    return uris


def add_sources(
    home: Home,
    crawl: SiteServer,
    seeds: list[str],
    docs: SiteServer,
    delay: float,
    archive_url: str | None = None,
    shards: int = 1,
) -> None:
    """A `web` crawl of `crawl` (split over `shards`), a `urls` list of `docs`' pages
    and, if given, a mail archive: all polite with `delay`, loopback allowed."""
    polite = ["-o", "allow_private=true", "-o", f"delay={delay}"]
    home.run(
        "source", "add", "web", seeds[0], "--type", "web",
        "-o", "seeds=" + " ".join(seeds[1:]), "-o", f"scope={scope_of(crawl)}", *polite,
        "-o", f"shards={shards}",
    )  # fmt: skip
    listing = home.path / "docs.txt"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text("\n".join(sorted(docs.pages)) + "\n")
    home.run("source", "add", "docs", str(listing), "--type", "urls", *polite)
    if archive_url is not None:
        home.run("source", "add", "list", archive_url, *polite)


def too_close(times_by_host: dict[str, list[float]], delay: float) -> dict[str, float]:
    """Hosts fetched twice within `delay` (5 % of slack for the clocks), with their
    shortest gap."""
    out = {}
    for host, times in times_by_host.items():
        gaps = [b - a for a, b in itertools.pairwise(sorted(times))]
        if gaps and min(gaps) < delay * 0.95:
            out[host] = round(min(gaps), 3)
    return out


def stop_workers(procs: Iterable[subprocess.Popen[str]]) -> None:
    """SIGTERM every worker still running, wait for each (30 s), kill what hangs."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def watch_workers(
    home: Home,
    procs: Mapping[str, subprocess.Popen[str]],
    seconds: float,
    victim: Callable[[], int | None],
) -> tuple[str | None, float]:
    """Poll until every source run has ended, asserting that no worker exits but the one
    killed: `victim()` is called every 0.1 s (it may watch too), and the first pid it
    names is killed with SIGKILL. The workers are stopped at the end, whatever happens.
    Returns the killed worker's name and when it was killed (monotonic), or (None, 0.0)."""
    deadline = time.monotonic() + seconds
    killed: str | None = None
    killed_at = 0.0
    try:
        while True:
            assert time.monotonic() < deadline, "the workers did not finish"
            for key, proc in procs.items():
                assert key == killed or proc.poll() is None, proc.communicate()
            time.sleep(0.1)
            pid = victim()
            if pid is not None and killed is None:
                [killed] = [k for k, p in procs.items() if p.pid == pid]
                killed_at = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                procs[killed].communicate()
            runs = home.query("SELECT outcome FROM source_runs")
            if runs and all(r["outcome"] != "running" for r in runs):
                return killed, killed_at
    finally:
        stop_workers(procs.values())


def descendants(pid: int) -> list[int]:
    """The processes `pid` started, and theirs (Linux's /proc children lists)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            out += [kid, *descendants(kid)]
    return out


def wait_for_pages(home: Home, proc: subprocess.Popen[str], pages: int, deadline: float) -> None:
    """Until the crawl `proc` runs has committed `pages` pages (it must not end first)."""
    committed = 0
    while committed < pages:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
        try:
            rows = home.query("SELECT pages FROM crawl_runs")
        except Exception:  # the database or its tables do not exist yet
            continue
        committed = int(rows[0]["pages"]) if rows else 0
