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

from ..ingest.requests import MAX_REJECTS, DamagedInput, LoadReport, check_file, load_requests
from .app import App, setup_logging

__all__ = ["SHOWN_REJECTS", "ingest_group"]

log = logging.getLogger("thresher.ingest")

# Rejected lines listed by the text report; --json lists up to MAX_REJECTS.
SHOWN_REJECTS = 20
# Without a terminal, a progress line goes to the log this many seconds apart.
PLAIN_PROGRESS_SECONDS = 10.0

Progressed = Callable[[int, LoadReport], None]


@click.group("ingest")
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


@ingest_group.command("load")
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
