"""`web`: crawl a site (or several) from seed URLs into WARC files, politely.

The source URL is the first seed; the `seeds` option adds more. One run is one crawl job
that drives the crawl engine (or, with `shards`, one job per shard of the hosts, and a
summary job once they are all done); the engine commits its progress as it goes, so a run that
is interrupted or killed resumes where it stopped, and a later run revisits every known
URL with a conditional GET and fetches only what is new or changed. WARC files go to
HOME/warc/SOURCE/.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import Config
from ..crawl import CrawlSettings, CrawlSummary
from ..crawl.ledger import Shard
from ..crawl.process import ChildCrawl
from ..errors import PermanentError, SourceError
from ..frontier import InvalidScope
from ..jobs import JobContext, JobSpec, Outcome, register
from ..jobs.child import here_or_in_child
from ..jobs.spread import take_share
from ..store import Row, Tx
from ..weburl import resolve
from .directory import get_source
from .types import Option, SourceType, register_type

__all__ = ["WEB", "warc_dir"]

log = logging.getLogger("thresher.crawl")

_DEFAULTS = CrawlSettings(seeds=("http://example.invalid/",))


def _check_seed(url: str) -> str:
    # As a browser reads it (thresher.weburl), as the crawl will.
    if resolve(url) is None:
        raise SourceError(f"a crawl seed must be an http(s) URL with a host, not {url!r}")
    return url


def _check_options(url: str, options: dict[str, Any]) -> None:
    for seed in str(options.get("seeds") or "").split():
        _check_seed(seed)
    try:
        CrawlSettings.from_source(url, options)
    except InvalidScope as exc:
        raise SourceError(str(exc)) from None


def _opt(kind: type, field: str, doc: str) -> Option:
    return Option(kind, getattr(_DEFAULTS, field), doc)


WEB = register_type(
    SourceType(
        name="web",
        root_kind="web.crawl",
        doc="A web crawl from seed URLs, kept in WARC files; later runs fetch what changed.",
        check_url=_check_seed,
        check_options=_check_options,
        options={
            "seeds": Option(str, "", "More seed URLs, separated by spaces."),
            "scope": _opt(str, "scope", "host, domain, prefix or a regex URLs must match."),
            "max_pages": Option(int, None, "Fetch at most this many URLs per run."),
            "max_depth": Option(int, None, "Follow links at most this many hops from a seed."),
            "max_per_host": Option(int, None, "Queue at most this many URLs per host."),
            "delay": Option(float, None, "Seconds between fetches from one host [config delay]."),
            "concurrency": _opt(int, "concurrency", "Fetches in flight at once."),
            "host_connections": _opt(int, "host_connections", "Fetches in flight per host."),
            "user_agent": Option(str, None, "User-Agent (default: the configured one)."),
            "allow_private": _opt(
                bool, "allow_private", "Fetch private, loopback and link-local addresses."
            ),
            "requisites": _opt(
                bool, "requisites", "Fetch what pages embed (images, stylesheets …), anywhere."
            ),
            "sitemaps": _opt(bool, "sitemaps", "Read the seed hosts' sitemaps."),
            "timeout": Option(
                float, None, "Seconds one fetch may take in all [config http_timeout]."
            ),
            "max_body": _opt(int, "max_body", "Largest response body, in bytes."),
            "warc_max_size": _opt(int, "warc_max_size", "Start a new WARC file past this size."),
            "parse_processes": _opt(
                int, "parse_processes", "Parse and archive pages in a child process (1)."
            ),
            "shards": _opt(
                int, "shards", "Split the hosts over this many jobs that workers run at once."
            ),
        },
    )
)


def warc_dir(home: Path, source: str) -> Path:
    return home / "warc" / source


async def _settings(ctx: JobContext) -> CrawlSettings:
    # The source as it is now, not as it was when the run opened: a resumed crawl obeys
    # the limits of the command that resumed it.
    name = ctx.job.source or ""
    source = await ctx.store.run(lambda tx: get_source(tx, name), False)
    return crawl_settings(source.url, source.options, ctx.config)


def crawl_settings(url: str, options: Mapping[str, Any], config: Config) -> CrawlSettings:
    """A `web` source's crawl, with what its options leave out from the settings every
    fetch shares (`delay`, `http_timeout`, `user_agent`, the silences), and the
    `max_links_per_page` setting."""
    merged = dict(options)
    shared = (("delay", "delay"), ("timeout", "http_timeout"), ("user_agent", "user_agent"))
    for option, setting in shared:
        if merged.get(option) in (None, ""):
            merged[option] = getattr(config, setting)
    merged["stall_timeout"] = config.stall_timeout
    merged["read_timeout"] = config.read_timeout
    merged["max_links_per_page"] = config.max_links_per_page
    return CrawlSettings.from_source(url, merged)


def _spec(ctx: JobContext, settings: CrawlSettings, shard: Shard | None) -> ChildCrawl:
    name = ctx.job.source or ""
    assert ctx.job.source_run_id is not None
    return ChildCrawl(
        settings=settings,
        source=name,
        run=ctx.job.source_run_id,
        store_url=ctx.config.store_url,
        warc_dir=warc_dir(ctx.config.home, name),
        job=ctx.job.id,
        owner=ctx.owner,
        shard=shard,
        shared_leases=ctx.leases is not None,
        lease_seconds=ctx.config.lease_seconds,
        log_level=logging.getLogger("thresher").getEffectiveLevel(),
    )


async def _run_engine(ctx: JobContext, spec: ChildCrawl, *, alone: bool = False) -> CrawlSummary:
    """The crawl `spec` describes, in this process or a child's (`here_or_in_child`)."""
    summary = await here_or_in_child(
        spec,
        lambda: spec.engine(ctx.store, ctx.clock, ctx.leases, ctx.stopping).run(),
        ctx.stopping,
        alone=alone,
    )
    assert isinstance(summary, CrawlSummary)
    return summary


