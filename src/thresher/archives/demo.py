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

Why the model is mutable while served: the hard part of harvesting archives is what
changes between runs — late mail for an old month, a month that shrinks (a moderator
deleted a post), the same message listed twice — and tests change the model between
runs to check the harvester notices, through validators that move with every change.

Why faults and a request log: the integration tests assert how the harvester behaves on
503/500, connection resets, truncated bodies and hung requests, and what it asked for
(conditional GETs, Range requests, bytes downloaded). The server runs aiohttp on its own
event loop in a background thread, so synchronous tests, async tests on another loop and
subprocesses can all use it. It only ever binds 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import hashlib
import html
import json
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import formatdate, parseaddr, parsedate_to_datetime
from typing import Literal
from urllib.parse import parse_qs

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from .demo_messages import (
    HOSTILE_NAMES,
    MONTH_NAMES,
    Hostile,
    generate_messages,
    hostile_messages,
    modmbox_index_html,
    pipermail_index_html,
    render_mbox,
    render_pipermail,
)
from .demo_mhonarc import mhonarc_index_html, mhonarc_list_html, mhonarc_message_html
from .demo_thread import ThreadedServer
from .message import parse_message
from .months import month_bounds, month_of, next_month, valid_month

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
Clock = Callable[[], float]
_FAULT_KINDS = ("503", "500", "reset", "truncate", "hang")
_ALL = "*"  # cache key of the whole list (plain mbox, multi-month exports)


class ArchiveList:
    """One mailing list: its months ('YYYY-MM', kept in date order) and their messages in
    archive order. Change it only through the methods, which are thread-safe and bump
    the month's version and "last changed" time, so ETags and Last-Modified move."""

    def __init__(
        self,
        address: str,
        created: str | None = None,
        months: Mapping[str, Sequence[bytes]] | None = None,
        *,
        clock: Clock = time.time,
    ) -> None:
        name, at, domain = address.partition("@")
        if not (name and at and domain):
            raise ValueError(f"not a list address: {address!r}")
        self.address, self.name, self.domain = address, name, domain
        self._clock = clock
        self._lock = threading.RLock()
        self.months: dict[str, list[bytes]] = {}
        self.versions: dict[str, int] = {}
        self.changed: dict[str, float] = {}
        self.generation = 0  # bumped by every change of any month
        self._added: list[tuple[str, bytes]] = []  # (month, message) of each later add
        now = clock()
        for month in sorted(months or {}):
            self._check(month)
            self.months[month] = list((months or {})[month])
            self.versions[month], self.changed[month] = 1, now
        self.created = created or (min(self.months) if self.months else month_of(now))
        self._check(self.created)

    @staticmethod
    def _check(month: str) -> None:
        if not valid_month(month):
            raise ValueError(f"not a month (YYYY-MM): {month!r}")

    def _touch(self, month: str) -> None:
        self.versions[month] = self.versions.get(month, 0) + 1
        self.changed[month] = self._clock()
        self.generation += 1

    def add(self, month: str, raw: bytes) -> None:
        """Append a message to `month` (late mail for an old month is just this)."""
        self._check(month)
        with self._lock:
            if month not in self.months:
                months = sorted([*self.months.items(), (month, [])])
                self.months.clear()
                self.months.update(months)
            self.months[month].append(raw)
            self._added.append((month, raw))
            self._touch(month)

    def remove(self, month: str, index: int) -> bytes:
        """Delete the message at `index` of `month` (a month that shrinks)."""
        with self._lock:
            raw = self.months[month].pop(index)
            self._touch(month)
            return raw

    def replace(self, month: str, index: int, raw: bytes) -> None:
        """Put `raw` in place of the message at `index` of `month`: an archive that
        rewrites a message it holds (re-wrapped, or a trailing blank line added)."""
        with self._lock:
            self.months[month][index] = raw
            self._touch(month)

    def add_duplicate(self, month: str, index: int) -> None:
        """List an identical copy of the message at `index` of `month` again."""
        with self._lock:
            self.months[month].append(self.months[month][index])
            self._added.append((month, self.months[month][index]))
            self._touch(month)

    def snapshot(self, month: str) -> tuple[int, tuple[bytes, ...], float] | None:
        """(version, messages, last changed) of one month, or None when there is none."""
        with self._lock:
            if month not in self.months:
                return None
            return self.versions[month], tuple(self.months[month]), self.changed[month]

    def all_messages(self) -> tuple[int, tuple[bytes, ...], float]:
        """(generation, every message in archive order, last change of any month)."""
        with self._lock:
            messages = tuple(raw for month in self.months.values() for raw in month)
            return self.generation, messages, max(self.changed.values(), default=0.0)

    def archived(self) -> list[tuple[str, bytes]]:
        """Every message with its month, in the order the archive received them (what
        HyperKitty's listing sorts by): the list as built, month by month, then each
        later `add` in turn, late mail for an old month included."""
        with self._lock:
            left = Counter((m, raw) for m, messages in self.months.items() for raw in messages)
            later = [item for item in self._added if _take(left, item)]
            first = [
                (m, raw) for m, msgs in self.months.items() for raw in msgs if _take(left, (m, raw))
            ]
            return first + later

    def counts(self) -> dict[str, int]:
        """Messages listed per month; a copy listed twice counts twice."""
        with self._lock:
            return {month: len(messages) for month, messages in self.months.items()}


