"""Split an mbox archive, held in memory as bytes, into its messages.

Every list archive Thresher harvests (pipermail ``.txt``/``.txt.gz`` months, mod_mbox
``YYYYMM.mbox``, Pony Mail mboxrd, HyperKitty ``.mbox.gz`` exports, plain mbox files)
arrives as one byte string. Splitting must be exact, because a message's `RawMessage.offset`
(the byte offset of its ``From `` envelope line) is the "stop sign" a later run resumes
from, and fast, because the mail benchmark splits tens of thousands of messages per run.

Why the envelope test is strict: pipermail does not escape body lines that start with
``From ``, so "a line starting with From " would cut messages in half. A split point here
is a line that (1) starts the data or follows a blank line, and (2) reads
``From <address> <asctime date>``, e.g. ``From user at example.org  Mon Jan  1 00:00:00
2024``; the address may be pipermail's ``user at host``, ``MAILER-DAEMON``, ``-`` or raw
8-bit bytes, and the date may carry a timezone or extra tokens. A body line that passes
both tests is indistinguishable from an envelope by any reader, so it is split there.

Why one regex: `iter_mbox` runs a single ``finditer`` over the whole buffer; the pattern
starts with the literal ``From ``, which lets ``re`` skip ahead with a fast substring
search, and the blank-line test is a look-behind, so no Python code runs per line.

Escaping: with ``unescape=True`` (mboxrd: Pony Mail Foal's ``api/mbox.lua``) one ``>``
is removed from every body line matching ``^>+From ``. That is exact for mboxrd. For
mboxo (HyperKitty's exports and Python's ``mailbox``, which quote ``From `` lines only;
mod_mbox files; any plain mbox, which cannot say which it is) it is ambiguous: mboxo
turned ``From `` into ``>From `` but left ``>From `` alone, so a ``>From `` line may have
been either; pass ``unescape=False`` to keep such bodies as served, which is the only
choice that never invents a change. Pipermail does not quote at all. Which archive kind
un-escapes, and why, is in docs/mail.md ("``>From`` lines").

`maybe_gunzip` decides by the gzip magic bytes, not by file name or Content-Encoding,
because servers mislabel ``.txt.gz`` months both ways; it caps the decompressed size so
a gzip bomb cannot exhaust memory, and returns what it could decode from a truncated
download together with a flag, so the caller can keep the complete messages and refetch.
It is the fetch client's streaming decoder (`thresher.fetch.decoding`), run the same way:
a short first step on the event loop, the rest in a thread that stops when the task is
cancelled (a signal), so a month job never freezes the loop.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from thresher.errors import PermanentError
from thresher.fetch.decoding import DecodedTooLarge, Decoding, Undecodable, decode_off_loop

__all__ = [
    "ArchiveTooLarge",
    "RawMessage",
    "is_envelope",
    "iter_mbox",
    "maybe_gunzip",
    "split_mbox",
]

_DAY = rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_MONTH = rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
# Everything after "From ": the address token (possibly empty, possibly "user at host"),
# then an asctime date; a timezone or other tokens may sit before or after the year.
_ENVELOPE_REST = (
    rb"[^\s]*(?: at [^\s]+)?[ \t]+"
    + _DAY
    + rb",?[ \t]+"
    + _MONTH
    + rb"[ \t]+\d{1,2}[ \t]+\d{1,2}:\d\d(?::\d\d)?"
    + rb"[ \t]+(?:[^\s]+[ \t]+){0,2}\d{4}\b[^\r\n]*(?:\r?\n|\Z)"
)
# Look-behinds sit after the literal so that re can search for "From " quickly.
_ENVELOPE_AFTER_BLANK = re.compile(rb"From (?:(?<=\n\nFrom )|(?<=\n\r\nFrom ))" + _ENVELOPE_REST)
_ENVELOPE_LINE = re.compile(rb"From " + _ENVELOPE_REST)
_QUOTED_FROM = re.compile(rb"^>(>*From )", re.MULTILINE)

_GZIP_MAGIC = b"\x1f\x8b"


class ArchiveTooLarge(PermanentError, ValueError):
    """A compressed archive decompresses to more than the allowed size."""


@dataclass(frozen=True, slots=True)
class RawMessage:
    """One message cut out of an mbox.

    `offset` is the byte offset of the envelope line in the data given to `split_mbox`;
    `raw` the message (headers and body) without the envelope line and without the
    blank separator line before the next envelope, un-escaped when asked;
    `envelope` the envelope line itself, line ending included.

    A message longer than the cap `iter_mbox` was given has only its first bytes in
    `raw`, and the whole in `whole` (a view of the data it was cut from, not a copy,
    unless un-escaping changed it) until the job that stores it has written the whole to
    a file of its own; then `whole` is None and `size` and `sha256` say what the file
    holds (`thresher.archives.rows`: the row is flagged truncated in the index).
    """

    offset: int
    raw: bytes
    envelope: bytes = b""
    whole: bytes | memoryview | None = field(default=None, repr=False, compare=False)
    size: int | None = None  # of the whole message, when `raw` is its start only
    sha256: str | None = None  # of the whole message, when `raw` is its start only


def is_envelope(line: bytes) -> bool:
    """True if `line` reads like an mbox ``From `` envelope line (ignoring its position)."""
    return _ENVELOPE_LINE.fullmatch(line) is not None


def iter_mbox(
    data: bytes, *, unescape: bool = True, max_size: int | None = None
) -> Iterator[RawMessage]:
    """Yield the messages of an mbox in file order; bytes before the first envelope are
    not a message and are skipped. Never raises on any bytes. A message longer than
    `max_size` has its first `max_size` bytes in `raw`, and the whole in `whole`."""
    starts: Iterator[re.Match[bytes]] = _ENVELOPE_AFTER_BLANK.finditer(data)
    first = _ENVELOPE_LINE.match(data)
    prev = first if first is not None else next(starts, None)
    if prev is None:
        return
    for match in starts:
        yield _cut(data, prev, match.start(), unescape=unescape, last=False, cap=max_size)
        prev = match
    yield _cut(data, prev, len(data), unescape=unescape, last=True, cap=max_size)


def _cut(
    data: bytes,
    envelope: re.Match[bytes],
    stop: int,
    *,
    unescape: bool,
    last: bool,
    cap: int | None = None,
) -> RawMessage:
    start = envelope.end()
    # The blank line before the next envelope belongs to the file format, not the message;
    # the last message has one only if the writer added it (Python's mailbox does). The
    # envelope's own line ending may be half of that blank line, hence the test on `data`.
    # Measured on `data`, so that the message is copied once (a 200 MB one was 3 times).
    if not last or data.endswith((b"\n\n", b"\n\r\n"), 0, stop):
        if stop - start >= 2 and data.startswith(b"\r\n", stop - 2):
            stop -= 2
        elif stop > start and data[stop - 1] == 0x0A:
            stop -= 1
    quoted = unescape and data.find(b">From ", start, stop) >= 0
    if cap is not None and stop - start > cap:
        whole: bytes | memoryview = memoryview(data)[start:stop]
        if quoted:
            whole = _QUOTED_FROM.sub(rb"\1", data[start:stop])
        return RawMessage(envelope.start(), bytes(whole[:cap]), envelope.group(), whole)
    raw = data[start:stop]
    if quoted:
        raw = _QUOTED_FROM.sub(rb"\1", raw)
    return RawMessage(envelope.start(), raw, envelope.group())


def split_mbox(
    data: bytes, *, unescape: bool = True, max_size: int | None = None
) -> list[RawMessage]:
    """All the messages of an mbox, in file order (see `iter_mbox`)."""
    return list(iter_mbox(data, unescape=unescape, max_size=max_size))


async def maybe_gunzip(data: bytes, max_size: int) -> tuple[bytes, bool]:
    """Decompress `data` if it starts with the gzip magic bytes, else return it as is.

    Returns ``(data, truncated)``: `truncated` is True when the gzip stream ends early or
    is corrupt part-way, and `data` is then everything decoded before that point.
    Concatenated gzip members are all decoded; bytes after the last member that are not
    gzip are ignored. Raises `ArchiveTooLarge` (a `ValueError`) once the output would
    exceed `max_size` bytes; uncompressed input is not subject to the cap, since it is
    already in memory. Decodes off the event loop (see the module docstring); no
    deadline, as the cap bounds the time too (the work is linear in input and output).
    """
    if not data.startswith(_GZIP_MAGIC):
        return data, False
    decoding = Decoding(data, ["gzip"], max_size)
    try:
        await decode_off_loop(decoding, math.inf)
    except DecodedTooLarge:
        raise ArchiveTooLarge(
            f"archive decompresses to more than {max_size} bytes; refused"
        ) from None
    except Undecodable:
        return decoding.content(), True
    return decoding.content(), False
