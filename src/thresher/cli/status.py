"""`thresher status`: sources, jobs, what runs now."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from ..redact import redact_url
from ..status import collect_status
from .app import App
from .commands import examples, summary
from .output import print_table, stdout_is_terminal

__all__ = ["status_command"]


@click.command(
    "status",
    short_help=summary("status"),
    epilog=examples(
        "thresher status",
        "thresher --db postgresql://harvest@db.internal/thresher status --json",
    ),
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="As one JSON object: store; sources, each with last_run (id, started, finished,"
    " outcome, counts, error, shortfall), last_error and, for mail archives, archive"
    " (messages, months); jobs per state; running jobs; live workers.",
)
@click.pass_obj
def status_command(app: App, as_json: bool) -> None:
    """Per source the last run, its outcome, counts and last error; jobs per state;
    what is running now and which workers are alive."""
    config = app.config
    with app.store(read=True) as store, store.transaction(write=False) as tx:
        info = {
            "backend": store.backend,
            "url": redact_url(store.url),
            "schema_version": store.schema_version(),
        }
        status = collect_status(tx, time.time(), config.lease_seconds, info)
    if as_json:
        click.echo(json.dumps(status, indent=2))
        return
    # On a terminal, tables sized to it; piped, tab-separated lines (`print_table`).
    terminal = stdout_is_terminal()
    click.echo(f"store: {info['backend']} {info['url']} (schema {info['schema_version']})")
    rows = []
    for s in status["sources"]:
        run = s["last_run"] or {}
        counts = ", ".join(f"{k} {v}" for k, v in sorted((run.get("counts") or {}).items()))
        error = s["last_error"] or ""
        rows.append(
            (
                s["name"],
                s["type"],
                run.get("started") or "never",
                (run.get("outcome") or "")
                + (f" ({run['shortfall']} short)" if run.get("shortfall") else ""),
                counts,
                error[:80] if terminal else error,
            )
        )
    print_table(("source", "type", "last run", "outcome", "jobs", "last error"), rows)
    for s in status["sources"]:
        if "archive" in s:
            _print_archive(s["name"], s["archive"])
    click.echo("jobs: " + ", ".join(f"{k} {v}" for k, v in status["jobs"].items()))
    for r in status["running"]:
        click.echo(f"running: {r['job']} ({r['kind']}) by {r['owner']} since {r['since']}")
    for w in status["workers"]:
        holds = f", holds {len(w['jobs'])} jobs" + (
            f" and hosts {', '.join(w['hosts'])}" if w["hosts"] else ""
        )
        click.echo(
            f"worker: {w['name']} on {w['hostname']}, heartbeat {w['heartbeat']}, "
            f"{w['jobs_done']} jobs done ({w['jobs_per_second']}/s){holds}"
        )


def _print_archive(name: str, archive: dict[str, Any]) -> None:
    """Open months in full (they are the ones still moving); complete ones as a count."""
    months = archive["months"]
    complete = [m for m in months if m["state"] == "complete"]
    click.echo(
        f"{name}: {archive['messages']} messages, {len(months)} months ({len(complete)} complete)"
    )
    open_months = [m for m in months if m["state"] != "complete"]
    if not open_months:
        return
    print_table(
        ("month", "state", "expected", "in file", "stored", "missing", "last checked"),
        [
            (
                m["month"],
                m["state"],
                "" if m["expected"] is None else str(m["expected"]),
                str(m["counted"]),
                str(m["stored"]),
                str(m["missing"] or ""),
                m["last_checked"] or "",
            )
            for m in open_months
        ],
    )
