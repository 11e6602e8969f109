"""What `thresher status` reports, as plain data (the CLI renders it as a table or JSON).

The JSON shape is a contract documented in the README: add fields, never rename them.
"""

from __future__ import annotations

import json
from typing import Any

from .clock import iso
from .sources import list_sources
from .sources.archives import ARCHIVE_TYPE_NAMES
from .store import Tx

__all__ = ["archive_status", "collect_status", "iso"]

# A worker that has not sent a heartbeat for this many lease periods is shown as lost.
_LIVE_LEASES = 2


def archive_status(tx: Tx, source: str) -> dict[str, Any]:
    """Per month of a mail archive: what the archive counted, what the last harvest
    counted in its file, what is stored, and whether the month is complete."""
    count = tx.one("count_source_messages", source=source)
    return {
        "messages": int(count["n"]) if count else 0,
        "months": [
            {
                "month": m["month"],
                "state": m["state"],
                "expected": m["expected"],
                "counted": int(m["counted"]),
                "stored": int(m["stored"]),
                "missing": int(m["missing"]),
                "last_checked": iso(m["checked_at"]),
                "last_fetched": iso(m["fetched_at"]),
            }
            for m in tx.all("archive_months", source=source)
        ],
    }


def collect_status(
    tx: Tx, now: float, lease_seconds: float, store: dict[str, Any]
) -> dict[str, Any]:
    last_runs = {r["source"]: r for r in tx.all("last_runs")}
    sources = []
    for src in list_sources(tx):
        run = last_runs.get(src.name)
        last_error = tx.one("last_error", source=src.name)
        sources.append(
            {
                "name": src.name,
                "type": src.type,
                "url": src.url,
                "last_run": None
                if run is None
                else {
                    "id": int(run["id"]),
                    "started": iso(run["started"]),
                    "finished": iso(run["finished"]),
                    "outcome": run["outcome"],
                    "counts": json.loads(run["counts"]),
                    "error": run["error"],
                    "shortfall": None if run["shortfall"] is None else int(run["shortfall"]),
                },
                "last_error": last_error["error"] if last_error else None,
                "last_error_at": iso(last_error["finished"]) if last_error else None,
            }
        )
        if src.type in ARCHIVE_TYPE_NAMES:
            sources[-1]["archive"] = archive_status(tx, src.name)
    jobs = dict.fromkeys(("pending", "waiting", "leased", "done", "failed"), 0)
    jobs.update({r["state"]: int(r["n"]) for r in tx.all("job_counts")})
    running = [
        {
            "job": r["key"],
            "kind": r["kind"],
            "source": r["source"],
            "owner": r["lease_owner"],
            "attempts": int(r["attempts"]),
            "since": iso(r["updated"]),
            "lease_expires": iso(r["lease_expires"]),
        }
        for r in tx.all("leased_jobs")
    ]
    hosts: dict[str, list[str]] = {}
    for lease in tx.all("held_host_leases", now=now):
        hosts.setdefault(lease["owner"], []).append(lease["key"].split(":", 1)[1])
    workers = []
    for w in tx.all("live_workers", since=now - _LIVE_LEASES * lease_seconds):
        alive = max(1e-9, float(w["heartbeat"]) - float(w["started"]))
        workers.append(
            {
                "name": w["owner"],
                "hostname": w["hostname"],
                "pid": int(w["pid"]),
                "started": iso(w["started"]),
                "heartbeat": iso(w["heartbeat"]),
                "jobs_done": int(w["jobs_done"]),
                # As of its last heartbeat: jobs done since it started, per second.
                "jobs_per_second": round(int(w["jobs_done"]) / alive, 2),
                "jobs": [r["job"] for r in running if r["owner"] == w["owner"]],
                "hosts": sorted(hosts.get(w["owner"], [])),
            }
        )
    return {
        "store": store,
        "sources": sources,
        "jobs": jobs,
        "running": running,
        "workers": workers,
    }
