"""What each page of `thresher serve` shows, read from the store as plain data.

Every function takes an open read-only transaction and returns JSON-ready values (times
as ISO 8601 UTC strings, as in `status --json`): the HTML pages render them, the
`/api/…` routes send them as they are, so both always agree. The SQL is in
store/queries/serve.sql; every query goes through an index and reads a page of rows
(see migration 0017), except the status itself, which is `collect_status` unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..archives.export import UNDATED
from ..archives.months import ALL, month_of, valid_month
from ..archives.search import search_messages
from ..clock import iso
from ..errors import UsageError
from ..sources import get_source
from ..sources.archives import ARCHIVE_TYPE_NAMES
from ..sources.ingest import ingest_warc_dir
from ..sources.types import shown_options
from ..sources.web import warc_dir
from ..status import archive_status, collect_status
from ..store import Row, Tx
from .threads import build_threads, first_ref

__all__ = [
    "CRAWL_STATES",
    "MONTH_CAP",
    "PAGE",
    "NotFound",
    "capture",
    "check_month",
    "crawl_page",
    "dashboard",
    "ingest_page",
    "list_page",
    "message_head",
    "message_json",
    "month_page",
    "named_source",
    "number",
    "search_page",
    "source_runs",
    "thread_ids",
    "thread_page",
    "warc_files",
]

# Rows per page of a listing.
PAGE = 50
# Threads are built from at most this many messages of a month (its headers only).
MONTH_CAP = 10_000
# A thread stops growing here (a runaway References chain must not read the list).
THREAD_CAP = 2_000
# Search results beyond this many are not paged to (each page is searched afresh).
SEARCH_CAP = 500
# URL states of a crawl, as the ledger writes them, in the order the page shows them.
CRAWL_STATES = ("done", "error", "redirect", "robots", "capped", "queued")
# Counts of URLs per state stop at this (the page says "10000+").
COUNT_CAP = 10_000
# The largest id a key can have: "before" this is "from the newest".
_NEWEST = 2**62


class NotFound(UsageError):
    """Nothing has that name or number (HTTP 404)."""


def number(text: str) -> int:
    """A number from a path; NotFound for anything else."""
    try:
        return int(text)
    except ValueError:
        raise NotFound(f"not a number: {text!r}") from None


def named_source(tx: Tx, name: str, types: Collection[str] | None = None) -> Any:
    try:
        source = get_source(tx, name)
    except UsageError:
        raise NotFound(f"no source named {name!r}") from None
    if types is not None and source.type not in types:
        raise NotFound(f"{name!r} is a {source.type} source")
    return source


def _run_json(r: Row) -> dict[str, Any]:
    return {
        "id": int(r["id"]),
        "started": iso(r["started"]),
        "finished": iso(r["finished"]),
        "outcome": r["outcome"],
        "counts": json.loads(r["counts"]),
        "error": r["error"],
        "shortfall": None if r["shortfall"] is None else int(r["shortfall"]),
    }


def source_runs(tx: Tx, name: str, before: int | None = None, limit: int = 20) -> list[Any]:
    """A source's runs, newest first (a page before run `before`)."""
    rows = tx.all("serve_source_runs", source=name, before=before or _NEWEST, limit=limit)
    return [_run_json(r) for r in rows]


# --- the dashboard ------------------------------------------------------------------------


def _months_summary(months: list[dict[str, Any]]) -> dict[str, Any]:
    checked = [m["last_checked"] for m in months if m["last_checked"]]
    return {
        "months": len(months),
        "complete": sum(1 for m in months if m["state"] == "complete"),
        "open": sum(1 for m in months if m["state"] != "complete"),
        "short": sum(1 for m in months if _short(m)),
        "missing": sum(m["missing"] for m in months),
        "last_checked": max(checked) if checked else None,
    }


def _short(m: dict[str, Any]) -> bool:
    return m["expected"] is not None and m["expected"] > m["stored"]


