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
