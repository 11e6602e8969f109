"""One month of an archive, harvested incrementally: what to ask for and what came back.

The store remembers per month what the last harvest saw (`Known`): the validators of the
file, its length, and the stop sign — `stop_offset`, the byte offset just past the newest
harvested message in the archive's own order, with `tail_sha256`, the digest of the
`OVERLAP` bytes before it. A Date header is never used for any of this: a message dated
2031 or not dated at all moves nothing.

`request_headers` asks for the file conditionally (If-None-Match / If-Modified-Since,
so an unchanged month costs a 304 and no body) and, for a file that only grows, for its
tail from `OVERLAP` bytes before the stop sign (Range). `absorb` reads the answer:

- 304: nothing changed.
- 206 (the tail): the overlap must hash to `tail_sha256` and the new bytes must start
  with an mbox envelope (after blank lines, which some writers leave or add before the
  next envelope); then only the messages after the stop sign are new. If not, the file
  was rewritten: `need_full`, and the caller asks for the whole file. Parsing a
  rewritten file again stores nothing twice: messages are told apart by their normal
  form (`thresher.archives.normal`), which ignores trailing blank lines and re-wrapping.
- 200 (the whole file, also from servers that ignore Range): if its prefix is what was
  harvested, only the messages after the stop sign are new; otherwise every message is
  parsed again (storing is idempotent) and the change is reported.
- 416: the file is shorter than the stop sign, it shrank: `need_full`.

Pure: the caller fetches, parses messages and writes the store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from ..errors import PermanentError, TransientError
from .mbox import RawMessage, is_envelope, split_mbox
from .units import Known, Unit

__all__ = ["OVERLAP", "Absorbed", "Decision", "Known", "absorb", "decide", "request_headers"]

# Bytes before the stop sign sent again with a Range request and compared, so an
# archive rewritten in place (a message removed, the file regenerated) is noticed.
OVERLAP = 1024

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)


Decision = Literal["skip", "confirm", "fetch"]


def decide(listed: Unit, known: Known | None, total_matches: bool | None) -> Decision:
    """What this run does about one month the archive lists.

    skip: complete, never asked about again (unless the archive volunteers, in a listing
    fetched anyway, a count that differs from what its file held). confirm: the
    archive's count matches what was harvested (or HyperKitty's total still adds up),
    so no request is made for the month. fetch: a month job asks for the file —
    conditionally, so an unchanged file costs a 304 and no body."""
    if known is not None and known.state == "complete":
        if listed.expected is not None and listed.expected not in (known.expected, known.counted):
            return "fetch"
        return "skip"
    if known is None or not known.harvested:
        return "fetch"
    if listed.expected is not None:
        # Like with like: the archive's count now against what its file held (or, for an
        # archive that counts differently from its files, against its own count when
        # the file was last harvested: unchanged means nothing arrived since).
        unchanged = listed.expected in (known.counted, known.expected)
        return "confirm" if unchanged else "fetch"
    if total_matches:
        return "confirm"
    return "fetch"


def _tail_digest(data: bytes | memoryview, stop: int) -> str:
    return hashlib.sha256(data[max(0, stop - OVERLAP) : stop]).hexdigest()


def request_headers(
    known: Known | None, url: str, grows: bool, *, conditional: bool = True
) -> tuple[dict[str, str], int | None]:
    """Headers for fetching `url` and the Range start asked for (None: the whole file)."""
    headers: dict[str, str] = {}
    if known is None or not known.harvested or known.url != url or not conditional:
        return headers, None
    if known.etag:
        headers["If-None-Match"] = known.etag
    if known.last_modified:
        headers["If-Modified-Since"] = known.last_modified
    stop = known.stop_offset or 0
    if grows and stop > 0 and known.tail_sha256 and not _compressed_name(url):
        start = max(0, stop - OVERLAP)
        headers["Range"] = f"bytes={start}-"
        # Ranges count bytes of the representation sent: a gzip-encoded one would not
        # line up with the file's own offsets.
        headers["Accept-Encoding"] = "identity"
        return headers, start
    return headers, None


def _compressed_name(url: str) -> bool:
    return url.lower().split("?", 1)[0].endswith((".gz", ".gzip"))


@dataclass
class Absorbed:
    """The outcome of one answer for a month."""

    not_modified: bool = False
    need_full: bool = False
    full: bool = False  # every message of the file is in `messages`
    messages: list[RawMessage] = field(default_factory=list)  # offsets in file coordinates
    counted: int = 0  # messages the file holds now
    length: int | None = None
    stop_offset: int | None = None
    tail_sha256: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    events: list[tuple[str, str]] = field(default_factory=list)


def absorb(
    known: Known | None,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    range_start: int | None,
    *,
    mboxrd: bool,
    truncated: bool = False,
    max_message: int | None = None,
) -> Absorbed:
    """Read one answer (see the module docstring); a 200's `body` is gunzipped already
    (`maybe_gunzip`, off the event loop), `truncated` if the gzip stream was cut short.
    Raises TransientError for answers worth retrying (5xx, 429, a truncated gzip) and
    PermanentError for the rest. A message longer than `max_message` bytes comes with
    only its start in `raw` (see `thresher.archives.mbox.RawMessage`)."""
    out = Absorbed(etag=headers.get("etag"), last_modified=headers.get("last-modified"))
    if status == 304 and known is not None and known.harvested:
        out.not_modified = True
        out.counted, out.length = known.counted, known.length
        out.stop_offset, out.tail_sha256 = known.stop_offset, known.tail_sha256
        out.etag = out.etag or known.etag
        out.last_modified = out.last_modified or known.last_modified
        return out
    if status == 416:
        out.need_full = True
        harvested = known.stop_offset if known is not None else 0
        out.events.append(("shrunk", f"the file is now under the {harvested} bytes harvested"))
        return out
    if status == 206:
        return _absorb_tail(known, headers, body, range_start, out, mboxrd, max_message)
    if status != 200:
        raise PermanentError(f"HTTP {status}")
    if truncated:
        raise TransientError(f"truncated gzip: {len(body)} bytes decoded")
    return _absorb_whole(known, body, out, mboxrd, max_message)


def _absorb_tail(
    known: Known | None,
    headers: Mapping[str, str],
    body: bytes,
    range_start: int | None,
    out: Absorbed,
    mboxrd: bool,
    max_message: int | None,
) -> Absorbed:
    match = _CONTENT_RANGE.match(headers.get("content-range", ""))
    if (
        known is None
        or known.stop_offset is None
        or range_start is None
        or match is None
        or int(match.group(1)) != range_start
    ):
        # A range we did not ask for, or cannot place: start again from the whole file.
        out.need_full = True
        return out
    stop = known.stop_offset
    overlap = stop - range_start
    total = None if match.group(3) == "*" else int(match.group(3))
    if len(body) < overlap or _tail_digest(body, overlap) != known.tail_sha256:
        out.need_full = True
        out.events.append(("changed", "the bytes before the stop sign changed: refetched whole"))
        return out
    tail = body[overlap:]
    skip = _blank_lines(tail, 0)
    if not _starts_message(tail, skip):
        out.need_full = True
        out.events.append(("changed", "the new bytes do not start a message: refetched whole"))
        return out
    start = stop + skip
    new = [
        replace(m, offset=m.offset + start)
        for m in split_mbox(tail[skip:], unescape=mboxrd, max_size=max_message)
    ]
    out.messages = new
    out.counted = known.counted + len(new)
    out.stop_offset = stop + len(tail)
    out.length = total if total is not None else out.stop_offset
    out.tail_sha256 = _tail_digest(body, len(body))
    return out


def _blank_lines(data: bytes, pos: int) -> int:
    """`pos` moved past the blank lines there. A writer may leave an extra blank line
    before the next envelope (or a trailing one that the next append follows): the
    bytes after the stop sign still start with a message, and only they are new."""
    end = pos
    while True:
        if data.startswith(b"\n", end):
            end += 1
        elif data.startswith(b"\r\n", end):
            end += 2
        else:
            return end


def _starts_message(data: bytes, pos: int) -> bool:
    """True at the end of `data` (nothing new) or at an envelope line."""
    if pos >= len(data):
        return True
    newline = data.find(b"\n", pos)
    return is_envelope(data[pos : newline + 1 if newline >= 0 else len(data)])


def _absorb_whole(
    known: Known | None, data: bytes, out: Absorbed, mboxrd: bool, max_message: int | None
) -> Absorbed:
    out.length = out.stop_offset = len(data)
    out.tail_sha256 = _tail_digest(data, len(data))
    stop = known.stop_offset if known is not None else None
    if (
        known is not None
        and stop is not None
        and stop <= len(data)
        and _tail_digest(data, stop) == known.tail_sha256
        and _starts_message(data, _blank_lines(data, stop))
    ):
        # The file grew (or is the same): only what follows the stop sign is new.
        start = _blank_lines(data, stop)
        out.messages = [
            replace(m, offset=m.offset + start)
            for m in split_mbox(data[start:], unescape=mboxrd, max_size=max_message)
        ]
        out.counted = known.counted + len(out.messages)
        return out
    out.full = True
    out.messages = split_mbox(data, unescape=mboxrd, max_size=max_message)
    out.counted = len(out.messages)
    if known is not None and known.harvested:
        kind = "shrunk" if out.counted < known.counted else "changed"
        out.events.append(
            (kind, f"the file was rewritten: {known.counted} messages before, {out.counted} now")
        )
    return out
