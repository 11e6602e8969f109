"""A crawl shard's work, as a whole: run in the process that takes its job, or, when that
process runs another shard already, in a child process of its own (`thresher.jobs.child`),
so that each shard gets a core. The child opens its own connection to the store, and its
own host leases when the workers of a PostgreSQL store share them.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

from ..clock import Clock, SystemClock
from ..fetch.leases import HostLeases
from ..liveness import is_dead_here
from ..store.aio import AsyncStore
from .engine import CrawlEngine
from .ledger import Shard
from .settings import CrawlSettings
from .summary import CrawlSummary

__all__ = ["ChildCrawl"]


@dataclass(frozen=True)
class ChildCrawl:
    """Everything a child process needs to run one engine (all of it pickles)."""

    settings: CrawlSettings
    source: str
    run: int
    store_url: str
    warc_dir: Path
    job: int | None
    owner: str | None
    shard: Shard | None
    # Workers share a PostgreSQL store's host turns (`thresher.fetch.leases`).
    shared_leases: bool
    lease_seconds: float
    log_level: int

    def engine(
        self,
        store: AsyncStore,
        clock: Clock,
        leases: HostLeases | None,
        stop: asyncio.Event | None = None,
    ) -> CrawlEngine:
        """The engine this describes, on `store` (in this process or a child's);
        `stop` set: finish what is in flight, commit, raise Interrupted."""
        return CrawlEngine(
            self.settings,
            source=self.source,
            run=self.run,
            store=store,
            warc_dir=self.warc_dir,
            clock=clock,
            job=self.job,
            owner=self.owner,
            leases=leases,
            shard=self.shard,
            stop=stop,
        )

    @property
    def what(self) -> str:
        return "crawl"

    async def work(self, stop: asyncio.Event) -> CrawlSummary:
        """The crawl, in this (child) process, on a store connection of its own."""
        store = await AsyncStore(self.store_url).open()
        leases = (
            HostLeases(
                store,
                self.owner or "crawl",
                lease_seconds=self.lease_seconds,
                is_dead=is_dead_here,
            )
            if self.shared_leases
            else None
        )
        clock = SystemClock()
        try:
            return await self.engine(store, clock, leases, stop).run()
        finally:
            if leases is not None:
                with contextlib.suppress(Exception):
                    await leases.release_all(clock.now())
            await store.close()
