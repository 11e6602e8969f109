"""A mailing-list archive on 127.0.0.1 that speaks like the real kinds Thresher harvests
over HTTP: for ``thresher demo``, the archive integration tests and the mail benchmark.

Why one server imitating six archives: a harvester is only as good as its handling of
what real archives do, and the public ones must not be hammered by tests. Each list of
the model (`ArchiveList`) is published six ways, each imitating its original:

- Mailman 2 pipermail (``/pipermail/<name>/``): an index page of month rows and static
  ``YYYY-Month.txt`` and ``.txt.gz`` files written by appending, with ``From `` body
  lines not escaped; like Apache serving files, with ETag, Last-Modified and Range.
- Apache mod_mbox (``/mod_mbox/<name>/``): an index with a message count per month and
  static ``YYYYMM.mbox`` files (mboxo escaping), validators and Range.
- Apache Pony Mail (``/list.html?<addr>``, ``/api/stats.lua``, ``/api/mbox.lua``): a JSON
  count per month and an mboxrd per month made on request, so no validators, no Range,
  and an empty 200 for a month without mail.
- Mailman 3 HyperKitty (``/hyperkitty/...``): the REST list description, a DRF-paged
  ``emails`` listing, newest archived first, whose ``count`` is the list's total and
  whose items carry the date each message is filed under, and gzipped mboxo exports per
  date range, made on request like Pony Mail's (HyperKitty writes them with Python's
  ``BytesGenerator(mangle_from_=True)``).
- A plain mbox file (``/mbox/<name>.mbox`` and ``.mbox.gz``): static, every month,
  mboxo as Python's ``mailbox`` and most mail programs write one.
- MHonArc (``/mhonarc/<name>/``), as lists.debian.org publishes it: a list page linking
  one MHonArc archive per month (``YYYY/MM/maillist.html``, ``threads.html``, one
  ``msgNNNNN.html`` per message numbered in archive order), pages written as MHonArc
  2.6 writes them (`demo_mhonarc`), static, with validators.

The parts, one module each: the model, and why it may change while served
(`demo_model`); the files, rendered once per version and served as a web server serves
them (`demo_files`); the pages of the static kinds (`demo_pages`) and of Pony Mail and
HyperKitty (`demo_apps`); the generated mail (`demo_messages`), the broken mail
(`demo_hostile`), the files archives keep mail in (`demo_mbox`) and their index pages
(`demo_indexes`); the server's thread (`demo_thread`). This module is the server
itself: its routes, faults and request log.

Why faults and a request log: the integration tests assert how the harvester behaves on
503/500, connection resets, truncated bodies and hung requests, and what it asked for
(conditional GETs, Range requests, bytes downloaded). The server runs aiohttp on its own
event loop in a background thread, so synchronous tests, async tests on another loop and
subprocesses can all use it. It only ever binds 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from .demo_apps import AppPages
from .demo_files import ArchiveFiles, Reply, not_found
from .demo_hostile import HOSTILE_NAMES, Hostile, hostile_messages
from .demo_indexes import modmbox_index_html, pipermail_index_html
from .demo_mbox import render_mbox, render_pipermail
from .demo_messages import generate_messages
from .demo_model import ArchiveList, Clock
from .demo_pages import FilePages
from .demo_thread import ThreadedServer

__all__ = [
    "HOSTILE_NAMES",
    "ArchiveList",
    "DemoArchive",
    "FaultKind",
    "Hostile",
    "LoggedRequest",
    "generate_messages",
    "hostile_messages",
    "modmbox_index_html",
    "pipermail_index_html",
    "render_mbox",
    "render_pipermail",
]

FaultKind = Literal["503", "500", "reset", "truncate", "hang"]
_FAULT_KINDS = ("503", "500", "reset", "truncate", "hang")


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the server saw it. `sent`: the body bytes handed to the connection
    (part of the body for a ``reset`` or ``truncate`` fault, none for HEAD and 304);
    `time`: when the request arrived (time.time()); the entry is added just before the
    response is written, so a client that has its answer finds it in the log."""

    method: str
    path: str
    query: str
    headers: CIMultiDictProxy[str]
    status: int
    sent: int
    time: float

    @property
    def target(self) -> str:
        return f"{self.path}?{self.query}" if self.query else self.path


@dataclass
class _Fault:
    substr: str
    kind: FaultKind
    times: int
    retry_after: int


