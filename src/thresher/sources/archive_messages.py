"""A unit's messages into the store: those longer than the `max_message_bytes` setting
written whole to a file first, the rows inserted and indexed for search, the unit's
stored messages counted. The port's checkpoints and the unit job both store this way.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..archives.mbox import RawMessage
from ..archives.months import ALL, valid_month
from ..archives.rows import parse_rows, whole_message_path
from ..archives.units import files_by_date
from ..jobs import JobContext
from ..store import Tx
from ..store.cdxj import fsync_directory

__all__ = ["count_of", "parse_messages", "store_rows"]


async def parse_messages(
    ctx: JobContext, source: str, unit: str, messages: list[RawMessage], now: float
) -> list[dict[str, Any]]:
    """The rows of `messages`, each message longer than the `max_message_bytes` setting
    written whole to its file first (in a thread: it can be hundreds of megabytes) and
    stored in the index from its start (see `thresher.archives.rows`). Empties
    `messages` then, which lets go of the month file the wholes were views of."""
    home, cap = ctx.config.home, ctx.config.max_message_bytes
    if any(m.whole is not None or len(m.raw) > cap for m in messages):
        spilled = await asyncio.to_thread(_spill, home, messages, cap)
        messages.clear()
        messages = spilled
    return await parse_rows(source, unit, messages, now)


def _spill(home: Path, messages: Sequence[RawMessage], cap: int) -> list[RawMessage]:
    """`messages`, those longer than `cap` bytes cut to their first `cap` once their
    whole bytes are in HOME/messages/ (synced: the row that names the file is committed
    after it, so a crash can leave a file without its row, never a row without its
    file; the next run writes the same file again)."""
    kept: list[RawMessage] = []
    for m in messages:
        whole = m.whole if m.whole is not None else m.raw if len(m.raw) > cap else None
        if whole is None:
            kept.append(m)
            continue
        sha256 = hashlib.sha256(whole).hexdigest()
        path = home / whole_message_path(sha256)
        if not (path.exists() and path.stat().st_size == len(whole)):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".part-{uuid.uuid4().hex}")
            try:
                with open(tmp, "xb") as out:
                    out.write(whole)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            fsync_directory(path.parent)
        kept.append(RawMessage(m.offset, m.raw[:cap], m.envelope, None, len(whole), sha256))
    return kept


def store_rows(
    tx: Tx, source: str, unit: str, rows: Sequence[Mapping[str, Any]], previous: int
) -> int:
    """Insert `rows` (a capture already stored adds nothing) and index them for search;
    the unit's stored messages after it. A month's are the messages filed under it, a
    plain mbox's every message of the source; a unit of another kind (a git epoch, a
    range of articles) files its messages by date, and counts what it added itself."""
    added = 0
    if files_by_date(unit) and unit != ALL and rows:
        pairs = sorted({(r["key"], r["norm_sha256"]) for r in rows})
        held = count_of(tx, "count_pairs_among", source=source, pairs=json.dumps(pairs))
        added = len(pairs) - held
    if rows:
        after = count_of(tx, "last_message_id")
        tx.execute_many("insert_message", rows)
        tx.execute("index_new_messages", after=after)
        for month in sorted({r["month"] for r in rows}):
            tx.execute("flag_conflicts", source=source, month=month)
    if unit == ALL:
        return count_of(tx, "count_source_messages", source=source)
    if valid_month(unit):
        return count_of(tx, "count_month_messages", source=source, month=unit)
    return previous + added


def count_of(tx: Tx, query: str, **params: Any) -> int:
    """The `n` of the one row `query` gives (0 without one)."""
    row = tx.one(query, **params)
    return int(row["n"]) if row else 0
