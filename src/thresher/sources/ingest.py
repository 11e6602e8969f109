"""`ingest`: fetch the URLs of loaded ingest requests, once each, and record what happened.

`thresher ingest run` (or `thresher run` of a source of this type) runs over the
(ingest_type, base_url) pairs of `ingest_requests` that have no result yet (or whose
status is to be retried, or all with `force`) in three kinds of job:

- the root job (`ingest.run`) writes that selection to the run's queue, split over the
  run's `shards` by host (`thresher.ingest.ledger`), and spawns one job per shard;
- each shard job (`ingest.shard`) runs an ingest engine (`thresher.ingest.engine`) over
  its URLs: many walks at once through its polite fetcher, their results, bodies and WARC
  position committed in batches. Shards spread over `thresher worker` processes like a
  crawl's; a shard killed mid-run resumes from its last commit;
- the commit job (`ingest.commit`) adds up the run's statuses once every shard is done.

A URL is a row of a queue, not a job: a run of a million URLs is a handful of jobs, and
the job system's cost per job (a claim and a commit, 1-2 ms of CPU) is not paid per URL.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path
from typing import Any

from ..errors import SourceError
from ..fetch import FetchSettings
from ..frontier import Politeness
from ..ingest import ledger
from ..ingest.engine import IngestSettings, ShardSummary
from ..ingest.ledger import Filler, Selection
from ..ingest.process import ShardWork
from ..ingest.request_line import INGEST_TYPES
from ..ingest.walk import MAX_HOPS, STATUSES
from ..jobs import JobContext, JobSpec, Outcome, register
from ..jobs.child import here_or_in_child
from ..jobs.resources import HANDLER_MAX_BODY
from ..jobs.spread import take_share
from ..store import Tx
from .types import Option, SourceType, register_type

__all__ = ["INGEST", "INGEST_URL", "ingest_warc_dir", "parse_statuses"]

log = logging.getLogger("thresher.ingest")

INGEST_URL = "ingest:"
"""The URL of an ingest source: its work is in the store, not behind a URL."""


def parse_statuses(text: str) -> list[str]:
    """Statuses separated by commas or spaces, each checked against the vocabulary."""
    statuses = [s for s in re.split(r"[\s,]+", text.strip()) if s]
    unknown = [s for s in statuses if s not in STATUSES]
    if unknown:
        known = ", ".join(sorted(STATUSES))
        raise SourceError(f"unknown ingest status {unknown[0]!r} (known: {known})")
    return list(dict.fromkeys(statuses))


def _check_url(url: str) -> str:
    if url.strip() not in ("", INGEST_URL):
        raise SourceError(f"an ingest source's URL is {INGEST_URL!r}, not {url!r}")
    return INGEST_URL


def _check_options(url: str, options: dict[str, Any]) -> None:
    parse_statuses(str(options.get("retry") or ""))
    kind = options.get("ingest_type")
    if kind is not None and kind not in INGEST_TYPES:
        raise SourceError(f"ingest_type {kind!r}: one of {', '.join(sorted(INGEST_TYPES))}")
    if options.get("blocklist"):
        _read_blocklist(str(options["blocklist"]))
    if int(options.get("shards") or 1) < 1:
        raise SourceError("shards must be at least 1")


INGEST = register_type(
    SourceType(
        name="ingest",
        root_kind="ingest.run",
        doc="The loaded ingest requests (thresher ingest load): each URL fetched once.",
        check_url=_check_url,
        check_options=_check_options,
        options={
            "ingest_type": Option(str, None, "Only requests of this ingest_type."),
            "link_source": Option(str, None, "Only requests from this link_source."),
            "limit": Option(int, None, "Fetch at most this many URLs per run."),
            "retry": Option(str, "", "Fetch again URLs whose status is one of these."),
            "force": Option(bool, False, "Fetch again every URL, whatever its result."),
            "max_hops": Option(int, MAX_HOPS, "Landing-page links followed at most."),
            "max_bytes": Option(int, 128 * 2**20, "Largest body; larger is body-too-large."),
            "delay": Option(float, None, "Seconds between requests to one host [config delay]."),
            "allow_private": Option(
                bool, False, "Also fetch private, loopback and link-local addresses."
            ),
            "blocklist": Option(str, "", "A file of more URL substrings never to fetch."),
            "shards": Option(
                int, 1, "Split the hosts over this many jobs that workers run at once."
            ),
        },
    )
)


def ingest_warc_dir(home: Path) -> Path:
    return home / "warc" / "ingest"


# --- the run: its selection queued, its shards ----------------------------------------


@register("ingest.run")
async def _run(ctx: JobContext) -> Outcome:
    """Queue the run's selection (once: a run resumed after a crash keeps its own) and
    spawn its shards."""
    opts = dict(ctx.job.payload["options"])
    selection = Selection.from_options(opts)
    parse_statuses(" ".join(selection.retry))
    shards = max(1, int(opts.get("shards") or 1))
    run = ctx.job.source_run_id
    assert run is not None
    job, owner = ctx.job.id, ctx.owner
    # Rows that runs which ended unfinished left behind: their URLs are selected again.
    await ctx.store.run(lambda tx: tx.execute("delete_closed_ingest_queues"))
    filler = Filler(shards)
    after = ("", "")
    while True:
        size = ledger.PAGE
        if selection.limit is not None:
            size = min(size, selection.limit - filler.urls)
        if size <= 0:
            break

        def page(tx: Tx, after: tuple[str, str] = after, size: int = size) -> list[Any]:
            ledger.guard(tx, job, owner)
            return ledger.fill_page(tx, run, selection, after, size, filler)

        rows = await ctx.store.run(page)
        if len(rows) < size:
            break
        after = (rows[-1]["ingest_type"], rows[-1]["base_url"])
    log.info(
        "%s: run %s: %d URLs on %d hosts, in %d shard%s",
        ctx.job.source,
        run,
        filler.urls,
        filler.hosts,
        shards,
        "" if shards == 1 else "s",
    )
    children = tuple(
        JobSpec("ingest.shard", f"shard{i}", {"shard": i, "shards": shards, "options": opts})
        for i in range(shards)
    )
    return Outcome(
        result={"urls": filler.urls, "hosts": filler.hosts, "shards": filler.loads()},
        children=children,
        commit=JobSpec("ingest.commit", "commit"),
    )


@register("ingest.shard")
async def _shard(ctx: JobContext) -> Outcome:
    """One shard's URLs, walked by an ingest engine: in this process when the run has
    one shard, or when no other shard runs here; else in a child process."""
    p = ctx.job.payload
    shard, shards, opts = int(p["shard"]), int(p["shards"]), dict(p["options"])
    if shards > 1:
        await take_share(ctx, shards, "ingest shard")
    config = ctx.config
    extra = _read_blocklist(str(opts["blocklist"])) if opts.get("blocklist") else ()
    delay = float(config.delay if opts.get("delay") is None else opts["delay"])
    assert ctx.job.source_run_id is not None
    work = ShardWork(
        settings=IngestSettings(
            max_hops=int(opts["max_hops"] if opts.get("max_hops") is not None else MAX_HOPS),
            max_bytes=int(opts.get("max_bytes") or INGEST.options["max_bytes"].default),
            blocklist=extra,
            # A run-wide setting, as a crawl's: each shard has its part of it.
            concurrency=max(1, config.workers // shards + (shard < config.workers % shards)),
            max_attempts=config.max_attempts,
            backoff_base=config.backoff_base,
            backoff_max=config.backoff_max,
        ),
        fetch=FetchSettings(
            user_agent=config.user_agent,
            total_timeout=config.http_timeout,
            stall_timeout=config.stall_timeout,
            read_timeout=config.read_timeout,
            allow_private=bool(opts.get("allow_private")),
            max_body=HANDLER_MAX_BODY,
            max_decoded=HANDLER_MAX_BODY,
            limit=max(100, 2 * config.workers),
        ),
        politeness=Politeness(delay=delay, ip_delay=delay / 2),
        max_defer=config.defer_max,
        run=ctx.job.source_run_id,
        shard=shard,
        store_url=config.store_url,
        warc_dir=ingest_warc_dir(config.home),
        job=ctx.job.id,
        owner=ctx.owner,
        shared_leases=ctx.leases is not None or shards > 1,
        lease_seconds=config.lease_seconds,
        log_level=logging.getLogger("thresher").getEffectiveLevel(),
    )
    summary = await here_or_in_child(
        work, lambda: work.on(ctx.store, ctx.clock, ctx.stopping), ctx.stopping, alone=shards == 1
    )
    assert isinstance(summary, ShardSummary)
    return Outcome(result=summary.as_dict())


@register("ingest.commit")
async def _commit(ctx: JobContext) -> Outcome:
    run = ctx.job.source_run_id

    def counts(tx: Tx) -> dict[str, int]:
        row = tx.one("source_run_started", id=run)
        since = float(row["started"]) if row else 0.0
        return {r["status"]: int(r["n"]) for r in tx.all("ingest_status_counts", since=since)}

    return Outcome(result={"statuses": await ctx.store.run(counts, False)})


@register("ingest.page")
@register("ingest.fetch")
async def _older(ctx: JobContext) -> Outcome:
    """A job of a run an older Thresher left open (a URL or a page of URLs each): done
    with nothing, so the run ends; its URLs have no result, and the next run takes them."""
    log.warning("%s: a job of an older Thresher, left to the next run", ctx.job.key)
    return Outcome()


# --- the blocklist ------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _blocklist_file(path: str, mtime: float) -> tuple[str, ...]:
    text = Path(path).read_text("utf-8")
    return tuple(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


def _read_blocklist(path: str) -> tuple[str, ...]:
    try:
        return _blocklist_file(path, os.stat(path).st_mtime)
    except (OSError, UnicodeError) as exc:
        raise SourceError(f"blocklist {path}: {exc}") from None
