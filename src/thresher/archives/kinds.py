"""The five archive kinds: where their months are listed and how the listing reads.

Each kind turns what the archive publishes about itself — Mailman 2's index page, the
mod_mbox index with a count per month, Pony Mail's stats, HyperKitty's REST API, or a
single mbox file — into `Month` values: where the month's file is, the archive's own
count when it gives one, and whether the file only ever grows (so a later run can ask
for just its new tail with a Range request). Pure functions of URLs and bytes: the job
handlers in `thresher.sources.archives` do the fetching.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qs, quote, urljoin, urlsplit, urlunsplit

from ..errors import PermanentError, SourceError
from .message import normalize_message_id
from .months import ALL, next_month, valid_month

__all__ = [
    "KINDS",
    "ArchiveIndexError",
    "HyperKittyPage",
    "Month",
    "hyperkitty_emails_url",
    "hyperkitty_export_url",
    "hyperkitty_key",
    "hyperkitty_list_url",
    "hyperkitty_parts",
    "mbox_month",
    "parse_hyperkitty_emails",
    "parse_hyperkitty_list",
    "parse_modmbox_index",
    "parse_pipermail_index",
    "parse_ponymail_stats",
    "pipermail_index_url",
    "ponymail_mbox_url",
    "ponymail_parts",
    "ponymail_stats_url",
]

KINDS = ("pipermail", "modmbox", "ponymail", "hyperkitty", "mbox")

_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_PIPERMAIL_FILE = re.compile(
    r"""href\s*=\s*["']?((\d{4})-(""" + "|".join(_MONTH_NAMES) + r""")\.txt(\.gz)?)["'\s>]""",
    re.IGNORECASE,
)
_MODMBOX_ROW = re.compile(r"<tr\b.*?</tr>", re.IGNORECASE | re.DOTALL)
_MODMBOX_MONTH = re.compile(r"""(?:id\s*=\s*["']|href\s*=\s*["']?)(\d{4})(\d{2})\b""", re.I)
_MODMBOX_COUNT = re.compile(r"""class\s*=\s*["']?msgcount["']?[^>]*>\s*([\d,]+)\s*<""", re.I)
_ADDRESS = re.compile(r"^[^@/\s]+@[^@/\s]+\.[^@/\s]+$")


class ArchiveIndexError(PermanentError):
    """The archive's listing of its months cannot be read."""


@dataclass(frozen=True)
class Month:
    """One sub-list of an archive as the archive lists it now.

    `urls`: where the month's file is, best first (pipermail serves `.txt` and
    `.txt.gz`; a 404 on one moves to the next). `expected`: the archive's own count, or
    None when it gives none (then validators decide). `grows`: the file is only ever
    appended to, so a Range request for its tail is worth trying. `mboxrd`: body lines
    `>From ` were escaped the mboxrd way and are un-escaped."""

    month: str
    urls: tuple[str, ...]
    expected: int | None = None
    grows: bool = False
    mboxrd: bool = True


def _dir_url(url: str) -> str:
    parts = urlsplit(url)
    path = parts.path
    if path.endswith((".html", ".htm")):
        path = path.rsplit("/", 1)[0] + "/"
    elif not path.endswith("/"):
        path += "/"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


# --- pipermail (Mailman 2) -------------------------------------------------------


def pipermail_index_url(url: str) -> str:
    return _dir_url(url)


def parse_pipermail_index(
    html: bytes, base: str, *, prefer_plain: Callable[[str], bool]
) -> list[Month]:
    """The months the index links to. A month's `.txt` and `.txt.gz` are both offered:
    months in `prefer_plain` (still open) ask for `.txt` first, because Mailman appends
    to it as mail arrives while the `.gz` is rebuilt by a nightly job, and a plain file
    can be fetched by its tail; closed months ask for the smaller `.gz` first. A month
    harvested before keeps its file, so its validators still apply."""
    found: dict[str, dict[str, str]] = {}
    for match in _PIPERMAIL_FILE.finditer(html.decode("latin-1")):
        name, year, month_name, gz = match.groups()
        number = [m.lower() for m in _MONTH_NAMES].index(month_name.lower()) + 1
        month = f"{year}-{number:02d}"
        stem = urljoin(base, name[:-3] if gz else name)
        found.setdefault(month, {})["txt"] = stem
        if gz:
            found[month]["gz"] = stem + ".gz"
    months = []
    for month, files in sorted(found.items()):
        txt, gz = files["txt"], files.get("gz")
        plain_first = prefer_plain(month) or gz is None
        urls = (txt, gz) if plain_first else (gz, txt)
        months.append(Month(month, tuple(u for u in urls if u), grows=True, mboxrd=False))
    if not months and b"pipermail" not in html.lower() and b"<html" not in html[:2048].lower():
        raise ArchiveIndexError("the pipermail index page lists no month and is not HTML")
    return months


# --- mod_mbox (Apache) -------------------------------------------------------------


def parse_modmbox_index(html: bytes, base: str) -> list[Month]:
    """Months with their message counts from the mod_mbox index's table rows."""
    months: dict[str, Month] = {}
    text = html.decode("latin-1")
    for row in _MODMBOX_ROW.findall(text):
        month_match = _MODMBOX_MONTH.search(row)
        count_match = _MODMBOX_COUNT.search(row)
        if month_match is None:
            continue
        month = f"{month_match.group(1)}-{month_match.group(2)}"
        if not valid_month(month):
            continue
        expected = int(count_match.group(1).replace(",", "")) if count_match else None
        url = urljoin(base, f"{month_match.group(1)}{month_match.group(2)}.mbox")
        months[month] = Month(month, (url,), expected, grows=True, mboxrd=False)
    if not months and "mod_mbox" not in text and "msgcount" not in text:
        raise ArchiveIndexError("the mod_mbox index page lists no month")
    return [months[m] for m in sorted(months)]


