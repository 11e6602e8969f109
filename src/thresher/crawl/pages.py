"""What happens to a fetched page after the fetch: digest, links, WARC records.

This is the CPU-heavy half of crawling (HTML parsing, hashing, compression), so it can
run in a child process that owns the `WarcWriter`, leaving the event loop to fetch: two
cores instead of one. `PageWriter` does the work; `InlinePages` calls it in-process,
`ProcessPages` in a child. Both process exchanges strictly in the order given, so the
position `sync()` returns covers exactly the exchanges sent before it — which is what
lets the engine commit a batch with the WARC position that covers it.

The writer also remembers the payload digest of every page stored (this crawl's and
earlier runs'), so a page identical to an earlier one becomes a `revisit` record naming
the capture that holds the payload; and a 304 becomes a server-not-modified `revisit` of
the capture its validators came from (`Exchange.confirms`), a requisite's as a page's.

What is read in a 2xx answer, the engine says per exchange: an HTML page's links
(`follow`) and its requisites (`requisites`: what it embeds, and the URLs inside a
stylesheet, `thresher.parse.css`), or the URLs a sitemap lists (`sitemap`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..childproc import spawn_pool
from ..parse import decode_css, extract_links, is_css, is_html
from ..parse.css import css_urls
from ..parse.links import resolver
from ..parse.sitemaps import Sitemap, read_sitemap
from ..store.warc import WarcPosition, WarcWriter
from ..store.warcrecord import Capture, payload_digest

__all__ = [
    "Exchange",
    "InlinePages",
    "PageWriter",
    "Pages",
    "ProcessPages",
    "Processed",
    "WarcSetup",
    "open_pages",
]


@dataclass(frozen=True)
class WarcSetup:
    """Where and how the WARC files of one crawl run are written."""

    directory: Path
    prefix: str
    max_size: int
    resume: WarcPosition | None
    digests: dict[str, Capture]  # payload digest -> the capture stored earlier that holds it


@dataclass(frozen=True)
class Exchange:
    """One HTTP exchange to archive (and, for a page, to parse)."""

    url: str
    request_head: bytes
    response_head: bytes
    body: bytes  # as transferred
    content: bytes | None  # decoded body when it differs from `body`
    content_type: str | None
    ip: str | None
    fetched_at: float
    page: bool = False  # a 2xx answer: find its links, and compare its digest
    outlinks: tuple[str, ...] = ()  # what to record as outlinks when not a page
    # A 304: the capture it confirms, as far as it is known (at least its URI).
    confirms: Capture | None = None
    follow: bool = True  # a page: read an HTML page (its links; requisites if asked)
    requisites: bool = False  # a page: read what it embeds (HTML if followed; CSS)
    sitemap: bool = False  # a page: read it as a sitemap instead
    max_links: int | None = None  # a page: links (and requisites) read, the rest dropped


@dataclass(frozen=True)
class Processed:
    links: list[str]
    nofollow: bool
    digest: str | None
    duplicate: bool
    filename: str
    offset: int
    # Of a 2xx answer: the record that holds its payload (its own, or the original's if a
    # duplicate), which a later 304 confirms.
    capture: Capture | None = None
    requisites: list[str] = field(default_factory=list)
    sitemap: Sitemap | None = None
    links_dropped: int = 0  # past the exchange's max_links


class PageWriter:
    """The single writer of one crawl run's WARC files."""

    def __init__(self, setup: WarcSetup) -> None:
        self.warc = WarcWriter(
            setup.directory,
            setup.prefix,
            max_size=setup.max_size,
            resume=setup.resume,
            software="Thresher",
        )
        self.digests = dict(setup.digests)

    def process(self, ex: Exchange) -> Processed:
        links: list[str] = []
        requisites: list[str] = []
        sitemap: Sitemap | None = None
        nofollow = False
        dropped = 0
        digest: str | None = None
        earlier: Capture | None = None
        if ex.page:
            content = ex.body if ex.content is None else ex.content
            if ex.sitemap:
                sitemap = read_sitemap(content, ex.url)
            elif ex.follow and is_html(ex.content_type, content):
                parsed = extract_links(
                    content,
                    ex.url,
                    ex.content_type,
                    requisites=ex.requisites,
                    max_links=ex.max_links,
                )
                links, nofollow, requisites = parsed.links, parsed.nofollow, parsed.requisites
                dropped = parsed.dropped
            elif ex.requisites and is_css(ex.content_type, ex.url):
                resolve = resolver(ex.url)
                found = (resolve(u) for u in css_urls(decode_css(content, ex.content_type)))
                requisites = [u for u in found if u is not None]
                if ex.max_links is not None and len(requisites) > ex.max_links:
                    dropped = len(requisites) - ex.max_links
                    del requisites[ex.max_links :]
            digest = payload_digest(ex.body)
            earlier = self.digests.get(digest)
        rec = self.warc.write_exchange(
            url=ex.url,
            request_head=ex.request_head,
            response_head=ex.response_head,
            payload=ex.body,
            ip=ex.ip,
            fetched_at=ex.fetched_at,
            revisit_of=earlier,
            # A 304 with a body (no server should send one) is kept as it came.
            not_modified_of=None if ex.body else ex.confirms,
            payload_digest=digest,
            outlinks=[*requisites, *links] if ex.page else ex.outlinks,
        )
        capture = earlier
        if digest is not None and earlier is None:
            capture = self.digests[digest] = Capture(ex.url, rec.date, rec.record_id, digest)
        return Processed(
            links,
            nofollow,
            digest,
            earlier is not None,
            rec.filename,
            rec.offset,
            capture,
            requisites,
            sitemap,
            dropped,
        )

    def sync(self) -> WarcPosition:
        return self.warc.sync()

    def close(self) -> list[str]:
        self.warc.close()
        return self.warc.files


