"""`ingest`: fetch the URLs of loaded ingest requests, once each, and record what happened.

`thresher ingest run` (or `thresher run` of a source of this type) turns the requests of
`ingest_requests` into jobs: one `ingest.fetch` job per (ingest_type, base_url) that has
no result yet (or whose status is to be retried, or all with `force`). The URLs are
handed out a page at a time — an `ingest.page` job spawns the fetch jobs of one page
and the job of the next — so a run over millions of requests never holds them all, and
the job table grows only as fast as the workers drain it.

A fetch job walks from the URL to the file (`thresher.ingest.walk`) through the process's
polite fetcher, keeps every body it fetched once by SHA-1 (`thresher.ingest.archive`: WARC
record and `file_meta` row), and commits one `ingest_results` row with its job. A
transient failure (timeout, 5xx, reset, DNS) is retried with backoff by the job system;
only the last attempt records it as the result. Permanent outcomes are recorded at once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import Deferred, SourceError, TransientError
from ..fetch import (
    AddressRefused,
    BadResponse,
    ConnectionFailed,
    DNSError,
    FetchError,
    FetchTimeout,
    InvalidRequestURL,
    TooLarge,
)
from ..fetch.polite import RobotsDisallowed
from ..ingest.archive import Archiver, Kept, kept
from ..ingest.requests import INGEST_TYPES
from ..ingest.sniff import sniff_mimetype
from ..ingest.walk import (
    DEFAULT_BLOCKLIST,
    MAX_HOPS,
    STATUSES,
    Answer,
    Blocklist,
    Fetch,
    Verdict,
    Walk,
)
from ..jobs import JobContext, JobSpec, Outcome, register
from ..jobs.worker import is_dead_here
from ..store import Row, Tx
from .types import Option, SourceType, register_type

__all__ = ["INGEST", "INGEST_URL", "PAGE", "ingest_warc_dir", "parse_statuses"]

INGEST_URL = "ingest:"
"""The URL of an ingest source: its work is in the store, not behind a URL."""
PAGE = 1000
"""URLs per `ingest.page` job."""


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
        },
    )
)


def ingest_warc_dir(home: Path) -> Path:
    return home / "warc" / "ingest"


# --- handing out the URLs -----------------------------------------------------------------


@register("ingest.run")
@register("ingest.page")
async def _page(ctx: JobContext) -> Outcome:
    payload = ctx.job.payload
    opts = dict(payload["options"])
    after = payload.get("after") or ["", ""]
    taken = int(payload.get("taken", 0))
    limit = opts.get("limit")
    size = PAGE if limit is None else max(0, min(PAGE, int(limit) - taken))
    params = {
        "after_type": after[0],
        "after_url": after[1],
        "ingest_type": opts.get("ingest_type"),
        "link_source": opts.get("link_source"),
        "force": 1 if opts.get("force") else 0,
        "retry": json.dumps(parse_statuses(str(opts.get("retry") or ""))),
        "page": size,
    }
    rows = await ctx.store.run(lambda tx: tx.all("ingest_page", **params), False) if size else []
    cursor = rows[-1] if rows else None
    # Pages come in URL order, which bunches each host's URLs together; one host takes
    # one request at a time, so its URLs are dealt out in turns with the other hosts'
    # (jobs are claimed in the order they were made).
    rows = _interleave_hosts(rows)
    fetch_opts = {
        k: opts.get(k) for k in ("max_hops", "max_bytes", "delay", "allow_private", "blocklist")
    }
    children = [
        JobSpec(
            "ingest.fetch",
            hashlib.sha1(f"{r['ingest_type']}\n{r['base_url']}".encode()).hexdigest()[:20],
            {"ingest_type": r["ingest_type"], "base_url": r["base_url"], **fetch_opts},
        )
        for r in rows
    ]
    if cursor is not None and len(rows) == size:
        # The next page is claimed once this page's fetches are all claimed (lower
        # priority), so the job table holds about one page of pending work.
        last = cursor
        children.append(
            JobSpec(
                "ingest.page",
                "next",
                {
                    "options": opts,
                    "after": [last["ingest_type"], last["base_url"]],
                    "taken": taken + len(rows),
                },
                priority=-1,
            )
        )
    commit = JobSpec("ingest.commit", "commit") if ctx.job.kind == "ingest.run" else None
    return Outcome(result={"urls": len(rows)}, children=tuple(children), commit=commit)


def _interleave_hosts(rows: list[Row]) -> list[Row]:
    by_host: dict[str, list[Row]] = {}
    for row in rows:
        by_host.setdefault(urlsplit(row["base_url"]).netloc.lower(), []).append(row)
    queues = list(by_host.values())
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


@register("ingest.commit")
async def _commit(ctx: JobContext) -> Outcome:
    run = ctx.job.source_run_id

    def counts(tx: Tx) -> dict[str, int]:
        row = tx.one("source_run_started", id=run)
        since = float(row["started"]) if row else 0.0
        return {r["status"]: int(r["n"]) for r in tx.all("ingest_status_counts", since=since)}

    return Outcome(result={"statuses": await ctx.store.run(counts, False)})


# --- one URL ------------------------------------------------------------------------------


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


# What each fetch error is called in the result.
_ERRORS: tuple[tuple[type[Exception], str], ...] = (
    (RobotsDisallowed, "blocked-robots"),
    (TooLarge, "body-too-large"),
    (FetchTimeout, "timeout"),
    (DNSError, "dns-error"),
    (ConnectionFailed, "connection-error"),
    (BadResponse, "bad-response"),
    (AddressRefused, "blocked-address"),
    (InvalidRequestURL, "bad-url"),
    # A host that asked us to wait longer than a worker waits (Retry-After, backoff).
    (TransientError, "host-backoff"),
)


async def _archiver(ctx: JobContext) -> Archiver:
    async def make() -> Archiver:
        return Archiver(
            ingest_warc_dir(ctx.config.home),
            ctx.store,
            ctx.owner,
            ctx.clock,
            lease_seconds=ctx.config.lease_seconds,
            is_dead=is_dead_here,
        )

    return await ctx.shared("ingest-archiver", make)


@register("ingest.fetch")
async def _fetch(ctx: JobContext) -> Outcome:
    p = ctx.job.payload
    ingest_type, base_url = str(p["ingest_type"]), str(p["base_url"])
    max_bytes = int(p.get("max_bytes") or INGEST.options["max_bytes"].default)
    extra = _read_blocklist(str(p["blocklist"])) if p.get("blocklist") else ()
    walk = Walk(
        ingest_type,
        base_url,
        max_hops=int(p["max_hops"] if p.get("max_hops") is not None else MAX_HOPS),
        blocklist=Blocklist(DEFAULT_BLOCKLIST + extra),
    )
    fetcher = await ctx.fetcher(allow_private=bool(p.get("allow_private")), delay=p.get("delay"))
    bodies: dict[str, Kept] = {}
    terminal: Kept | None = None
    retry_after: float | None = None
    step = walk.start()
    while isinstance(step, Fetch):
        url = step.url
        try:
            resp = await fetcher.get(url, None, max_body=max_bytes)
        except Deferred:
            raise  # not a result: the job waits for the host's turn, or for the next run
        except (FetchError, RobotsDisallowed, TransientError) as exc:
            status = next((name for kind, name in _ERRORS if isinstance(exc, kind)), "bad-url")
            retry_after = getattr(exc, "retry_after", None)
            step = walk.on_error(status, url, str(exc))
            break
        if len(resp.content) > max_bytes:  # within the limit on the wire, not decoded
            step = walk.on_error("body-too-large", url, f"decoded body exceeds {max_bytes}")
            break
        if resp.decode_error is not None:
            step = walk.on_error("bad-response", url, resp.decode_error)
            break
        if resp.status in (429, 503):
            retry_after = resp.retry_after
        step = walk.on_answer(
            Answer(url, resp.status, resp.location, resp.content, resp.header("Content-Type"))
        )
        terminal = None
        if 200 <= resp.status < 300 and resp.content:
            mimetype = sniff_mimetype(resp.content, resp.header("Content-Type"))
            terminal = bodies.setdefault(url, kept(resp, mimetype))
    verdict: Verdict = step
    last_attempt = ctx.job.attempts + 1 >= ctx.job.max_attempts
    if verdict.transient and not last_attempt:
        raise TransientError(
            f"{base_url}: {verdict.status}: {verdict.error or verdict.terminal_status}",
            retry_after,
        )
    if bodies:
        await (await _archiver(ctx)).keep(list(bodies.values()))
    at_terminal = terminal is not None and terminal.response.url == verdict.terminal_url
    sha1 = terminal.sha1 if terminal is not None and at_terminal else None
    row = {
        "ingest_type": ingest_type,
        "base_url": base_url,
        "hit": 1 if verdict.hit else 0,
        "status": verdict.status,
        "terminal_url": verdict.terminal_url,
        "terminal_status": verdict.terminal_status,
        "terminal_sha1": sha1,
        "hops": json.dumps(walk.hops, ensure_ascii=False),
        "error": (verdict.error or None) and str(verdict.error)[:2000],
        "now": ctx.clock.now(),
    }

    def write(tx: Tx) -> None:
        tx.execute("upsert_ingest_result", **row)

    return Outcome(result={"status": verdict.status, "sha1": sha1}, write=write)
