"""`thresher run`: one pass over the sources, or a schedule with --every."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict
from typing import Any

import click
from rich.console import Console

from .. import runtime
from ..clock import SystemClock
from ..config import Config
from ..crawl.settings import CrawlSettings
from ..errors import ThresherError
from ..jobs import Job
from ..jobs.child import prewarm
from ..plan import ExecutionPlan, RunReport, parse_duration
from ..sources.directory import list_sources
from ..store.aio import AsyncStore
from . import limits
from .app import App, setup_logging
from .commands import examples, summary
from .progress import Polled, live_progress

__all__ = [
    "EXIT_SOURCE_FAILED",
    "EXIT_SOURCE_INCOMPLETE",
    "JobCounts",
    "ProgressFactory",
    "open_async_store",
    "run_command",
    "run_plan",
    "stop_on_signals",
]

log = logging.getLogger("thresher.run")

# Exit code of a one-shot run in which a source failed (the failure is recorded too).
EXIT_SOURCE_FAILED = 4
# ... in which no source failed but one is incomplete: its jobs all succeeded, yet the
# archive counts messages the store does not hold (a server that lists more than it
# serves). Cron and scripts see it; the next run tries again for what is missing.
EXIT_SOURCE_INCOMPLETE = 5


class JobCounts:
    def __init__(self) -> None:
        self.done = self.failed = self.retried = 0

    def __call__(self, event: str, job: Job) -> None:
        if event == "done":
            self.done += 1
        elif event == "failed":
            self.failed += 1
        elif event == "retried":
            self.retried += 1

    def line(self) -> str:
        return f"jobs done {self.done}, retried {self.retried}, failed {self.failed}"


async def _run_progress(store: AsyncStore, plan: ExecutionPlan) -> tuple[int, int] | None:
    """(finished, total) jobs of the runs in progress, or None between runs."""
    pool = plan.pool
    if pool is None:
        return None
    row = await store.run(lambda tx: tx.one("runs_progress", runs=json.dumps(pool.runs)), False)
    return (int(row["finished"] or 0), int(row["total"] or 0)) if row else None


@contextmanager
def _progress(
    console: Console | None, counts: JobCounts, store: AsyncStore, plan: ExecutionPlan
) -> Iterator[None]:
    """The jobs of the runs done so far (the total grows as jobs spawn children)."""

    async def poll() -> Polled:
        done_total = await _run_progress(store, plan)
        return (counts.line(), *(done_total or (None, None)))

    with live_progress(console, poll):
        yield


ProgressFactory = Callable[
    [Console | None, JobCounts, AsyncStore, ExecutionPlan], AbstractContextManager[None]
]


async def run_plan(
    config: Config,
    names: tuple[str, ...],
    every: float | None,
    console: Console | None,
    progress: ProgressFactory | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    detach: bool = False,
) -> list[RunReport]:
    """Run the plan for `names` (with `options` over the sources' own for this run) with
    signal handling: the first SIGINT/SIGTERM stops gracefully, the second at once.
    `detach`: open the runs and return, leaving the work to `thresher worker`s."""
    store = await open_async_store(config)
    counts = JobCounts()
    plan = ExecutionPlan(config, store, SystemClock(), listener=counts)
    try:
        with stop_on_signals(plan, config), (progress or _progress)(console, counts, store, plan):
            if detach:
                return [await plan.run_once(names, options, detach=True)]
            if every is None:
                return [await plan.run_once(names, options)]
            return await plan.run_every(every, names)
    except asyncio.CancelledError:
        return [RunReport(interrupted=True)]
    finally:
        await store.close()


async def open_async_store(config: Config) -> AsyncStore:
    """The store a working process uses: PostgreSQL gets a connection per worker (up
    to 4), so that workers claim and commit in parallel."""
    connections = 1 if config.db is None else min(config.workers, 4)
    return await AsyncStore(config.store_url, connections).open()


@contextmanager
def stop_on_signals(plan: ExecutionPlan, config: Config) -> Iterator[None]:
    """The first SIGINT/SIGTERM stops `plan` gracefully (in-flight jobs get the grace
    period, the rest is handed back); the second cancels the current task at once."""
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    signals = 0

    def on_signal(signame: str) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            log.warning(
                "%s: stopping: nothing new starts; what is in flight gets a few seconds"
                " (at most %.0f s), then is committed; send it again to stop now",
                signame,
                config.grace_seconds,
            )
            plan.stop()
        elif main_task is not None:
            log.warning("%s again: stopping now; unfinished jobs go back to the queue", signame)
            main_task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig.name)
    try:
        yield
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _shards_to_start(app: App, names: tuple[str, ...]) -> int:
    """The shard processes the web sources this run names will start, for `prewarm`: one
    shard runs in this process (`thresher.jobs.child.here_or_in_child`)."""
    with app.store() as store, store.transaction(write=False) as tx:
        sources = list_sources(tx)
    total = 0
    for source in sources:
        if source.type != "web" or (names and source.name not in names):
            continue
        try:
            shards = CrawlSettings.from_source(source.url, source.options).shards
        except (ThresherError, ValueError):  # the run records what is wrong with it
            continue
        total += shards if shards > 1 else 0
    return max(0, total - 1)


@click.command(
    "run",
    short_help=summary("run"),
    epilog=examples("thresher run", "thresher run maven-dev nightly --every 1h -c 8"),
)
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option(
    "--every", metavar="DURATION", help="Repeat forever, a run every DURATION (1h, 15m, 1d)."
)
@click.option(
    "-c",
    "--concurrency",
    "-w",
    "--workers",
    "workers",
    type=limits.workers(),
    help="Jobs run at once (-w/--workers: the old name). [env THRESHER_WORKERS; default 4]",
)
@click.option(
    "--grace",
    "grace_seconds",
    type=limits.grace(),
    help="Seconds in-flight jobs get on SIGINT/SIGTERM.",
)
@click.option(
    "--detach",
    is_flag=True,
    help="Only queue the runs and return: `thresher worker` processes do the work.",
)
@click.option("--json", "as_json", is_flag=True, help="Print each run's report as a JSON line.")
@click.option(
    "--progress/--no-progress", default=None, help="Progress bar (default: on a terminal)."
)
@click.pass_obj
def run_command(
    app: App,
    names: tuple[str, ...],
    every: str | None,
    workers: int | None,
    grace_seconds: float | None,
    detach: bool,
    as_json: bool,
    progress: bool | None,
) -> None:
    """Harvest the sources NAME… (all when none is given): one pass, or forever with --every.

    Each run resumes what an interrupted run left; a failing source is recorded and
    tried again next run. SIGINT/SIGTERM: finish in-flight work, release the rest, exit 0.
    One pass exits 4 when a source failed, 5 when one is incomplete (its archive counts
    messages the store does not hold). With a PostgreSQL store (--db), `thresher worker`
    processes anywhere share the work."""
    if detach and every:
        raise click.UsageError("--detach queues one run; schedule it with cron instead of --every")
    interval = parse_duration(every) if every else None
    if not detach and interval is None:
        # First, while this process has one thread (the store is opened and closed).
        prewarm(_shards_to_start(app, names))
    config = app.with_flags(workers=workers, grace_seconds=grace_seconds)
    show = sys.stderr.isatty() if progress is None else progress
    console = Console(stderr=True) if show else None
    setup_logging(app.verbose, console)
    started = time.time()
    reports = runtime.run(run_plan(config, names, interval, console, detach=detach))
    failed = incomplete = False
    for report in reports:
        failed = failed or any(s.outcome == "failed" for s in report.sources)
        incomplete = incomplete or any(s.outcome == "incomplete" for s in report.sources)
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "interrupted": report.interrupted,
                        "sources": [asdict(s) for s in report.sources],
                    }
                )
            )
    if not as_json:
        if not any(r.sources for r in reports) and not any(r.interrupted for r in reports):
            click.echo("no sources to run: add one with 'thresher source add NAME URL'")
        for report in reports[-1:]:
            for s in report.sources:
                counts = ", ".join(f"{k} {v}" for k, v in sorted(s.counts.items()))
                line = f"{s.source}: {s.outcome}" + (f" ({counts})" if counts else "")
                if s.outcome == "queued":
                    line += f" as run {s.run_id}: `thresher worker` processes will do it"
                if s.shortfall:
                    line += f"; {s.shortfall} messages the archive counts are not stored"
                if s.problems:
                    line += f"; {s.problems}"
                click.echo(line + (f"; {s.error}" if s.error else ""))
            if report.interrupted:
                click.echo(
                    "interrupted: what was done is committed, the rest stays queued;"
                    " resume with the same command"
                )
        click.echo(f"took {time.time() - started:.1f} s")
    if interval is None and not any(r.interrupted for r in reports):
        if failed:
            sys.exit(EXIT_SOURCE_FAILED)
        if incomplete:
            sys.exit(EXIT_SOURCE_INCOMPLETE)
