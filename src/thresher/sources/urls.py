"""`urls`: keep a current snapshot of every URL in a list.

The source URL names a text file (a local path or an http(s) URL) with one URL per line
(`#` starts a comment). Each run fetches the list, then each URL as its own job, with a
conditional GET (ETag / Last-Modified) so an unchanged page costs a 304 and no bytes.
Bodies are stored once, by SHA-256, under HOME/content/; the `documents` table holds
the newest state of each URL. HTTP errors a retry cannot fix (404, 410 …) are recorded
on the document, not retried; 408, 429 and 5xx are retried with backoff.

Every fetch goes through the process's `PoliteFetcher`: robots.txt is obeyed (a URL it
disallows is recorded, not fetched), one request at a time reaches a host with `delay`
seconds between them, and private or loopback addresses are refused unless the source
allows them (`-o allow_private=true`), so a list from elsewhere cannot make Thresher
fetch an internal service. Redirects are followed by hand, each hop checked again.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from ..errors import PermanentError, SourceError, TransientError
from ..fetch import AddressRefused, InvalidRequestURL, TooLarge
from ..fetch.polite import RobotsDisallowed
from ..jobs import JobContext, JobSpec, Outcome, register
from ..store import Tx
from .http import RETRY_STATUSES, TooManyRedirects, get_following
from .types import Option, RunNote, SourceType, register_type

__all__ = ["URLS", "content_path"]

# `#` starts a comment at the start of a line or after white space; a `#` inside a URL
# is its fragment.
_COMMENT = re.compile(r"(?:^|\s)#")


def _check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise SourceError(f"URL {url!r} has no host")
        return url
    if parts.scheme == "file":
        # file:///a%20b/list.txt names "/a b/list.txt".
        return str(Path(url2pathname(parts.path)).resolve())
    if parts.scheme and len(parts.scheme) > 1:
        raise SourceError(f"unsupported URL scheme {parts.scheme!r} in {url!r}")
    return str(Path(url).resolve())


# URLs named in a run's report of what failed (the rest are counted).
_SHOWN_PROBLEMS = 3


def _problems(tx: Tx, source: str, since: float) -> RunNote | None:
    """The URLs whose fetch in this run ended in an error: a run with a 404 is not just
    "ok (done 5)". A run whose every URL was refused for its address fetched nothing:
    it failed, saying how to allow them."""
    rows = tx.all("document_errors_since", source=source, since=since)
    if not rows:
        return None
    noun = "URL" if len(rows) == 1 else "URLs"
    refused = [str(r["error"]) for r in rows if ": refused: " in str(r["error"])]
    if len(refused) == len(rows):
        fetched = tx.one("count_documents_fetched_since", source=source, since=since)
        if fetched is not None and int(fetched["n"]) == len(rows):
            reason = refused[0][refused[0].index(": refused: ") + 2 :]
            return RunNote(f"{reason}; nothing was fetched ({len(rows)} {noun} refused)", True)
    shown = "; ".join(f"{r['url']}: {r['error']}" for r in rows[:_SHOWN_PROBLEMS])
    more = f"; and {len(rows) - _SHOWN_PROBLEMS} more" if len(rows) > _SHOWN_PROBLEMS else ""
    return RunNote(f"{len(rows)} {noun} failed: {shown}{more}")


URLS = register_type(
    SourceType(
        name="urls",
        root_kind="urls.run",
        doc="A list of URLs (file or URL, one per line), each kept as a current snapshot.",
        check_url=_check_url,
        problems=_problems,
        options={
            "max_bytes": Option(
                int, 50 * 2**20, "Largest body stored (and URL list read); larger is an error."
            ),
            "allow_private": Option(
                bool, False, "Also fetch private, loopback and link-local addresses."
            ),
            "delay": Option(float, None, "Seconds between requests to one host [config delay]."),
        },
    )
)


def content_path(home: Path, sha256: str) -> Path:
    return home / "content" / sha256[:2] / sha256


async def _get_list(ctx: JobContext, where: str, max_bytes: int) -> bytes:
    """The list, at most `max_bytes` (the source's cap on a body: on the wire, and once
    its Content-Encoding is undone by the fetch's streaming decoder); more is an error."""
    # The scheme is case-insensitive: HTTP://host/list is a URL, not a file name.
    if urlsplit(where).scheme in ("http", "https"):
        try:
            resp = await get_following(ctx, where, {}, max_bytes)
        except TooLarge as exc:
            raise PermanentError(f"URL list {where}: {exc}") from None
        if resp.status in RETRY_STATUSES:
            raise TransientError(f"URL list {where}: HTTP {resp.status}", resp.retry_after)
        if resp.status != 200:
            raise PermanentError(f"URL list {where}: HTTP {resp.status}")
        return resp.content
    try:
        with open(where, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise PermanentError(f"URL list {where}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise PermanentError(f"URL list {where}: larger than max_bytes={max_bytes}")
    return data


def parse_list(data: bytes) -> tuple[list[str], list[str]]:
    """The distinct http(s) URLs in a list, in order, and a reason for each rejected line."""
    urls: dict[str, None] = {}
    rejected = []
    # utf-8-sig: a list saved with a byte-order mark must not lose its first line.
    for number, raw in enumerate(data.decode("utf-8-sig", "replace").splitlines(), 1):
        line = _COMMENT.split(raw, 1)[0].strip()
        if not line:
            continue
        parts = urlsplit(line)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or any(c.isspace() for c in line)
        ):
            rejected.append(f"line {number}: not an http(s) URL: {line[:200]!r}")
            continue
        urls.setdefault(line)
    return list(urls), rejected


@register("urls.run")
async def _run(ctx: JobContext) -> Outcome:
    opts = ctx.job.payload["options"]
    max_bytes = int(opts.get("max_bytes") or URLS.options["max_bytes"].default)
    urls, rejected = parse_list(await _get_list(ctx, ctx.job.payload["url"], max_bytes))
    children = tuple(
        JobSpec("urls.fetch", hashlib.sha1(u.encode()).hexdigest()[:20], {"url": u, **opts})
        for u in urls
    )
    return Outcome(
        result={"urls": len(urls), "rejected": rejected[:100], "rejected_count": len(rejected)},
        children=children,
        commit=JobSpec("urls.commit", "commit"),
    )


@register("urls.fetch")
async def _fetch(ctx: JobContext) -> Outcome:
    url, source = ctx.job.payload["url"], ctx.job.source or ""
    max_bytes = int(ctx.job.payload.get("max_bytes", URLS.options["max_bytes"].default))
    known = await ctx.store.run(lambda tx: tx.one("get_document", source=source, url=url), False)
    headers = {}
    if known and known["sha256"]:
        if known["etag"]:
            headers["If-None-Match"] = known["etag"]
        if known["last_modified"]:
            headers["If-Modified-Since"] = known["last_modified"]
    doc: dict[str, Any] = dict(
        source=source,
        url=url,
        sha256=None,
        length=None,
        content_type=None,
        etag=None,
        last_modified=None,
        error=None,
        now=ctx.clock.now(),
    )
    answered: int | None = None  # the status of the last response, as sent
    try:
        resp = await get_following(ctx, url, headers, max_bytes)
        doc["status"] = answered = resp.status
        if resp.status in RETRY_STATUSES:
            raise TransientError(f"{url}: HTTP {resp.status}", resp.retry_after)
        if resp.status == 304 and known and headers:
            # Not modified: the stored body is current, whatever state the last
            # fetch (a 404 since then, say) left on the document.
            last = known["status"]
            doc["status"] = last if last is not None and 200 <= last < 300 else 200
            doc["etag"] = resp.header("ETag")
            doc["last_modified"] = resp.header("Last-Modified")
        elif resp.status >= 300:
            # An error, or a redirect that was not followed (no Location, or an
            # unasked-for 304): there is no body to keep.
            doc["error"] = f"HTTP {resp.status} {resp.reason or ''}".strip()
        else:
            if len(resp.content) > max_bytes:  # within the limit on the wire, not decoded
                raise PermanentError(f"{url}: decoded body exceeds max_bytes={max_bytes}")
            doc.update(_save_body(ctx.config.home, resp.content))
            doc["content_type"] = resp.header("Content-Type")
            doc["etag"] = resp.header("ETag")
            doc["last_modified"] = resp.header("Last-Modified")
    except (TooManyRedirects, InvalidRequestURL, AddressRefused, RobotsDisallowed) as exc:
        # Errors of the URL itself that no retry can fix: recorded like a 404.
        last = getattr(exc, "last", None)
        doc["status"] = answered = last.status if last is not None else None
        doc["error"] = f"{type(exc).__name__}: {exc}"[:2000]

    def write(tx: Tx) -> None:
        tx.execute("upsert_document", **doc)

    return Outcome(result={"status": answered, "sha256": doc["sha256"]}, write=write)


def _save_body(home: Path, body: bytes) -> dict[str, Any]:
    """Write the body to a temporary file, then move it to its content address."""
    folder = home / "content"
    folder.mkdir(parents=True, exist_ok=True)
    sha = hashlib.sha256(body).hexdigest()
    # Not mkstemp: its files are private (0600) whatever the umask, and the content
    # files are meant to be read like any other file the user writes.
    tmp = folder / f".part-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body)
        final = content_path(home, sha)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return {"sha256": sha, "length": len(body)}


@register("urls.commit")
async def _commit(ctx: JobContext) -> Outcome:
    source = ctx.job.source or ""
    row = await ctx.store.run(lambda tx: tx.one("count_documents", source=source), False)
    return Outcome(result={"documents": int(row["n"]) if row else 0})
