"""What a mail archive's pages show: its months, calendar, events and runs; a month's
threads. Read as plain data, as `data` says.
"""

from __future__ import annotations

from typing import Any

from ..archives.export import UNDATED
from ..archives.months import ALL, month_of, valid_month
from ..clock import iso
from ..sources.archives import ARCHIVE_TYPE_NAMES
from ..status import archive_status
from ..store import Tx
from .data import NEWEST, PAGE, NotFound, months_summary, named_source, short, source_runs
from .message_data import message_head
from .threads import build_threads

__all__ = ["MONTH_CAP", "check_month", "list_page", "month_page"]

# Threads are built from at most this many messages of a month (its headers only).
MONTH_CAP = 10_000


def _cell_state(m: dict[str, Any] | None) -> str:
    """complete, open, missing (the archive counts more than is stored, or lost mail
    that is stored), never (listed, never harvested), none (not listed)."""
    if m is None:
        return "none"
    if short(m) or m["missing"] > 0:
        return "missing"
    if m["last_checked"] is None and m["last_fetched"] is None:
        return "never"
    return "complete" if m["state"] == "complete" else "open"


def _grid(months: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """A row per year from the first month to this one, a cell per month."""
    dated = [m for m in months if valid_month(m["month"])]
    if not dated:
        return []
    by_month = {m["month"]: m for m in dated}
    first = int(dated[0]["month"][:4])
    last = max(int(month_of(now)[:4]), int(dated[-1]["month"][:4]))
    years = []
    for year in range(last, first - 1, -1):
        cells: list[dict[str, Any]] = []
        for mm in range(1, 13):
            key = f"{year:04d}-{mm:02d}"
            m = by_month.get(key)
            cells.append({"month": key, "state": _cell_state(m), "info": m})
        stored = sum(c["info"]["stored"] for c in cells if c["info"])
        years.append({"year": year, "cells": cells, "stored": stored})
    return years


def list_page(tx: Tx, name: str, now: float, before: int | None = None) -> dict[str, Any]:
    """A mail archive: its months (as `status --json` gives them), the calendar grid,
    for a plain mbox the months its messages are filed under (by their Date), its
    events (a page before event `before`) and its latest runs."""
    source = named_source(tx, name, ARCHIVE_TYPE_NAMES)
    archive = archive_status(tx, name)
    months = archive["months"]
    filed = []
    if any(m["month"] == ALL for m in months):
        filed = [
            {"month": r["month"], "messages": int(r["n"])}
            for r in tx.all("serve_message_months", source=name)
        ]
        # One file: the grid shows the months its messages fall in, in the file's state.
        whole = next(m for m in months if m["month"] == ALL)
        grid_months = [
            {
                **whole,
                "month": f["month"],
                "expected": None,
                "counted": f["messages"],
                "stored": f["messages"],
                "missing": 0,
            }
            for f in filed
            if valid_month(f["month"])
        ]
    else:
        grid_months = months
    events = [
        {
            "id": int(e["id"]),
            "month": e["month"],
            "at": iso(e["at"]),
            "kind": e["kind"],
            "detail": e["detail"],
        }
        for e in tx.all("serve_events", source=name, before=before or NEWEST, limit=PAGE)
    ]
    return {
        "name": name,
        "type": source.type,
        "url": source.url,
        "archive": archive,
        "summary": months_summary(months),
        "grid": _grid(grid_months, now),
        "filed": filed,
        "events": events,
        "runs": source_runs(tx, name, limit=10),
    }


def check_month(month: str) -> None:
    if month not in (ALL, UNDATED) and not valid_month(month):
        raise NotFound(f"not a month: {month!r}")


def month_page(tx: Tx, name: str, month: str, page: int = 1) -> dict[str, Any]:
    """A month's threads, oldest first, `PAGE` threads a page."""
    named_source(tx, name, ARCHIVE_TYPE_NAMES)
    check_month(month)
    count = int((tx.one("serve_month_count", source=name, month=month) or {"n": 0})["n"])
    heads = tx.all("serve_month_heads", source=name, month=month, limit=MONTH_CAP)
    threads = build_threads(heads)
    pages = max(1, -(-len(threads) // PAGE))
    page = min(max(1, page), pages)
    shown = threads[(page - 1) * PAGE : page * PAGE]
    return {
        "name": name,
        "month": month,
        "messages": count,
        "threaded": len(heads),
        "threads": len(threads),
        "page": page,
        "pages": pages,
        "items": [t.as_json(message_head) for t in shown],
    }
