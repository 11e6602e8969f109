"""The demo archive's replies and its lists' files: a reply before it is sent, each file
rendered once per version of what it holds (`ArchiveFiles`), and served as nginx or
Apache serve a static file (`static`: validators, 304s and byte ranges).
"""

from __future__ import annotations

import gzip
import hashlib
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime

from aiohttp import web

from .demo_mbox import render_mbox, render_pipermail
from .demo_model import ArchiveList

__all__ = ["ArchiveFiles", "Reply", "etag_of", "not_found", "static"]


@dataclass
class Reply:
    """A response before it is sent: faults may cut `body` short."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain"
    headers: dict[str, str] = field(default_factory=dict)


_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:24] + '"'


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)  # mtime=0: the same bytes each time


def not_found(what: str = "Not Found") -> Reply:
    return Reply(404, f"404: {what}\n".encode())


class ArchiveFiles:
    """The lists' files and their ETags, each rendered once per version of what it holds:
    keyed by (list address, kind, month or other key)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, str], tuple[int, bytes, str]] = {}

    def cached(
        self, key: tuple[str, str, str], version: int, make: Callable[[], bytes]
    ) -> tuple[bytes, str]:
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1], hit[2]
        body = make()
        etag = etag_of(body)
        with self._lock:
            self._cache[key] = (version, body, etag)
        return body, etag

    def month_file(
        self, archive: ArchiveList, month: str, kind: str
    ) -> tuple[bytes, str, float] | None:
        """(body, ETag, last changed) of one month's file, rendered once per version.
        `kind`: pipermail, modmbox or mboxrd, with ".gz" for the gzipped file."""
        snapshot = archive.snapshot(month)
        if snapshot is None:
            return None
        version, messages, changed = snapshot
        body, etag = self.render(archive.address, month, version, messages, kind)
        return body, etag, changed

    def render(
        self, address: str, key: str, version: int, messages: Sequence[bytes], kind: str
    ) -> tuple[bytes, str]:
        plain = kind.removesuffix(".gz")
        if plain != kind:
            return self.cached(
                (address, kind, key),
                version,
                lambda: _gzip(self.render(address, key, version, messages, plain)[0]),
            )
        makers: dict[str, Callable[[], bytes]] = {
            "pipermail": lambda: render_pipermail(messages),
            "modmbox": lambda: render_mbox(messages, rd=False),
            "mboxrd": lambda: render_mbox(messages, rd=True),
            "mboxo": lambda: render_mbox(messages, rd=False),
        }
        return self.cached((address, kind, key), version, makers[kind])


def static(
    request: web.Request,
    body: bytes,
    etag: str,
    changed: float,
    content_type: str,
    *,
    ranges: bool,
) -> Reply:
    """A file as nginx or Apache serve one: validators, 304s and byte ranges (none when
    not `ranges`, like servers without support)."""
    last_modified = formatdate(int(changed), usegmt=True)
    headers = {"ETag": etag, "Last-Modified": last_modified, "Accept-Ranges": "bytes"}
    if not ranges:
        del headers["Accept-Ranges"]
    inm = request.headers.get("If-None-Match")
    if inm is not None:
        tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
        if "*" in tags or etag in tags:
            return Reply(304, headers=headers)
    else:
        since = _http_date(request.headers.get("If-Modified-Since"))
        if since is not None and int(changed) <= since:
            return Reply(304, headers=headers)
    reply = Reply(200, body, content_type, headers)
    spec = request.headers.get("Range")
    if not ranges or spec is None or request.method != "GET":
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
        return Reply(416, headers={**headers, "Content-Range": f"bytes */{size}"})
    headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    return Reply(206, body[start : end + 1], content_type, headers)


def _http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
