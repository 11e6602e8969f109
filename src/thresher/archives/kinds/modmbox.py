"""Apache mod_mbox: an index with a message count per month, and `YYYYMM.mbox` files.

The count is the smart update's expected value; the files only grow (mboxo at best, so
`>From ` lines are kept as served).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urljoin

from ..months import valid_month
from ..units import Known, Month
from .base import ArchiveIndexError, Listing, Port, dir_url, http_url, url_path
from .files import FileKind

__all__ = ["ModMbox", "parse_modmbox_index"]

_MODMBOX_ROW = re.compile(r"<tr\b.*?</tr>", re.IGNORECASE | re.DOTALL)
_MODMBOX_MONTH = re.compile(r"""(?:id\s*=\s*["']|href\s*=\s*["']?)(\d{4})(\d{2})\b""", re.I)
_MODMBOX_COUNT = re.compile(r"""class\s*=\s*["']?msgcount["']?[^>]*>\s*([\d,]+)\s*<""", re.I)


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


class ModMbox(FileKind):
    name = "modmbox"
    doc = "An Apache mod_mbox list archive: its index page URL."

    def check_url(self, url: str) -> str:
        return dir_url(http_url(url))

    def detect(self, url: str) -> bool:
        return "/mod_mbox/" in url_path(url)

    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        return Listing(parse_modmbox_index(await port.listing(url), url))
