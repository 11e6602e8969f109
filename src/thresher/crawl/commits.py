"""A crawl's batch and its commits: what the crawl did since the last commit, written to
the store with the WARC position that covers it.

Every second (or `commit_pages` pages) the engine syncs the WARC file and commits the
batch with that position (see `ledger`), so a crawl killed at any moment resumes where its
last commit left it, never fetching a committed page again and never writing a page
twice. An exchange is archived (`pages`) and then recorded in the batch, both or neither
as far as a commit can tell: a commit holds new exchanges back while it waits for those
being archived, so the position it syncs covers exactly the batch it writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection

from ..clock import Clock
from ..frontier import Workbench
from ..store.aio import AsyncStore
from .admission import Admission
from .ledger import Batch, CrawlLedger, ShardState
from .pages import Exchange, Pages, Processed
from .settings import CrawlSettings

__all__ = ["OWNERS_SECONDS", "Commits"]

# How long links to hosts without an owner may wait for a commit to give them one.
OWNERS_SECONDS = 0.1


class Commits:
    """Archives exchanges and records them in `batch` (`archive`), and commits the batch
    (`commit`). `pages` is set once the WARC files are open."""

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        store: AsyncStore,
        ledger: CrawlLedger,
        batch: Batch,
        admission: Admission,
        workbench: Workbench,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.store = store
        self.ledger = ledger
        self.batch = batch
        self.admission = admission
        self.workbench = workbench
        self.clock = clock
        self.pages: Pages | None = None
        self._lock = asyncio.Lock()
        self._last = 0.0  # when the last commit was made
        # Archiving and the commit that covers it: new exchanges wait while a commit
        # drains those in progress, so the synced position covers exactly the batch.
        self._writes_open = asyncio.Event()
        self._writes_open.set()
        self._drained = asyncio.Event()
        self._drained.set()
        self._outstanding = 0
        self._archiving: set[asyncio.Task[None]] = set()

    async def archive(self, ex: Exchange, record: Callable[[Processed], None]) -> None:
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

    async def settle(self) -> None:
        """Exchanges being archived finish and are recorded."""
        await asyncio.gather(*self._archiving, return_exceptions=True)

    def due(self, now: float, in_flight: Collection[object]) -> bool:
        """Whether to commit now (`in_flight`: the fetches in flight)."""
        if self.admission.unowned and (not in_flight or now - self._last >= OWNERS_SECONDS):
            return True  # new hosts: their URLs wait for an owner
        return len(self.batch) >= self.settings.commit_pages or (
            now - self._last >= self.settings.commit_seconds
            and bool(self.batch.finishes or self.batch.inserts or self.batch.robots)
        )

    async def commit(
        self, *, final: bool = False, idle: bool = False, limited: bool = False
    ) -> ShardState | None:
        """Write the batch with the WARC position that covers it, and let admission have
        what the store answered (hosts' owners, URLs sent to this shard). `idle`: the
        crawl has nothing in hand; `final`: nor will it, and with no page limit reached
        (`limited`), nothing is left queued."""
        async with self._lock:
            assert self.pages is not None
            self._writes_open.clear()
            try:
                await self._drained.wait()
                batch = self.batch.take()
                unowned = self.admission.take_unowned()
                pos = await self.pages.sync()
            finally:
                self._writes_open.set()
            now = self.clock.now()
            self._last = now
            stats = self.workbench.stats(now)
            queued = stats.queued + stats.in_flight + self.admission.waiting_count()
            try:
                state = await self.store.run(
                    lambda tx: self.ledger.commit(
                        tx,
                        batch,
                        (pos.filename, pos.offset),
                        queued=0 if final and not limited else queued,
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
                self.batch.put_back(batch)
                self.admission.put_back_unowned(unowned)
                raise
            if state is not None:
                self.admission.owned(unowned, state.owners, now)
                if state.received:
                    self.admission.receive(state.received, now)
            return state
