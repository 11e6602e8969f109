"""A store filled by real harvests, as a user fills it, for `thresher serve` to show,
and `thresher serve` started over it as a subprocess (the tests in tests/serve).

`fill(home)` runs, as subprocesses: `thresher demo` (the built-in archive, five kinds);
`thresher run` of a list served by a `DemoArchive` in this process whose mail is hostile
(script tags, event handlers, `javascript:` links, an HTML-only message, an HTML
attachment); `thresher crawl` of `HostileSite`, a small loopback site whose pages carry
the same; and `thresher ingest load` + `ingest run` of a few of its URLs (a PDF, a
landing page, a login wall, a 404, an image).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from cli_proc import Home
from thresher.archives.demo import DemoArchive

__all__ = [
    "XSS_LIST",
    "Filled",
    "HostileSite",
    "Served",
    "fill",
    "free_port",
    "start_serve",
    "stop_serve",
]

XSS_LIST = "xss@lists.example.org"
# Strings that would run if harvested content were rendered as markup.
XSS_MARKERS = ("<script>alert(", "onerror=alert(", "javascript:alert(")

_SCRIPT = "<script>alert('xss-subject')</script>"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _message(n: int, month: str, subject: str, body: str, extra: str = "", **kw: str) -> bytes:
    day = 3 + n
    headers = [
        f"From: {kw.get('sender', 'Eve <eve@example.com>')}",
        f"To: {XSS_LIST}",
        f"Subject: {subject}",
        f"Date: Tue, {day:02d} {_MON[month[5:]]} {month[:4]} 10:{n:02d}:00 +0000",
        f"Message-ID: <xss.{n}.{month}@example.org>",
    ]
    if "reply_to" in kw:
        headers += [f"In-Reply-To: <{kw['reply_to']}>", f"References: <{kw['reply_to']}>"]
    head = "\n".join(headers) + ("\n" + extra if extra else "")
    if "Content-Type" not in extra:
        head += "\nContent-Type: text/plain; charset=utf-8"
    return (head + "\n\n" + body).encode()


_MON = {
    f"{i + 1:02d}": name
    for i, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    )
}


def hostile_mail(month: str) -> list[bytes]:
    """Mail whose every field tries to run in a page."""
    html_only = "MIME-Version: 1.0\nContent-Type: text/html; charset=utf-8"
    multipart = 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="XX"'
    attached = (
        "--XX\nContent-Type: text/plain; charset=utf-8\n\nSee the attached page.\n"
        '--XX\nContent-Type: text/html; name="evil.html"\n'
        'Content-Disposition: attachment; filename="evil.html"\n\n'
        "<html><body><script>alert('attachment')</script></body></html>\n--XX--\n"
    )
    return [
        _message(
            1,
            month,
            _SCRIPT,
            "Hello <script>alert('body')</script>\n"
            '<img src=x onerror=alert(1)>\n<a href="javascript:alert(2)">click me</a>\n',
            sender='"<img src=x onerror=alert(3)>" <eve@example.com>',
        ),
        _message(
            2,
            month,
            "Re: " + _SCRIPT,
            "javascript:alert(4) in a reply\n<svg onload=alert(5)>\n",
            reply_to=f"xss.1.{month}@example.org",
        ),
        _message(
            3,
            month,
            "HTML only <b onmouseover=alert(6)>bold</b>",
            "<html><body><p>An HTML message</p><script>alert('html')</script>"
            '<a href="javascript:alert(7)">link</a></body></html>\n',
            extra=html_only,
        ),
        _message(4, month, "An attachment", attached, extra=multipart),
    ]


class HostileSite:
    """Loopback pages for a crawl and files for an ingest, carrying script."""

    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        pdf = b"%PDF-1.5\n% a test file\n1 0 obj << /Type /Catalog >> endobj\n" + b"x" * 500
        evil = (
            "<!DOCTYPE html><html><head><title><script>alert('title')</script></title></head>"
            "<body><script>alert('crawl')</script><img src=x onerror=alert(8)>"
            '<a href="javascript:alert(9)">js</a> <a href="/a.html">a</a></body></html>'
        )
        self.pages: dict[str, tuple[int, str, bytes]] = {
            "/": (200, "text/html", self._links("/a.html", "/evil.html", "/missing",
                                                 "/q?x=%3Cscript%3Ealert(10)%3C/script%3E")),
            "/a.html": (200, "text/html", self._links("/b.html", "/")),
            "/b.html": (200, "text/html", self._links("/a.html")),
            "/evil.html": (200, "text/html", evil.encode()),
            "/q?x=%3Cscript%3Ealert(10)%3C/script%3E": (200, "text/html", self._links("/")),
            "/files/1.pdf": (200, "application/pdf", pdf),
            "/files/2.pdf": (200, "application/octet-stream", pdf + b"2"),
            "/article/1": (200, "text/html", (
                b'<html><head><meta name="citation_pdf_url" content="/files/2.pdf"></head>'
                b"<body>An article</body></html>")),
            "/article/wall": (200, "text/html", (
                b"<html><body><form action=/login method=post><input name=u>"
                b"<input type=password name=p></form></body></html>")),
            "/image.png": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
        }  # fmt: skip

    @staticmethod
    def _links(*paths: str) -> bytes:
        items = "".join(f'<a href="{p}">{p}</a> ' for p in paths)
        return f"<!DOCTYPE html><html><body>{items}</body></html>".encode()

    async def _handle(self, request: web.Request) -> web.Response:
        found = self.pages.get(request.path_qs)
        if found is None:
            return web.Response(status=404, text="no such page")
        status, ctype, body = found
        return web.Response(status=status, body=body, headers={"Content-Type": ctype})

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def __enter__(self) -> HostileSite:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@dataclass
class Filled:
    home: Home
    crawl: dict[str, Any]  # `thresher crawl --json`'s summary
    ingest: dict[str, Any]  # `thresher ingest run --json`'s summary
    xss_month: str


def fill(home: Home) -> Filled:
    """Harvest into `home` (see the module docstring)."""
    home.run("demo", "--port", str(free_port()))
    archive = DemoArchive(0)
    xss_month = "2024-03"
    archive.add_list(XSS_LIST, xss_month, {xss_month: hostile_mail(xss_month)})
    with archive, HostileSite() as site:
        url = archive.url("modmbox", XSS_LIST)
        home.run("source", "add", "xss", url, "--type", "modmbox",
                 "-o", "allow_private=true", "-o", "delay=0")  # fmt: skip
        home.run("run", "xss", "--no-progress")
        crawl = json.loads(
            home.run("crawl", site.base + "/", "--allow-private", "--delay", "0", "--json").stdout
        )
        requests = home.path / "requests.jsonl"
        lines = [
            ("pdf", "/files/1.pdf"), ("pdf", "/article/1"), ("pdf", "/article/wall"),
            ("pdf", "/gone"), ("pdf", "/image.png"), ("html", "/evil.html"),
        ]  # fmt: skip
        requests.write_text(
            "".join(
                json.dumps(
                    {
                        "ingest_type": kind,
                        "base_url": site.base + path,
                        "link_source": "test",
                        "link_source_id": str(i),
                    }
                )
                + "\n"
                for i, (kind, path) in enumerate(lines)
            )
        )
        home.run("ingest", "load", str(requests))
        ingest = json.loads(
            home.run("ingest", "run", "--allow-private", "--delay", "0", "--json").stdout
        )
    return Filled(home, crawl, ingest, xss_month)


@dataclass
class Served:
    url: str  # http://127.0.0.1:PORT/ (with the trailing slash)
    proc: subprocess.Popen[str]
    filled: Filled

    def status(self) -> dict[str, Any]:
        return dict(json.loads(self.filled.home.run("status", "--json").stdout))


def start_serve(home: Home, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`thresher serve --port 0 ARGS` started; its URL, read from its first line."""
    proc = home.start("serve", "--port", "0", *args)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"serving (http://\S+/)", line)
    if not found:
        proc.kill()
        raise AssertionError(f"thresher serve did not start: {line!r} {proc.communicate()}")
    return proc, found[1]


def stop_serve(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
