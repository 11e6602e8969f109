"""A worker pool's claims: how its workers get their jobs.

A worker takes a job claimed ahead when there is one, or claims; short jobs are claimed
many at a time, ahead of the workers (`MAX_PREFETCH`). While nothing is due, one idle
worker at a time asks the store and sleeps until the next job is due, or until the pool
wakes it. Every transaction of the pool goes through `store_with_due`, which first wakes
the commit jobs that the pool's completions may have made due.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..clock import Clock
from ..config import Config
from ..store import Tx
from ..store.aio import AsyncStore
from . import queue
from .model import Job

__all__ = [
    "CLOCK_STEP_WARN",
    "IDLE_POLL_SECONDS",
    "MAX_PREFETCH",
    "MIN_IDLE_WAIT",
    "SHORT_JOB_SECONDS",
    "Claims",
    "Drained",
]

log = logging.getLogger("thresher.jobs")

# How often an idle worker looks for work that another process may create: while a
# worker of another process is alive or holds a lease on a job of its runs (finishing
# it may add or wake jobs), and, serving, for new runs. Otherwise nothing can change
# unseen: it sleeps until the next job is due, or until this pool wakes it.
IDLE_POLL_SECONDS = 0.5
# The shortest idle sleep. A claim that took nothing says when the next job is due,
# after that claim's `now`, so the wait is positive; this floor keeps a wall clock that
# stands still or crawls (frozen by a debugger, faked) from making it a busy loop.
MIN_IDLE_WAIT = 0.05
# A jump of the wall clock against the monotonic one worth a warning: jobs backing off
# are due by the wall clock, so a step back makes them wait that much longer.
CLOCK_STEP_WARN = 5.0
# Jobs of a short kind (their handlers' mean time under SHORT_JOB_SECONDS) are claimed
# ahead of the workers that will run them, up to MAX_PREFETCH, so that one claim and
# one commit serve many jobs. A job of any other kind is claimed only for a worker that
# is free: claimed ahead, it would keep its lease from a worker elsewhere that is free
# now (a claim of many hands such jobs straight back, in its transaction).
SHORT_JOB_SECONDS = 0.005
MAX_PREFETCH = 32

T = TypeVar("T")

Drained = Callable[[list[tuple[int, str]]], Awaitable[None]]


class Claims:
    """The jobs a pool's workers take (`next`), claimed for `owner` from `runs` (serving:
    every open run, refreshed while idle, and those drained handed to `on_drained`).

    `committing` tells whether the pool's own group commit is under way: its end will
    add or free jobs, so an idle worker waits for it rather than for a lull. One that
    runs (`commit_running`) claims for the workers waiting, so an idle worker's claim
    waits for its end, and one that starts during such a claim (`claiming`) claims
    nothing. The pool counts its workers waiting for a job in `idle`; the group commit
    claims in its own transaction (`claim_in`, `wanted`) and leaves the jobs whose
    commits it may have made due in `due`; the handlers' mean times per kind go in
    `kind_seconds`."""

    def __init__(
        self,
        config: Config,
        store: AsyncStore,
        clock: Clock,
        owner: str,
        runs: list[int],
        *,
        serve: bool,
        on_drained: Drained | None,
        stopping: asyncio.Event,
        finished: asyncio.Event,
        wake: asyncio.Event,
        committing: Callable[[], bool],
        commit_running: Callable[[], bool],
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.owner = owner
        self.runs = runs
        self.serve = serve
        self._on_drained = on_drained
        self._stopping = stopping
        self._finished = finished
        self._wake = wake
        self._committing = committing
        self._commit_running = commit_running
        self._turn = 0  # rotates the run claimed from first
        # One idle worker at a time asks the store for work and sleeps until some is
        # due; the others queue here, not on the store.
        self._asking = asyncio.Lock()
        self._clock_offset: float | None = None  # wall minus monotonic, at the last look
        # Jobs whose commits may be due, from completions committed since: woken by the
        # next transaction (see thresher.jobs.queue on why not by the completing one).
        self.due: list[int] = []
        # Jobs leased to this pool and not started yet, claimed ahead (see MAX_PREFETCH).
        self.claimed: deque[Job] = deque()
        self.kind_seconds: dict[str, float] = {}  # each kind's recent mean handler time
        self.idle = 0  # workers waiting for a job
        # An idle worker's claim is in flight: the group commit then claims nothing, as
        # neither may claim beside the other (see `next`).
        self.claiming = False

    async def next(self) -> Job | None:
        """A job claimed ahead, or a claim; while none is due, sleep until one is or the
        pool wakes us. None once the pool is stopping or its runs have no unfinished job."""
        if self.claimed and not self._stopping.is_set():
            return self.claimed.popleft()
        async with self._asking:
            while not self._stopping.is_set() and not self._finished.is_set():
                if self.claimed:  # a commit claimed some meanwhile
                    return self.claimed.popleft()
                # Cleared before the claim, so a wake-up during it is not lost.
                self._wake.clear()
                if self._commit_running():
                    # The group commit claims for the workers waiting, this one too. A
                    # claim beside it would take their jobs twice: long ones would sit
                    # leased in `claimed` with no worker free to start them. Each of
                    # its groups wakes the pool, and so does its end.
                    await self._wake.wait()
                    continue
                if self.serve:
                    await self._refresh_runs()
                self.claiming = True
                try:
                    got, now, monotonic = await self.store_with_due(self._claim_or_lull)
                finally:
                    self.claiming = False
                if isinstance(got, Job):
                    return got
                if isinstance(got, list):
                    self.claimed.extend(got[1:])
                    return got[0]
                if self._committing():
                    # Our own commit will add or free jobs: wait for it, not a lull.
                    await self._sleep(self.config.heartbeat_seconds)
                    continue
                self._check_clock(now, monotonic)
                wait = self._idle_wait(got, now)
                if wait is None:
                    self._finished.set()
                    self._wake.set()
                    return None
                await self._sleep(wait)
        return None

    def _idle_wait(self, lull: queue.Lull, now: float) -> float | None:
        """How long to sleep after a claim at `now` took nothing; None: the runs are over.

        Until the next job is due; while another process may add work unseen (a worker
        elsewhere is alive or holds a lease of these runs; serving: new runs), no longer
        than a poll. Alone, only this pool's own work can change anything, and its end
        wakes us: the heartbeat's period is only a net for what no rule foresaw."""
        if not lull.unfinished and not self.serve:
            return None
        wait = self.config.heartbeat_seconds
        if lull.next_due is not None:
            wait = min(wait, max(MIN_IDLE_WAIT, lull.next_due - now))
        if lull.elsewhere or self.serve:
            wait = min(wait, IDLE_POLL_SECONDS)
        return wait

    async def _sleep(self, seconds: float) -> None:
        """Sleep `seconds` (by the monotonic clock), or until the pool is woken."""
        waker = asyncio.create_task(self._wake.wait())
        sleeper = asyncio.create_task(self.clock.sleep(seconds))
        try:
            await asyncio.wait({waker, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waker.cancel()
            sleeper.cancel()

    def _check_clock(self, now: float, monotonic: float) -> None:
        """Warn when the wall clock jumped: a job backing off is due by the wall clock,
        so after a step back it waits that much longer (its `not_before` is in the
        store, shared with other machines, and stays as written)."""
        offset = now - monotonic
        last, self._clock_offset = self._clock_offset, offset
        if last is not None and abs(offset - last) >= CLOCK_STEP_WARN:
            way = "back" if offset < last else "forward"
            log.warning(
                "the wall clock went %s by %.0f s: jobs backing off are due by it",
                way,
                abs(offset - last),
            )

    async def _refresh_runs(self) -> None:
        """Serve every open run; hand those with nothing left open to `on_drained`."""
        rows = await self.store.run(lambda tx: tx.all("open_runs_jobs"), write=False)
        self.runs = [int(r["id"]) for r in rows]
        drained = [(int(r["id"]), str(r["source"])) for r in rows if not r["open_jobs"]]
        if drained and self._on_drained is not None:
            await self._on_drained(drained)

    async def store_with_due(self, work: Callable[[Tx], T]) -> T:
        """Run `work` in a transaction that first wakes the commits of `self.due`."""
        due, self.due = self.due, []
        now = self.clock.now()

        def run(tx: Tx) -> T:
            for job_id in due:
                queue.wake(tx, job_id, now)
            return work(tx)

        try:
            return await self.store.run(run)
        except BaseException:
            self.due.extend(due)
            raise

    def wanted(self) -> int:
        """How many jobs to claim now: one for each worker waiting (at least one), and, once
        a kind of job is known to be short, up to MAX_PREFETCH ahead of them."""
        if self._stopping.is_set():
            return 0
        short = any(t < SHORT_JOB_SECONDS for t in self.kind_seconds.values())
        return max(0, max(self.idle, 1) + (MAX_PREFETCH if short else 0) - len(self.claimed))

    def claim_in(self, tx: Tx, now: float, n: int) -> list[Job]:
        """Claim up to `n` jobs in `tx`; of those beyond the workers waiting, keep the
        ones of short kinds and hand the others back."""
        self._turn += 1
        jobs = queue.claim_many(
            tx, self.owner, self.runs, now, self.config.lease_seconds, n, self._turn
        )
        free = max(self.idle, 1) - len(self.claimed)
        seconds = self.kind_seconds
        back = [
            job
            for i, job in enumerate(jobs)
            if i >= free and seconds.get(job.kind, SHORT_JOB_SECONDS) >= SHORT_JOB_SECONDS
        ]
        if back:
            queue.unclaim(tx, back, self.owner, now)
            kept = {job.id for job in back}
            jobs = [job for job in jobs if job.id not in kept]
        return jobs

    def _claim_or_lull(self, tx: Tx) -> tuple[Job | list[Job] | queue.Lull, float, float]:
        """A claim, or why it took nothing, with the one reading of the clock it used.

        The clock is read here, in the transaction, not before it: waiting for the
        store (behind busy workers' commits) would make a `now` read earlier stale, and
        a wait from it too long. The wait is then worked out from this very reading, so
        no second reading (another moment, another thread) can disagree with the claim.
        """
        now, monotonic = self.clock.now(), self.clock.monotonic()
        n = self.wanted()
        if n > 1:
            jobs = self.claim_in(tx, now, n)
            if jobs:
                return jobs, now, monotonic
            self._turn -= 1  # the claim below counts as the one that took nothing
        self._turn += 1
        got = queue.claim_or_lull(
            tx, self.owner, self.runs, now, self.config.lease_seconds, start=self._turn
        )
        return got, now, monotonic
