"""`thresher crawl SEED…`: crawl now, into WARC files; run it again to resume or refresh.

A crawl is a `web` source like any other (named after its first seed and scope unless
`--name` is given), so `thresher run`, `status` and `source` commands see it too. Running
the same command again resumes an interrupted crawl, or, once it finished, revisits
every known URL with a conditional GET and fetches what is new.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console

from .. import runtime
from ..crawl import CrawlSummary
from ..crawl.ledger import COUNTERS
from ..errors import SourceError, UnknownSource
from ..frontier import canonicalize, host_of
from ..frontier.errors import InvalidURL
from ..jobs.child import prewarm
from ..plan import ExecutionPlan
from ..sources import add_source, get_source
from ..sources.directory import update_source
from ..sources.web import warc_dir
from ..store import Row
from ..store.aio import AsyncStore
from . import limits
from .app import App, setup_logging
from .commands import examples, summary
from .progress import Polled, live_progress
from .run import EXIT_SOURCE_FAILED, JobCounts, ProgressFactory, run_plan

__all__ = ["crawl_command", "crawl_name"]

log = logging.getLogger("thresher.crawl")


def crawl_name(seeds: tuple[str, ...], scope: str) -> str:
    """The source name of an unnamed crawl: the same seeds and scope, the same crawl."""
    try:
        canon = sorted({canonicalize(s) for s in seeds})
    except InvalidURL as exc:
        raise SourceError(str(exc)) from None
    digest = hashlib.sha1("\n".join([scope, *canon]).encode()).hexdigest()[:8]
    host = host_of(canon[0]).replace(":", "_") or "crawl"
    return f"crawl-{host}-{digest}"[:128]


def _line(row: Row | None, started: float, before: int) -> str:
    """The progress line; the rate counts the pages of this command, not those of the
    session that was interrupted before it (`before`)."""
    if row is None:
        return "starting"
    elapsed = max(1e-6, time.time() - started)
    return (
        f"pages {row['pages']} ({(row['pages'] - before) / elapsed:.0f}/s), "
        f"requisites {row.get('requisites', 0)}, "
        f"{row['bytes'] / 2**20:.1f} MiB, queue {row['queued']}, hosts {row['hosts']}, "
        f"errors {row['errors']}"
    )


def _crawl_progress(source: str) -> ProgressFactory:
    @contextmanager
    def progress(
        console: Console | None, counts: JobCounts, store: AsyncStore, plan: ExecutionPlan
    ) -> Iterator[None]:
        started = time.time()
        before: int | None = None

        async def poll() -> Polled:
            nonlocal before
            row = await store.run(lambda tx: tx.one("latest_crawl_run", source=source), False)
            if before is None:
                before = int(row["pages"]) if row is not None else 0
            return _line(row, started, before), None, None

        with live_progress(console, poll, bar=False):
            yield

    return progress


@click.command(
    "crawl",
    short_help=summary("crawl"),
    epilog=examples(
        "thresher crawl https://example.org/ --scope domain --max-pages 5000",
        "thresher crawl https://example.org/blog/ --scope prefix --delay 0.5 -c 32 --json",
    ),
)
@click.argument("seeds", nargs=-1, required=True, metavar="SEED...")
@click.option(
    "--scope",
    default="host",
    show_default=True,
    help="host (the seeds' hosts), domain (and subdomains), prefix (under the seeds' "
    "folders) or a regex the canonical URL must match.",
)
@click.option("--max-pages", type=limits.count(), help="Fetch at most N URLs this run.")
@click.option(
    "--max-depth",
    type=limits.count(limits.MAX_DEPTH, 0),
    help="Follow at most D links from a seed.",
)
@click.option("--max-per-host", type=limits.count(), help="Queue at most N URLs per host.")
@click.option(
    "--delay",
    type=limits.seconds(limits.MAX_DELAY),
    help="Seconds between fetches from a host [the delay setting, THRESHER_DELAY: 1].",
)
@click.option(
    "-c", "--concurrency", type=limits.concurrency(), help="Fetches in flight, in all [16]."
)
@click.option(
    "--host-connections", type=limits.concurrency(), help="Fetches in flight per host [1]."
)
@click.option("--user-agent", help="User-Agent to send [the configured one].")
@click.option(
    "--allow-private",
    is_flag=True,
    default=None,
    help="Also fetch private, loopback and link-local addresses (refused by default).",
)
@click.option(
    "--requisites/--no-requisites",
    default=None,
    help="Also fetch what pages embed (images, stylesheets, scripts, fonts), on any host; "
    "their links are not followed [on].",
)
@click.option(
    "--sitemaps/--no-sitemaps",
    default=None,
    help="Read the seed hosts' sitemaps (robots.txt Sitemap: lines, /sitemap.xml) [on].",
)
@click.option(
    "--parse-processes",
    type=click.IntRange(min=0, max=1),
    help="1: parse and archive pages in a child process; 0: in this one [0].",
)
@click.option(
    "--shards",
    type=limits.shards(),
    help="Split the hosts over N jobs that run at once, in this process or in "
    "`thresher worker` processes sharing a PostgreSQL store [1].",
)
@click.option("--name", help="Source name for this crawl [crawl-HOST-HASH of seeds and scope].")
@click.option(
    "--detach", is_flag=True, help="Only queue the crawl: `thresher worker` processes do it."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary at the end.")
@click.option(
    "--progress/--no-progress", default=None, help="Progress display (default: on a terminal)."
)
@click.pass_obj
def crawl_command(
    app: App,
    /,
    seeds: tuple[str, ...],
    scope: str,
    name: str | None,
    detach: bool,
    as_json: bool,
    progress: bool | None,
    **flags: Any,
) -> None:
    """Crawl from SEED… into WARC files under HOME/warc/NAME/.

    Polite by default: robots.txt, one connection and a second between fetches per host.
    Run the same command again to resume an interrupted crawl or to refresh a finished one."""
    shards = flags.get("shards") or 1
    if shards > 1 and not detach:
        # One shard runs in this process; the others in forks made first, while this
        # process has one thread and no store open.
        prewarm(shards - 1)
    config = app.config
    name = name or crawl_name(seeds, scope)
    raw = {"scope": scope, "seeds": " ".join(seeds[1:])}
    raw.update({k: str(v) for k, v in flags.items() if v is not None})
    with app.store() as store, store.transaction() as tx:
        now = time.time()
        try:
            existing = get_source(tx, name)
        except UnknownSource:
            existing = None
        if existing is None:
            add_source(tx, name, seeds[0], "web", raw, now)
        elif existing.type != "web":
            raise SourceError(f"source {name!r} is a {existing.type} source, not a web crawl")
        else:
            # Options left out keep their defaults, as in a fresh `crawl` command.
            update_source(tx, name, seeds[0], raw, now)
    show = sys.stderr.isatty() if progress is None else progress
    console = Console(stderr=True) if show else None
    setup_logging(app.verbose, console)
    started = time.time()
    if detach:
        [report] = runtime.run(run_plan(config, (name,), None, None, detach=True))
        run = report.sources[0].run_id if report.sources else None
        if as_json:
            click.echo(json.dumps({"source": name, "run": run, "status": "queued"}))
        else:
            click.echo(f"{name}: queued as run {run}: `thresher worker` processes will do it")
        return
    reports = runtime.run(run_plan(config, (name,), None, console, _crawl_progress(name)))
    report = reports[-1]
    outcome = "interrupted" if report.interrupted else "ok"
    error = None
    for s in report.sources:
        outcome, error = s.outcome, s.error
    with app.store() as store, store.transaction(write=False) as tx:
        row = tx.one("latest_crawl_run", source=name)
        shards = len(tx.all("crawl_shard_rows", run=row["run_id"])) if row else 0
        errors = tx.all("crawl_run_errors", source=name, run=row["run_id"]) if row else []
    folder = warc_dir(config.home, name)
    files = sorted(p.name for p in folder.glob("*.warc.gz"))
    seconds = round(time.time() - started, 3)
    run_id = None if row is None else row["run_id"]
    if row is None:  # failed before the crawl could start: nothing done
        row = {"source": name, "run_id": 0, **dict.fromkeys((*COUNTERS, "queued", "hosts"), 0)}
    summary = CrawlSummary.from_row(row, seconds, files, max(1, shards), errors).as_dict()
    summary.update(source=name, status=outcome, error=error, run=run_id)
    summary["warc_dir"] = str(folder)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        reasons = ", ".join(f"{why} {n}" for why, n in summary["error_reasons"].items())
        click.echo(
            f"{name}: {outcome}: {summary['pages']} pages, {summary['requisites']} requisites, "
            f"{summary['bytes'] / 2**20:.1f} MiB, "
            f"{summary['not_modified']} not modified, {summary['redirects']} redirects, "
            f"{summary['errors']} errors{f' ({reasons})' if reasons else ''}"
            + (f", {summary['links_dropped']} links dropped" if summary["links_dropped"] else "")
            + f", {summary['queued']} left in {summary['seconds']:.1f} s"
            + (f"; {error}" if error else "")
        )
        click.echo(f"WARC files in {folder}")
        if outcome == "interrupted":
            click.echo("interrupted: what was fetched is committed; resume with the same command")
    if outcome == "failed":
        sys.exit(EXIT_SOURCE_FAILED)
