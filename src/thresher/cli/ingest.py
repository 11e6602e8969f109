"""`thresher ingest`: bulk ingest of full-text URLs named by digital libraries.

`thresher ingest load FILE` puts a dump's requests into the store (see
`thresher.ingest.requests` for the formats). It is a command of its own, not a source
run, because a dump is a one-off file someone downloaded: it is loaded once, reported
on at once (new, duplicate, rejected, with the reason of each rejected line), and
loading it again is harmless. A load with rejected lines still exits 0, since the
rejects are the report's business; only a file that cannot be read (2) or is damaged
part-way (1, after loading and reporting what came before the damage) fails.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from .. import runtime
from ..errors import SourceError, UnknownSource
from ..ingest.request_line import INGEST_TYPES
from ..ingest.requests import (
    MAX_REJECTS,
    DamagedInput,
    LoadReport,
    check_file,
    load_requests,
)
from ..ingest.walk import MAX_HOPS
from ..jobs.child import prewarm
from ..plan import ExecutionPlan
from ..sources import add_source, get_source
from ..sources.ingest import INGEST_URL, ingest_warc_dir, parse_statuses
from ..store.aio import AsyncStore
from . import limits
from .app import App, setup_logging
from .commands import examples, summary
from .ingest_report import register
from .progress import PLAIN_PROGRESS_SECONDS, Polled, live_progress
from .run import EXIT_SOURCE_FAILED, JobCounts, run_plan

__all__ = ["INGEST_SOURCE", "SHOWN_REJECTS", "ingest_group"]

log = logging.getLogger("thresher.ingest")

# The source `ingest run` runs as (made on first use).
INGEST_SOURCE = "ingest"
# Rejected lines listed by the text report; --json lists up to MAX_REJECTS.
SHOWN_REJECTS = 20

Progressed = Callable[[int, LoadReport], None]


@click.group(
    "ingest",
    short_help=summary("ingest"),
    epilog=examples(
        "thresher ingest load unpaywall.jsonl.gz --source unpaywall && thresher ingest run",
        "thresher ingest results --status success -o hits.jsonl",
    ),
)
def ingest_group() -> None:
    """Bulk ingest: URLs that digital libraries say hold the full text of a work."""


@contextmanager
def _progress(console: Console | None, path: Path) -> Iterator[Progressed]:
    """A bar over the file's bytes on a terminal; a log line every few seconds otherwise."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if console is not None:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task("reading", total=size or None)

            def show(position: int, report: LoadReport) -> None:
                bar.update(task, completed=position, description=report.summary())

            yield show
        return
    last = time.monotonic()

    def write(position: int, report: LoadReport) -> None:
        nonlocal last
        if time.monotonic() - last >= PLAIN_PROGRESS_SECONDS:
            last = time.monotonic()
            share = f" ({100 * position / size:.0f}% of the file)" if size else ""
            log.info("progress: %s%s", report.summary(), share)

    yield write


@ingest_group.command(
    "load",
    epilog=examples(
        "thresher ingest load unpaywall.jsonl.gz --source unpaywall",
        "thresher ingest load requests.tsv --json",
    ),
)
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--source",
    metavar="S",
    help="The link_source of lines that have none (a line's own value wins).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report as JSON: format, new, duplicate, rejected, rejects "
    f"(the first {MAX_REJECTS}, each {{line, reason}}), error, file, seconds.",
)
@click.pass_obj
def load_command(app: App, file: Path, source: str | None, as_json: bool) -> None:
    """Load the ingest requests of FILE: JSON Lines or TSV with a header line, gzipped
    or not (told from the content, not the name).

    A request is new unless the store has it already (same ingest_type, base_url,
    link_source and link_source_id), so loading a file again adds nothing. Prints
    new, duplicate and rejected counts and why each line was rejected; exits 0 even
    with rejected lines, 2 when FILE cannot be read, 1 when it is damaged part-way
    (what came before is loaded and reported).

    \b
    JSON Lines: {"ingest_type": …, "base_url": …, "link_source": …,
      "link_source_id": …, "release_stage": …, "ext_ids": {…}, "request": {…}};
      other keys go into request.
    TSV header columns: ingest_type, base_url, link_source (or --source),
      link_source_id, release_stage (optional), ext_ids.NAME (any number, e.g.
      ext_ids.doi); other columns go into request. An empty cell is no value."""
    check_file(file)  # before the store: a typo in FILE must not create a store
    console = Console(stderr=True) if sys.stderr.isatty() else None
    setup_logging(app.verbose, console)
    started = time.monotonic()
    damaged: DamagedInput | None = None
    with app.store() as store, _progress(console, file) as progress:
        try:
            report = load_requests(store, file, source, time.time(), progress=progress)
        except DamagedInput as exc:
            if exc.report is None:
                raise
            damaged, report = exc, exc.report
    seconds = time.monotonic() - started
    if as_json:
        out = {"file": str(file), **report.to_json(), "seconds": round(seconds, 3)}
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        click.echo(report.summary())
        for reject in report.rejects[:SHOWN_REJECTS]:
            click.echo(str(reject))
        more = report.rejected - min(len(report.rejects), SHOWN_REJECTS)
        if more:
            click.echo(f"… and {more} more rejected lines (--json lists the first {MAX_REJECTS})")
    if damaged is not None:
        raise damaged


