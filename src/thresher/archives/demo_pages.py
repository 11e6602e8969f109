"""The demo archive's kinds published as static files (`FilePages`): Mailman 2
pipermail, Apache mod_mbox, a plain mbox file and MHonArc, each page and file served as
a web server serves a file, with validators and Range (`demo_files`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

from aiohttp import web

from .demo_files import ArchiveFiles, Reply, etag_of, not_found, static
from .demo_indexes import modmbox_index_html, pipermail_index_html
from .demo_mbox import MONTH_NAMES
from .demo_mhonarc import mhonarc_index_html, mhonarc_list_html, mhonarc_message_html
from .demo_model import ArchiveList

__all__ = ["FilePages", "FileSite"]

_ALL = "*"  # cache key of the whole list (plain mbox, multi-month exports)
_MONTH_NUMBER = {name: i + 1 for i, name in enumerate(MONTH_NAMES)}


class FileSite(Protocol):
    """The server as these pages see it (`DemoArchive`): read at each request, since
    both may change at any time."""

    @property
    def lists(self) -> Mapping[str, ArchiveList]: ...

    @property
    def ranges(self) -> bool: ...


class FilePages:
    """The routes of the static kinds: each method answers a request whose path matched
    its pattern (`match`) in the server's routes."""

    def __init__(self, site: FileSite, files: ArchiveFiles) -> None:
        self._site = site
        self._files = files

    def _by_name(self, name: str) -> ArchiveList | None:
        return next((a for a in list(self._site.lists.values()) if a.name == name), None)

    def _static(
        self, request: web.Request, body: bytes, etag: str, changed: float, content_type: str
    ) -> Reply:
        return static(request, body, etag, changed, content_type, ranges=self._site.ranges)

    def pipermail_index(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._by_name(match.group(1))
        if archive is None:
            return not_found("no such list")
        sizes = {}
        for month in archive.counts():
            gz = self._files.month_file(archive, month, "pipermail.gz")
            sizes[month] = len(gz[0]) if gz else 0
        page = pipermail_index_html(archive.name, sizes).encode("ascii", "xmlcharrefreplace")
        # Mailman 2 rewrites index.html as mail arrives: a static file, with validators.
        changed = max(archive.changed.values(), default=0.0)
        return self._static(request, page, etag_of(page), changed, "text/html")

    def pipermail(self, request: web.Request, match: re.Match[str]) -> Reply:
        name, year, month_name, gz = match.groups()
        archive = self._by_name(name)
        number = _MONTH_NUMBER.get(month_name)
        if archive is None or number is None:
            return not_found()
        month = f"{year}-{number:02d}"
        found = self._files.month_file(archive, month, "pipermail.gz" if gz else "pipermail")
        if found is None:
            return not_found()
        kind = "application/gzip" if gz else "text/plain; charset=utf-8"
        return self._static(request, *found, kind)

    def mhonarc_list(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._by_name(match.group(1))
        if archive is None:
            return not_found("no such list")
        page = mhonarc_list_html(archive.name, sorted(archive.counts()))
        changed = max(archive.changed.values(), default=0.0)
        return self._static(request, page, etag_of(page), changed, "text/html")

    def mhonarc_index(self, request: web.Request, match: re.Match[str]) -> Reply:
        name, year, mon, which = match.groups()
        archive = self._by_name(name)
        snapshot = archive.snapshot(f"{year}-{mon}") if archive else None
        if archive is None or snapshot is None:
            return not_found()
        version, messages, changed = snapshot
        page, etag = self._files.cached(
            (archive.address, f"mhonarc.{which}", f"{year}-{mon}"),
            version,
            lambda: mhonarc_index_html(messages, threads=which == "threads"),
        )
        # MHonArc rewrites its index files as mail is added: static, with validators.
        return self._static(request, page, etag, changed, "text/html")

    def mhonarc_page(self, request: web.Request, match: re.Match[str]) -> Reply:
        name, year, mon, number = match.groups()
        archive = self._by_name(name)
        snapshot = archive.snapshot(f"{year}-{mon}") if archive else None
        if snapshot is None or int(number) >= len(snapshot[1]):
            return not_found()
        # MHonArc dates a message without a Date when it archives it; the demo, on the
        # first of its month, so the page is the same every time.
        archived = datetime(int(year), int(mon), 1, tzinfo=UTC).strftime("%a %b %d %H:%M:%S %Y")
        page = mhonarc_message_html(snapshot[1][int(number)], int(number), archived)
        return self._static(request, page, etag_of(page), snapshot[2], "text/html")

    def modmbox_index(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._by_name(match.group(1))
        if archive is None:
            return not_found("no such list")
        page = modmbox_index_html(archive.address, archive.counts())
        return Reply(200, page.encode(), "text/html; charset=utf-8")

    def modmbox(self, request: web.Request, match: re.Match[str]) -> Reply:
        name, year, mon = match.groups()
        archive = self._by_name(name)
        found = self._files.month_file(archive, f"{year}-{mon}", "modmbox") if archive else None
        if found is None:
            return not_found()
        return self._static(request, *found, "application/mbox")

    def plain_mbox(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._by_name(match.group(1))
        if archive is None:
            return not_found()
        generation, messages, changed = archive.all_messages()
        kind = "modmbox.gz" if match.group(2) else "modmbox"
        body, etag = self._files.render(archive.address, _ALL, generation, messages, kind)
        content_type = "application/gzip" if match.group(2) else "application/mbox"
        return self._static(request, body, etag, changed, content_type)
