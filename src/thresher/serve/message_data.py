"""What a mail archive's threads, messages and search show, read as plain data, as
`data` says.
"""

from __future__ import annotations

import json
from typing import Any

from ..archives.search import search_messages
from ..clock import iso
from ..sources.archives import ARCHIVE_TYPE_NAMES
from ..store import Row, Tx
from .data import PAGE, NotFound, named_source
from .threads import build_threads, first_ref

__all__ = ["message_head", "message_json", "search_page", "thread_ids", "thread_page"]

# A thread stops growing here (a runaway References chain must not read the list).
THREAD_CAP = 2_000
# Search results beyond this many are not paged to (each page is searched afresh).
SEARCH_CAP = 500


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