@contextmanager
def _run_progress(
    console: Console | None, counts: JobCounts, store: AsyncStore, plan: ExecutionPlan
) -> Iterator[None]:
    """The URLs of the run done so far, of those it queued: a bar on a terminal, a log
    line every few seconds otherwise."""

    async def done_total() -> tuple[int, int] | None:
        pool = plan.pool
        if pool is None or not pool.runs:
            return None
        run = pool.runs[0]
        row = await store.run(lambda tx: tx.one("ingest_run_progress", run=run), False)
        if row is None or row["root"] is None:
            return None
        total = int(json.loads(row["root"]).get("urls", 0))
        return max(0, total - int(row["queued"])), total

    async def poll() -> Polled | None:
        got = await done_total()
        return None if got is None else ("URLs done", *got)

    with live_progress(console, poll):
        yield


@ingest_group.command(
    "run",
    epilog=examples(
        "thresher ingest run -c 8",
        "thresher ingest run --type pdf --source unpaywall --retry no-pdf-link --limit 1000",
    ),
)
@click.option(
    "--type", "ingest_type", type=click.Choice(sorted(INGEST_TYPES)), help="Only this type."
)
@click.option("--source", "link_source", metavar="S", help="Only requests from link_source S.")
@click.option("--limit", type=limits.count(), help="Fetch at most N URLs.")
@click.option(
    "--retry",
    multiple=True,
    metavar="STATUS",
    help="Also fetch again URLs whose last status is STATUS (repeat, or separate by commas).",
)
@click.option("--force", is_flag=True, help="Fetch again every selected URL, whatever its result.")
@click.option(
    "--max-hops",
    type=limits.count(limits.MAX_HOPS_OPTION, 0),
    help=f"Landing-page links followed [{MAX_HOPS}].",
)
@click.option("--max-bytes", type=limits.count(limits.MAX_BYTES), help="Largest body [128 MiB].")
@click.option(
    "--delay",
    type=limits.seconds(limits.MAX_DELAY),
    help="Seconds between requests to one host [1].",
)
@click.option(
    "--allow-private",
    is_flag=True,
    default=None,
    help="Also fetch private, loopback and link-local addresses (refused by default);"
    " URLs refused for their address before (blocked-address) are fetched again.",
)
@click.option(
    "--blocklist",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file of more URL substrings never to fetch (one per line; 're:' for a regex).",
)
@click.option(
    "--shards",
    type=limits.shards(),
    help="Split the hosts over N engines, each in a process of its own (a core each),"
    " which `thresher worker` processes share [1].",
)
@click.option(
    "-c",
    "--concurrency",
    "-w",
    "--workers",
    "workers",
    type=limits.workers(),
    help="URLs fetched at once (-w/--workers: the old name) [4].",
)
@click.option(
    "--detach", is_flag=True, help="Only queue the run: `thresher worker` processes do it."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary at the end.")
@click.option(
    "--progress/--no-progress", default=None, help="Progress bar (default: on a terminal)."
)
@click.pass_obj
def run_command(
    app: App,
    /,
    retry: tuple[str, ...],
    force: bool,
    blocklist: Path | None,
    workers: int | None,
    detach: bool,
    as_json: bool,
    progress: bool | None,
    **flags: Any,
) -> None:
    """Fetch the loaded requests' URLs that have no result yet, each once, and record
    one result per (ingest_type, base_url).

    Redirects are followed (at most 10), landing pages to their full-text link (at most
    --max-hops), and bodies are told apart by their bytes. Every body is kept once by
    SHA-1 in WARC files under HOME/warc/ingest/ and in file_meta. Timeouts, 5xx and
    resets are retried with backoff; the other statuses are final unless --retry names
    them. Runs as the source 'ingest', so `thresher run` fetches newly loaded requests
    too; an interrupted run resumes with the same command (keeping its selection)."""
    shards = flags.get("shards") or 1
    if shards > 1 and not detach:
        # One shard is walked in this process itself (sources.ingest).
        prewarm(shards - 1)  # first, while this process has one thread and no store open
    config = app.with_flags(workers=workers)
    options: dict[str, Any] = {k: v for k, v in flags.items() if v is not None}
    retries = parse_statuses(",".join(retry))
    if flags.get("allow_private") and "blocked-address" not in retries:
        # URLs refused for their address are what --allow-private is given for: fetched
        # again without being named (they were marked so by a run without it).
        retries.append("blocked-address")
    options["retry"] = " ".join(retries)
    options["force"] = force
    if blocklist is not None:
        options["blocklist"] = str(blocklist.resolve())
    with app.store() as store, store.transaction() as tx:
        try:
            existing = get_source(tx, INGEST_SOURCE)
        except UnknownSource:
            add_source(tx, INGEST_SOURCE, INGEST_URL, "ingest", {}, time.time())
        else:
            if existing.type != "ingest":
                raise SourceError(
                    f"source {INGEST_SOURCE!r} is a {existing.type} source, not ingest"
                )
    show = sys.stderr.isatty() if progress is None else progress
    console = Console(stderr=True) if show else None
    setup_logging(app.verbose, console)
    started = time.monotonic()
    reports = runtime.run(
        run_plan(
            config,
            (INGEST_SOURCE,),
            None,
            console,
            progress=_run_progress,
            options={INGEST_SOURCE: options},
            detach=detach,
        )
    )
    seconds = time.monotonic() - started
    report = reports[-1]
    outcome, error, run_id = ("interrupted" if report.interrupted else "ok"), None, None
    for s in report.sources:
        outcome, error, run_id = s.outcome, s.error, s.run_id
    statuses: dict[str, int] = {}
    if detach:
        if as_json:
            click.echo(json.dumps({"source": INGEST_SOURCE, "run": run_id, "status": outcome}))
        else:
            click.echo(f"ingest: queued as run {run_id}: `thresher worker` processes will do it")
        return
    if run_id is not None:
        with app.store() as store, store.transaction(write=False) as tx:
            row = tx.one("source_run_started", id=run_id)
            since = float(row["started"]) if row else 0.0
            statuses = {
                r["status"]: int(r["n"]) for r in tx.all("ingest_status_counts", since=since)
            }
    urls = sum(statuses.values())
    summary = {
        "source": INGEST_SOURCE,
        "run": run_id,
        "status": outcome,
        "error": error,
        "urls": urls,
        "hits": statuses.get("success", 0),
        "statuses": statuses,
        "seconds": round(seconds, 3),
        "urls_per_second": round(urls / seconds, 1) if seconds > 0 else None,
        "warc_dir": str(ingest_warc_dir(config.home)),
    }
    if as_json:
        click.echo(json.dumps(summary))
    else:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "nothing to fetch"
        click.echo(f"ingest: {outcome}: {urls} URLs in {seconds:.1f} s: {counts}")
        if error:
            click.echo(f"error: {error}")
        if outcome == "interrupted":
            click.echo("interrupted: what was fetched is committed; resume with the same command")
    blocked = statuses.get("blocked-address", 0)
    if blocked:
        click.echo(
            f"{blocked} URLs refused: private or loopback addresses; pass --allow-private"
            " to fetch them (they are fetched again then, without --retry)",
            err=True,
        )
    if outcome == "failed" or (blocked and blocked == urls):  # nothing fetched at all
        sys.exit(EXIT_SOURCE_FAILED)


register(ingest_group)
