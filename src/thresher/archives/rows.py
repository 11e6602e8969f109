"""Messages to store rows: parsed in a child process when a month is big.

Parsing a message (headers, date, addresses, body text, digest) costs about 130 µs of
pure Python, and storing it about as much, most of that in SQLite with the GIL held row
by row. In one process the two take turns; with the parsing of one month in a child
process while another month is written, a harvest uses both cores of a small machine
(the mail benchmark: see benchmarks/README.md). Small months are parsed inline, where a
round trip to the child would cost more than it saves.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..childproc import spawn_pool
from .body import text_body
from .mbox import RawMessage
from .message import Message, parse_message
from .months import month_of
from .normal import normal_digest
from .units import files_by_date

__all__ = ["PARALLEL_MIN", "display_name", "message_rows", "parse_rows", "whole_message_path"]

log = logging.getLogger("thresher.archives")

# Months with fewer messages are parsed inline.
PARALLEL_MIN = 200

_NAME_BEFORE_ANGLE = re.compile(r'^\s*"?(.*?)"?\s*<[^<>]*>\s*$', re.DOTALL)
_NAME_IN_COMMENT = re.compile(r"\(([^()]*)\)\s*$")

_pool: ProcessPoolExecutor | None = None
_pool_failed = False


def whole_message_path(sha256: str) -> Path:
    """Where, under the home folder, a message too long for the index is kept whole:
    by the SHA-256 of its bytes (the `sha256` of its row)."""
    return Path("messages", sha256[:2], sha256)


def _clean(text: str | None) -> str | None:
    # PostgreSQL text cannot hold NUL; the raw bytes keep it.
    return text.replace("\x00", "") if text is not None and "\x00" in text else text


def display_name(from_: str | None) -> str | None:
    """The sender's name in a From value: `Ann <ann@x>`, `"Doe, J." <j@x>`, or the
    comment form pipermail writes, `ann at x (Ann)`; None when only an address is given."""
    if not from_:
        return None
    match = _NAME_BEFORE_ANGLE.match(from_) or _NAME_IN_COMMENT.search(from_)
    return (match.group(1).strip() or None) if match else None


def message_rows(
    source: str, unit: str, messages: Sequence[RawMessage], now: float
) -> list[dict[str, Any]]:
    """The `insert_message` parameters of each message, in order. Never raises: a
    message whose headers, text or normal form cannot be read (a codec that fails in a
    way nobody foresaw) is stored with its raw bytes and what could be read, and the
    reason in `parse_error`; the month goes on."""
    moment = datetime.fromtimestamp(now, UTC)
    return [_row(source, unit, raw, now, moment) for raw in messages]


def _reason(part: str, exc: BaseException) -> str:
    return f"{part}: {type(exc).__name__}: {exc}"[:500]


def _row(source: str, unit: str, raw: RawMessage, now: float, moment: datetime) -> dict[str, Any]:
    # A message too long for the index (`RawMessage.size`) is parsed, searched and
    # stored from its start; its file holds it whole.
    data = raw.raw
    sha256 = raw.sha256 or hashlib.sha256(data).hexdigest()
    truncated = None
    if raw.size is not None:
        truncated = (
            f"truncated-in-index: {raw.size} bytes, the first {len(data)} stored"
            f" (max_message_bytes); the whole message is in HOME/{whole_message_path(sha256)}"
        )
    errors: list[str] = []
    try:
        normal = normal_digest(data)
    except Exception as exc:  # normal_form never raises; if it ever does, the raw
        errors.append(_reason("normal form", exc))  # digest is as stable a stand-in
        normal = sha256
    try:
        msg: Message | None = parse_message(data, list_name=source, now=moment, normal=normal)
    except Exception as exc:
        errors.append(_reason("headers", exc))
        msg = None
    try:
        body: str | None = text_body(data)
    except Exception as exc:
        errors.append(_reason("body", exc))
        body = None
    if msg is None:
        msg = Message(
            "sha256:" + normal, None, None, None, None, None, None, None, None, (), source, data
        )
    date = msg.date.timestamp() if msg.date is not None else None
    month = unit
    if files_by_date(unit):
        # A plain mbox (a git epoch, a range of articles) has no months of its own: file
        # each message under its Date's, unless the date is missing, unreadable or in
        # the future.
        month = month_of(date) if date is not None and msg.date_flag is None else "undated"
    return dict(
        source=source,
        month=month,
        key=_clean(msg.key),
        sha256=sha256,
        norm_sha256=normal,
        message_id=_clean(msg.message_id),
        date=date,
        date_raw=_clean(msg.date_raw),
        date_flag=msg.date_flag,
        from_name=_clean(display_name(msg.from_)),
        from_addr=_clean(msg.from_addr),
        subject=_clean(msg.subject),
        in_reply_to=_clean(msg.in_reply_to),
        refs=_clean(" ".join(msg.references)) or None,
        body=_clean(body),
        raw=data,
        position=raw.offset,
        parse_error=_clean("; ".join(errors)) or None,
        truncated=truncated,
        now=now,
    )


async def parse_rows(
    source: str, unit: str, messages: Sequence[RawMessage], now: float
) -> list[dict[str, Any]]:
    """`message_rows`, in this process's parsing child when the month is big enough and
    the machine has a core to spare; inline otherwise, or if the child died."""
    global _pool, _pool_failed
    if len(messages) < PARALLEL_MIN or (os.cpu_count() or 1) < 2 or _pool_failed:
        return message_rows(source, unit, messages, now)
    if _pool is None:
        _pool = spawn_pool(1)
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(_pool, message_rows, source, unit, list(messages), now)
    except Exception as exc:  # message_rows never raises: the child could not run it
        log.warning("the message parsing process failed (%s); parsing in this process", exc)
        _pool_failed = True
        pool, _pool = _pool, None
        pool.shutdown(wait=False, cancel_futures=True)
        return message_rows(source, unit, messages, now)
