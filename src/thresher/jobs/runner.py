"""Running a job and recording its outcome: the handler, then the group commit.

A worker runs the job's handler and hands what it returned to the group commit, which
commits what the pool's workers finished in one transaction at a time (falling back to
one job per transaction when a group fails) and claims in it the jobs they will want
next. A handler that raised has its job retried with backoff, deferred, handed back or
failed for good. Each end is counted in `PoolStats` and told to the pool's listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from ..clock import Clock
from ..config import Config
from ..errors import Deferred, Interrupted, LeaseLost
from ..fetch.dns import STREAK
from ..fetch.errors import DNSError
from ..store import Tx
from ..store.aio import AsyncStore
from . import queue
from .claims import Claims
from .handlers import JobContext, handler_for
from .model import Job, JobState, Outcome
from .resources import Resources
from .retry import backoff_delay, is_transient

__all__ = ["MAX_UNCOMMITTED", "Listener", "PoolStats", "Runner"]

log = logging.getLogger("thresher.jobs")

# Completions waiting for their group commit past which a worker waits for it.
MAX_UNCOMMITTED = 256


@dataclass
class PoolStats:
    done: int = 0
    failed: int = 0
    retried: int = 0
    deferred: int = 0  # handed back until later (Deferred: their host's turn, ...)
    released: int = 0
    running: dict[int, str] = field(default_factory=dict)


Listener = Callable[[str, Job], None]


class Runner:
    """Runs the jobs of a pool's workers (`execute`) for the owner of their leases, and
    commits their outcomes (`flush` waits for the last). The group commit claims through
    `claims`; handlers get `resources`; a failure or a commit wakes the pool (`wake`)."""

    def __init__(
        self,
        config: Config,
        store: AsyncStore,
        clock: Clock,
        owner: str,
        *,
        claims: Claims,
        resources: Resources,
        stats: PoolStats,
        listener: Listener | None,
        stopping: asyncio.Event,
        wake: asyncio.Event,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.owner = owner
        self.stats = stats
        self._listener = listener
        self._claims = claims
        self._kind_seconds = claims.kind_seconds
        # What every JobContext gets, bound once.
        self._fetcher = resources.fetcher
        self._get_shared = resources.get_shared
        self._leases = resources.leases
        self._stopping = stopping
        self._wake = wake
        # Jobs whose handlers are done, waiting for the group commit (`_commit_all`): one
        # transaction commits them all, and claims the jobs the workers will want next.
        self._uncommitted: list[tuple[Job, Outcome]] = []
        self._committer: asyncio.Task[None] | None = None
        self._committed = asyncio.Event()

    def committing(self) -> bool:
        """Whether finished jobs wait for their commit, or one is under way."""
        return bool(self._uncommitted) or self._committer is not None

    def commit_running(self) -> bool:
        """Whether a group commit runs now (and may claim for the workers waiting)."""
        return self._committer is not None

    async def execute(self, job: Job) -> None:
        """Run the job; its outcome goes to the group commit (`_commit_all`), which the
        worker does not wait for unless MAX_UNCOMMITTED outcomes are waiting already."""
        handler = handler_for(job.kind)
        ctx = JobContext(
            job,
            self.owner,
            self.config,
            self.clock,
            self.store,
            self._fetcher,
            self._get_shared,
            self._leases,
            self._stopping,
        )
        started = self.clock.monotonic()
        try:
            if handler is None:
                raise LookupError(f"no handler for job kind {job.kind!r}")
            outcome = await handler(ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._failed(job, exc)
            # Retried, deferred or handed back, in a transaction of its own (not the
            # group commit, which wakes the pool when done): an idle worker asking for
            # work sleeps until the next job was due when it asked, maybe a heartbeat away.
            self._wake.set()
            return
        took = self.clock.monotonic() - started
        mean = self._kind_seconds.get(job.kind)
        self._kind_seconds[job.kind] = took if mean is None else 0.9 * mean + 0.1 * took
        self._uncommitted.append((job, outcome))
        if self._committer is None:
            self._committer = asyncio.ensure_future(self._commit_all())
        while len(self._uncommitted) >= MAX_UNCOMMITTED and self._committer is not None:
            self._committed.clear()
            await self._committed.wait()

    async def _commit_all(self) -> None:
        """Commit what the workers finished, in one transaction at a time, each with what
        finished while the one before ran (a group commit), and claim in it the jobs the
        workers will want next."""
        try:
            while self._uncommitted:
                done, self._uncommitted = self._uncommitted, []
                await self._commit_group(done)
                self._committed.set()
                # New children or a freed commit may be claimable now.
                self._wake.set()
        finally:
            self._committer = None
            self._committed.set()
            self._wake.set()

    async def _commit_group(self, done: list[tuple[Job, Outcome]]) -> None:
        claims = self._claims
        now = self.clock.now()
        # Read at each commit, not bound once: an idle worker's claim sets it meanwhile.
        wanted = 0 if claims.claiming else claims.wanted()

        def commit(tx: Tx) -> tuple[queue.Completed, list[Job]]:
            completed = queue.complete_many(tx, done, self.owner, now, self.config.max_attempts)
            claimed = claims.claim_in(tx, now, wanted) if wanted and claims.runs else []
            return completed, claimed

        try:
            completed, claimed = await claims.store_with_due(commit)
        except Exception as exc:
            if len(done) == 1:
                await self._commit_one(*done[0], exc)
                return
            # One handler's writes failed (a constraint, a bug), or the store did: each
            # job on its own, so that only the one at fault fails.
            log.info("a group commit of %d jobs failed (%s): one by one", len(done), exc)
            for job, outcome in done:
                await self._commit_one(job, outcome)
            return
        claims.claimed.extend(claimed)
        claims.due.extend(completed.due)
        lost = {job.id for job in completed.lost}
        for job in completed.lost:
            log.warning("job %s: lease lost before completion; result discarded", job.key)
        for job, _ in done:
            if job.id not in lost:
                self.stats.done += 1
                self._emit("done", job)

    async def _commit_one(self, job: Job, outcome: Outcome, error: Exception | None = None) -> None:
        """Commit one job in a transaction of its own (after a group commit failed)."""
        now = self.clock.now()
        due: list[int] = []

        def commit(tx: Tx) -> None:
            due[:] = queue.complete(tx, job, self.owner, outcome, now, self.config.max_attempts)

        try:
            if error is not None:
                raise error
            await self._claims.store_with_due(commit)
        except LeaseLost as exc:
            log.warning("%s", exc)
            return
        except Exception as exc:
            # Writing the results failed (constraint, bug): nothing was committed.
            await self._failed(job, exc)
            return
        self._claims.due.extend(due)
        self.stats.done += 1
        self._emit("done", job)

    async def flush(self) -> None:
        """Wait for the group commit to commit every finished job."""
        while self._committer is not None:
            await asyncio.gather(asyncio.shield(self._committer), return_exceptions=True)
        if self._uncommitted:  # the committer failed: what it left, one by one
            left, self._uncommitted = self._uncommitted, []
            for job, outcome in left:
                with contextlib.suppress(Exception):
                    await self._commit_one(job, outcome)

    async def _failed(self, job: Job, exc: Exception) -> None:
        error = _describe(exc)
        now = self.clock.now()
        if isinstance(exc, Deferred):
            # An interrupted job is due again at once: it stopped only because we did.
            until = now if isinstance(exc, Interrupted) else exc.until
            try:
                await self.store.run(lambda tx: queue.defer(tx, job, self.owner, until, now))
            except LeaseLost as lost:
                log.warning("%s", lost)
                return
            if isinstance(exc, Interrupted):
                self.stats.released += 1
                log.info("job %s handed back: %s", job.key, exc)
                return
            self.stats.deferred += 1
            log.debug("job %s deferred: %s", job.key, exc)
            return
        if isinstance(exc, DNSError):
            STREAK.failed(str(exc))  # offline? says so early, as a warning
        try:
            if is_transient(exc) and not isinstance(exc, LookupError):
                delay = backoff_delay(
                    job.attempts + 1,
                    self.config.backoff_base,
                    self.config.backoff_max,
                    getattr(exc, "retry_after", None),
                )
                state = await self.store.run(
                    lambda tx: queue.retry(tx, job, self.owner, error, now, delay)
                )
            else:
                await self.store.run(lambda tx: queue.fail(tx, job, self.owner, error, now))
                state = JobState.FAILED
        except LeaseLost as lost:
            log.warning("%s", lost)
            return
        if state is JobState.FAILED:
            self.stats.failed += 1
            log.error("job %s failed for good: %s", job.key, error)
            self._emit("failed", job)
        else:
            self.stats.retried += 1
            log.info("job %s will be retried: %s", job.key, error)
            self._emit("retried", job)

    def _emit(self, event: str, job: Job) -> None:
        if self._listener is not None:
            self._listener(event, job)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if type(exc).__module__ not in ("thresher.errors", "builtins"):
        text = f"{type(exc).__name__}: {text}"
    if not isinstance(exc, OSError | TimeoutError) and type(exc).__module__ == "builtins":
        # An unexpected exception is a bug: keep where it happened.
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            last = frames[-1]
            text += f" (at {os.path.basename(last.filename)}:{last.lineno})"
    return text[:2000]
