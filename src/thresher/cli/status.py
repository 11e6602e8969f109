"""`thresher status`: sources, jobs, what runs now."""

from __future__ import annotations

import json
import time
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..redact import redact_url
from ..status import collect_status
from .app import App

__all__ = ["status_command"]


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="As JSON (fields: see README).")
@click.pass_obj
def status_command(app: App, as_json: bool) -> None:
    """Per source the last run, its outcome, counts and last error; jobs per state;
    what is running now and which workers are alive."""
    config = app.config
    with app.store() as store, store.transaction(write=False) as tx:
        info = {
            "backend": store.backend,
            "url": redact_url(store.url),
            "schema_version": store.schema_version(),
        }
        status = collect_status(tx, time.time(), config.lease_seconds, info)
    if as_json:
        click.echo(json.dumps(status, indent=2))
        return
    console = Console()
    console.print(f"store: {info['backend']} {info['url']} (schema {info['schema_version']})")
    table = Table("source", "type", "last run", "outcome", "jobs", "last error")
    for s in status["sources"]:
        run = s["last_run"] or {}
        counts = ", ".join(f"{k} {v}" for k, v in sorted((run.get("counts") or {}).items()))
        table.add_row(
            s["name"],
            s["type"],
            run.get("started") or "never",
            (run.get("outcome") or "")
            + (f" ({run['shortfall']} short)" if run.get("shortfall") else ""),
            counts,
            (s["last_error"] or "")[:80],
        )
    console.print(table)
    for s in status["sources"]:
        if "archive" in s:
            _print_archive(console, s["name"], s["archive"])
    console.print("jobs: " + ", ".join(f"{k} {v}" for k, v in status["jobs"].items()))
    for r in status["running"]:
        console.print(f"running: {r['job']} ({r['kind']}) by {r['owner']} since {r['since']}")
    for w in status["workers"]:
        holds = f", holds {len(w['jobs'])} jobs" + (
            f" and hosts {', '.join(w['hosts'])}" if w["hosts"] else ""
        )
        console.print(
            f"worker: {w['name']} on {w['hostname']}, heartbeat {w['heartbeat']}, "
            f"{w['jobs_done']} jobs done ({w['jobs_per_second']}/s){holds}"
        )


def _print_archive(console: Console, name: str, archive: dict[str, Any]) -> None:
    """Open months in full (they are the ones still moving); complete ones as a count."""
    months = archive["months"]
    complete = [m for m in months if m["state"] == "complete"]
    console.print(
        f"{name}: {archive['messages']} messages, {len(months)} months ({len(complete)} complete)"
    )
    open_months = [m for m in months if m["state"] != "complete"]
    if not open_months:
        return
    table = Table("month", "state", "expected", "in file", "stored", "missing", "last checked")
    for m in open_months:
        expected = "" if m["expected"] is None else str(m["expected"])
        table.add_row(
            m["month"],
            m["state"],
            expected,
            str(m["counted"]),
            str(m["stored"]),
            str(m["missing"] or ""),
            m["last_checked"] or "",
        )
    console.print(table)
