"""The crawl engine: the async shell that drives the frontier core.

One loop asks the `Workbench` what may be fetched now and starts up to `concurrency`
fetch tasks; each task fetches through the guarded `Fetcher`, writes the exchange to the
WARC files, extracts links, and sends them through scope and sieve back to the workbench.
New hosts wait behind their site's robots.txt, fetched once per site. A page's
requisites (what it embeds) are fetched too, in scope or not, and the seed hosts'
sitemaps read (`Hop`); see docs/crawling.md. Every second (or
`commit_pages` pages) the engine syncs the WARC file and commits the batch with that
position (see `ledger`), so a crawl killed at any moment resumes where its last commit
left it, never fetching a committed page again and never writing a page twice.

With `leases` (workers sharing a PostgreSQL store) each fetch also takes its host's turn
in the store (`thresher.fetch.leases`): a host another worker is fetching, or fetched
less than a delay ago, goes back to the workbench until then, and a fetch leaves the
host's next allowed time behind for every other worker (`turns`).

With a `shard` the engine crawls one shard of a run: only the hosts it owns, sending the
links it finds to other hosts' owners through the store (see `ledger`). A link to a host
without an owner waits for the next commit, which gives the host one. When it has
nothing in hand it says so in a commit and polls its inbox until every shard says the
same; if a sibling shard's job is still waiting for a worker, it hands its own slot back
(`Deferred`) rather than wait in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..errors import Deferred, Interrupted, PermanentError
from ..fetch import Fetcher, FetchError, FetchSettings, Response
from ..fetch.leases import HostLeases
from ..fetch.polite import fetch_robots
from ..frontier import (
    Fetch,
    Hop,
    InvalidURL,
    RobotsCache,
    Scope,
    Sieve,
    Workbench,
    host_of,
    key_of,
    robots_url,
    site_of,
    url_hash,
)
from ..frontier.politeness import is_failure
from ..parse.sitemaps import Sitemap
from ..store import Row, Tx
from ..store.aio import AsyncStore
from ..store.warc import WarcPosition
from ..store.warcrecord import Capture
from ..weburl import resolve
from .ledger import Batch, CrawlLedger, Loaded, Pending, Shard, ShardState, Unowned
from .pages import Exchange, Pages, Processed, WarcSetup, open_pages
from .settings import CrawlSettings
from .summary import TOO_MANY_REDIRECTS, CrawlSummary, error_text
from .turns import HostTurns

__all__ = ["CrawlEngine", "CrawlSummary"]

log = logging.getLogger("thresher.crawl")

# Links remembered as already sent through scope and sieve (about 100 bytes each).
RECENT_LINKS = 50_000
# A shard with nothing in hand asks for URLs sent to it this often (and four times as
# often in its first second idle: at a run's end its siblings finish about then, and the
# run ends with the last one to notice)...
SHARD_POLL_SECONDS = 0.2
SHARD_QUICK_POLLS_SECONDS = 1.0
# ...and after this long idle, gives its worker slot to a sibling shard waiting for one.
SHARD_HOLD_SECONDS = 2.0
# How long links to hosts without an owner may wait for a commit to give them one.
OWNERS_SECONDS = 0.1
# Stopping (SIGINT, SIGTERM): fetches in flight get this long to finish and be
# committed; those still running then are abandoned, and fetched again on resume.
STOP_IN_FLIGHT_SECONDS = 3.0
# Redirects followed in a row, as handlers do (`sources.http.MAX_REDIRECTS`); the next
# is an error. Counted in memory, so a resumed crawl may follow a chain 10 more.
MAX_REDIRECTS = 10
# Sitemaps found through sitemap indexes, at most this many indexes deep (the protocol
# allows one: robots.txt or /sitemap.xml -> an index -> sitemaps; one more is tolerated).
MAX_SITEMAP_DEPTH = 2
# The pages a sitemap lists count as one link from a seed (so --max-depth 0 keeps to
# the seeds).
SITEMAP_LINK_DEPTH = 1


def _site_key(url: str) -> str:
    scheme, host, port = site_of(url)
    return f"{scheme}://{host}:{port}"


class CrawlEngine:
    """Crawls one run of one source; `run()` returns when nothing is left to fetch."""

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        source: str,
        run: int,
        store: AsyncStore,
        warc_dir: Path,
        clock: Clock,
        job: int | None = None,
        owner: str | None = None,
        fetch_settings: FetchSettings | None = None,
        leases: HostLeases | None = None,
        shard: Shard | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.settings = settings
        # Set when the process is stopping: start no fetch, finish those in flight,
        # commit, raise Interrupted.
        self.stop = stop
        self.source = source
        self.run_id = run
        self.store = store
        self.warc_dir = warc_dir
        self.clock = clock
        self.shard = shard
        self.ledger = CrawlLedger(source, run, job=job, owner=owner, shard=shard)
        # A run's limits are the run's: each shard has its share of them.
        self.max_pages = settings.max_pages
        self.concurrency = settings.concurrency
        if shard is not None:
            if self.max_pages is not None:
                self.max_pages = shard.share(self.max_pages)
            self.concurrency = max(1, shard.share(self.concurrency))
        self.fetch_settings = fetch_settings or FetchSettings(
            user_agent=settings.user_agent,
            allow_private=settings.allow_private,
            total_timeout=settings.timeout,
            stall_timeout=settings.stall_timeout,
            read_timeout=settings.read_timeout,
            max_body=settings.max_body,
            max_decoded=settings.max_body,  # one cap, on the wire and decoded
            limit=self.concurrency * 2,
        )
        self.scope: Scope = settings.make_scope()
        self.workbench = Workbench(settings.politeness())
        # Workers sharing a PostgreSQL store take turns on hosts through it: a fetch
        # holds its host there, and leaves the host's next allowed time behind.
        self.turns = (
            None
            if leases is None
            else HostTurns(
                leases,
                self.workbench,
                self._resolve,
                clock,
                fetch_seconds=self.fetch_settings.total_timeout,
                sticky=settings.delay == 0,  # and so no delay per address either
            )
        )
        self.robots = RobotsCache(settings.user_agent)
        self.sieve = Sieve()
        self.batch = Batch()
        self.totals: dict[str, int] = {}
        # Known URLs with validators for a conditional GET, and the capture they confirm.
        self._validators: dict[int, Pending] = {}
        # URLs waiting for their site's robots.txt: (url, key, depth, hop)
        self._waiting: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
        self._robots_inflight: set[str] = set()
        self._refused: dict[str, str] = {}  # site -> why it may not be fetched at all
        self._recent: dict[str, int] = {}  # link -> least depth it was offered at
        self._redirects: dict[int, int] = {}  # URL key -> redirects in a row to it
        self._recent_embeds: set[str] = set()  # requisites offered (scope is no matter)
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._seq = 0
        self._started = 0  # fetches started this session, for max_pages
        self._finished_before = 0  # pages finished by earlier sessions of this run
        self._commit_lock = asyncio.Lock()
        self._committing: asyncio.Task[None] | None = None
        self._last_commit = 0.0
        self._idle_since: float | None = None
        # A shard's run: each host's owner, and URLs of hosts that have none yet.
        self._owners: dict[str, int] = {}
        self._unowned: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
        # Seeds are fetched as a browser reads them, like every link; the Sitemap: lines
        # of their sites' robots.txt files are read.
        self._seeds = [url for seed in settings.seeds if (url := resolve(seed)) is not None]
        self._seed_sites = {_site_key(seed) for seed in self._seeds}
        self._failure: BaseException | None = None
        self.pages: Pages | None = None
        self.fetcher: Fetcher | None = None
        # Archiving and the commit that covers it: new exchanges wait while a commit
        # drains those in progress, so the synced position covers exactly the batch.
        self._writes_open = asyncio.Event()
        self._writes_open.set()
        self._drained = asyncio.Event()
        self._drained.set()
        self._outstanding = 0
        self._archiving: set[asyncio.Task[None]] = set()

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> CrawlSummary:
        t0 = time.monotonic()
        loaded = await self.store.run(lambda tx: self.ledger.load(tx, self.clock.now()))
        setup = self._restore(loaded)
        if self._finished_before:
            # Resumed: the session before may have died a moment ago, mid-fetch, in
            # another process. Its hosts' clocks died with it, so every host waits one
            # delay from now before its first fetch.
            policy = self.workbench.policy
            self.workbench.not_before = self.clock.now() + max(policy.delay, policy.ip_delay)
        self.pages = await open_pages(setup, self.settings.parse_processes)
        watcher = None if self.stop is None else asyncio.ensure_future(self._watch_stop())
        try:
            async with Fetcher(self.fetch_settings) as fetcher:
                self.fetcher = fetcher
                self._discover_pending(loaded)
                await self._crawl()
                if self.turns is not None:
                    await self.turns.release(every=True)
        except BaseException as exc:
            # Interrupted (a signal, a lost lease, a store error): keep what is done. A
            # deferred shard had nothing in hand, and says so again.
            idle = isinstance(exc, Deferred) and not isinstance(exc, Interrupted)
            await self._abort(idle=idle)
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
        await self._commit(final=True)
        files = await self.pages.close()

        def read(tx: Tx) -> tuple[Row | None, list[Row]]:
            errors = tx.all("crawl_run_errors", source=self.source, run=self.run_id)
            return tx.one("get_crawl_run", run=self.run_id), errors

        row, errors = await self.store.run(read, False)
        assert row is not None
        return CrawlSummary.from_row(
            row, time.monotonic() - t0, files, self.shard.count if self.shard else 1, errors
        )

    def _restore(self, loaded: Loaded) -> WarcSetup:
        self.sieve = loaded.sieve
        self._owners = loaded.owners
        self._seq = loaded.seq
        self._finished_before = loaded.finished
        for r in loaded.robots:
            scheme, rest = str(r["site"]).split("://", 1)
            self.robots.on_robots(
                f"{scheme}://{rest}/robots.txt",
                r["status"],
                bytes(r["body"]) if r["body"] is not None else None,
                float(r["fetched_at"]),
            )
        self.warc_dir.mkdir(parents=True, exist_ok=True)
        prefix = f"{self.source}-run{self.run_id}"
        if self.shard is not None:
            prefix += f"-shard{self.shard.index}"
        resume = None
        if loaded.warc is None:
            # Nothing committed yet: whatever a dead session wrote is not ours to keep.
            # (Digits first: not another shard's files, whose prefix goes on.)
            for stale in self.warc_dir.glob(f"{prefix}-[0-9]*"):
                stale.unlink()
        else:
            resume = WarcPosition(str(loaded.warc[0]), int(loaded.warc[1]))
        return WarcSetup(self.warc_dir, prefix, self.settings.warc_max_size, resume, loaded.digests)

    def _discover_pending(self, loaded: Loaded) -> None:
        now = self.clock.now()
        settings = self.settings
        for p in loaded.pending:
            # Known requisites and sitemaps wait while their kind is turned off.
            if (p.hop == Hop.EMBED and not settings.requisites) or (
                p.hop == Hop.SITEMAP and not settings.sitemaps
            ):
                continue
            if p.etag or p.last_modified:
                self._validators[p.hash] = p
            self._admit(p.url, p.hash, p.depth, now, Hop(p.hop))
        self._discover(self._seeds, depth=0, now=now)
        if settings.sitemaps:
            # Each seed host's /sitemap.xml, and the Sitemap: lines of the robots.txt
            # files known already (a fresh robots.txt gives its own as it comes).
            guesses = [
                robots_url(seed).removesuffix("robots.txt") + "sitemap.xml" for seed in self._seeds
            ]
            self._discover(guesses, 0, now, Hop.SITEMAP)
            for seed in {_site_key(seed): seed for seed in self._seeds}.values():
                self._discover(self.robots.sitemaps(seed, now) or (), 0, now, Hop.SITEMAP)
        if loaded.pending:
            log.info(
                "%s: run %s starts with %d known URLs to fetch",
                self.source,
                self.run_id,
                len(loaded.pending),
            )
        loaded.pending.clear()
        loaded.digests.clear()

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    async def _watch_stop(self) -> None:
        assert self.stop is not None
        await self.stop.wait()
        self._wake.set()

    async def _finish_in_flight(self) -> None:
        """Stopping: the fetches in flight get a few seconds to finish, so that what the
        server sent is archived and committed, not asked for again on resume."""
        if self._tasks:
            log.info(
                "%s: stopping: %d fetches in flight get %.0f s to finish",
                self.source,
                len(self._tasks),
                STOP_IN_FLIGHT_SECONDS,
            )
            await asyncio.wait(set(self._tasks), timeout=STOP_IN_FLIGHT_SECONDS)

    async def _crawl(self) -> None:
        limit = self.concurrency
        while True:
            # Cleared before looking, not before waiting: a task that ends while this
            # loop awaits a commit must still wake the wait below.
            self._wake.clear()
            if self._failure is not None:
                raise self._failure
            if self._stopping():
                await self._finish_in_flight()
                raise Interrupted(
                    f"crawl {self.source} stopped: what it fetched is committed,"
                    " the rest stays queued",
                    self.clock.now(),
                )
            now = self.clock.now()
            decision: Fetch | float | None = None
            while len(self._tasks) < limit and not self._page_limit_reached():
                decision = self.workbench.next_fetch(now)
                if not isinstance(decision, Fetch):
                    break
                self._start(decision)
            if self._page_limit_reached():
                decision = None
            if self._idle(decision):
                if self.shard is None:
                    return
                if await self._shard_idle(now):
                    return
                continue
            self._idle_since = None
            if self._committing is None and self._due_commit(now):
                # In the background: fetches go on starting while the store commits (a
                # tenth of a second or more, with a sibling shard's commit in the way).
                self._committing = asyncio.ensure_future(self._commit_in_background())
            wait = 1.0
            if isinstance(decision, float) and math.isfinite(decision):
                wait = min(wait, max(0.0, decision - now))
            if len(self._tasks) >= limit or wait > 0:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns instead of
                # raising when it is cancelled just as the event is set (a fetch ending as
                # SIGTERM arrives), and a shard that lost its cancellation polled for ever.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wake.wait()

    async def _commit_in_background(self) -> None:
        try:
            await self._commit()
            if self.turns is not None and self.turns.holding:
                await self.turns.release()
        except Exception as exc:
            if self._failure is None:
                self._failure = exc
        finally:
            self._committing = None
            self._wake.set()

    def _idle(self, decision: Fetch | float | None) -> bool:
        """Nothing in hand: nothing in flight, and nothing queued that this run may fetch.
        A commit in flight may yet hand this shard hosts (their owners), so it counts."""
        return (
            not self._tasks
            and self._committing is None
            and not self._robots_inflight
            and not self._unowned
            and (decision is None or self._page_limit_reached())
        )

    async def _shard_idle(self, now: float) -> bool:
        """A shard with nothing in hand: say so, take what was sent to it, and tell
        whether the run is over. Waits a poll interval if nothing came."""
        if self._idle_since is None:
            self._idle_since = now
        if self.turns is not None and self.turns.holding:
            await self.turns.release()
        state = await self._commit(idle=True)
        assert state is not None
        if state.done:
            return True
        if not state.received:
            if state.siblings_waiting and now - self._idle_since >= SHARD_HOLD_SECONDS:
                raise Deferred(
                    f"shard {self.ledger.shard}: idle while a sibling waits for a worker",
                    now + SHARD_POLL_SECONDS,
                    now,
                )
            quick = now - self._idle_since < SHARD_QUICK_POLLS_SECONDS
            await self.clock.sleep(SHARD_POLL_SECONDS / 4 if quick else SHARD_POLL_SECONDS)
        return False

    def _page_limit_reached(self) -> bool:
        cap = self.max_pages
        return cap is not None and self._finished_before + self._started >= cap

    def _start(self, fetch: Fetch) -> None:
        now = self.clock.now()
        allowed = self.robots.allowed(fetch.url, now)
        if allowed is None:
            # The site's rules expired during the crawl (they last a day): its URLs wait
            # for robots.txt again, as new ones do, and are admitted under the new rules.
            self.workbench.on_withdraw(fetch)
            self._waiting[_site_key(fetch.url)].append(
                (fetch.url, fetch.key, fetch.depth, fetch.hop)
            )
            self._need_robots(fetch.url)
            return
        if not allowed:  # queued before robots.txt was fetched again, which forbids it
            self.workbench.on_withdraw(fetch)
            self.batch.counts["robots_excluded"] += 1
            self.ledger.finish(self.batch, fetch.key, "robots", now=now)
            return
        if fetch.hop is not Hop.SITEMAP:  # a page limit counts pages and requisites
            self._started += 1
        self._spawn(self._fetch(fetch))

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()
        self._wake.set()

    def _due_commit(self, now: float) -> bool:
        if self._unowned and (not self._tasks or now - self._last_commit >= OWNERS_SECONDS):
            return True  # new hosts: their URLs wait for an owner
        return len(self.batch) >= self.settings.commit_pages or (
            now - self._last_commit >= self.settings.commit_seconds
            and bool(self.batch.finishes or self.batch.inserts or self.batch.robots)
        )

    # -- admission: scope, sieve, robots.txt ----------------------------------------------

    def _discover(
        self, links: list[str] | tuple[str, ...], depth: int, now: float, hop: Hop = Hop.LINK
    ) -> None:
        """Send links found `depth` hops from a seed through scope and sieve; requisites
        and sitemaps (`hop`) through the sieve only. Links are URLs as
        `thresher.weburl.resolve` gives them: each is fetched as it is, and keyed by the
        hash of its canonical form."""
        fresh: list[tuple[str, int]] = []
        if hop is not Hop.LINK:
            offered = self._recent_embeds
            if len(offered) > RECENT_LINKS:
                offered.clear()
            for link in links:
                if link in offered:
                    continue
                offered.add(link)
                try:
                    canon = key_of(link)
                except InvalidURL:
                    continue
                fresh.append((link, url_hash(canon)))
            self._offer(fresh, depth, now, hop)
            return
        # BUbiNG's URL cache: most links on a page were on the last pages too, and once a
        # link went through scope and sieve at some depth, the answer is the same for it
        # at that depth or deeper — so skip canonicalising it again.
        recent = self._recent
        if len(recent) > RECENT_LINKS:
            recent.clear()
        for link in links:
            seen_at = recent.get(link)
            if seen_at is not None and seen_at <= depth:
                continue
            recent[link] = depth
            try:
                canon = key_of(link)
            except InvalidURL:
                continue
            if self.scope.allows_canonical(canon, depth):
                fresh.append((link, url_hash(canon)))
        self._offer(fresh, depth, now, hop)

    def _in_scope(self, fetch: Fetch) -> bool:
        """Whether a fetched URL is in the crawl's scope at its depth (by its key)."""
        try:
            return self.scope.allows_canonical(key_of(fetch.url), fetch.depth)
        except InvalidURL:
            return False

    def _discover_listed(self, sitemap: Sitemap, now: float) -> None:
        """The pages a sitemap lists: links one hop from the seeds, if in scope, each with
        its lastmod kept (on a known URL too)."""
        fresh: list[tuple[str, int]] = []
        for link, lastmod in sitemap.urls:
            try:
                canon = key_of(link)
            except InvalidURL:
                continue
            if self.scope.allows_canonical(canon, SITEMAP_LINK_DEPTH):
                h = url_hash(canon)
                fresh.append((link, h))
                if lastmod is not None:
                    self.ledger.lastmod(self.batch, h, lastmod)
        self._offer(fresh, SITEMAP_LINK_DEPTH, now, Hop.LINK)

    def _offer(self, fresh: list[tuple[str, int]], depth: int, now: float, hop: Hop) -> None:
        """URLs to fetch and their keys through the sieve: the new ones are recorded, and
        fetched here or sent to their host's shard."""
        shard = self.shard
        for url, h in self.sieve.offer_hashed(fresh):
            self._seq += 1
            host = host_of(url)
            self.ledger.insert(self.batch, url, h, host, depth, self._seq, hop)
            if shard is None:
                self._admit(url, h, depth, now, hop)
                continue
            owner = self._owners.get(host)
            if owner is None:
                self._unowned[host].append((url, h, depth, hop))
            elif owner == shard.index:
                self._admit(url, h, depth, now, hop)
            else:
                self.ledger.send(self.batch, owner, url, h, depth, hop)

    def _owned(self, unowned: Unowned, owners: dict[str, int], now: float) -> None:
        """Hosts given owners by a commit: this shard's URLs of its own are fetched (the
        commit sent the others on)."""
        assert self.shard is not None
        self._owners.update(owners)
        for host, urls in unowned.items():
            if owners[host] == self.shard.index:
                for url, h, depth, hop in urls:
                    self._admit(url, h, depth, now, Hop(hop))

    def _receive(self, urls: list[Pending], now: float) -> None:
        """URLs another shard found on this shard's hosts (already in `crawl_urls`)."""
        assert self.shard is not None
        known = {p.hash: p for p in urls}
        for url, h in self.sieve.offer_hashed((p.url, p.hash) for p in urls):
            self._owners[host_of(url)] = self.shard.index
            self._admit(url, h, known[h].depth, now, Hop(known[h].hop))

    def _admit(self, url: str, h: int, depth: int, now: float, hop: Hop = Hop.LINK) -> None:
        if self._refused:
            refused = self._refused.get(_site_key(url))
            if refused is not None:
                self.batch.counts["errors"] += hop is not Hop.SITEMAP
                self.ledger.finish(self.batch, h, "error", now=now, error=refused)
                return
        allowed = self.robots.allowed(url, now)
        if allowed is None:
            self._waiting[_site_key(url)].append((url, h, depth, hop))
            self._need_robots(url)
        elif not allowed:
            self.batch.counts["robots_excluded"] += 1
            self.ledger.finish(self.batch, h, "robots", now=now)
        else:
            host = host_of(url)
            if self.workbench.host(host) is None:
                self.workbench.set_crawl_delay(host, self.robots.crawl_delay(url, now))
            if not self.workbench.add(url, depth, now, h, hop):
                self.ledger.finish(self.batch, h, "capped", now=now)

    def _need_robots(self, url: str) -> None:
        site = _site_key(url)
        if site not in self._robots_inflight and not self._stopping():
            self._robots_inflight.add(site)
            self._spawn(self._fetch_robots(site, url))

    async def _fetch_robots(self, site: str, url: str) -> None:
        assert self.fetcher is not None
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
            self._refused[site] = error_text(exc)
            self._robots_inflight.discard(site)
            for u, h, depth, hop in self._waiting.pop(site, []):
                self._admit(u, h, depth, self.clock.now(), Hop(hop))
            return
        now = self.clock.now()
        self.robots.on_robots(url, answer.status, answer.body, now)
        self.ledger.robots(self.batch, site, answer.status, answer.body, now)
        if (
            self.settings.sitemaps
            and site in self._seed_sites
            and answer.status is not None
            and 200 <= answer.status < 300
        ):
            self._discover(self.robots.sitemaps(url, now) or (), 0, now, Hop.SITEMAP)
        if answer.response is not None:
            await self._archive(_exchange(answer.response), lambda processed: None)
        if answer.error:
            log.warning(
                "%s: robots.txt unavailable (%s): the site is skipped this run", site, answer.error
            )
        delay = self.robots.crawl_delay(url, now)
        waiting = self._waiting.pop(site, [])
        for name in {host_of(u) for u, _, _, _ in waiting}:
            self.workbench.set_crawl_delay(name, delay)
        # robots.txt was a request to the host like any other: the first page waits.
        self.workbench.on_side_fetch(host, now)
        if self.turns is not None:
            await self.turns.give(host)
        self._robots_inflight.discard(site)
        for u, h, depth, hop in waiting:
            self._admit(u, h, depth, now, Hop(hop))

    # -- one fetch ------------------------------------------------------------------------

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

    async def _resolve(self, name: str) -> list[str]:
        assert self.fetcher is not None
        return await self.fetcher.resolve(name)

    async def _fetch(self, fetch: Fetch) -> None:
        assert self.fetcher is not None
        if self.turns is not None:
            until = await self.turns.take(fetch.host, fetch.url)
            if until is not None:  # another worker's turn
                if fetch.hop is not Hop.SITEMAP:
                    self._started -= 1
                self.workbench.on_held(fetch, until)
                return
        try:
            await self._fetch_held(fetch)
        finally:
            if self.turns is not None:
                await self.turns.give(fetch.host)

    async def _fetch_held(self, fetch: Fetch) -> None:
        assert self.fetcher is not None
        h = fetch.key
        headers: dict[str, str] = {}
        known = self._validators.get(h)
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
        self._validators.pop(h, None)

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
            await self._archive(_exchange(resp), failed(f"HTTP {status}"))
        elif 300 <= status < 400 and status != 304:
            target = resp.location
            link = None if target is None else resolve(target)  # an http(s) URL, or none
            hops = self._redirects.pop(h, 0) + 1  # this answer's place in a chain
            if link is not None and hops > MAX_REDIRECTS:
                too_many = (
                    f"{TOO_MANY_REDIRECTS}: {fetch.url} is the {hops}th redirect in a row"
                    f" (at most {MAX_REDIRECTS} are followed); not to {target}"
                )
                await self._archive(_exchange(resp), failed(too_many))
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
                    self._discover([link], fetch.depth, now, fetch.hop)
                    self._count_hop(link, hops)

            await self._archive(_exchange(resp, outlinks=(target,) if target else ()), redirect)
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
            await self._archive(_exchange(resp, confirms=confirms), not_modified)
        else:
            robots_tag = (resp.header("X-Robots-Tag") or "").lower()
            follow = "nofollow" not in robots_tag and "none" not in robots_tag
            hop = fetch.hop
            # An embed is fetched wherever it is; its links are followed only if it is in
            # scope itself (a stylesheet's own requisites always are).
            read_links = hop is Hop.LINK or (hop is Hop.EMBED and self._in_scope(fetch))

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
                    self._discover_listed(sitemap, now)
                    if sitemap.sitemaps and fetch.depth < MAX_SITEMAP_DEPTH:
                        self._discover(sitemap.sitemaps, fetch.depth + 1, now, Hop.SITEMAP)
                if p.requisites:  # nofollow or not: the page needs them to be seen
                    self._discover(p.requisites, fetch.depth, now, Hop.EMBED)
                if follow and not p.nofollow and p.links:
                    self._discover(p.links, fetch.depth + 1, now)

            ex = _exchange(
                resp,
                page=resp.decode_error is None,
                follow=read_links,
                requisites=self.settings.requisites and hop is not Hop.SITEMAP,
                sitemap=hop is Hop.SITEMAP,
                max_links=self.settings.max_links_per_page,
            )
            await self._archive(ex, page)

    async def _archive(self, ex: Exchange, record: Callable[[Processed], None]) -> None:
        """Archive `ex`, then `record` what became of it in the batch — both or neither
        as far as a commit can tell: a cancelled fetch task still finishes this."""
        while not self._writes_open.is_set():
            await self._writes_open.wait()
        assert self.pages is not None
        process_now = self.pages.process_now
        if process_now is not None:
            # Nothing suspends between archiving and recording, so nothing can cancel in
            # between: no task, shield or count of writes in flight needed (10-15 µs).
            record(process_now(ex))
            return
        self._outstanding += 1
        self._drained.clear()
        inner = asyncio.ensure_future(self._archive_now(ex, record))
        self._archiving.add(inner)
        inner.add_done_callback(self._archiving.discard)
        await asyncio.shield(inner)

    async def _archive_now(self, ex: Exchange, record: Callable[[Processed], None]) -> None:
        assert self.pages is not None
        try:
            record(await self.pages.process(ex))
        finally:
            self._outstanding -= 1
            if not self._outstanding:
                self._drained.set()

    # -- commits --------------------------------------------------------------------------

    async def _commit(self, *, final: bool = False, idle: bool = False) -> ShardState | None:
        async with self._commit_lock:
            assert self.pages is not None
            self._writes_open.clear()
            try:
                await self._drained.wait()
                batch, self.batch = self.batch, Batch()
                unowned, self._unowned = self._unowned, defaultdict(list)
                pos = await self.pages.sync()
            finally:
                self._writes_open.set()
            now = self.clock.now()
            self._last_commit = now
            stats = self.workbench.stats(now)
            queued = stats.queued + stats.in_flight + sum(len(w) for w in self._waiting.values())
            try:
                state = await self.store.run(
                    lambda tx: self.ledger.commit(
                        tx,
                        batch,
                        (pos.filename, pos.offset),
                        queued=0 if final and not self._page_limit_reached() else queued,
                        hosts=stats.hosts,
                        now=now,
                        idle=idle or final,
                        unowned=unowned,
                    )
                )
            except Exception:
                # Not written, though its records are in the WARC files before any later
                # commit's position: the next commit (the abort's, a retry's) writes it
                # too, or a resume would fetch its pages again and archive them twice.
                self.batch = batch.then(self.batch)
                for host, urls in unowned.items():
                    self._unowned[host][:0] = urls
                raise
            if state is not None:
                self._owned(unowned, state.owners, now)
                if state.received:
                    self._receive(state.received, now)
            return state

    async def _abort(self, *, idle: bool) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._committing is not None:
            # Not cancelled: the store finishes the transaction anyway, and its answer
            # (new hosts' owners) is recorded before the last commit below.
            await asyncio.gather(asyncio.shield(self._committing), return_exceptions=True)
        if self.turns is not None and self.turns.holding:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.turns.release(every=True))
        # Exchanges being archived finish and are recorded, so the last commit below
        # covers exactly what the WARC files hold up to its position.
        await asyncio.gather(*self._archiving, return_exceptions=True)
        try:
            if self.pages is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._commit(idle=idle))
        finally:
            if self.pages is not None:
                await self.pages.abandon()


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
