"""Write a list's stored messages back out, as mboxrd or as JSON lines.

Why mboxrd: it is the one mbox dialect that is reversible. A writer adds one ``>`` to
every line matching ``^>*From `` (so ``From `` becomes ``>From `` and ``>From `` becomes
``>>From ``), and a reader removes one ``>`` from every line matching ``^>+From ``; the
message comes back byte for byte. mboxo, which only quotes ``From `` lines, cannot tell
a quoted ``From `` from a real ``>From `` afterwards. Readers that do not un-escape
(Python's `mailbox.mbox`, mutt) still split the file correctly, since no line of a
message starts with ``From `` any more, and only show the extra ``>``.

Layout of each message: the envelope ``From <sender> <asctime>`` (the sender is the
stored From address, or ``MAILER-DAEMON`` when there is none or it would not fit on the
line as one token; the time is the message's UTC date, or when it was first seen if it
has none or one outside years 1000-9999), the escaped raw bytes exactly as stored (CRLF
line endings and 8-bit bytes included), a newline if the message does not end with one,
and one blank line. Readers drop that blank line again; the added newline is the one
thing the format cannot give back, so a message stored without a final newline reads
back with one.

Why JSON lines carry the raw message twice: ``raw`` is the bytes decoded as UTF-8 with
U+FFFD for undecodable bytes, readable and greppable but lossy for 8-bit legacy mail;
``raw_base64`` is exact. Dates are ISO 8601 in UTC.

A message longer than the `max_message_bytes` setting is stored in the index from its
start only (`truncated` says so) and whole in a file of the home folder; both formats
write the whole message, read from that file a piece at a time (if the file is gone, the
stored start, and `truncated` tells).

Why stream by id: the messages of a list can be gigabytes, and PostgreSQL's client-side
cursor holds a whole result in memory. The export first reads the ids of the messages in
order (small), then fetches the messages `BATCH` at a time, so memory is bounded by a
batch on both backends.
"""

from __future__ import annotations

import base64
import codecs
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal

from ..clock import iso
from ..errors import UsageError
from ..store import Row, Tx
from .months import valid_month
from .rows import whole_message_path

__all__ = [
    "BATCH",
    "BATCH_BYTES",
    "FILE_PIECE",
    "FORMATS",
    "UNDATED",
    "Format",
    "check_month",
    "envelope",
    "export_messages",
    "iter_messages",
    "message_batches",
    "message_json",
    "messages_by_id",
    "write_jsonl",
    "write_mboxrd",
]

Format = Literal["mbox", "jsonl"]
FORMATS: tuple[Format, ...] = ("mbox", "jsonl")

# Messages fetched per query while exporting, and the most bytes of raw messages (each
# up to the max_message_bytes setting) one query brings, unless one message is more.
BATCH = 200
BATCH_BYTES = 64 * 2**20

# The month of a plain mbox's messages without a usable date (see `_row` in archives/rows.py).
UNDATED = "undated"

_FROM_LINE = re.compile(rb"^(>*From )", re.MULTILINE)
# The sender must be one token of printable characters on the envelope line.
_SENDER = re.compile(r"^[^\s\x00-\x1f\x7f]+$")
# Earliest and latest moments with a four-digit year, the form mbox readers expect.
_MIN_TIME = datetime(1000, 1, 1, tzinfo=UTC).timestamp()
_MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


def envelope(row: Row) -> bytes:
    """The ``From `` line (with its newline) that starts `row` in an mbox."""
    sender = (row.get("from_addr") or "").strip()
    if not _SENDER.match(sender):
        sender = "MAILER-DAEMON"
    when = _envelope_time(row.get("date"))
    if when is None:
        when = _envelope_time(row.get("first_seen"))
    stamp = time.asctime(time.gmtime(when or 0.0))
    return f"From {sender} {stamp}\n".encode()


def _envelope_time(value: Any) -> float | None:
    if value is None:
        return None
    ts = float(value)
    return ts if _MIN_TIME <= ts <= _MAX_TIME else None


# Bytes of a message kept whole in its file read at a time.
FILE_PIECE = 2**20


def _whole_file(row: Row, home: Path | None) -> Path | None:
    """The file that holds `row`'s message whole, if it is truncated in the index and
    the file is there."""
    if home is None or not row.get("truncated"):
        return None
    path = home / whole_message_path(str(row["sha256"]))
    return path if path.is_file() else None


def _lines(path: Path) -> Iterator[bytes]:
    """The file's bytes in pieces of whole lines (the last may lack its newline), about
    `FILE_PIECE` bytes each, or a line each when lines are longer."""
    pending: list[bytes] = []
    with open(path, "rb") as f:
        while block := f.read(FILE_PIECE):
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                pending.append(block)
                continue
            pending.append(block[:cut])
            yield b"".join(pending)
            pending = [block[cut:]] if cut < len(block) else []
    if pending:
        yield b"".join(pending)


def write_mboxrd(rows: Iterable[Row], out: BinaryIO, home: Path | None = None) -> int:
    """Write `rows` (with at least `raw`, `from_addr`, `date`, `first_seen`) to `out` as
    mboxrd; return how many were written. With `home`, a message truncated in the index
    is written whole from its file."""
    count = 0
    for row in rows:
        path = _whole_file(row, home)
        pieces: Iterable[bytes] = [bytes(row["raw"])] if path is None else _lines(path)
        out.write(envelope(row))
        last = b""
        for piece in pieces:
            # A piece starts a line, so ^ in the pattern finds every line's start.
            out.write(_FROM_LINE.sub(rb">\1", piece))
            last = piece or last
        out.write(b"\n" if last.endswith(b"\n") else b"\n\n")
        count += 1
    return count


