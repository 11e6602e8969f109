"""What the pages of a crawl and of the ingest show (URLs fetched from the web, their
states, the WARC files that hold them), read as plain data, as `data` says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..clock import iso
from ..sources.ingest import ingest_warc_dir
from ..sources.types import shown_options
from ..sources.web import warc_dir
from ..store import Row, Tx
from .data import NEWEST, PAGE, NotFound, crawl_run_json, named_source, source_runs

__all__ = ["CRAWL_STATES", "capture", "crawl_page", "ingest_page", "warc_files"]

# URL states of a crawl, as the ledger writes them, in the order the page shows them.
CRAWL_STATES = ("done", "error", "redirect", "robots", "capped", "queued")
# Counts of URLs per state stop at this (the page says "10000+").
COUNT_CAP = 10_000


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
        crawl_run_json(r) for r in tx.all("serve_crawl_runs", source=name, before=NEWEST, limit=20)
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
