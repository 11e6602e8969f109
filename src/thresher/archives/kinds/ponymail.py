"""Apache Pony Mail: `api/stats.lua` counts per month, `api/mbox.lua` a month as mboxrd.

The counts are the smart update's expected values; each month's mbox is made on
request (no validators, no Range), written as mboxrd by Pony Mail Foal, so `>From`
lines are un-escaped (docs/mail.md, `>From` lines).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import parse_qs, quote, urljoin, urlsplit, urlunsplit

from ...errors import SourceError
from ..months import valid_month
from ..units import Known, Month
from .base import ADDRESS, ArchiveIndexError, Listing, Port, http_url
from .files import FileKind

__all__ = [
    "PonyMail",
    "parse_ponymail_stats",
    "ponymail_mbox_url",
    "ponymail_parts",
    "ponymail_stats_url",
]


def ponymail_parts(url: str) -> tuple[str, str, str]:
    """(site root, list, domain) from a list page `…/list.html?dev@maven.apache.org`
    (also `…/list?dev@…`, with a `:2024-1` month suffix), or an API URL
    `…/api/stats.lua?list=dev&domain=maven.apache.org` or `…/api/mbox.lua?list=dev@…`."""
    parts = urlsplit(url)
    path = parts.path
    query = parts.query
    address = None
    if "/api/" in path:
        root = path[: path.index("/api/") + 1]
        params = parse_qs(query)
        name = (params.get("list") or [""])[0]
        domain = (params.get("domain") or [""])[0]
        address = name if "@" in name else f"{name}@{domain}" if name and domain else None
    else:
        root = path.rsplit("/", 1)[0] + "/"
        address = query.split(":", 1)[0].split("&", 1)[0] or None
    if address is None or not ADDRESS.match(address):
        raise SourceError(
            f"cannot find the list in {url!r}: paste the list page "
            "(https://lists.example.org/list.html?dev@project.example.org) or the stats.lua URL"
        )
    name, domain = address.split("@", 1)
    return urlunsplit((parts.scheme, parts.netloc, root, "", "")), name, domain.lower()


def ponymail_stats_url(root: str, name: str, domain: str) -> str:
    return urljoin(root, f"api/stats.lua?list={quote(name)}&domain={quote(domain)}")


def ponymail_mbox_url(root: str, name: str, domain: str, month: str) -> str:
    return urljoin(root, f"api/mbox.lua?list={quote(name)}@{quote(domain)}&date={month}")


def parse_ponymail_stats(data: bytes) -> dict[str, int]:
    """`active_months` of a stats.lua answer: month → messages the archive counts."""
    try:
        doc = json.loads(data)
        active = doc["active_months"]
        if not isinstance(active, dict):
            raise TypeError("active_months is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveIndexError(f"Pony Mail stats: {exc}") from None
    out: dict[str, int] = {}
    for key, count in active.items():
        year, _, mon = str(key).partition("-")
        month = f"{year}-{mon.zfill(2)}"
        if valid_month(month) and isinstance(count, int) and count >= 0:
            out[month] = count
    return out


class PonyMail(FileKind):
    name = "ponymail"
    doc = "An Apache Pony Mail list: its page (list.html?list@domain) or stats.lua URL."

    def check_url(self, url: str) -> str:
        ponymail_parts(http_url(url))
        return url

    def detect(self, url: str) -> bool:
        parts = urlsplit(url)
        return (
            parts.path.endswith(("/list.html", "/list")) and "@" in parts.query
        ) or parts.path.endswith(("/api/stats.lua", "/api/mbox.lua"))

    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        root, name, domain = ponymail_parts(url)
        counts = parse_ponymail_stats(await port.listing(ponymail_stats_url(root, name, domain)))
        return Listing(
            [
                Month(m, (ponymail_mbox_url(root, name, domain, m),), n, grows=False, mboxrd=True)
                for m, n in sorted(counts.items())
            ]
        )
