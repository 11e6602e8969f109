"""The crawl engine: the async shell that drives the frontier core.

One loop asks the `Workbench` what may be fetched now and starts up to `concurrency`
fetch tasks; each task fetches through the guarded `Fetcher`, writes the exchange to the
WARC files, extracts links (`fetches`), and sends them through scope and sieve back to the
workbench (`admission`). Every second (or `commit_pages` pages) the engine commits the
batch with the WARC position that covers it (`commits`), so a crawl killed at any moment
resumes where its last commit left it.

With `leases` (workers sharing a PostgreSQL store) each fetch also takes its host's turn
in the store (`thresher.fetch.leases`): a host another worker is fetching, or fetched
less than a delay ago, goes back to the workbench until then, and a fetch leaves the
host's next allowed time behind for every other worker (`turns`).

With a `shard` the engine crawls one shard of a run: only the hosts it owns, sending the
links it finds to other hosts' owners through the store (see `admission`). When it has
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
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..errors import Deferred, Interrupted
from ..fetch import Fetcher, FetchSettings
from ..fetch.leases import HostLeases
from ..frontier import Fetch, Hop, RobotsCache, Workbench
from ..store import Row, Tx
from ..store.aio import AsyncStore
from ..store.warc import WarcPosition
from .admission import Admission
from .commits import Commits
from .fetches import Fetches
from .ledger import Batch, CrawlLedger, Loaded, Shard
from .pages import WarcSetup, open_pages
from .settings import CrawlSettings
from .summary import CrawlSummary
from .turns import HostTurns

__all__ = ["CrawlEngine", "CrawlSummary"]

log = logging.getLogger("thresher.crawl")

# A shard with nothing in hand asks for URLs sent to it this often (and four times as
# often in its first second idle: at a run's end its siblings finish about then, and the
# run ends with the last one to notice)...
SHARD_POLL_SECONDS = 0.2
SHARD_QUICK_POLLS_SECONDS = 1.0
# ...and after this long idle, gives its worker slot to a sibling shard waiting for one.
SHARD_HOLD_SECONDS = 2.0
# Stopping (SIGINT, SIGTERM): fetches in flight get this long to finish and be
# committed; those still running then are abandoned, and fetched again on resume.
STOP_IN_FLIGHT_SECONDS = 3.0


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
        # What has happened since the last commit: one object for the engine's life (a
        # commit takes what it holds), shared with admission and fetches, which record in it.
        self.batch = Batch()
        self.totals: dict[str, int] = {}
        self.admission = Admission(
            settings,
            ledger=self.ledger,
            batch=self.batch,
            workbench=self.workbench,
            robots=self.robots,
            clock=clock,
            shard=shard,
            fetch_robots=self._fetch_robots,
        )
        self.commits = Commits(
            settings,
            store=store,
            ledger=self.ledger,
            batch=self.batch,
            admission=self.admission,
            workbench=self.workbench,
            clock=clock,
        )
        self.fetches: Fetches | None = None  # made in run(), with the open Fetcher
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._started = 0  # fetches started this session, for max_pages
        self._finished_before = 0  # pages finished by earlier sessions of this run
        self._committing: asyncio.Task[None] | None = None
        self._idle_since: float | None = None
        self._failure: BaseException | None = None
        self.fetcher: Fetcher | None = None

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
        pages = await open_pages(setup, self.settings.parse_processes)
        self.commits.pages = pages
        watcher = None if self.stop is None else asyncio.ensure_future(self._watch_stop())
        try:
            async with Fetcher(self.fetch_settings) as fetcher:
                self.fetcher = fetcher
                self.fetches = Fetches(
                    self.settings,
                    source=self.source,
                    fetcher=fetcher,
                    workbench=self.workbench,
                    clock=self.clock,
                    ledger=self.ledger,
                    batch=self.batch,
                    admission=self.admission,
                    turns=self.turns,
                    archive=self.commits.archive,
                )
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
        await self.commits.commit(final=True, limited=self._page_limit_reached())
        files = await pages.close()

        def read(tx: Tx) -> tuple[Row | None, list[Row]]:
            errors = tx.all("crawl_run_errors", source=self.source, run=self.run_id)
            return tx.one("get_crawl_run", run=self.run_id), errors

        row, errors = await self.store.run(read, False)
        assert row is not None
        return CrawlSummary.from_row(
            row, time.monotonic() - t0, files, self.shard.count if self.shard else 1, errors
        )

    def _restore(self, loaded: Loaded) -> WarcSetup:
        self.admission.restore(loaded)
        self._finished_before = loaded.finished
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
        assert self.fetches is not None
        now = self.clock.now()
        settings = self.settings
        validators = self.fetches.validators
        admission = self.admission
        for p in loaded.pending:
            # Known requisites and sitemaps wait while their kind is turned off.
            if (p.hop == Hop.EMBED and not settings.requisites) or (
                p.hop == Hop.SITEMAP and not settings.sitemaps
            ):
                continue
            if p.etag or p.last_modified:
                validators[p.hash] = p
            admission.admit(p.url, p.hash, p.depth, now, Hop(p.hop))
        admission.discover_seeds(now)
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
            if self._committing is None and self.commits.due(now, self._tasks):
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
            await self.commits.commit()
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
            and not self.admission.robots_inflight
            and not self.admission.unowned
            and (decision is None or self._page_limit_reached())
        )

    async def _shard_idle(self, now: float) -> bool:
        """A shard with nothing in hand: say so, take what was sent to it, and tell
        whether the run is over. Waits a poll interval if nothing came."""
        if self._idle_since is None:
            self._idle_since = now
        if self.turns is not None and self.turns.holding:
            await self.turns.release()
        state = await self.commits.commit(idle=True)
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
            self.admission.wait_for_robots(fetch.url, fetch.key, fetch.depth, fetch.hop)
            return
        if not allowed:  # queued before robots.txt was fetched again, which forbids it
            self.workbench.on_withdraw(fetch)
            self.batch.counts["robots_excluded"] += 1
            error = self.robots.refusal(fetch.url, now)
            self.ledger.finish(self.batch, fetch.key, "robots", now=now, error=error)
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

    # -- fetch tasks ----------------------------------------------------------------------

    async def _resolve(self, name: str) -> list[str]:
        assert self.fetcher is not None
        return await self.fetcher.resolve(name)

    async def _fetch(self, fetch: Fetch) -> None:
        fetches = self.fetches
        assert fetches is not None
        if self.turns is not None:
            until = await self.turns.take(fetch.host, fetch.url)
            if until is not None:  # another worker's turn
                if fetch.hop is not Hop.SITEMAP:
                    self._started -= 1
                self.workbench.on_held(fetch, until)
                return
        try:
            await fetches.fetch(fetch)
        finally:
            if self.turns is not None:
                await self.turns.give(fetch.host)

    def _fetch_robots(self, site: str, url: str) -> bool:
        """Start fetching `site`'s robots.txt (for `url`), unless the crawl is stopping."""
        if self._stopping():
            return False
        assert self.fetches is not None
        self._spawn(self.fetches.robots(site, url))
        return True

    # -- aborting -------------------------------------------------------------------------

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
        await self.commits.settle()
        pages = self.commits.pages
        try:
            if pages is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.commits.commit(idle=idle))
        finally:
            if pages is not None:
                await pages.abandon()
