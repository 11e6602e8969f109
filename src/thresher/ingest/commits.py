"""A shard's batch and its commits: what its engine finished, written to the store.

An ingest engine (`thresher.ingest.engine`) records every walk it finishes in one batch
(`Batch`: the result, the bodies' records, the queue rows it empties or the attempt to
try again), and commits it beside the walks: about every `COMMIT_SECONDS`, or sooner once
`COMMIT_BYTES` of records wait. A commit is one transaction (`thresher.ingest.ledger`'s
`commit`: file_meta, the records and the WARC position, the results, the queue rows),
guarded by the shard job's lease; a `kill -9` loses at most the batch not committed yet,
which the resumed engine walks again.
"""

from __future__ import annotations

from ..clock import Clock
from ..store.aio import AsyncStore
from .archive import IngestArchive
from .ledger import Batch, commit

__all__ = ["COMMIT_BYTES", "COMMIT_SECONDS", "Commits"]

COMMIT_SECONDS = 0.1
"""Longest a finished URL waits for its commit (what a `kill -9` makes walk again)."""
COMMIT_BYTES = 8 << 20
"""Records waiting for a commit past which it is made at once (the memory they hold)."""


class Commits:
    """The batch of one shard of one run (one object for the engine's life, which the
    engine records in) and its commits; `bodies` counts the bodies new to the store."""

    def __init__(
        self,
        *,
        run: int,
        shard: int,
        store: AsyncStore,
        archive: IngestArchive,
        clock: Clock,
        job: int | None,
        owner: str | None,
    ) -> None:
        self.run_id = run
        self.shard = shard
        self.store = store
        self.archive = archive
        self.clock = clock
        self.job = job
        self.owner = owner
        self.batch = Batch()
        self.bodies = 0
        self.last = 0.0  # when the last commit was made (monotonic)
        self.seconds = COMMIT_SECONDS  # the engine's loop wakes as often

    def due(self) -> bool:
        if not self.batch:
            return False
        waited = self.clock.monotonic() - self.last
        return waited >= self.seconds or self.batch.nbytes >= COMMIT_BYTES

    async def commit(self) -> None:
        batch = self.batch.take()
        self.last = self.clock.monotonic()
        if not batch:
            return
        now = self.clock.now()
        self.bodies += await self.store.run(
            lambda tx: commit(
                tx,
                batch,
                run=self.run_id,
                shard=self.shard,
                archive=self.archive,
                now=now,
                job=self.job,
                owner=self.owner,
            )
        )
