"""Ctrl-C during `thresher ingest run` (a real process against a real loopback server):
no fetch starts after the signal, what was in flight is committed, the command exits 0
saying how to resume, and the rerun fetches no URL twice."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cli_proc import Home

PDF = b"%PDF-1.5\n1 0 obj << /Type /Catalog >> endobj\n" + b"x" * 2000
URLS = 30
ANSWER_SECONDS = 0.3  # each PDF: a crawl of them takes seconds, time to interrupt it


def test_ctrl_c_starts_no_fetch_and_the_rerun_fetches_nothing_twice(tmp_path: Path) -> None:
    arrivals: list[tuple[float, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            arrivals.append((time.monotonic(), self.path))
            if self.path == "/robots.txt":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            time.sleep(ANSWER_SECONDS)
            self.send_response(200)
            self.send_header("Content-Type", "application/pdf")
            self.send_header("Content-Length", str(len(PDF)))
            self.end_headers()
            self.wfile.write(PDF)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        home = Home(tmp_path / "home")
        dump = tmp_path / "dump.jsonl"
        dump.write_text(
            "".join(
                json.dumps(
                    {"ingest_type": "pdf", "base_url": f"{base}/{i}.pdf", "link_source_id": str(i)}
                )
                + "\n"
                for i in range(URLS)
            )
        )
        home.run("ingest", "load", str(dump), "--source", "s")
        args = ("ingest", "run", "--allow-private", "--delay", "0", "-c", "4", "--no-progress")
        proc = home.start(*args)
        deadline = time.monotonic() + 120
        while sum(p.endswith(".pdf") for _, p in arrivals) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - signalled
        assert proc.returncode == 0, err
        assert took < 5, f"exited {took:.1f} s after SIGINT"
        assert out.strip().splitlines()[-1] == (
            "interrupted: what was fetched is committed; resume with the same command"
        ), out
        # None started after the signal (a moment allowed for one sent as it came).
        late = [p for t, p in arrivals if t > signalled + 0.2]
        assert late == [], late
        before = Counter(p for _, p in arrivals if p.endswith(".pdf"))
        assert 3 <= len(before) < URLS

        again = home.run(*args[:-1], "--json")
        assert json.loads(again.stdout)["statuses"] == {"success": URLS}, again.stdout
        fetched = Counter(p for _, p in arrivals if p.endswith(".pdf"))
        assert fetched == Counter({f"/{i}.pdf": 1 for i in range(URLS)})
    finally:
        httpd.shutdown()
        httpd.server_close()
