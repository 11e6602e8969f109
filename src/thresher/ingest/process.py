"""One ingest shard's work, as a whole: run in the process that takes its job, or, when
that process walks another shard already, in a child process of its own
(`thresher.jobs.child`), so that each shard gets a core — an engine's fetching, hashing,
parsing and WARC writing share one event loop, as a crawl's do.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

from ..clock import Clock, SystemClock
from ..fetch import FetchSettings
from ..fetch.leases import StickyLeases
from ..fetch.polite import PoliteFetcher
from ..frontier import Politeness
from ..liveness import is_dead_here
from ..store.aio import AsyncStore
from .archive import IngestArchive, engine_owner
from .engine import IngestEngine, IngestSettings, ShardSummary

__all__ = ["ShardWork"]


@dataclass(frozen=True)
class ShardWork:
    """Everything one shard's engine needs (all of it pickles)."""

    settings: IngestSettings
    fetch: FetchSettings
    politeness: Politeness
    max_defer: float
    run: int
    shard: int
    store_url: str
    warc_dir: Path
    job: int | None
    owner: str
    # Holds on hosts kept in the store: workers of a PostgreSQL store, and the shards of
    # a run (each may be in a process of its own), share the hosts' turns.
    shared_leases: bool
    lease_seconds: float
    log_level: int

    @property
    def what(self) -> str:
        return "ingest shard"

    async def on(
        self, store: AsyncStore, clock: Clock, stop: asyncio.Event | None = None
    ) -> ShardSummary:
        """Walk the shard's URLs with `store` (this process's own, or a child's); `stop`
        set: abandon the walks in flight, commit what is done, raise Interrupted."""
        # Its own owner for holds and WARC slot, alive while its worker is: the shards
        # of one worker, in processes of their own, must not take each other's for theirs.
        owner = engine_owner(self.owner, self.shard)
        leases = None
        if self.shared_leases:
            leases = StickyLeases(
                store, owner, lease_seconds=self.lease_seconds, is_dead=is_dead_here
            )
        fetcher = PoliteFetcher(
            self.fetch, self.politeness, clock, max_defer=self.max_defer, leases=leases
        )
        archive = IngestArchive(
            self.warc_dir,
            owner,
            clock,
            lease_seconds=self.lease_seconds,
            is_dead=is_dead_here,
        )
        async with fetcher:
            engine = IngestEngine(
                self.settings,
                run=self.run,
                shard=self.shard,
                store=store,
                fetcher=fetcher,
                archive=archive,
                clock=clock,
                job=self.job,
                owner=self.owner,
                leases=leases,
                stopping=stop,
            )
            try:
                return await engine.run()
            finally:
                if leases is not None:
                    await asyncio.shield(leases.release(clock.now(), every=True))

    async def work(self, stop: asyncio.Event) -> ShardSummary:
        """The shard in a child process, on a store connection of its own."""
        store = await AsyncStore(self.store_url).open()
        try:
            return await self.on(store, SystemClock(), stop)
        finally:
            with contextlib.suppress(Exception):
                await store.close()