def _crawl_run_json(r: Row) -> dict[str, Any]:
    seconds = max(0.0, float(r["updated"]) - float(r["started"]))
    return {
        "run": int(r["run_id"]),
        "started": iso(r["started"]),
        "updated": iso(r["updated"]),
        **{
            k: int(r[k])
            for k in (
                "pages",
                "errors",
                "bytes",
                "redirects",
                "not_modified",
                "duplicates",
                "robots_excluded",
                "queued",
                "hosts",
            )
        },
        "seconds": round(seconds, 1),
        "pages_per_second": round(int(r["pages"]) / seconds, 2) if seconds > 0 else None,
        "warc_file": r["warc_file"],
    }


def dashboard(tx: Tx, now: float, lease_seconds: float, store: dict[str, Any]) -> dict[str, Any]:
    """`status --json` (key `status`, unchanged) and, per source, what the dashboard
    adds: a mail archive's months summed up, a crawl's latest run."""
    status = collect_status(tx, now, lease_seconds, store)
    crawls = {r["source"]: _crawl_run_json(r) for r in tx.all("serve_crawl_latest")}
    extra: dict[str, Any] = {}
    for s in status["sources"]:
        if "archive" in s:
            extra[s["name"]] = {"archive": _months_summary(s["archive"]["months"])}
        elif s["name"] in crawls:
            extra[s["name"]] = {"crawl": crawls[s["name"]]}
    return {"status": status, "extra": extra}


# --- a mail archive -----------------------------------------------------------------------


def _cell_state(m: dict[str, Any] | None) -> str:
    """complete, open, missing (the archive counts more than is stored, or lost mail
    that is stored), never (listed, never harvested), none (not listed)."""
    if m is None:
        return "none"
    if _short(m) or m["missing"] > 0:
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
        for e in tx.all("serve_events", source=name, before=before or _NEWEST, limit=PAGE)
    ]
    return {
        "name": name,
        "type": source.type,
        "url": source.url,
        "archive": archive,
        "summary": _months_summary(months),
        "grid": _grid(grid_months, now),
        "filed": filed,
        "events": events,
        "runs": source_runs(tx, name, limit=10),
    }


