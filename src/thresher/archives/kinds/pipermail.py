"""Mailman 2 (pipermail): an index page linking `YYYY-Month.txt` and `.txt.gz` per month.

Mailman appends to the open month's `.txt` as mail arrives and rebuilds the `.gz` in a
nightly job; neither says how many messages it holds, so validators and Range requests
decide. Body lines starting `From ` are not quoted at all (docs/mail.md, `>From` lines).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from urllib.parse import urljoin

from ..months import is_closed
from ..units import Known, Month
from .base import ArchiveIndexError, Listing, Port, dir_url, http_url, url_path
from .files import FileKind

__all__ = ["Pipermail", "parse_pipermail_index", "pipermail_index_url"]

_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_PIPERMAIL_FILE = re.compile(
    r"""href\s*=\s*["']?((\d{4})-(""" + "|".join(_MONTH_NAMES) + r""")\.txt(\.gz)?)["'\s>]""",
    re.IGNORECASE,
)


def pipermail_index_url(url: str) -> str:
    return dir_url(url)


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


class Pipermail(FileKind):
    name = "pipermail"
    doc = "A Mailman 2 (pipermail) list archive: its index page URL."

    def check_url(self, url: str) -> str:
        return pipermail_index_url(http_url(url))

    def detect(self, url: str) -> bool:
        return "/pipermail/" in url_path(url)

    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        now = port.now

        def plain_first(month: str) -> bool:
            k = known.get(month)
            if k is not None and k.harvested:
                return k.url.endswith(".txt")
            return not is_closed(month, now, grace)

        return Listing(
            parse_pipermail_index(await port.listing(url), url, prefer_plain=plain_first)
        )