def message_json(row: Row, *, raw: bool = True) -> dict[str, Any]:
    """The JSON object of one stored message (see the module docstring); without the
    raw message's two fields (its last two) if not `raw`."""
    fields = {
        "source": row["source"],
        "month": row["month"],
        "key": row["key"],
        "message_id": row["message_id"],
        "date": iso(row["date"]),
        "date_raw": row["date_raw"],
        "date_flag": row["date_flag"],
        "from_name": row["from_name"],
        "from_addr": row["from_addr"],
        "subject": row["subject"],
        "in_reply_to": row["in_reply_to"],
        "references": (row["refs"] or "").split(),
        "conflict": bool(row["conflict"]),
        "sha256": row["sha256"],
        "parse_error": row["parse_error"],
        "truncated": row.get("truncated"),
    }
    if raw:
        message = bytes(row["raw"])
        fields["raw"] = message.decode("utf-8", "replace")
        fields["raw_base64"] = base64.b64encode(message).decode("ascii")
    return fields


# Bytes of a raw message turned into JSON at a time (a multiple of 3: whole base64 units).
JSONL_PIECE = 3 * 2**18


def write_jsonl(
    rows: Iterable[Row], out: BinaryIO, piece: int = JSONL_PIECE, home: Path | None = None
) -> int:
    """Write one JSON object per line (UTF-8), `message_json`'s, byte for byte; return
    how many were written. The raw message goes out `piece` bytes at a time: made
    whole, as text, escaped and encoded, a 200 MB message took 1.6 GB. With `home`, a
    message truncated in the index is written whole from its file."""
    piece = max(3, piece - piece % 3)  # base64 pieces join only in whole 3-byte units
    count = 0
    for row in rows:
        pieces = _raw_pieces(row, home, piece)
        head = json.dumps(message_json(row, raw=False), ensure_ascii=False, separators=(",", ":"))
        out.write(head[:-1].encode("utf-8"))  # the object stays open for the raw fields
        out.write(b',"raw":"')
        text = codecs.getincrementaldecoder("utf-8")("replace")
        for raw in pieces():
            out.write(_json_chars(text.decode(raw)))
        out.write(_json_chars(text.decode(b"", final=True)))
        out.write(b'","raw_base64":"')
        for raw in pieces():
            out.write(base64.b64encode(raw))
        out.write(b'"}\n')
        count += 1
    return count


def _raw_pieces(
    row: Row, home: Path | None, piece: int
) -> Callable[[], Iterator[bytes | memoryview]]:
    """What gives `row`'s raw message `piece` bytes at a time (the last fewer), each
    time it is called: from its file if truncated in the index (see `_whole_file`)."""
    path = _whole_file(row, home)

    def stored() -> Iterator[bytes | memoryview]:
        raw = memoryview(row["raw"])
        return (raw[start : start + piece] for start in range(0, len(raw), piece))

    def whole() -> Iterator[bytes | memoryview]:
        assert path is not None
        with open(path, "rb") as f:
            while data := f.read(piece):  # a file's read gives all it asks but at the end
                yield data

    return stored if path is None else whole


def _json_chars(text: str) -> bytes:
    """`text` escaped as in a JSON string, without the quotes (escapes are per
    character, so pieces escaped one by one make the whole)."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")


def iter_messages(tx: Tx, source: str, month: str | None = None) -> Iterator[Row]:
    """The stored messages of `source` (of one month if given) ordered by month, byte
    position in the month file (messages without one last), id; `BATCH` in memory, or
    fewer if they are more than `BATCH_BYTES`."""
    for batch in message_batches(tx, source, month):
        yield from messages_by_id(tx, batch)


def message_batches(tx: Tx, source: str, month: str | None = None) -> Iterator[list[int]]:
    """The ids of `iter_messages`, in its order, in batches of at most `BATCH` messages
    and, unless one message is more, `BATCH_BYTES`."""
    if month is None:
        rows = tx.stream("export_message_ids", source=source)
    else:
        rows = tx.stream("export_month_message_ids", source=source, month=month)
    batch: list[int] = []
    size = 0
    for row in rows:
        if batch and size + int(row["size"] or 0) > BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(int(row["id"]))
        size += int(row["size"] or 0)
        if len(batch) == BATCH:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def messages_by_id(tx: Tx, ids: list[int]) -> list[Row]:
    """The messages `ids` (all fields `write_mboxrd` and `write_jsonl` need), in that
    order; a message deleted since its id was read is skipped, not an error."""
    rows = {int(r["id"]): r for r in tx.all("export_messages_by_id", ids=json.dumps(ids))}
    return [rows[i] for i in ids if i in rows]


def check_month(month: str | None) -> None:
    """Raise UsageError unless `month` is None, 'YYYY-MM' or 'undated'."""
    if month is not None and month != UNDATED and not valid_month(month):
        raise UsageError(f"not a month: {month!r} (expected YYYY-MM or {UNDATED!r})")


def export_messages(
    tx: Tx, source: str, month: str | None, fmt: str, out: BinaryIO, home: Path | None = None
) -> int:
    """Write the messages of list `source` (only `month`, 'YYYY-MM' or 'undated', if given)
    to `out` as 'mbox' (mboxrd) or 'jsonl'; return how many were written; messages
    truncated in the index whole from their files under `home`. Raises UsageError for a
    bad month or format; the source itself is not checked."""
    check_month(month)
    rows = iter_messages(tx, source, month)
    if fmt == "mbox":
        return write_mboxrd(rows, out, home)
    if fmt == "jsonl":
        return write_jsonl(rows, out, home=home)
    raise UsageError(f"unknown export format {fmt!r} (expected one of {', '.join(FORMATS)})")
