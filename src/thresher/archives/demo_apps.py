"""The demo archive's kinds that are web applications (`AppPages`): Apache Pony Mail and
Mailman 3 HyperKitty, whose pages, JSON and mbox files are made on request, so served
without validators or Range.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parseaddr
from typing import Protocol
from urllib.parse import parse_qs

from aiohttp import web

from .demo_files import ArchiveFiles, Reply, not_found
from .demo_model import ArchiveList, Clock
from .message import parse_message
from .months import month_bounds, month_of, next_month, valid_month

__all__ = ["AppPages", "AppSite"]


class AppSite(Protocol):
    """The server as these pages see it (`DemoArchive`)."""

    @property
    def lists(self) -> Mapping[str, ArchiveList]: ...

    @property
    def base(self) -> str: ...


class AppPages:
    """The routes of the web-application kinds: each method answers a request whose path
    matched its pattern (`match`) in the server's routes. `clock` says what month it is
    now (HyperKitty's list page links every month up to the current one)."""

    def __init__(self, site: AppSite, files: ArchiveFiles, clock: Clock) -> None:
        self._site = site
        self._files = files
        self._clock = clock

    # --- Pony Mail: made on request, so no validators and no Range ------------------------

    def pony_page(self, request: web.Request, match: re.Match[str]) -> Reply:
        address = request.query_string.split(":", 1)[0].split("&", 1)[0]
        archive = self._site.lists.get(address)
        if archive is None:
            return not_found("no such list")
        title = html.escape(archive.address)
        page = (
            f"<!DOCTYPE html>\n<html><head><title>Pony Mail: {title}</title>"
            '<script src="js/config.js"></script><script src="js/ponymail.js"></script>'
            f"</head><body onload=\"listView({{list: '{title}'}})\">"
            f'<div id="listtitle">{title}</div><div id="emails"></div></body></html>\n'
        )
        return Reply(200, page.encode(), "text/html; charset=utf-8")

    def _pony_list(self, request: web.Request) -> ArchiveList | None:
        params = parse_qs(request.query_string)
        name = (params.get("list") or [""])[0]
        domain = (params.get("domain") or [""])[0]
        return self._site.lists.get(name if "@" in name else f"{name}@{domain}")

    def pony_stats(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._pony_list(request)
        if archive is None:
            return not_found("no such list")
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
        return Reply(200, json.dumps(doc).encode(), "application/json")

    def pony_mbox(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._pony_list(request)
        if archive is None:
            return not_found("no such list")
        year, _, mon = (parse_qs(request.query_string).get("date") or [""])[0].partition("-")
        month = f"{year}-{mon.zfill(2)}"
        if not valid_month(month):
            return Reply(400, b"400: bad date\n")
        found = self._files.month_file(archive, month, "mboxrd")
        name = f"{archive.name}_{archive.domain}_{month}.mbox"
        return Reply(
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
        return f"{self._site.base}/hyperkitty/api/list/{archive.address}/"

    def hk_page(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._site.lists.get(match.group(1))
        if archive is None:
            return not_found("no such list")
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
        return Reply(200, page.encode(), "text/html; charset=utf-8")

    def hk_list(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._site.lists.get(match.group(1))
        if archive is None:
            return Reply(404, b'{"detail": "Not found."}', "application/json")
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
        return Reply(200, json.dumps(doc).encode(), "application/json")

    def hk_emails(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._site.lists.get(match.group(1))
        if archive is None:
            return Reply(404, b'{"detail": "Not found."}', "application/json")
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
        return Reply(200, json.dumps(doc).encode(), "application/json")

    def hk_export(self, request: web.Request, match: re.Match[str]) -> Reply:
        archive = self._site.lists.get(match.group(1))
        if archive is None:
            return not_found("no such list")
        try:
            start = _day(request.query.get("start"), float("-inf"))
            end = _day(request.query.get("end"), float("inf"))
        except ValueError:
            return Reply(400, b"Invalid dates")
        months = {m for m in archive.counts() if start <= month_bounds(m)[0] < end}
        messages = tuple(raw for m, raw in archive.archived() if m in months)
        version = hash((archive.generation, messages))
        key = "export:" + ",".join(sorted(months))
        body, _ = self._files.render(archive.address, key, version, messages, "mboxo.gz")
        disposition = f'attachment; filename="{match.group(2)}.mbox.gz"'
        return Reply(200, body, "application/gzip", {"Content-Disposition": disposition})


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
