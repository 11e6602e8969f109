"""One mbox file, plain or gzipped, at a URL or a local path: one unit, `all`.

A file has no months: its messages are filed under their Date's month. Only a plain
file can be read by its tail (gzip is sniffed); it may grow for ever, so it is never
complete. mboxo and mboxrd files cannot be told apart: `>From ` lines are kept as served.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from ...errors import SourceError
from ..months import ALL
from ..units import Known, Month
from .base import Listing, Port, http_url, url_path
from .files import FileKind

__all__ = ["Mbox", "mbox_month"]


def mbox_month(url: str) -> Month:
    """A plain mbox file is one sub-list; gzip is sniffed, so only a plain file grows."""
    gz = url.lower().endswith((".gz", ".gzip"))
    # mboxo and mboxrd files cannot be told apart: ">From " lines are kept as served.
    return Month(ALL, (url,), None, grows=not gz, mboxrd=False)


class Mbox(FileKind):
    name = "mbox"
    doc = "One mbox file, plain or gzipped: a URL or a local path."

    def check_url(self, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https"):
            return http_url(url)
        if parts.scheme == "file":
            return str(Path(url2pathname(parts.path)).resolve())
        if parts.scheme and len(parts.scheme) > 1:
            raise SourceError(f"unsupported URL scheme {parts.scheme!r} in {url!r}")
        return str(Path(url).resolve())

    def detect(self, url: str) -> bool:
        return url_path(url).endswith((".mbox", ".mbox.gz", ".mbx", ".mbx.gz"))

    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        return Listing([mbox_month(url)])