@register("web.crawl")
async def _crawl(ctx: JobContext) -> Outcome:
    settings = await _settings(ctx)
    run = ctx.job.source_run_id
    started = await ctx.store.run(lambda tx: tx.one("get_crawl_run", run=run), False)
    if settings.shards > 1 and started is not None:
        # This job crawled unsharded before it was interrupted: its WARC file and
        # counts are the run's, and only an unsharded resume repairs and continues them.
        name = ctx.job.source
        log.info("%s: run %s resumes in one job; shards apply from the next run", name, run)
        settings = dataclasses.replace(settings, shards=1)
    if settings.shards > 1:
        # The run's shard count is fixed here, in its jobs: hosts keep their owner
        # however the option changes before the run is resumed.
        n = settings.shards
        shards = tuple(
            JobSpec("web.shard", f"shard{i}", {"shard": i, "shards": n}) for i in range(n)
        )
        return Outcome(children=shards, commit=JobSpec("web.summary", "summary"))
    # Here, always; counted, so that a shard this worker takes meanwhile gets a core.
    summary = await _run_engine(ctx, _spec(ctx, settings, None), alone=True)
    await _check_fetched(ctx, summary)
    return Outcome(result=summary.as_dict())


async def _check_fetched(ctx: JobContext, summary: CrawlSummary) -> None:
    """A crawl that fetched nothing because every URL it tried failed failed: it is not
    "ok" with 0 pages, which a script or a schedule would take for success. Its error
    names the first failure (a seed's, when a seed failed); when every address was
    refused (loopback, private …: `allow_private` is off), it says how to fix that.
    What it recorded stays; the next run asks for every URL again."""
    answered = summary.pages + summary.requisites + summary.sitemaps
    answered += summary.not_modified + summary.redirects + summary.robots_excluded
    if answered or not summary.errors:
        return
    rows = await ctx.store.run(
        lambda tx: tx.all("crawl_run_errors", source=summary.source, run=summary.run), False
    )
    refused = dict(summary.error_reasons).get("address refused", 0)
    if refused == summary.errors:
        # Each refusal is recorded as "address refused: GET URL: refused: why; what to do".
        texts = [str(r["error"] or "") for r in rows]
        text = next((t for t in texts if ": refused: " in t), "")
        reason = text[text.index(": refused: ") + 2 :] if text else "refused: every address"
        noun = "URL" if refused == 1 else "URLs"
        raise PermanentError(f"{reason}; nothing was fetched ({refused} {noun} refused)")
    first = str(rows[0]["error"] or "") if rows else ""
    if rows and str(rows[0]["url"]) not in first:
        first = f"{first or 'failed'} for {rows[0]['url']}"  # "HTTP 403" names no URL
    noun = "URL" if summary.errors == 1 else "URLs"
    raise PermanentError(f"{first}; nothing was fetched ({summary.errors} {noun} failed)")


@register("web.shard")
async def _shard(ctx: JobContext) -> Outcome:
    """One shard: in this process when no other shard runs here, else in a child process
    of its own (shards are there to use more cores)."""
    shard = Shard(int(ctx.job.payload["shard"]), int(ctx.job.payload["shards"]))
    await take_share(ctx, shard.count, f"shard {shard.index}")
    summary = await _run_engine(ctx, _spec(ctx, await _settings(ctx), shard))
    return Outcome(result=summary.as_dict())


@register("web.summary")
async def _summary(ctx: JobContext) -> Outcome:
    """The run's summary once every shard is done: what they did, added up."""
    run = ctx.job.source_run_id
    name = ctx.job.source or ""

    def read(tx: Tx) -> tuple[Row | None, list[Row], list[Row]]:
        errors = tx.all("crawl_run_errors", source=name, run=run)
        return tx.one("get_crawl_run", run=run), tx.all("crawl_shard_rows", run=run), errors

    row, shards, errors = await ctx.store.run(read, False)
    if row is None:
        raise PermanentError(f"crawl run {run} of {name} has no progress row")
    folder = warc_dir(ctx.config.home, name)
    files = sorted(p.name for p in folder.glob(f"{name}-run{run}-*.warc.gz"))
    seconds = float(row["updated"]) - float(row["started"])
    summary = CrawlSummary.from_row(row, seconds, files, len(shards), errors)
    await _check_fetched(ctx, summary)
    return Outcome(result=summary.as_dict())