_Route = Callable[[web.Request, "re.Match[str]"], Reply]


class DemoArchive(ThreadedServer):
    """The archive server (see the module docstring). Use as a context manager, or call
    `start` and `stop`. `lists` maps addresses to `ArchiveList`; add with `add_list`,
    before or after starting. Settings that may change at any time: `ranges` (False:
    ignore Range headers like servers without support), `robots` (the robots.txt text;
    None: 404), `hang_seconds` (how long a ``hang`` fault stalls)."""

    thread_name = "thresher-demo-archive"

    def __init__(
        self,
        port: int = 0,
        *,
        ranges: bool = True,
        clock: Clock = time.time,
        hang_seconds: float = 30.0,
        robots: str | None = None,
    ) -> None:
        super().__init__()
        self.port = port
        self.ranges = ranges
        self.hang_seconds = hang_seconds
        self.robots = robots
        self.lists: dict[str, ArchiveList] = {}
        self.requests: list[LoggedRequest] = []
        self._clock = clock
        self._lock = threading.Lock()
        self._faults: list[_Fault] = []
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        files = self._new_files()
        pages = FilePages(self, files)
        apps = AppPages(self, files, clock)
        self._routes: list[tuple[re.Pattern[str], _Route]] = [
            (re.compile(r"/"), self._home),
            (re.compile(r"/robots\.txt"), self._robots),
            (re.compile(r"/pipermail/([^/]+)/(?:index\.html)?"), pages.pipermail_index),
            (re.compile(r"/pipermail/([^/]+)/(\d{4})-([A-Za-z]+)\.txt(\.gz)?"), pages.pipermail),
            (re.compile(r"/mod_mbox/([^/]+)/(?:index\.html)?"), pages.modmbox_index),
            (re.compile(r"/mod_mbox/([^/]+)/(\d{4})(\d\d)\.mbox"), pages.modmbox),
            (re.compile(r"/list\.html"), apps.pony_page),
            (re.compile(r"/api/stats\.lua"), apps.pony_stats),
            (re.compile(r"/api/mbox\.lua"), apps.pony_mbox),
            (re.compile(r"/hyperkitty/list/([^/]+)/"), apps.hk_page),
            (re.compile(r"/hyperkitty/api/list/([^/]+)/"), apps.hk_list),
            (re.compile(r"/hyperkitty/api/list/([^/]+)/emails/"), apps.hk_emails),
            (re.compile(r"/hyperkitty/list/([^/]+)/export/([^/]+)\.mbox\.gz"), apps.hk_export),
            (re.compile(r"/mbox/([^/]+)\.mbox(\.gz)?"), pages.plain_mbox),
            (re.compile(r"/mhonarc/([^/]+)/(?:index\.html)?"), pages.mhonarc_list),
            (
                re.compile(r"/mhonarc/([^/]+)/(\d{4})/(\d\d)/(maillist|threads)\.html"),
                pages.mhonarc_index,
            ),
            (re.compile(r"/mhonarc/([^/]+)/(\d{4})/(\d\d)/msg(\d{5})\.html"), pages.mhonarc_page),
        ]

    def _new_files(self) -> ArchiveFiles:
        """The lists' files, rendered once per version; a subclass may render them its own
        way (tests/archives/test_incomplete.py's withholds a message from the exports)."""
        return ArchiveFiles()

    # --- the model --------------------------------------------------------------------

    def add_list(
        self,
        address: str,
        created: str | None = None,
        months: Mapping[str, Sequence[bytes]] | None = None,
    ) -> ArchiveList:
        archive = ArchiveList(address, created, months, clock=self._clock)
        self.lists[address] = archive
        return archive

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, kind: str, address: str) -> str:
        """The URL a user would give Thresher for the list, per kind (the names of
        `thresher.cli.demo.DEMO_KINDS`)."""
        name = address.split("@", 1)[0]
        paths = {
            "pipermail": f"/pipermail/{name}/",
            "modmbox": f"/mod_mbox/{name}/",
            "ponymail": f"/list.html?{address}",
            "hyperkitty": f"/hyperkitty/list/{address}/",
            "mbox": f"/mbox/{name}.mbox",
            "mhonarc": f"/mhonarc/{name}/",
        }
        return self.base + paths[kind]

    # --- log and faults ---------------------------------------------------------------

    def count(self, substr: str | None = None, status: int | None = None) -> int:
        """Requests whose path and query contain `substr` (and had `status`)."""
        return sum(
            1
            for r in list(self.requests)
            if (substr is None or substr in r.target) and (status is None or r.status == status)
        )

    def bytes_sent(self, substr: str | None = None) -> int:
        return sum(r.sent for r in list(self.requests) if substr is None or substr in r.target)

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()

    def fault(self, substr: str, kind: FaultKind, times: int = 1, retry_after: int = 1) -> None:
        """Make the next `times` requests whose path and query contain `substr` fail:
        ``503`` (with Retry-After), ``500``, ``reset`` (headers and part of the body,
        then the connection is aborted), ``truncate`` (the full Content-Length but half
        the body, then the connection is closed), ``hang`` (answer after `hang_seconds`,
        or at once when the server stops)."""
        if kind not in _FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {_FAULT_KINDS}")
        with self._lock:
            self._faults.append(_Fault(substr, kind, times, retry_after))

    def _take_fault(self, target: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.substr in target:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    # --- lifecycle --------------------------------------------------------------------

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def stop(self) -> None:
        """Stop serving; requests in a ``hang`` fault are answered first."""
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        super().stop()

    # --- request handling ---------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.time()
        query = request.query_string
        target = f"{request.path}?{query}" if query else request.path
        fault = self._take_fault(target)
        status, sent = 500, 0
        try:
            if fault is not None and fault.kind == "hang" and self._stopping is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.hang_seconds)
            if fault is not None and fault.kind in ("503", "500"):
                reply = Reply(int(fault.kind), f"{fault.kind}: fault injected\n".encode())
                if fault.kind == "503":
                    reply.headers["Retry-After"] = str(fault.retry_after)
            else:
                reply = self._answer(request)
            status = reply.status
            empty = request.method == "HEAD" or status in (204, 304)
            if fault is not None and fault.kind in ("reset", "truncate") and not empty:
                response, sent = await self._broken(request, reply, fault.kind)
                return response
            sent = 0 if empty else len(reply.body)
            return web.Response(status=status, body=reply.body, headers=_headers(reply))
        finally:
            entry = LoggedRequest(
                request.method,
                request.path,
                query,
                CIMultiDictProxy(CIMultiDict(request.headers)),
                status,
                sent,
                started,
            )
            with self._lock:
                self.requests.append(entry)

    async def _broken(
        self, request: web.Request, reply: Reply, kind: str
    ) -> tuple[web.StreamResponse, int]:
        response = web.StreamResponse(status=reply.status, headers=_headers(reply))
        response.content_length = len(reply.body)
        response.force_close()
        await response.prepare(request)
        part = reply.body[: len(reply.body) // 2]
        if part:
            await response.write(part)
        transport = request.transport
        if transport is not None:
            if kind == "reset":
                await asyncio.sleep(0.05)  # let the client read the headers first
                sock = transport.get_extra_info("socket")
                if sock is not None:  # linger 0: close() sends a RST, not a FIN
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                transport.abort()
            else:
                transport.close()
        return response, len(part)

    def _answer(self, request: web.Request) -> Reply:
        if request.method not in ("GET", "HEAD"):
            return Reply(405, b"405: Method Not Allowed\n", headers={"Allow": "GET, HEAD"})
        for pattern, route in self._routes:
            match = pattern.fullmatch(request.path)
            if match is not None:
                return route(request, match)
        return not_found()

    # --- its own pages (the kinds' are FilePages' and AppPages') -----------------------

    def _home(self, request: web.Request, match: re.Match[str]) -> Reply:
        items = []
        for address in sorted(self.lists):
            links = " ".join(
                f'<a href="{html.escape(self.url(kind, address))}">{kind}</a>'
                for kind in ("pipermail", "modmbox", "ponymail", "hyperkitty", "mbox", "mhonarc")
            )
            items.append(f"<li>{html.escape(address)}: {links}</li>")
        page = f"<html><body><h1>Thresher demo archive</h1><ul>{''.join(items)}</ul></body></html>"
        return Reply(200, page.encode(), "text/html")

    def _robots(self, request: web.Request, match: re.Match[str]) -> Reply:
        if self.robots is None:
            return not_found()
        return Reply(200, self.robots.encode(), "text/plain")


def _headers(reply: Reply) -> dict[str, str]:
    if reply.status == 304:
        return reply.headers
    return {**reply.headers, "Content-Type": reply.content_type}