# --- Pony Mail (Apache) ------------------------------------------------------------


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
    if address is None or not _ADDRESS.match(address):
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


# --- HyperKitty (Mailman 3) ----------------------------------------------------------
#
# What HyperKitty 1.3 serves (read from its source and checked against a real server in
# tests/archives/test_hyperkitty_real.py): the REST description of a list
# (`api/list/LIST/`); its `emails` listing (`api/list/LIST/emails/`, DRF limit/offset
# pages, newest *archived* first, no cap on `limit`) whose `count` is every message of
# the list and whose items carry `message_id` and `date`, the instant HyperKitty files
# the message under; and the export of a date range (`list/LIST/export/NAME.mbox.gz
# ?start=YYYY-MM-DD&end=YYYY-MM-DD`), every message of the list whose `date` is in
# [start, end), rebuilt from its database with `From ` body lines quoted the mboxo way.
# A message without a usable Date is filed at the date of its mbox envelope when it
# was imported, or at the moment it was archived; one dated 2031 under 2031-01. The
# list page's month links run from the oldest message's month to today, so they miss
# future-dated mail and say nothing about counts: the months come from the listing.


def hyperkitty_parts(url: str) -> tuple[str, str]:
    """(HyperKitty root, list address) from `…/hyperkitty/list/dev@example.org/` (or
    `…/archives/list/…`, its path on many sites) or the REST URL `…/api/list/dev@…/`."""
    parts = urlsplit(url)
    match = re.search(r"^(.*?/)(?:api/)?list/([^/]+@[^/]+)(?:/|$)", parts.path)
    if match is None or not _ADDRESS.match(match.group(2)):
        raise SourceError(
            f"cannot find the list in {url!r}: paste its HyperKitty page, "
            "e.g. https://lists.example.org/hyperkitty/list/dev@example.org/"
        )
    return urlunsplit((parts.scheme, parts.netloc, match.group(1), "", "")), match.group(2)


def _q(address: str) -> str:
    # HyperKitty's own links keep the "@" of the address as it is.
    return quote(address, safe="@")


def hyperkitty_list_url(root: str, address: str) -> str:
    return urljoin(root, f"api/list/{_q(address)}/")


def hyperkitty_emails_url(root: str, address: str, limit: int, offset: int = 0) -> str:
    """A page of the list's `emails` listing; `limit=1` is the cheapest way to its count."""
    page = f"limit={limit}" + (f"&offset={offset}" if offset else "")
    return urljoin(root, f"api/list/{_q(address)}/emails/?{page}")


def hyperkitty_export_url(root: str, address: str, month: str) -> str:
    end = next_month(month)
    return urljoin(
        root,
        f"list/{_q(address)}/export/{_q(address)}-{month}.mbox.gz?start={month}-01&end={end}-01",
    )


def parse_hyperkitty_list(data: bytes, address: str) -> None:
    """Check that the REST description is the list's (a wrong URL is an error here, not
    an empty harvest)."""
    try:
        name = json.loads(data)["name"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveIndexError(f"HyperKitty list: {exc}") from None
    if str(name).lower() != address.lower():
        raise ArchiveIndexError(f"HyperKitty list: the API describes {name!r}, not {address!r}")


@dataclass(frozen=True)
class HyperKittyPage:
    """One page of the `emails` listing: the list's total, and per message its key (as
    Thresher will key the exported copy; None for an empty id) and the month HyperKitty
    files it under."""

    count: int
    emails: tuple[tuple[str | None, str], ...]


_HK_BAD_ID = re.compile(r"[\s<>()]")


def hyperkitty_key(message_id: str) -> str | None:
    """The key of a message as exported: HyperKitty writes `Message-ID: <id>` with
    whitespace, angle brackets and parentheses removed from the id it stored."""
    return normalize_message_id(f"<{_HK_BAD_ID.sub('', message_id)}>")


def _utc_month(value: str) -> str:
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return f"{moment.year:04d}-{moment.month:02d}"


def parse_hyperkitty_emails(data: bytes) -> HyperKittyPage:
    """A page of the REST `emails` listing (see `HyperKittyPage`)."""
    try:
        doc = json.loads(data)
        count = doc["count"]
        if not isinstance(count, int) or count < 0:
            raise TypeError(f"bad count {count!r}")
        emails = []
        for item in doc.get("results") or ():
            emails.append((hyperkitty_key(str(item["message_id"])), _utc_month(str(item["date"]))))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ArchiveIndexError(f"HyperKitty emails: {exc}") from None
    return HyperKittyPage(count, tuple(emails))


# --- plain mbox ------------------------------------------------------------------------


def mbox_month(url: str) -> Month:
    """A plain mbox file is one sub-list; gzip is sniffed, so only a plain file grows."""
    gz = url.lower().endswith((".gz", ".gzip"))
    # mboxo and mboxrd files cannot be told apart: ">From " lines are kept as served.
    return Month(ALL, (url,), None, grows=not gz, mboxrd=False)