def _take(left: Counter[tuple[str, bytes]], item: tuple[str, bytes]) -> bool:
    if left[item] <= 0:
        return False
    left[item] -= 1
    return True


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


@dataclass
class _Reply:
    """A response before it is sent: faults may cut `body` short."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain"
    headers: dict[str, str] = field(default_factory=dict)


_Route = Callable[[web.Request, "re.Match[str]"], _Reply]
_MONTH_NUMBER = {name: i + 1 for i, name in enumerate(MONTH_NAMES)}
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:24] + '"'


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)  # mtime=0: the same bytes each time


def _not_found(what: str = "Not Found") -> _Reply:
    return _Reply(404, f"404: {what}\n".encode())


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
        self._cache: dict[tuple[str, str, str], tuple[int, bytes, str]] = {}
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self._routes: list[tuple[re.Pattern[str], _Route]] = [
            (re.compile(r"/"), self._home),
            (re.compile(r"/robots\.txt"), self._robots),
            (re.compile(r"/pipermail/([^/]+)/(?:index\.html)?"), self._pipermail_index),
            (re.compile(r"/pipermail/([^/]+)/(\d{4})-([A-Za-z]+)\.txt(\.gz)?"), self._pipermail),
            (re.compile(r"/mod_mbox/([^/]+)/(?:index\.html)?"), self._modmbox_index),
            (re.compile(r"/mod_mbox/([^/]+)/(\d{4})(\d\d)\.mbox"), self._modmbox),
            (re.compile(r"/list\.html"), self._pony_page),
            (re.compile(r"/api/stats\.lua"), self._pony_stats),
            (re.compile(r"/api/mbox\.lua"), self._pony_mbox),
            (re.compile(r"/hyperkitty/list/([^/]+)/"), self._hk_page),
            (re.compile(r"/hyperkitty/api/list/([^/]+)/"), self._hk_list),
            (re.compile(r"/hyperkitty/api/list/([^/]+)/emails/"), self._hk_emails),
            (re.compile(r"/hyperkitty/list/([^/]+)/export/([^/]+)\.mbox\.gz"), self._hk_export),
            (re.compile(r"/mbox/([^/]+)\.mbox(\.gz)?"), self._plain_mbox),
            (re.compile(r"/mhonarc/([^/]+)/(?:index\.html)?"), self._mhonarc_list),
            (
                re.compile(r"/mhonarc/([^/]+)/(\d{4})/(\d\d)/(maillist|threads)\.html"),
                self._mhonarc_index,
            ),
            (re.compile(r"/mhonarc/([^/]+)/(\d{4})/(\d\d)/msg(\d{5})\.html"), self._mhonarc_page),
        ]

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

    def _by_name(self, name: str) -> ArchiveList | None:
        return next((a for a in list(self.lists.values()) if a.name == name), None)

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
                reply = _Reply(int(fault.kind), f"{fault.kind}: fault injected\n".encode())
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
        self, request: web.Request, reply: _Reply, kind: str
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

    def _answer(self, request: web.Request) -> _Reply:
        if request.method not in ("GET", "HEAD"):
            return _Reply(405, b"405: Method Not Allowed\n", headers={"Allow": "GET, HEAD"})
        for pattern, route in self._routes:
            match = pattern.fullmatch(request.path)
            if match is not None:
                return route(request, match)
        return _not_found()

    def _cached(
        self, key: tuple[str, str, str], version: int, make: Callable[[], bytes]
    ) -> tuple[bytes, str]:
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1], hit[2]
        body = make()
        etag = _etag(body)
        with self._lock:
            self._cache[key] = (version, body, etag)
        return body, etag

    def _static(
        self, request: web.Request, body: bytes, etag: str, changed: float, content_type: str
    ) -> _Reply:
        """A file as nginx or Apache serve one: validators, 304s and byte ranges."""
        last_modified = formatdate(int(changed), usegmt=True)
        headers = {"ETag": etag, "Last-Modified": last_modified, "Accept-Ranges": "bytes"}
        if not self.ranges:
            del headers["Accept-Ranges"]
        inm = request.headers.get("If-None-Match")
        if inm is not None:
            tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
            if "*" in tags or etag in tags:
                return _Reply(304, headers=headers)
        else:
            since = _http_date(request.headers.get("If-Modified-Since"))
            if since is not None and int(changed) <= since:
                return _Reply(304, headers=headers)
        reply = _Reply(200, body, content_type, headers)
        spec = request.headers.get("Range")
        if not self.ranges or spec is None or request.method != "GET":
            return reply
        if_range = request.headers.get("If-Range")
        if if_range is not None and if_range.strip() not in (etag, last_modified):
            return reply
        match = _RANGE.fullmatch(spec.strip())
        if match is None or match.groups() == ("", ""):
            return reply  # malformed or multiple ranges: the whole file, as RFC 9110 allows
        first, last = match.groups()
        size = len(body)
        if first:
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
            if last and int(last) < start:
                return reply
        else:
            start, end = max(0, size - int(last)), size - 1
        if start >= size or end < start:
            return _Reply(416, headers={**headers, "Content-Range": f"bytes */{size}"})
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        return _Reply(206, body[start : end + 1], content_type, headers)

    # --- pages --------------------------------------------------------------------------

    def _home(self, request: web.Request, match: re.Match[str]) -> _Reply:
        items = []
        for address in sorted(self.lists):
            links = " ".join(
                f'<a href="{html.escape(self.url(kind, address))}">{kind}</a>'
                for kind in ("pipermail", "modmbox", "ponymail", "hyperkitty", "mbox", "mhonarc")
            )
            items.append(f"<li>{html.escape(address)}: {links}</li>")
        page = f"<html><body><h1>Thresher demo archive</h1><ul>{''.join(items)}</ul></body></html>"
        return _Reply(200, page.encode(), "text/html")

    def _robots(self, request: web.Request, match: re.Match[str]) -> _Reply:
        if self.robots is None:
            return _not_found()
        return _Reply(200, self.robots.encode(), "text/plain")

    def _pipermail_index(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self._by_name(match.group(1))
        if archive is None:
            return _not_found("no such list")
        sizes = {}
        for month in archive.counts():
            gz = self._month_file(archive, month, "pipermail.gz")
            sizes[month] = len(gz[0]) if gz else 0
        page = pipermail_index_html(archive.name, sizes).encode("ascii", "xmlcharrefreplace")
        # Mailman 2 rewrites index.html as mail arrives: a static file, with validators.
        changed = max(archive.changed.values(), default=0.0)
        return self._static(request, page, _etag(page), changed, "text/html")

    def _month_file(
        self, archive: ArchiveList, month: str, kind: str
    ) -> tuple[bytes, str, float] | None:
        """(body, ETag, last changed) of one month's file, rendered once per version.
        `kind`: pipermail, modmbox or mboxrd, with ".gz" for the gzipped file."""
        snapshot = archive.snapshot(month)
        if snapshot is None:
            return None
        version, messages, changed = snapshot
        body, etag = self._render(archive.address, month, version, messages, kind)
        return body, etag, changed

    def _render(
        self, address: str, key: str, version: int, messages: Sequence[bytes], kind: str
    ) -> tuple[bytes, str]:
        plain = kind.removesuffix(".gz")
        if plain != kind:
            return self._cached(
                (address, kind, key),
                version,
                lambda: _gzip(self._render(address, key, version, messages, plain)[0]),
            )
        makers: dict[str, Callable[[], bytes]] = {
            "pipermail": lambda: render_pipermail(messages),
            "modmbox": lambda: render_mbox(messages, rd=False),
            "mboxrd": lambda: render_mbox(messages, rd=True),
            "mboxo": lambda: render_mbox(messages, rd=False),
        }
        return self._cached((address, kind, key), version, makers[kind])

    def _pipermail(self, request: web.Request, match: re.Match[str]) -> _Reply:
        name, year, month_name, gz = match.groups()
        archive = self._by_name(name)
        number = _MONTH_NUMBER.get(month_name)
        if archive is None or number is None:
            return _not_found()
        month = f"{year}-{number:02d}"
        found = self._month_file(archive, month, "pipermail.gz" if gz else "pipermail")
        if found is None:
            return _not_found()
        kind = "application/gzip" if gz else "text/plain; charset=utf-8"
        return self._static(request, *found, kind)

    def _mhonarc_list(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self._by_name(match.group(1))
        if archive is None:
            return _not_found("no such list")
        page = mhonarc_list_html(archive.name, sorted(archive.counts()))
        changed = max(archive.changed.values(), default=0.0)
        return self._static(request, page, _etag(page), changed, "text/html")

    def _mhonarc_index(self, request: web.Request, match: re.Match[str]) -> _Reply:
        name, year, mon, which = match.groups()
        archive = self._by_name(name)
        snapshot = archive.snapshot(f"{year}-{mon}") if archive else None
        if archive is None or snapshot is None:
            return _not_found()
        version, messages, changed = snapshot
        page, etag = self._cached(
            (archive.address, f"mhonarc.{which}", f"{year}-{mon}"),
            version,
            lambda: mhonarc_index_html(messages, threads=which == "threads"),
        )
        # MHonArc rewrites its index files as mail is added: static, with validators.
        return self._static(request, page, etag, changed, "text/html")

    def _mhonarc_page(self, request: web.Request, match: re.Match[str]) -> _Reply:
        name, year, mon, number = match.groups()
        archive = self._by_name(name)
        snapshot = archive.snapshot(f"{year}-{mon}") if archive else None
        if snapshot is None or int(number) >= len(snapshot[1]):
            return _not_found()
        # MHonArc dates a message without a Date when it archives it; the demo, on the
        # first of its month, so the page is the same every time.
        archived = datetime(int(year), int(mon), 1, tzinfo=UTC).strftime("%a %b %d %H:%M:%S %Y")
        page = mhonarc_message_html(snapshot[1][int(number)], int(number), archived)
        return self._static(request, page, _etag(page), snapshot[2], "text/html")

    def _modmbox_index(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self._by_name(match.group(1))
        if archive is None:
            return _not_found("no such list")
        page = modmbox_index_html(archive.address, archive.counts())
        return _Reply(200, page.encode(), "text/html; charset=utf-8")

    def _modmbox(self, request: web.Request, match: re.Match[str]) -> _Reply:
        name, year, mon = match.groups()
        archive = self._by_name(name)
        found = self._month_file(archive, f"{year}-{mon}", "modmbox") if archive else None
        if found is None:
            return _not_found()
        return self._static(request, *found, "application/mbox")

    def _plain_mbox(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self._by_name(match.group(1))
        if archive is None:
            return _not_found()
        generation, messages, changed = archive.all_messages()
        kind = "modmbox.gz" if match.group(2) else "modmbox"
        body, etag = self._render(archive.address, _ALL, generation, messages, kind)
        content_type = "application/gzip" if match.group(2) else "application/mbox"
        return self._static(request, body, etag, changed, content_type)

    # --- Pony Mail: made on request, so no validators and no Range ------------------------

    def _pony_page(self, request: web.Request, match: re.Match[str]) -> _Reply:
        address = request.query_string.split(":", 1)[0].split("&", 1)[0]
        archive = self.lists.get(address)
        if archive is None:
            return _not_found("no such list")
        title = html.escape(archive.address)
        page = (
            f"<!DOCTYPE html>\n<html><head><title>Pony Mail: {title}</title>"
            '<script src="js/config.js"></script><script src="js/ponymail.js"></script>'
            f"</head><body onload=\"listView({{list: '{title}'}})\">"
            f'<div id="listtitle">{title}</div><div id="emails"></div></body></html>\n'
        )
        return _Reply(200, page.encode(), "text/html; charset=utf-8")

    def _pony_list(self, request: web.Request) -> ArchiveList | None:
        params = parse_qs(request.query_string)
        name = (params.get("list") or [""])[0]
        domain = (params.get("domain") or [""])[0]
        return self.lists.get(name if "@" in name else f"{name}@{domain}")

    def _pony_stats(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self._pony_list(request)
        if archive is None:
            return _not_found("no such list")
        active = {m: n for m, n in archive.counts().items() if n > 0}
        first = min(active, default=archive.created)
        last = max(active, default=archive.created)
        doc = {
            "list": f"{archive.name}@{archive.domain}",
            "domain": archive.domain,
            "name": archive.name,
            "firstYear": int(first[:4]),
            "firstMonth": int(first[5:]),
            "lastYear": int(last[:4]),
            "lastMonth": int(last[5:]),
            "active_months": active,
            "hits": sum(active.values()),
            "emails": [],
        }
        return _Reply(200, json.dumps(doc).encode(), "application/json")

    def _pony_mbox(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self._pony_list(request)
        if archive is None:
            return _not_found("no such list")
        year, _, mon = (parse_qs(request.query_string).get("date") or [""])[0].partition("-")
        month = f"{year}-{mon.zfill(2)}"
        if not valid_month(month):
            return _Reply(400, b"400: bad date\n")
        found = self._month_file(archive, month, "mboxrd")
        name = f"{archive.name}_{archive.domain}_{month}.mbox"
        return _Reply(
            200,
            found[0] if found else b"",
            "application/mbox",
            {"Content-Disposition": f"attachment; filename={name}"},
        )

    # --- HyperKitty: REST API and exports made on request ---------------------------------
    # As HyperKitty 1.3 serves them (tests/archives/test_hyperkitty_real.py runs the real
    # one): the list page links every month from the oldest message's to the current one;
    # the `emails` listing is newest *archived* first, each message with the date it is
    # filed under; an export holds the range's messages in the order they were archived,
    # `From ` body lines quoted the mboxo way.

    def _hk_api(self, archive: ArchiveList) -> str:
        return f"{self.base}/hyperkitty/api/list/{archive.address}/"

    def _hk_page(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self.lists.get(match.group(1))
        if archive is None:
            return _not_found("no such list")
        title = html.escape(archive.address)
        counts = archive.counts()
        current = month_of(self._clock())
        first = min([m for m, n in counts.items() if n] or [current])
        months = [first]
        while months[-1] < current:
            months.append(next_month(months[-1]))
        links = "".join(
            f'<li><a href="/hyperkitty/list/{title}/{m[:4]}/{int(m[5:])}/">{m}</a></li>'
            for m in reversed(months)
        )
        export = (
            f"/hyperkitty/list/{title}/export/{title}-{current}.mbox.gz?"
            f"start={current}-01&amp;end={next_month(current)}-01"
        )
        page = (
            f"<!DOCTYPE html>\n<html><head><title>{title} - HyperKitty</title></head><body>"
            f'<h1>{html.escape(archive.name)}</h1><a href="{export}">Download</a>'
            f'<ul class="archives">{links}</ul></body></html>\n'
        )
        return _Reply(200, page.encode(), "text/html; charset=utf-8")

    def _hk_list(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self.lists.get(match.group(1))
        if archive is None:
            return _Reply(404, b'{"detail": "Not found."}', "application/json")
        api = self._hk_api(archive)
        doc = {
            "url": api,
            "name": archive.address,
            "display_name": archive.name,
            "description": "",
            "subject_prefix": f"[{archive.name}] ",
            "archive_policy": "public",
            "created_at": f"{archive.created}-01T00:00:00Z",
            "threads": api + "threads/",
            "emails": api + "emails/",
        }
        return _Reply(200, json.dumps(doc).encode(), "application/json")

    def _hk_emails(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self.lists.get(match.group(1))
        if archive is None:
            return _Reply(404, b'{"detail": "Not found."}', "application/json")
        limit = _positive(request.query.get("limit"), 10)
        offset = _positive(request.query.get("offset"), 0, allow_zero=True)
        newest_first = archive.archived()[::-1]
        total = len(newest_first)
        page = newest_first[offset : offset + limit]
        url = f"{self._hk_api(archive)}emails/"
        after = offset + limit
        before = max(0, offset - limit)
        doc = {
            "count": total,
            "next": f"{url}?limit={limit}&offset={after}" if after < total else None,
            "previous": None
            if offset == 0
            else f"{url}?limit={limit}" + (f"&offset={before}" if before else ""),
            "results": [_hk_email(self._hk_api(archive), month, raw) for month, raw in page],
        }
        return _Reply(200, json.dumps(doc).encode(), "application/json")

    def _hk_export(self, request: web.Request, match: re.Match[str]) -> _Reply:
        archive = self.lists.get(match.group(1))
        if archive is None:
            return _not_found("no such list")
        try:
            start = _day(request.query.get("start"), float("-inf"))
            end = _day(request.query.get("end"), float("inf"))
        except ValueError:
            return _Reply(400, b"Invalid dates")
        months = {m for m in archive.counts() if start <= month_bounds(m)[0] < end}
        messages = tuple(raw for m, raw in archive.archived() if m in months)
        version = hash((archive.generation, messages))
        key = "export:" + ",".join(sorted(months))
        body, _ = self._render(archive.address, key, version, messages, "mboxo.gz")
        disposition = f'attachment; filename="{match.group(2)}.mbox.gz"'
        return _Reply(200, body, "application/gzip", {"Content-Disposition": disposition})


def _headers(reply: _Reply) -> dict[str, str]:
    if reply.status == 304:
        return reply.headers
    return {**reply.headers, "Content-Type": reply.content_type}


def _http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _positive(value: str | None, default: int, *, allow_zero: bool = False) -> int:
    # DRF's LimitOffsetPagination falls back to the default on a bad number.
    try:
        number = int(value) if value is not None else default
    except ValueError:
        return default
    return number if number > 0 or (allow_zero and number == 0) else default


def _day(value: str | None, default: float) -> float:
    if value is None:
        return default
    return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()


def _hk_email(api: str, month: str, raw: bytes) -> dict[str, str | None]:
    message = parse_message(raw)
    moment = message.date
    if moment is None or month_of(moment.timestamp()) != month:
        # HyperKitty lists the date it files a message under: the month it is in here.
        moment = datetime.fromtimestamp(month_bounds(month)[0], UTC)
    name, addr = parseaddr(message.from_ or "")
    message_id = message.message_id or ""
    digest = hashlib.sha1(message_id.encode(), usedforsecurity=False).digest()
    return {
        "mailinglist": api,
        "message_id": message_id,
        "message_id_hash": base64.b32encode(digest).decode(),
        "sender_name": name or addr,
        "subject": message.subject or "",
        "date": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
