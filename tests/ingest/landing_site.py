"""A loopback web server with the shapes ingest meets: landing pages, galleys, walls, loops.

It runs in a thread of its own, so that ingest runs in the test process and `thresher`
subprocesses (the kill -9 test) can both use it. Every request is logged by path.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import zlib
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["LandingSite", "Page", "landing", "pdf_bytes", "png_bytes"]


def pdf_bytes(tag: str, size: int = 2000) -> bytes:
    """A small, distinct PDF-looking body (what the sniffer checks is its header)."""
    head = f"%PDF-1.5\n% {tag}\n1 0 obj << /Type /Catalog >> endobj\n".encode()
    return head + (tag.encode() * (size // max(1, len(tag)) + 1))[: max(0, size - len(head))]


def png_bytes() -> bytes:
    raw = b"\x00\xff\x00\x00"
    chunk = b"IHDR" + (1).to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00"
    return (
        b"\x89PNG\r\n\x1a\n"
        + len(chunk[4:]).to_bytes(4, "big")
        + chunk
        + zlib.crc32(chunk).to_bytes(4, "big")
        + zlib.compress(raw)
    )


def landing(*, meta: str | None = None, links: str = "", form: bool = False) -> bytes:
    """A landing page: an optional citation_pdf_url, more body, optionally a login form."""
    head = f'<meta name="citation_pdf_url" content="{meta}">' if meta is not None else ""
    login = (
        '<form action="/login" method="post"><input name="user">'
        '<input type="password" name="pw"><button>Sign in</button></form>'
        if form
        else ""
    )
    return (
        f"<!DOCTYPE html><html><head><title>Article</title>{head}</head>"
        f"<body><h1>An article</h1><p>Abstract text.</p>{links}{login}</body></html>"
    ).encode()


@dataclass
class Page:
    body: bytes = b""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    location: str | None = None  # a redirect target (relative or absolute)
    fail_first: int = 0  # answer this many requests 503 (Retry-After: 0) first
    hang: float = 0.0  # seconds to wait before answering (a server that hangs)
    reset: bool = False  # close the connection without an answer
    headers: dict[str, str] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LandingSite:
    """Pages by path (with query), the same on each of `hosts` loopback addresses
    (127.0.0.1, 127.0.0.2 …, one port); robots.txt from `robots` (None: 404)."""

    def __init__(self, hosts: int = 1) -> None:
        self.port = _free_port()
        self.ips = [f"127.0.0.{i + 1}" for i in range(hosts)]
        self.base = f"http://127.0.0.1:{self.port}"
        self.pages: dict[str, Page] = {}
        self.robots: str | None = None
        self.log: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def url(self, path: str, host: int = 0) -> str:
        return f"http://{self.ips[host]}:{self.port}{path}"

    def counts(self) -> Counter[str]:
        return Counter(self.log)

    def __enter__(self) -> LandingSite:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the landing site did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self._stop(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(self._runner.setup())
        for ip in self.ips:
            loop.run_until_complete(web.TCPSite(self._runner, ip, self.port).start())
        self._ready.set()
        loop.run_forever()
        loop.close()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/robots.txt":
            if self.robots is None:
                return web.Response(status=404)
            return web.Response(text=self.robots)
        self.log.append(request.path_qs)
        page = self.pages.get(request.path_qs)
        if page is None:
            return web.Response(status=404, text="no such page")
        if page.hang:
            await asyncio.sleep(page.hang)
        if page.reset:
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        if page.fail_first > 0:
            page.fail_first -= 1
            return web.Response(status=503, text="busy", headers={"Retry-After": "0"})
        headers = {"Content-Type": page.content_type, **page.headers}
        if page.location is not None:
            headers["Location"] = page.location
        return web.Response(status=page.status, body=page.body, headers=headers)