def message_head(r: Row) -> dict[str, Any]:
    """A message as listings show it (no body, no raw bytes)."""
    return {
        "id": int(r["id"]),
        "month": r.get("month"),
        "message_id": r["message_id"],
        "in_reply_to": r["in_reply_to"],
        "subject": r["subject"],
        "from_name": r["from_name"],
        "from_addr": r["from_addr"],
        "date": iso(r["date"]),
        "date_flag": r["date_flag"],
        "conflict": bool(r["conflict"]),
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


def _thread_root(tx: Tx, name: str, head: Row) -> str | None:
    """The Message-ID the thread of `head` starts from: the first of its References, or
    up its In-Reply-To chain as far as the list holds it."""
    seen: set[str] = set()
    node = head
    for _ in range(100):
        root = first_ref(node["refs"])
        if root:
            return root
        parent = node["in_reply_to"]
        if not parent or parent in seen:
            break
        seen.add(parent)
        found = tx.one("serve_message_by_message_id", source=name, message_id=parent)
        if found is None:
            return str(parent)
        node = found
    return None if node["message_id"] is None else str(node["message_id"])


def thread_page(tx: Tx, name: str, message: int) -> dict[str, Any]:
    """The whole thread of message `message`, across months: from its root, every
    message naming a message of the thread (see serve.sql), in reading order."""
    head = tx.one("serve_message_head", id=message)
    if head is None or head["source"] != name:
        raise NotFound(f"no message {message} in {name!r}")
    root = _thread_root(tx, name, head)
    rows: dict[int, Row] = {int(head["id"]): head}
    frontier = {root} if root else set()
    if head["message_id"]:
        frontier.add(head["message_id"])
    known: set[str] = set()
    while frontier and len(rows) < THREAD_CAP:
        known |= frontier
        found = tx.all(
            "serve_thread_members", source=name, ids=json.dumps(sorted(frontier)), limit=THREAD_CAP
        )
        frontier = set()
        for r in found:
            rows.setdefault(int(r["id"]), r)
            mid = r["message_id"]
            if mid and mid not in known:
                frontier.add(mid)
    threads = build_threads(rows.values())
    items = [{"depth": d, **message_head(r)} for t in threads for d, r in t.messages]
    return {
        "name": name,
        "id": message,
        "subject": head["subject"],
        "root": root,
        "messages": items,
        "capped": len(rows) >= THREAD_CAP,
    }


def thread_ids(page: dict[str, Any]) -> list[int]:
    return [int(m["id"]) for m in page["messages"]]


def message_json(tx: Tx, name: str, message: int) -> tuple[dict[str, Any], bytes]:
    """One message: its listing fields, its stored text and the other stored fields;
    and its raw bytes (the caller parses them for headers and attachments)."""
    from .mail import parse_for_display

    row = tx.one("serve_message", id=message)
    if row is None or row["source"] != name:
        raise NotFound(f"no message {message} in {name!r}")
    raw = bytes(row["raw"])
    parent = None
    if row["in_reply_to"]:
        found = tx.one("serve_message_by_message_id", source=name, message_id=row["in_reply_to"])
        parent = int(found["id"]) if found else None
    parsed = parse_for_display(raw, row["body"])
    return {
        **message_head(row),
        "references": (row["refs"] or "").split(),
        "parent": parent,
        "date_raw": row["date_raw"],
        "sha256": row["sha256"],
        "size": len(raw),
        "first_seen": iso(row["first_seen"]),
        "parse_error": row["parse_error"],
        "headers": [{"name": k, "value": v} for k, v in parsed.headers],
        "shown": [{"name": k, "value": v} for k, v in parsed.shown],
        "text": row["body"] or "",
        "text_truncated": parsed.text_truncated,
        "attachments": [
            {
                "part": a.index,
                "filename": a.filename,
                "content_type": a.content_type,
                "size": a.size,
            }
            for a in parsed.attachments
        ],
    }, raw


def search_page(
    tx: Tx, backend: str, query: str, source: str | None, page: int = 1
) -> dict[str, Any]:
    """`thresher search`'s hits (the same engine), `PAGE` a page."""
    if source:
        named_source(tx, source, ARCHIVE_TYPE_NAMES)
    pages_cap = SEARCH_CAP // PAGE
    page = min(max(1, page), pages_cap)
    rows = search_messages(tx, backend, query, source, limit=page * PAGE + 1)
    shown = rows[(page - 1) * PAGE : page * PAGE]
    return {
        "query": query,
        "list": source,
        "page": page,
        "more": len(rows) > page * PAGE and page < pages_cap,
        "hits": [
            {
                "id": int(r["id"]),
                "source": r["source"],
                "month": r["month"],
                "date": iso(r["date"]),
                "from_name": r["from_name"],
                "from_addr": r["from_addr"],
                "subject": r["subject"],
                "message_id": r["message_id"],
                "snippet": r["snippet"],
                "matches": [list(m) for m in r["matches"]],
            }
            for r in shown
        ],
    }


# --- crawls -------------------------------------------------------------------------------


def warc_files(home: Path, name: str) -> list[dict[str, Any]]:
    """The WARC files of a crawl (or of ingest, for `ingest`), newest first."""
    folder = ingest_warc_dir(home) if name == "ingest" else warc_dir(home, name)
    try:
        entries = [p for p in folder.iterdir() if p.name.endswith((".warc", ".warc.gz"))]
    except OSError:
        return []
    out = []
    for p in sorted(entries, key=lambda p: p.name, reverse=True):
        try:
            out.append({"name": p.name, "size": p.stat().st_size})
        except OSError:
            continue
    return out


def crawl_page(
    tx: Tx, home: Path, name: str, state: str = "done", after: int = 0, hosts_after: str = ""
) -> dict[str, Any]:
    """A crawl: its runs with their counters and rates, its URLs in one state (a page
    after seq `after`), a page of its hosts, its WARC files."""
    source = named_source(tx, name, ("web",))
    if state not in CRAWL_STATES:
        raise NotFound(f"no URL state {state!r} (one of {', '.join(CRAWL_STATES)})")
    runs = [
        _crawl_run_json(r)
        for r in tx.all("serve_crawl_runs", source=name, before=_NEWEST, limit=20)
    ]
    counts = {
        s: int(
            (tx.one("serve_crawl_state_count", source=name, state=s, cap=COUNT_CAP) or {}).get(
                "n", 0
            )
        )
        for s in CRAWL_STATES
    }
    urls = tx.all("serve_crawl_urls", source=name, state=state, after=after, limit=PAGE + 1)
    hosts = tx.all("serve_crawl_hosts", source=name, after=hosts_after, limit=PAGE + 1)
    return {
        "name": name,
        "url": source.url,
        "options": shown_options(source.type, source.options),
        "runs": runs,
        "source_runs": source_runs(tx, name, limit=10),
        "counts": counts,
        "count_cap": COUNT_CAP,
        "state": state,
        "urls": [
            {
                "hash": int(u["hash"]),
                "url": u["url"],
                "host": u["host"],
                "depth": int(u["depth"]),
                "seq": int(u["seq"]),
                "status": None if u["status"] is None else int(u["status"]),
                "error": u["error"],
                "fetched_at": iso(u["fetched_at"]),
                "warc_file": u["warc_file"],
                "warc_offset": None if u["warc_offset"] is None else int(u["warc_offset"]),
            }
            for u in urls[:PAGE]
        ],
        "next_after": int(urls[PAGE - 1]["seq"]) if len(urls) > PAGE else None,
        "hosts": [
            {
                "host": h["host"],
                "urls": int(h["urls"]),
                "done": int(h["done"]),
                "errors": int(h["errors"]),
            }
            for h in hosts[:PAGE]
        ],
        "hosts_next": hosts[PAGE - 1]["host"] if len(hosts) > PAGE else None,
        "warc_files": warc_files(home, name),
    }


def capture(tx: Tx, name: str, key: int) -> Row:
    """The ledger row of one URL of a crawl (by its hash), with where its record is."""
    named_source(tx, name, ("web",))
    row = tx.one("serve_capture", source=name, hash=key)
    if row is None:
        raise NotFound(f"no URL {key} in crawl {name!r}")
    return row


# --- ingest -------------------------------------------------------------------------------


def ingest_page(
    tx: Tx, stats: dict[str, Any], status: str | None = None, after: tuple[str, str] = ("", "")
) -> dict[str, Any]:
    """`stats` (`ingest stats --json`, `ingest_stats`, key `stats` unchanged), a page of
    results (of one status if given) after the key `after`, and the ingest runs."""
    params = {"after_type": after[0], "after_url": after[1], "limit": PAGE + 1}
    if status:
        rows = tx.all("serve_ingest_results_of_status", status=status, **params)
    else:
        rows = tx.all("serve_ingest_results", **params)
    results = [
        {
            "ingest_type": r["ingest_type"],
            "base_url": r["base_url"],
            "hit": bool(r["hit"]),
            "status": r["status"],
            "terminal_url": r["terminal_url"],
            "terminal_status": None if r["terminal_status"] is None else int(r["terminal_status"]),
            "terminal_sha1": r["terminal_sha1"],
            "error": r["error"],
            "attempts": int(r["attempts"]),
            "updated": iso(r["updated"]),
        }
        for r in rows[:PAGE]
    ]
    last = rows[PAGE - 1] if len(rows) > PAGE else None
    return {
        "stats": stats,
        "status": status,
        "results": results,
        "next": None if last is None else [last["ingest_type"], last["base_url"]],
        "runs": source_runs(tx, "ingest", limit=10),
    }
