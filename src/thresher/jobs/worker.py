"""The worker pool: stateless workers that claim jobs, run them and commit the outcome.

One pool per process; its workers share one lease owner id, renewed by one heartbeat.
The pool drains the jobs of the source runs it serves and returns when none is left
open, or when asked to stop: then it claims nothing more, lets in-flight jobs finish
within the grace period, and hands back the leases of the rest (no attempt counted).

A serving pool (`thresher worker`) serves every open run instead, whoever opened it,
looks for new runs while idle, hands each run whose jobs are all finished to
`on_drained` (which closes it), and returns only when asked to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import traceback
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar, cast

from ..clock import Clock
from ..config import Config
from ..errors import Deferred, Interrupted, LeaseLost
from ..fetch import FetchSettings
from ..fetch.dns import STREAK
from ..fetch.errors import DNSError
from ..fetch.leases import HostLeases, forget_gone_waiters
from ..fetch.polite import PoliteFetcher
from ..frontier import Politeness
from ..liveness import BOOT_ID as _BOOT_ID
from ..liveness import HOST as _HOST
from ..liveness import is_dead_here
from ..store import Tx
from ..store.aio import AsyncStore
from . import queue
from .handlers import C, Closable, JobContext, handler_for
from .model import Job, JobState, Outcome
from .retry import backoff_delay, is_transient

__all__ = ["PoolStats", "WorkerPool", "is_dead_here", "make_owner"]

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
# Completions waiting for their group commit past which a worker waits for it.
MAX_UNCOMMITTED = 256

T = TypeVar("T")

# The most any handler may ask a fetch to read (a source's max_bytes is capped by it).
HANDLER_MAX_BODY = 2 * 2**30


def make_owner(name: str | None = None) -> str:
    """A unique lease owner id: the name given (or the host's), this pid and a nonce."""
    return f"{name or _HOST}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class PoolStats:
    done: int = 0
    failed: int = 0
    retried: int = 0
    deferred: int = 0  # handed back until later (Deferred: their host's turn, ...)
    released: int = 0
    running: dict[int, str] = field(default_factory=dict)


Listener = Callable[[str, Job], None]
Drained = Callable[[list[tuple[int, str]]], Awaitable[None]]


class WorkerPool:
    def __init__(
        self,
        config: Config,
        store: AsyncStore,
        clock: Clock,
        runs: Sequence[int],
        *,
        owner: str | None = None,
        workers: int | None = None,
        listener: Listener | None = None,
        serve: bool = False,
        on_drained: Drained | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.runs = list(runs)
        self.owner = owner or make_owner()
        self.size = workers or config.workers
        self.stats = PoolStats()
        self._listener = listener
        self.serve = serve
        self._on_drained = on_drained
        self._stopping = asyncio.Event()
        self._finished = asyncio.Event()
        self._wake = asyncio.Event()
        self._fetchers: dict[tuple[bool, float], PoliteFetcher] = {}
        self._shared: dict[str, asyncio.Future[Closable]] = {}
        self._turn = 0  # rotates the run claimed from first
        # One idle worker at a time asks the store for work and sleeps until some is
        # due; the others queue here, not on the store.
        self._asking = asyncio.Lock()
        self._clock_offset: float | None = None  # wall minus monotonic, at the last look
        # Jobs whose commits may be due, from completions committed since: woken by the
        # next transaction (see thresher.jobs.queue on why not by the completing one).
        self._due: list[int] = []
        # Jobs leased to this pool and not started yet, claimed ahead (see MAX_PREFETCH).
        self._claimed: deque[Job] = deque()
        # Jobs whose handlers are done, waiting for the group commit (`_commit_all`): one
        # transaction commits them all, and claims the jobs the workers will want next.
        self._uncommitted: list[tuple[Job, Outcome]] = []
        self._committer: asyncio.Task[None] | None = None
        self._committed = asyncio.Event()
        # An idle worker's claim is in flight: the group commit then claims nothing, as
        # neither may claim beside the other (see `_next`).
        self._claiming = False
        self._kind_seconds: dict[str, float] = {}  # each kind's recent mean handler time
        self._idle = 0  # workers waiting for a job
        # Workers anywhere may share a PostgreSQL store: they share its hosts' turns.
        self._leases = (
            HostLeases(store, self.owner, lease_seconds=config.lease_seconds, is_dead=is_dead_here)
            if store.backend == "postgres"
            else None
        )

    def stop(self) -> None:
        """Claim nothing more; in-flight jobs get the grace period to finish."""
        self._stopping.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    async def run(self) -> PoolStats:
        await self.store.run(partial(self._beat, now=self.clock.now()))
        heartbeat = asyncio.create_task(self._heartbeat(), name="thresher-heartbeat")
        tasks = [
            asyncio.create_task(self._work(i), name=f"thresher-worker-{i}")
            for i in range(self.size)
        ]
        try:
            await self._drain(tasks)
        finally:
            # What the workers finished is committed before their leases go back.
            await self._flush()
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await self._close_shared()
            now = self.clock.now()
            self.stats.released += await self._store_with_due(
                lambda tx: queue.release(tx, self.owner, now)
            )
            await self.store.run(
                lambda tx: tx.execute(
                    "stop_worker", owner=self.owner, now=now, jobs_done=self.stats.done
                )
            )
            for fetcher in self._fetchers.values():
                await fetcher.__aexit__(None, None, None)
            if self._leases is not None:
                await self._leases.release_all(self.clock.now())
        return self.stats

    async def _drain(self, tasks: list[asyncio.Task[None]]) -> None:
        stop_wait: asyncio.Task[Any] = asyncio.create_task(self._stopping.wait())
        pending: set[asyncio.Task[Any]] = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(
                    pending | {stop_wait}, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(stop_wait)
                for task in done - {stop_wait}:
                    task.result()  # a worker that crashed (store gone) ends the pool
                if stop_wait in done:
                    break
            if pending:
                # Stopping: in-flight jobs get the grace period, then are cut off.
                _, late = await asyncio.wait(pending, timeout=self.config.grace_seconds)
                for task in late:
                    task.cancel()
        finally:
            stop_wait.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _heartbeat(self) -> None:
        while True:
            await self.clock.sleep(self.config.heartbeat_seconds)
            try:
                expired = await self.store.run(partial(self._beat, now=self.clock.now()))
                # Its own transaction: it locks commits' rows, the beat this worker's jobs.
                sweep = partial(queue.wake_ready, runs=list(self.runs), now=self.clock.now())
                expired += await self.store.run(sweep)
            except Exception as exc:  # a missed heartbeat is survivable; the next may work
                log.warning("heartbeat failed: %s", exc)
                continue
            if expired:
                self._wake.set()

    def _beat(self, tx: Tx, now: float) -> int:
        """Renew our leases, say we are alive, and free the jobs of workers that are not."""
        queue.renew(tx, self.owner, now, self.config.lease_seconds)
        tx.execute(
            "upsert_worker",
            owner=self.owner,
            hostname=_HOST,
            pid=os.getpid(),
            boot_id=_BOOT_ID,
            jobs_done=self.stats.done,
            now=now,
        )
        # What `status` needs to tell a run worked on from one left open.
        tx.execute(
            "set_worker_runs", owner=self.owner, runs=None if self.serve else json.dumps(self.runs)
        )
        if self._leases is not None:
            forget_gone_waiters(tx, now)
        return queue.expire_leases(tx, now) + queue.expire_dead_owners(tx, now, is_dead_here)

    async def _fetcher(
        self, *, allow_private: bool = False, delay: float | None = None
    ) -> PoliteFetcher:
        """The process's polite fetcher for these manners, made on first use."""
        key = (allow_private, self.config.delay if delay is None else delay)
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            settings = FetchSettings(
                user_agent=self.config.user_agent,
                total_timeout=self.config.http_timeout,
                stall_timeout=self.config.stall_timeout,
                read_timeout=self.config.read_timeout,
                allow_private=allow_private,
                # Handlers pass their own limit (`max_body=`, a source's max_bytes): a
                # month of a busy list's archive can be hundreds of megabytes.
                max_body=HANDLER_MAX_BODY,
                max_decoded=HANDLER_MAX_BODY,
            )
            politeness = Politeness(delay=key[1], ip_delay=key[1] / 2)
            fetcher = await PoliteFetcher(
                settings,
                politeness,
                self.clock,
                max_defer=self.config.defer_max,
                leases=self._leases,
                stopping=self._stopping,
            ).__aenter__()
            self._fetchers[key] = fetcher
        return fetcher

    async def _get_shared(self, key: str, make: Callable[[], Awaitable[C]]) -> C:
        """The process's object under `key`, made once even when many jobs ask at once."""
        made = self._shared.get(key)
        if made is None or (made.done() and (made.cancelled() or made.exception() is not None)):
            made = self._shared[key] = asyncio.ensure_future(make())
        # The dict holds every key's object; the key's maker decides its type.
        return cast(C, await asyncio.shield(made))

    async def _close_shared(self) -> None:
        shared, self._shared = self._shared, {}
        for key, made in shared.items():
            if not made.done() or made.cancelled() or made.exception() is not None:
                made.cancel()
                continue
            try:
                await made.result().aclose()
            except Exception as exc:  # the others must still be closed
                log.error("closing %s failed: %s", key, exc)

    async def _work(self, index: int) -> None:
        while not self._stopping.is_set() and not self._finished.is_set():
            self._idle += 1
            try:
                job = await self._next()
            finally:
                self._idle -= 1
            if job is None:
                continue
            self.stats.running[index] = job.key
            try:
                await self._execute(job)
            finally:
                self.stats.running.pop(index, None)

    async def _next(self) -> Job | None:
        """A job claimed ahead, or a claim; while none is due, sleep until one is or the
        pool wakes us. None once the pool is stopping or its runs have no unfinished job."""
        if self._claimed and not self._stopping.is_set():
            return self._claimed.popleft()
        async with self._asking:
            while not self._stopping.is_set() and not self._finished.is_set():
                if self._claimed:  # a commit claimed some meanwhile
                    return self._claimed.popleft()
                # Cleared before the claim, so a wake-up during it is not lost.
                self._wake.clear()
                if self._committer is not None:
                    # The group commit claims for the workers waiting, this one too. A
                    # claim beside it would take their jobs twice: long ones would sit
                    # leased in `_claimed` with no worker free to start them. Each of
                    # its groups wakes the pool, and so does its end.
                    await self._wake.wait()
                    continue
                if self.serve:
                    await self._refresh_runs()
                self._claiming = True
                try:
                    got, now, monotonic = await self._store_with_due(self._claim_or_lull)
                finally:
                    self._claiming = False
                if isinstance(got, Job):
                    return got
                if isinstance(got, list):
                    self._claimed.extend(got[1:])
                    return got[0]
                if self._uncommitted or self._committer is not None:
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

    async def _store_with_due(self, work: Callable[[Tx], T]) -> T:
        """Run `work` in a transaction that first wakes the commits of `self._due`."""
        due, self._due = self._due, []
        now = self.clock.now()

        def run(tx: Tx) -> T:
            for job_id in due:
                queue.wake(tx, job_id, now)
            return work(tx)

        try:
            return await self.store.run(run)
        except BaseException:
            self._due.extend(due)
            raise

    def _wanted(self) -> int:
        """How many jobs to claim now: one for each worker waiting (at least one), and, once
        a kind of job is known to be short, up to MAX_PREFETCH ahead of them."""
        if self._stopping.is_set():
            return 0
        short = any(t < SHORT_JOB_SECONDS for t in self._kind_seconds.values())
        return max(0, max(self._idle, 1) + (MAX_PREFETCH if short else 0) - len(self._claimed))

    def _claim_in(self, tx: Tx, now: float, n: int) -> list[Job]:
        """Claim up to `n` jobs in `tx`; of those beyond the workers waiting, keep the
        ones of short kinds and hand the others back."""
        self._turn += 1
        jobs = queue.claim_many(
            tx, self.owner, self.runs, now, self.config.lease_seconds, n, self._turn
        )
        free = max(self._idle, 1) - len(self._claimed)
        seconds = self._kind_seconds
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
        n = self._wanted()
        if n > 1:
            jobs = self._claim_in(tx, now, n)
            if jobs:
                return jobs, now, monotonic
            self._turn -= 1  # the claim below counts as the one that took nothing
        self._turn += 1
        got = queue.claim_or_lull(
            tx, self.owner, self.runs, now, self.config.lease_seconds, start=self._turn
        )
        return got, now, monotonic

    async def _execute(self, job: Job) -> None:
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
        now = self.clock.now()
        wanted = 0 if self._claiming else self._wanted()

        def commit(tx: Tx) -> tuple[queue.Completed, list[Job]]:
            completed = queue.complete_many(tx, done, self.owner, now, self.config.max_attempts)
            claimed = self._claim_in(tx, now, wanted) if wanted and self.runs else []
            return completed, claimed

        try:
            completed, claimed = await self._store_with_due(commit)
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
        self._claimed.extend(claimed)
        self._due.extend(completed.due)
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
            await self._store_with_due(commit)
        except LeaseLost as exc:
            log.warning("%s", exc)
            return
        except Exception as exc:
            # Writing the results failed (constraint, bug): nothing was committed.
            await self._failed(job, exc)
            return
        self._due.extend(due)
        self.stats.done += 1
        self._emit("done", job)

    async def _flush(self) -> None:
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
