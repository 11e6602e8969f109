"""What each page of `thresher serve` shows, read from the store as plain data.

Every function takes an open read-only transaction and returns JSON-ready values (times
as ISO 8601 UTC strings, as in `status --json`): the HTML pages render them, the
`/api/…` routes send them as they are, so both always agree. The SQL is in
store/queries/serve.sql; every query goes through an index and reads a page of rows
(see migration 0017), except the status itself, which is `collect_status` unchanged.

This module holds the dashboard and what every page shares: a source by name, a number
from a path, a source's runs, an archive's months summed up and a crawl run's rates (the
dashboard shows both beside the archive's and the crawl's own pages). The pages of a mail
archive are in `archive_data`, its threads, messages and search in `message_data`,
crawls and the ingest in `web_data`.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from ..clock import iso
from ..errors import UsageError
from ..sources import get_source
from ..status import collect_status
from ..store import Row, Tx

__all__ = [
    "NEWEST",
    "PAGE",
    "NotFound",
    "crawl_run_json",
    "dashboard",
    "months_summary",
    "named_source",
    "number",
    "run_json",
    "short",
    "source_runs",
]

# Rows per page of a listing.
PAGE = 50
# The largest id a key can have: "before" this is "from the newest".
NEWEST = 2**62


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


def run_json(r: Row) -> dict[str, Any]:
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
    rows = tx.all("serve_source_runs", source=name, before=before or NEWEST, limit=limit)
    return [run_json(r) for r in rows]


# --- the dashboard ------------------------------------------------------------------------


def months_summary(months: list[dict[str, Any]]) -> dict[str, Any]:
    checked = [m["last_checked"] for m in months if m["last_checked"]]
    return {
        "months": len(months),
        "complete": sum(1 for m in months if m["state"] == "complete"),
        "open": sum(1 for m in months if m["state"] != "complete"),
        "short": sum(1 for m in months if short(m)),
        "missing": sum(m["missing"] for m in months),
        "last_checked": max(checked) if checked else None,
    }


def short(m: dict[str, Any]) -> bool:
    return m["expected"] is not None and m["expected"] > m["stored"]


def crawl_run_json(r: Row) -> dict[str, Any]:
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
    crawls = {r["source"]: crawl_run_json(r) for r in tx.all("serve_crawl_latest")}
    extra: dict[str, Any] = {}
    for s in status["sources"]:
        if "archive" in s:
            extra[s["name"]] = {"archive": months_summary(s["archive"]["months"])}
        elif s["name"] in crawls:
            extra[s["name"]] = {"crawl": crawls[s["name"]]}
    return {"status": status, "extra": extra}
