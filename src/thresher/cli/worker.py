"""`thresher worker`: a long-lived process that works on every open run of a shared store.

Start as many as you like, on as many machines as can reach the PostgreSQL store; any
`thresher run`, `crawl` or `ingest run` against that store (or `thresher run --detach`,
which only queues) is shared among them. Each job is leased by one worker at a time, a
killed worker's leases expire and its jobs go to the others, and SIGTERM (or SIGINT)
makes a worker finish what it holds within the grace period and hand the rest back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time

import click

from .. import runtime
from ..clock import SystemClock
from ..config import Config
from ..jobs import PoolStats
from ..jobs.queue import take_worker_name
from ..liveness import BOOT_ID, HOST, is_alive
from ..plan import ExecutionPlan
from ..redact import redact_url
from ..sources.types import load_builtin_types
from . import limits
from .app import App, setup_logging
from .commands import examples, summary
from .run import JobCounts, open_async_store, stop_on_signals

__all__ = ["worker_command"]

log = logging.getLogger("thresher.worker")

# Seconds between two progress lines in the log.
PROGRESS_SECONDS = 30.0


async def serve(config: Config, owner: str) -> PoolStats:
    store = await open_async_store(config)
    counts = JobCounts()
    plan = ExecutionPlan(config, store, SystemClock(), owner=owner, listener=counts)
    started = time.monotonic()

    async def report() -> None:
        while True:
            await asyncio.sleep(PROGRESS_SECONDS)
            rate = counts.done / max(1e-9, time.monotonic() - started)
            log.info("%s (%.1f jobs/s)", counts.line(), rate)

    reporter = asyncio.create_task(report())
    try:
        with stop_on_signals(plan, config):
            return await plan.serve(config.workers)
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
        await store.close()


@click.command(
    "worker",
    short_help=summary("worker"),
    epilog=examples(
        "thresher --db postgresql://harvest@db.internal/thresher worker --name w1 -c 8",
        "thresher run --detach && thresher worker  # SQLite: a worker on this machine",
    ),
)
@click.option(
    "--db",
    metavar="URL",
    help="The shared store, postgresql://… (same as the global --db). [env THRESHER_DB]",
)
@click.option(
    "-c",
    "--concurrency",
    "-w",
    "--workers",
    "concurrency",
    type=limits.workers(),
    help="Jobs this worker runs at once (-w/--workers: as `run` once said)."
    " [env THRESHER_WORKERS; default 4]",
)
@click.option(
    "--name",
    help="This worker's name in `thresher status` [the host name]; if a live worker has it,"
    " NAME-2, NAME-3…",
)
@click.option(
    "--grace",
    "grace_seconds",
    type=limits.grace(),
    help="Seconds in-flight jobs get to finish on SIGTERM before they are handed back.",
)
@click.pass_obj
def worker_command(
    app: App,
    db: str | None,
    concurrency: int | None,
    name: str | None,
    grace_seconds: float | None,
) -> None:
    """Work on every open run of the store until stopped (SIGTERM or Ctrl-C).

    Runs are opened by `thresher run` (add --detach to only queue them), `thresher
    crawl` and `thresher ingest run`; workers close each run when its jobs are done."""
    config = app.with_flags(db=db, workers=concurrency, grace_seconds=grace_seconds)
    setup_logging(app.verbose, None)
    # The source types (the plan would load them) before the name is taken: from then
    # on the worker is seen, and a SIGTERM must soon find its handler installed, not
    # kill it while it imports.
    load_builtin_types()
    with app.store() as store, store.transaction() as tx:
        now = time.time()
        owner = take_worker_name(
            tx,
            name or HOST,
            now,
            lambda row: is_alive(row, now, 2 * config.lease_seconds),
            host=HOST,
            pid=os.getpid(),
            boot_id=BOOT_ID,
        )
    where = redact_url(config.store_url)
    log.info("worker %s: serving %s with %d at once", owner, where, config.workers)
    stats = runtime.run(serve(config, owner))
    click.echo(
        f"worker {owner} stopped: jobs done {stats.done}, retried {stats.retried}, "
        f"failed {stats.failed}, handed back {stats.released}"
    )
