"""Mailman 3 HyperKitty: its REST listing says what it holds; date-range exports per month.

What HyperKitty 1.3 serves (read from its source and checked against a real server in
tests/archives/test_hyperkitty_real.py): the REST description of a list
(`api/list/LIST/`); its `emails` listing (`api/list/LIST/emails/`, DRF limit/offset
pages, newest *archived* first, no cap on `limit`) whose `count` is every message of
the list and whose items carry `message_id` and `date`, the instant HyperKitty files
the message under; and the export of a date range (`list/LIST/export/NAME.mbox.gz
?start=YYYY-MM-DD&end=YYYY-MM-DD`), every message of the list whose `date` is in
[start, end), rebuilt from its database with `From ` body lines quoted the mboxo way.
A message without a usable Date is filed at the date of its mbox envelope when it
was imported, or at the moment it was archived; one dated 2031 under 2031-01. The
list page's month links run from the oldest message's month to today, so they miss
future-dated mail and say nothing about counts: the months come from the listing.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from ...errors import SourceError
from ..message import normalize_message_id
from ..months import next_month
from ..units import Known, Month
from .base import ADDRESS, ArchiveIndexError, Listing, Port, http_url, url_path
from .files import FileKind

__all__ = [
    "HYPERKITTY_PAGES",
    "HyperKitty",
    "HyperKittyPage",
    "hyperkitty_emails_url",
    "hyperkitty_export_url",
    "hyperkitty_key",
    "hyperkitty_list_url",
    "hyperkitty_parts",
    "parse_hyperkitty_emails",
    "parse_hyperkitty_list",
]

# Messages per page when HyperKitty's `emails` listing is walked (HyperKitty sets no
# cap; it costs about 0.8 KiB of JSON and a few queries a message): the first page is
# twice the messages looked for, within these bounds, and each next page twice the last.
HYPERKITTY_PAGES = (20, 500)


def hyperkitty_parts(url: str) -> tuple[str, str]:
    """(HyperKitty root, list address) from `…/hyperkitty/list/dev@example.org/` (or
    `…/archives/list/…`, its path on many sites) or the REST URL `…/api/list/dev@…/`."""
    parts = urlsplit(url)
    match = re.search(r"^(.*?/)(?:api/)?list/([^/]+@[^/]+)(?:/|$)", parts.path)
    if match is None or not ADDRESS.match(match.group(2)):
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


class HyperKitty(FileKind):
    name = "hyperkitty"
    doc = "A Mailman 3 HyperKitty list: its page (…/list/list@domain/) or REST URL."

    def check_url(self, url: str) -> str:
        hyperkitty_parts(http_url(url))
        return url

    def detect(self, url: str) -> bool:
        try:
            hyperkitty_parts(url)
        except SourceError:
            return False
        path = url_path(url)
        return "/hyperkitty/" in path or "/archives/" in path or "/api/list/" in path

    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        """HyperKitty's months, from what the archive holds (see docs/mail.md).

        Its total costs one request: when it equals the messages the months held at
        their last harvest, every month is vouched for and nothing is fetched. Otherwise
        its `emails` listing is walked, newest archived first, until as many messages as
        are missing were found that the store does not hold: their months are fetched.
        The first run, or a total that went down, walks the whole listing and counts
        every month, so a list created today with years of imported mail, mail filed
        under 2001 for want of a Date, and mail dated 2031 are all found; each month is
        then also compared by its count, like Pony Mail's, so a month that lost mail is
        checked."""
        root, address = hyperkitty_parts(url)
        parse_hyperkitty_list(await port.listing(hyperkitty_list_url(root, address)), address)
        counted = await port.listing(hyperkitty_emails_url(root, address, 1))
        total = parse_hyperkitty_emails(counted).count
        held = sum(k.counted for k in known.values())

        def month(name: str, expected: int | None) -> Month:
            return Month(
                name,
                (hyperkitty_export_url(root, address, name),),
                expected,
                grows=False,
                # Exports quote `From ` lines the mboxo way: `>From ` is kept as served.
                mboxrd=False,
            )

        if total == held:
            return Listing([month(m, None) for m in sorted(known)], total, frozenset(known))
        per_month, new, whole = await _walk(port, root, address, total - held)
        changed = frozenset(new)
        if whole:
            names = sorted(set(per_month) | set(known))
            return Listing([month(m, per_month[m]) for m in names], total, changed=changed)
        names = sorted(set(known) | changed)
        return Listing([month(m, None) for m in names], total, frozenset(known) - changed, changed)


async def _walk(
    port: Port, root: str, address: str, wanted: int
) -> tuple[Counter[str], Counter[str], bool]:
    """Walk the `emails` listing a page at a time: messages per month, the messages per
    month the store does not hold, and whether the listing was read to its end. Stops
    early once `wanted` (> 0) such messages were found. A message listed twice (the
    listing moved by a new arrival while it was walked) is counted once."""
    per_month: Counter[str] = Counter()
    new: Counter[str] = Counter()
    seen: set[str] = set()
    offset = 0
    smallest, largest = HYPERKITTY_PAGES
    size = largest if wanted <= 0 else max(smallest, min(largest, 2 * wanted))
    while True:
        url = hyperkitty_emails_url(root, address, size, offset)
        size = min(largest, 2 * size)
        got = await port.get(url, {})
        got.check(url)
        page = parse_hyperkitty_emails(got.content)
        fresh = [(key, month) for key, month in page.emails if key is None or key not in seen]
        seen.update(key for key, _ in fresh if key is not None)
        stored = await port.stored_keys([k for k, _ in fresh if k is not None])
        for key, month in fresh:
            per_month[month] += 1
            if key is not None and key not in stored:
                new[month] += 1
        offset += len(page.emails)
        if not page.emails or offset >= page.count:
            return per_month, new, True
        if 0 < wanted <= new.total():
            return per_month, new, False