class Pages(Protocol):
    process_now: Callable[[Exchange], Processed] | None
    """`process` without a suspension point, if this kind of pages has one."""

    async def process(self, ex: Exchange) -> Processed: ...

    async def sync(self) -> WarcPosition: ...

    async def close(self) -> list[str]: ...

    async def abandon(self) -> None:
        """Stop without closing the files: a resume repairs them from the store."""
        ...


class InlinePages:
    """Pages processed in the event loop's thread (small crawls, one core)."""

    def __init__(self, setup: WarcSetup) -> None:
        self.writer = PageWriter(setup)
        self.process_now: Callable[[Exchange], Processed] | None = self.writer.process

    async def process(self, ex: Exchange) -> Processed:
        return self.writer.process(ex)

    async def sync(self) -> WarcPosition:
        return self.writer.sync()

    async def close(self) -> list[str]:
        return self.writer.close()

    async def abandon(self) -> None:
        # Only the handles: what follows the committed position is cut off on resume.
        self.writer.warc.abort()


# The child process's writer: a process pool of one worker runs its calls one at a time,
# in the order they were submitted.
_writer: PageWriter | None = None


def _child_init(setup: WarcSetup) -> None:
    global _writer
    _writer = PageWriter(setup)


def _child_process(ex: Exchange) -> Processed:
    assert _writer is not None
    return _writer.process(ex)


def _child_sync() -> WarcPosition:
    assert _writer is not None
    return _writer.sync()


def _child_close() -> list[str]:
    assert _writer is not None
    return _writer.close()


class ProcessPages:
    """Pages processed by one child process that owns the WARC writer."""

    process_now: Callable[[Exchange], Processed] | None = None

    def __init__(self, setup: WarcSetup) -> None:
        self.pool = spawn_pool(1, _child_init, (setup,))

    async def process(self, ex: Exchange) -> Processed:
        return await asyncio.get_running_loop().run_in_executor(self.pool, _child_process, ex)

    async def sync(self) -> WarcPosition:
        return await asyncio.get_running_loop().run_in_executor(self.pool, _child_sync)

    async def close(self) -> list[str]:
        try:
            return await asyncio.get_running_loop().run_in_executor(self.pool, _child_close)
        finally:
            self.pool.shutdown()

    async def abandon(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


async def open_pages(setup: WarcSetup, processes: int) -> Pages:
    """`processes` = 0: in this process; 1: in a child process."""
    if processes <= 0:
        return InlinePages(setup)
    pages = ProcessPages(setup)
    # Start the child now, so a bad resume position fails here and not mid-crawl.
    await pages.sync()
    return pages
