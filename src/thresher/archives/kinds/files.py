"""Kinds whose unit is one mbox file: pipermail, mod_mbox, Pony Mail, HyperKitty, mbox.

They differ in how they list their months; a month is read the same way for all of
them (`thresher.archives.harvest`): conditionally, or only its new tail with a Range
request checked against the stop sign (a byte offset), and parsed again whole when the
file was rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import PermanentError
from ..harvest import Absorbed, absorb, request_headers
from ..mbox import maybe_gunzip
from ..units import Known, Unit
from .base import ArchiveKind, Got, Harvest, Port

__all__ = ["FileKind"]


class FileKind(ArchiveKind):
    """An archive whose every unit is one mbox file at `Unit.urls`."""

    async def harvest(self, port: Port, unit: Unit, known: Known | None, max_bytes: int) -> Harvest:
        url, got, start = await _fetch(
            port, unit.urls, known, unit.grows, max_bytes, empty_ok=unit.expected == 0
        )

        async def read(got: Got, start: int | None) -> Absorbed:
            body, truncated = got.content, False
            if got.status == 200:
                body, truncated = await maybe_gunzip(body, max_bytes)
            return absorb(
                known, got.status, got.headers, body, start,
                mboxrd=unit.mboxrd, truncated=truncated,
                max_message=port.max_message_bytes,
            )  # fmt: skip

        wire = got.wire
        absorbed = await read(got, start)
        events = list(absorbed.events)
        if absorbed.need_full:
            got = await port.get(url, {}, max_bytes)
            got.check(url)
            wire += got.wire
            absorbed = await read(got, None)
            events += absorbed.events
        return _harvest(url, got.status, wire, absorbed, events)


def _harvest(
    url: str, status: int, wire: int, absorbed: Absorbed, events: list[tuple[str, str]]
) -> Harvest:
    return Harvest(
        url=url,
        status=status,
        wire=wire,
        messages=absorbed.messages,
        counted=absorbed.counted,
        stop_offset=absorbed.stop_offset,
        full=absorbed.full,
        length=absorbed.length,
        tail_sha256=absorbed.tail_sha256,
        etag=absorbed.etag,
        last_modified=absorbed.last_modified,
        events=events,
    )


async def _fetch(
    port: Port,
    urls: Sequence[str],
    known: Known | None,
    grows: bool,
    max_bytes: int,
    *,
    empty_ok: bool = False,
) -> tuple[str, Got, int | None]:
    """The month's file from the first of `urls` the archive has (a 404 moves on). For
    a month the archive now counts as empty, a 404 is its empty file."""
    for i, url in enumerate(urls):
        headers, start = request_headers(known, url, grows)
        got = await port.get(url, headers, max_bytes)
        if got.status == 404 and i + 1 < len(urls):
            continue
        if got.status == 404 and empty_ok:
            return url, Got(200, {}, b"", got.wire), None
        got.check(url)
        return url, got, start
    raise PermanentError(f"no file for the month among {list(urls)}")
