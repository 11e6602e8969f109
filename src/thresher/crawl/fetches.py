"""One fetch of a crawl, and what becomes of its answer.

A URL the workbench hands out is fetched through the guarded `Fetcher` (a conditional GET
when its last answer came with validators). A 429 or 5xx goes back to the workbench to be
tried again; any other answer is archived (`pages`) and recorded in the batch the next
commit writes: an error, a redirect (its target offered to `admission`, up to
`MAX_REDIRECTS` in a row), a 304 (a revisit of the capture it confirms), or a page whose
links and requisites, or the URLs a sitemap lists, go to `admission`. A site's robots.txt
is fetched here too, in its host's turn, archived, and its answer handed to `admission`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ..clock import Clock
from ..errors import PermanentError
from ..fetch import Fetcher, FetchError, Response
from ..fetch.polite import fetch_robots
from ..frontier import Fetch, Hop, InvalidURL, Workbench, host_of, key_of, url_hash
from ..frontier.politeness import is_failure
from ..store.warcrecord import Capture
from ..weburl import resolve
from .admission import RECENT_LINKS, Admission
from .ledger import Batch, CrawlLedger, Pending
from .pages import Exchange, Processed
from .settings import CrawlSettings
from .summary import TOO_MANY_REDIRECTS, error_text
from .turns import HostTurns

__all__ = ["MAX_REDIRECTS", "MAX_SITEMAP_DEPTH", "Fetches"]

log = logging.getLogger("thresher.crawl")

# Redirects followed in a row, as handlers do (`sources.http.MAX_REDIRECTS`); the next
# is an error. Counted in memory, so a resumed crawl may follow a chain 10 more.
MAX_REDIRECTS = 10
# Sitemaps found through sitemap indexes, at most this many indexes deep (the protocol
# allows one: robots.txt or /sitemap.xml -> an index -> sitemaps; one more is tolerated).
MAX_SITEMAP_DEPTH = 2


class Fetches:
    """A crawl's fetches of URLs and of robots.txt files: each answer is archived through
    `archive` (`Commits.archive`), which then runs the fetch's record of it in `batch`."""

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        source: str,
        fetcher: Fetcher,
        workbench: Workbench,
        clock: Clock,
        ledger: CrawlLedger,
        batch: Batch,
        admission: Admission,
        turns: HostTurns | None,
        archive: Callable[[Exchange, Callable[[Processed], None]], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.source = source
        self.fetcher = fetcher
        self.workbench = workbench
        self.clock = clock
        self.ledger = ledger
        self.batch = batch
        self.admission = admission
        self.turns = turns
        self.archive = archive
        # Known URLs with validators for a conditional GET, and the capture they confirm.
        self.validators: dict[int, Pending] = {}
        self._redirects: dict[int, int] = {}  # URL key -> redirects in a row to it

    async def fetch(self, fetch: Fetch) -> None:
        """Fetch a URL the workbench handed out (in its host's turn, when the crawl takes
        turns: the engine took it), archive the answer and record what became of it."""
        h = fetch.key
        headers: dict[str, str] = {}
        known = self.validators.get(h)
        if known is not None:
            if known.etag:
                headers["If-None-Match"] = known.etag
            if known.last_modified:
                headers["If-Modified-Since"] = known.last_modified
        # Sitemaps are fetched beside the crawl, as robots.txt is: not counted as pages,
        # errors or redirects (a site without /sitemap.xml is not at fault).
        counted = fetch.hop is not Hop.SITEMAP
        try:
            resp = await self.fetcher.get(fetch.url, headers)
        except FetchError as exc:
            final = isinstance(exc, PermanentError)
            if not self.workbench.on_done(fetch, self.clock.now(), None, final=final):
                self.batch.counts["errors"] += counted
                self.ledger.finish(
                    self.batch, h, "error", now=self.clock.now(), error=error_text(exc)
                )
            return
        now = self.clock.now()
        status = resp.status
        if self.workbench.on_done(fetch, now, status, resp.retry_after, resp.ip):
            return  # 429/5xx, to be tried again: only the final answer is archived
        self.validators.pop(h, None)

        def failed(error: str) -> Callable[[Processed], None]:
            def record(p: Processed) -> None:
                self.batch.counts["errors"] += counted
                self.ledger.finish(
                    self.batch,
                    h,
                    "error",
                    now=now,
                    status=status,
                    error=error,
                    warc=(p.filename, p.offset),
                )

            return record

        if is_failure(status) or 400 <= status < 500:
            await self.archive(_exchange(resp), failed(f"HTTP {status}"))
        elif 300 <= status < 400 and status != 304:
            target = resp.location
            link = None if target is None else resolve(target)  # an http(s) URL, or none
            hops = self._redirects.pop(h, 0) + 1  # this answer's place in a chain
            if link is not None and hops > MAX_REDIRECTS:
                too_many = (
                    f"{TOO_MANY_REDIRECTS}: {fetch.url} is the {hops}th redirect in a row"
                    f" (at most {MAX_REDIRECTS} are followed); not to {target}"
                )
                await self.archive(_exchange(resp), failed(too_many))
                return

            def redirect(p: Processed) -> None:
                self.batch.counts["redirects"] += counted
                self.ledger.finish(
                    self.batch,
                    h,
                    "redirect",
                    now=now,
                    status=status,
                    warc=(p.filename, p.offset),
                )
                if link is not None:  # a requisite's target is one, a sitemap's a sitemap
                    self.admission.discover([link], fetch.depth, now, fetch.hop)
                    self._count_hop(link, hops)

            await self.archive(_exchange(resp, outlinks=(target,) if target else ()), redirect)
        elif status == 304:

            def not_modified(p: Processed) -> None:
                self.batch.counts["not_modified"] += counted
                self.ledger.finish(
                    self.batch,
                    h,
                    "done",
                    now=now,
                    status=status,
                    etag=resp.header("ETag"),
                    last_modified=resp.header("Last-Modified"),
                    warc=(p.filename, p.offset),
                )

            # A revisit of the capture the validators came from; with none sent (a server
            # answering 304 unasked), of the URL's own latest capture (see docs/crawling.md).
            confirms = (known.capture if known else None) or Capture(resp.url)
            await self.archive(_exchange(resp, confirms=confirms), not_modified)
        else:
            robots_tag = (resp.header("X-Robots-Tag") or "").lower()
            follow = "nofollow" not in robots_tag and "none" not in robots_tag
            hop = fetch.hop
            # An embed is fetched wherever it is; its links are followed only if it is in
            # scope itself (a stylesheet's own requisites always are).
            read_links = hop is Hop.LINK or (hop is Hop.EMBED and self.admission.in_scope(fetch))

            def page(p: Processed) -> None:
                counts = self.batch.counts
                counts[_COUNTER[hop]] += 1
                counts["bytes"] += len(resp.body)
                counts["duplicates"] += p.duplicate
                counts["links_dropped"] += p.links_dropped
                sitemap = p.sitemap
                if sitemap is not None and sitemap.error:
                    log.warning("%s: sitemap %s: %s", self.source, fetch.url, sitemap.error)
                self.ledger.finish(
                    self.batch,
                    h,
                    "done",
                    now=now,
                    status=status,
                    error=sitemap.error if sitemap is not None else None,
                    replace=True,
                    etag=resp.header("ETag"),
                    last_modified=resp.header("Last-Modified"),
                    digest=p.digest,
                    warc=(p.filename, p.offset),
                    capture=p.capture,
                )
                if sitemap is not None:
                    self.admission.discover_listed(sitemap, now)
                    if sitemap.sitemaps and fetch.depth < MAX_SITEMAP_DEPTH:
                        self.admission.discover(sitemap.sitemaps, fetch.depth + 1, now, Hop.SITEMAP)
                if p.requisites:  # nofollow or not: the page needs them to be seen
                    self.admission.discover(p.requisites, fetch.depth, now, Hop.EMBED)
                if follow and not p.nofollow and p.links:
                    self.admission.discover(p.links, fetch.depth + 1, now)

            ex = _exchange(
                resp,
                page=resp.decode_error is None,
                follow=read_links,
                requisites=self.settings.requisites and hop is not Hop.SITEMAP,
                sitemap=hop is Hop.SITEMAP,
                max_links=self.settings.max_links_per_page,
            )
            await self.archive(ex, page)

    def _count_hop(self, link: str, hops: int) -> None:
        """Remember that `link` (as `resolve` gave it) is reached by `hops` redirects in a
        row, under the key its fetch will have."""
        try:
            key = url_hash(key_of(link))
        except InvalidURL:
            return
        if len(self._redirects) > RECENT_LINKS:  # targets never fetched (out of scope …)
            self._redirects.clear()
        self._redirects[key] = hops

    async def robots(self, site: str, url: str) -> None:
        """`site`'s robots.txt (for `url`), fetched in its host's turn, archived, and
        handed to `admission` with the URLs that waited for it."""
        host = host_of(url)
        if self.turns is not None:
            while (until := await self.turns.take(host, url)) is not None:
                await self.clock.sleep(max(0.0, until - self.clock.now()))
        try:
            answer = await fetch_robots(self.fetcher.get, url)
        except PermanentError as exc:  # refused address, bad URL: no retry helps
            if self.turns is not None:
                await self.turns.give(host)
            log.warning("%s: not crawled: %s", site, exc)
            self.admission.refuse(site, error_text(exc))
            return
        now = self.clock.now()
        self.admission.on_robots(site, url, answer.status, answer.body, now)
        if answer.response is not None:
            await self.archive(_exchange(answer.response), lambda processed: None)
        if answer.error:
            log.warning(
                "%s: robots.txt unavailable (%s): the site is skipped this run", site, answer.error
            )
        waiting = self.admission.take_waiting(site, url, now)
        # robots.txt was a request to the host like any other: the first page waits.
        self.workbench.on_side_fetch(host, now)
        if self.turns is not None:
            await self.turns.give(host)
        self.admission.admit_waiting(site, waiting, now)


# Which counter a stored 2xx answer adds to, by how its URL was reached.
_COUNTER = {Hop.LINK: "pages", Hop.EMBED: "requisites", Hop.SITEMAP: "sitemaps"}


def _exchange(
    resp: Response,
    *,
    page: bool = False,
    outlinks: tuple[str, ...] = (),
    confirms: Capture | None = None,
    follow: bool = True,
    requisites: bool = False,
    sitemap: bool = False,
    max_links: int | None = None,
) -> Exchange:
    return Exchange(
        url=resp.url,
        request_head=resp.request_head,
        response_head=resp.http_head(),
        body=resp.body,
        content=None if resp.content is resp.body or resp.content == resp.body else resp.content,
        content_type=resp.header("Content-Type"),
        ip=resp.ip,
        fetched_at=resp.started,
        page=page,
        outlinks=outlinks,
        confirms=confirms,
        follow=follow,
        requisites=requisites,
        sitemap=sitemap,
        max_links=max_links,
    )
