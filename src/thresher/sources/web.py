"""`web`: crawl a site (or several) from seed URLs into WARC files, politely.

The source URL is the first seed; the `seeds` option adds more. One run is one crawl job
that drives the crawl engine; the engine commits its progress as it goes, so a run that
is interrupted or killed resumes where it stopped, and a later run revisits every known
URL with a conditional GET and fetches only what is new or changed. WARC files go to
HOME/warc/SOURCE/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..crawl import CrawlEngine, CrawlSettings
from ..errors import SourceError
from ..frontier import InvalidScope
from ..jobs import JobContext, Outcome, register
from .directory import get_source
from .types import Option, SourceType, register_type

__all__ = ["WEB", "warc_dir"]

_DEFAULTS = CrawlSettings(seeds=("http://example.invalid/",))


def _check_seed(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
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
            "delay": _opt(float, "delay", "Seconds between two fetches from one host."),
            "concurrency": _opt(int, "concurrency", "Fetches in flight at once."),
            "host_connections": _opt(int, "host_connections", "Fetches in flight per host."),
            "user_agent": Option(str, None, "User-Agent (default: the configured one)."),
            "allow_private": _opt(
                bool, "allow_private", "Fetch private, loopback and link-local addresses."
            ),
            "timeout": _opt(float, "timeout", "Seconds one fetch may take in all."),
            "max_body": _opt(int, "max_body", "Largest response body, in bytes."),
            "warc_max_size": _opt(int, "warc_max_size", "Start a new WARC file past this size."),
            "parse_processes": _opt(
                int, "parse_processes", "Parse and archive pages in a child process (1)."
            ),
        },
    )
)


def warc_dir(home: Path, source: str) -> Path:
    return home / "warc" / source


@register("web.crawl")
async def _crawl(ctx: JobContext) -> Outcome:
    name = ctx.job.source or ""
    # The source as it is now, not as it was when the run opened: a resumed crawl obeys
    # the limits of the command that resumed it.
    source = await ctx.store.run(lambda tx: get_source(tx, name), False)
    options = dict(source.options)
    options["user_agent"] = options.get("user_agent") or ctx.config.user_agent
    settings = CrawlSettings.from_source(source.url, options)
    assert ctx.job.source_run_id is not None
    engine = CrawlEngine(
        settings,
        source=name,
        run=ctx.job.source_run_id,
        store=ctx.store,
        warc_dir=warc_dir(ctx.config.home, name),
        clock=ctx.clock,
        job=ctx.job.id,
        owner=ctx.owner,
        leases=ctx.leases,
    )
    summary = await engine.run()
    return Outcome(result=summary.as_dict())
