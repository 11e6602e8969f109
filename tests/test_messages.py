"""Every error names its cause and what to do (issue 21): real commands in subprocesses
against a real loopback server, their exit codes and the lines a user reads."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cli_proc import Home
from thresher.plan import SourceReport

PDF = b"%PDF-1.5\n1 0 obj << /Type /Catalog >> endobj\n" + b"x" * 2000


class Server:
    """A loopback HTTP server: `pages` path -> (status, body); every request counted."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, bytes]] = {}
        self.hits: Counter[str] = Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits[self.path] += 1
                status, body = server.pages.get(self.path, (404, b"not here"))
                self.send_response(status)
                kind = "application/pdf" if body.startswith(b"%PDF") else "text/plain"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    s.thread.start()
    try:
        yield s
    finally:
        s.httpd.shutdown()
        s.httpd.server_close()


def test_a_missing_local_mbox_is_no_such_file(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    missing = tmp_path / "nope.mbox"
    home.run("source", "add", "m", str(missing), "--type", "mbox")
    proc = home.run("run", "m", "--no-progress", check=False)
    assert proc.returncode == 4, proc.stderr
    assert f"m: failed (done 1, failed 2); run1:m/all: {missing}: no such file" in proc.stdout
    assert "404" not in proc.stdout + proc.stderr


def test_a_urls_run_reports_what_failed(tmp_path: Path, server: Server) -> None:
    """Not "ok (done 5)" when one URL is gone: the run says which and why."""
    home = Home(tmp_path / "home")
    server.pages["/a"] = (200, b"here")
    server.pages["/list.txt"] = (200, f"{server.url('/a')}\n{server.url('/gone')}\n".encode())
    home.run(
        "source", "add", "u", server.url("/list.txt"), "--type", "urls",
        "-o", "allow_private=true", "-o", "delay=0",
    )  # fmt: skip
    out = home.run("run", "u", "--no-progress").stdout
    assert f"u: ok (done 4); 1 URL failed: {server.url('/gone')}: HTTP 404 Not Found" in out
    report = json.loads(home.run("run", "u", "--json").stdout)
    [source] = report["sources"]
    assert source["problems"] == f"1 URL failed: {server.url('/gone')}: HTTP 404 Not Found"


def test_a_run_that_could_fetch_nothing_says_to_allow_private(
    tmp_path: Path, server: Server
) -> None:
    home = Home(tmp_path / "home")
    server.pages["/a"] = (200, b"here")
    listing = tmp_path / "list.txt"
    listing.write_text(server.url("/a") + "\n")
    home.run("source", "add", "u", str(listing), "--type", "urls")
    proc = home.run("run", "u", "--no-progress", check=False)
    assert proc.returncode == 4, proc.stderr
    assert (
        "u: failed (done 3); run1:u: refused: loopback address 127.0.0.1; pass"
        " --allow-private (a source: -o allow_private=true); nothing was fetched (1 URL refused)"
    ) in proc.stdout
    status = json.loads(home.run("status", "--json").stdout)
    assert status["sources"][0]["last_error"].startswith("run1:u: refused: loopback address")
    assert not server.hits


def test_ingest_run_with_allow_private_fetches_what_was_refused(
    tmp_path: Path, server: Server
) -> None:
    """Without --allow-private every loopback URL is blocked-address (exit 4, and a line
    saying what to pass); with it, a later run fetches them without --retry."""
    home = Home(tmp_path / "home")
    server.pages["/paper.pdf"] = (200, PDF)
    dump = tmp_path / "dump.jsonl"
    line = {"ingest_type": "pdf", "base_url": server.url("/paper.pdf"), "link_source_id": "1"}
    dump.write_text(json.dumps(line) + "\n")
    assert "new 1" in home.run("ingest", "load", str(dump), "--source", "s").stdout
    first = home.run("ingest", "run", "--delay", "0", "--no-progress", check=False)
    assert first.returncode == 4, first.stderr
    assert "ingest: ok: 1 URLs" in first.stdout and "blocked-address 1" in first.stdout
    assert "1 URLs refused: private or loopback addresses; pass --allow-private" in first.stderr
    assert not server.hits
    again = home.run("ingest", "run", "--allow-private", "--delay", "0", "--json")
    summary = json.loads(again.stdout)
    assert summary["statuses"] == {"success": 1}, summary
    assert server.hits == Counter({"/robots.txt": 1, "/paper.pdf": 1})


def test_offline_says_so_early_and_gives_up_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No name resolves (a machine without a network): a WARNING says "offline?" after a
    few failed attempts, and each URL's job gives up after its attempts: hosts are not
    parked for minutes for a name that does not resolve. (No DNS query leaves the
    machine: the resolver is replaced.)"""
    import asyncio
    import socket
    import time

    from thresher.clock import SystemClock
    from thresher.config import Config
    from thresher.fetch import dns
    from thresher.plan import ExecutionPlan
    from thresher.sources import add_source
    from thresher.store.aio import AsyncStore

    asked: Counter[str] = Counter()

    async def offline(host: str) -> list[str]:
        asked[host] += 1
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(dns, "system_lookup", offline)
    monkeypatch.setattr(dns, "STREAK", dns.DNSStreak())
    monkeypatch.setattr("thresher.jobs.runner.STREAK", dns.STREAK)
    listing = tmp_path / "list.txt"
    urls = [f"https://{host}.example/{i}" for host in ("a", "b") for i in range(4)]
    listing.write_text("\n".join(urls) + "\n")
    config = Config(home=tmp_path, backoff_base=0.05, backoff_max=0.2, max_attempts=3)

    async def run() -> SourceReport:
        store = await AsyncStore(config.store_url).open()
        try:
            options = {"delay": "0"}
            await store.run(lambda tx: add_source(tx, "u", str(listing), "urls", options, 0))
            report = await ExecutionPlan(config, store, SystemClock()).run_once()
            return report.sources[0]
        finally:
            await store.close()

    started = time.monotonic()
    with caplog.at_level("INFO", logger="thresher"):
        report = asyncio.run(asyncio.wait_for(run(), 120))
    assert time.monotonic() - started < 60, "a host was parked, or a retry waited long"
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    offline_said = [w for w in warnings if w.startswith("offline? ")]
    assert offline_said and "DNS failures in a row" in offline_said[0]
    # Each URL's job failed after its attempts (the next run tries again): the run ends.
    assert report.outcome == "failed" and report.counts["failed"] >= len(urls)
    assert report.error is not None and "cannot resolve" in report.error
    assert asked


def test_a_name_that_does_not_resolve_does_not_park_its_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parking (minutes, doubling) spares a struggling server; a name that does not
    resolve is our network's or the name's fault: each URL fails at once, and the next
    URL of the host is tried, not held back (HostBusy) for minutes."""
    import asyncio
    import socket

    from thresher.clock import FakeClock
    from thresher.fetch import DNSError, FetchSettings, dns
    from thresher.fetch.polite import PoliteFetcher
    from thresher.frontier import Politeness

    async def offline(host: str) -> list[str]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(dns, "system_lookup", offline)

    async def body() -> None:
        fetcher = PoliteFetcher(
            FetchSettings(), Politeness(delay=0, ip_delay=0), FakeClock(), robots=False
        )
        async with fetcher:
            for i in range(8):  # parking starts after failures of 3 different URLs
                with pytest.raises(DNSError):
                    await fetcher.get(f"https://gone.example/{i}")

    asyncio.run(body())
