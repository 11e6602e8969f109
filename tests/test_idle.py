"""An idle worker: it sleeps until the job it waits for is due, or until the pool wakes
it, whatever the wall clock does, and never claims in a loop (issue 18: a `thresher run`
spun at 90 % of a core while a job backed off, the wall clock of its process set back by
libfaketime)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from thresher.clock import FakeClock, SystemClock
from thresher.config import Config
from thresher.errors import TransientError
from thresher.jobs import Job, JobContext, JobSpec, Outcome, WorkerPool, queue
from thresher.jobs.claims import MIN_IDLE_WAIT
from thresher.jobs.handlers import register
from thresher.store import Tx
from thresher.store.aio import AsyncStore

START = 1_000_000.0


def make_config(store_url: str, home: Path, **kw: Any) -> Config:
    db = None if store_url.startswith("sqlite") else store_url
    return Config(**{"home": home, "db": db, "workers": 4, "grace_seconds": 5, **kw})


# A pool alone in its store sleeps until its next job is due, but no longer than a
# heartbeat period (a safety net): a long lease makes that net wider than any wait here.
ALONE = {"lease_seconds": 30_000.0}


def open_run(tx: Tx, now: float, *specs: JobSpec) -> int:
    row = tx.one("open_source_run", source="idle", now=now)
    assert row is not None
    run = int(row["id"])
    for spec in specs:
        queue.enqueue(
            tx,
            spec,
            key=f"run{run}:{spec.name}",
            now=now,
            default_max_attempts=5,
            source="idle",
            source_run_id=run,
        )
    return run


# -- The process's CPU while a job backs off --------------------------------------------

# (process CPU seconds, monotonic seconds) when each attempt of a job started or failed.
MARKS: dict[str, list[tuple[float, float]]] = {}


@register("test.backs_off")
async def _backs_off(ctx: JobContext) -> Outcome:
    marks = MARKS.setdefault(ctx.job.key, [])
    marks.append((time.process_time(), time.monotonic()))
    if ctx.job.attempts == 0:
        raise TransientError("the server stalled", float(ctx.job.payload["retry_after"]))
    return Outcome(result="done")


class ThreadSkewedClock(SystemClock):
    """A wall clock that reads `skew` seconds behind on every thread but the event
    loop's (the store's threads), as the wall clock of a process under libfaketime read
    differently from one reading to the next: the claim, run on a store thread, and
    the idle wait, worked out on the loop, saw different times, and the wait came out
    zero while the claim still found nothing due."""

    def __init__(self, skew: float) -> None:
        self.skew = skew
        self.loop_thread = threading.get_ident()

    def now(self) -> float:
        behind = threading.get_ident() != self.loop_thread
        return time.time() - (self.skew if behind else 0.0)


@pytest.mark.parametrize("clock_kind", ["system", "skewed"])
def test_a_worker_waiting_for_a_backing_off_job_uses_no_cpu(
    store_url: str, tmp_path: Path, clock_kind: str
) -> None:
    """Four workers, one job, its retry due 3 s after its first attempt failed: the
    process's CPU time over the wait stays near zero (a busy loop of claims costs a
    core). Generous for a loaded 2-core machine: under 10 % of the wall time waited."""
    wait = 3.0

    async def body() -> None:
        clock = SystemClock() if clock_kind == "system" else ThreadSkewedClock(2.0)
        config = make_config(store_url, tmp_path, backoff_base=0.01, backoff_max=10)
        store = await AsyncStore(config.store_url, connections=2).open()
        try:
            spec = JobSpec("test.backs_off", f"{clock_kind}-{store_url}", {"retry_after": wait})
            run = await store.run(lambda tx: open_run(tx, clock.now(), spec))
            stats = await WorkerPool(config, store, clock, [run]).run()
            assert (stats.done, stats.retried) == (1, 1)
            [job] = await store.run(lambda tx: tx.all("list_jobs", run=run), write=False)
            (cpu0, wall0), (cpu1, wall1) = MARKS[job["key"]]
        finally:
            await store.close()
        assert wall1 - wall0 >= wait - 0.1  # it did wait for the retry
        assert cpu1 - cpu0 < 0.1 * (wall1 - wall0), (cpu1 - cpu0, wall1 - wall0)

    asyncio.run(body())


# -- Sleeping until due, whatever the wall clock does -----------------------------------


class SteppingClock(FakeClock):
    """A FakeClock whose wall clock is stepped by `step` seconds in the middle of the
    first sleep of at least `after` seconds, as NTP or a resumed VM would."""

    def __init__(self, step: float, after: float) -> None:
        super().__init__(START)
        self.pending: float | None = step
        self.after = after

    async def sleep(self, seconds: float) -> None:
        if self.pending is not None and seconds >= self.after:
            self.advance(seconds / 2)
            self.step(self.pending)
            self.pending = None
            self.advance(seconds / 2)
            self.sleeps.append(seconds)
            await asyncio.sleep(0)
            return
        await super().sleep(seconds)


async def backing_off(
    store: AsyncStore, clock: FakeClock, config: Config, delay: float
) -> tuple[WorkerPool, int]:
    """A pool (not started: no heartbeat moves the fake clock) over a run whose only job
    failed once at START and is due again `delay` seconds later."""
    run = await store.run(lambda tx: open_run(tx, START, JobSpec("k", "job")))
    pool = WorkerPool(config, store, clock, [run], owner="us")

    def fail(tx: Tx) -> None:
        job = queue.claim(tx, "us", [run], START, config.lease_seconds)
        assert job is not None
        queue.retry(tx, job, "us", "the server stalled", START, delay)

    await store.run(fail)
    return pool, run


@pytest.mark.parametrize(
    ("step", "sleeps"),
    [
        (0.0, [10.0]),  # sleeps until due, in one sleep
        (-100.0, [110.0]),  # stepped back before: due 110 s later by the wall clock
        (+100.0, []),  # stepped forward: due at once
    ],
)
def test_a_worker_sleeps_until_the_job_is_due_by_the_wall_clock(
    store_url: str, tmp_path: Path, step: float, sleeps: list[float]
) -> None:
    async def body() -> None:
        clock = FakeClock(START)
        config = make_config(store_url, tmp_path, **ALONE)
        store = await AsyncStore(config.store_url).open()
        try:
            pool, _ = await backing_off(store, clock, config, 10.0)
            clock.step(step)
            job = await pool._claims.next()
        finally:
            await store.close()
        assert isinstance(job, Job) and job.attempts == 1
        assert clock.sleeps == pytest.approx(sleeps)
        assert clock.monotonic() == pytest.approx(sum(sleeps))

    asyncio.run(body())


@pytest.mark.parametrize("step", [-100.0, -3600.0, +100.0])
def test_a_wall_clock_stepped_during_the_wait_never_makes_it_a_loop(
    store_url: str, tmp_path: Path, step: float, caplog: pytest.LogCaptureFixture
) -> None:
    """Stepped back halfway through the sleep: the claim at its end finds the job not
    yet due by the wall clock, and the worker sleeps once more, for what the step
    added. Stepped forward: the job is due when the sleep ends (a sleep is never cut
    short by the wall clock: it is counted by the monotonic one)."""

    async def body() -> list[float]:
        clock = SteppingClock(step, after=1.0)
        config = make_config(store_url, tmp_path, **ALONE)
        store = await AsyncStore(config.store_url).open()
        try:
            pool, _ = await backing_off(store, clock, config, 10.0)
            job = await pool._claims.next()
        finally:
            await store.close()
        assert isinstance(job, Job) and job.attempts == 1
        assert clock.now() >= START + 10.0
        return clock.sleeps

    with caplog.at_level(logging.WARNING, logger="thresher.jobs"):
        got = asyncio.run(body())
    assert got[0] == pytest.approx(10.0)
    if step < 0:
        assert got[1:] == [pytest.approx(-step)]
        assert f"the wall clock went back by {-step:.0f} s" in caplog.text
    else:
        assert got[1:] == []
    assert all(s >= MIN_IDLE_WAIT for s in got)


def test_a_wall_clock_that_stands_still_is_not_a_busy_loop(store_url: str, tmp_path: Path) -> None:
    """A frozen wall clock (as under a debugger, or a faked time that does not run):
    the job never comes due, and each sleep is at least MIN_IDLE_WAIT, not zero."""

    class Frozen(FakeClock):
        async def sleep(self, seconds: float) -> None:
            self.sleeps.append(seconds)
            self._monotonic += seconds
            await asyncio.sleep(0)

    async def body() -> list[float]:
        clock = Frozen(START)
        config = make_config(store_url, tmp_path)
        store = await AsyncStore(config.store_url).open()
        try:
            pool, _ = await backing_off(store, clock, config, 1e-6)
            waiter = asyncio.create_task(pool._claims.next())
            while len(clock.sleeps) < 5:
                await asyncio.sleep(0.01)
            pool.stop()
            assert await waiter is None
        finally:
            await store.close()
        return clock.sleeps

    assert all(s >= MIN_IDLE_WAIT for s in asyncio.run(body()))


def test_an_idle_worker_is_woken_by_the_pool_not_by_a_poll(store_url: str, tmp_path: Path) -> None:
    """With no job due and no other worker alive, nothing can change unseen: the idle
    worker sleeps until woken (here by `stop`), asking the store nothing meanwhile.
    Another worker alive: it polls, since that one may add work at any moment."""

    async def body() -> None:
        config = make_config(store_url, tmp_path, **ALONE)
        store = await AsyncStore(config.store_url).open()
        try:
            now = time.time()
            run = await store.run(lambda tx: open_run(tx, now, JobSpec("k", "job")))
            pool = WorkerPool(config, store, SystemClock(), [run], owner="us")
            # Our own worker holds the job: its end will wake the pool.
            taken = await store.run(lambda tx: queue.claim(tx, "us", [run], now, 60))
            assert taken is not None
            waiter = asyncio.create_task(pool._claims.next())
            await asyncio.sleep(1.2)
            assert not waiter.done() and pool._claims._turn == 1  # one claim, then asleep
            await store.run(
                lambda tx: tx.execute(
                    "upsert_worker",
                    owner="them",
                    hostname="elsewhere",
                    pid=1,
                    boot_id=None,
                    jobs_done=0,
                    now=time.time(),
                )
            )
            pool._wake.set()
            await asyncio.sleep(1.2)
            assert 2 <= pool._claims._turn - 1 <= 6  # polls, every IDLE_POLL_SECONDS
            pool.stop()
            assert await waiter is None
        finally:
            await store.close()

    asyncio.run(body())


def test_the_claim_reads_the_clock_when_its_transaction_runs(
    store_url: str, tmp_path: Path
) -> None:
    """An idle worker's claim may wait for the store behind busy workers' commits: the
    time it claims at (and waits from) is read in its transaction, not before the
    wait, else a job that came due meanwhile would be slept through."""

    async def body() -> None:
        clock = FakeClock(START)
        config = make_config(store_url, tmp_path, **ALONE)
        store = await AsyncStore(config.store_url).open()
        try:
            pool, _ = await backing_off(store, clock, config, 10.0)
            release = threading.Event()

            def busy(tx: Tx) -> None:  # another worker's long commit: 20 s pass
                release.wait(10)
                clock.advance(20.0)

            commit = asyncio.create_task(store.run(busy))
            await asyncio.sleep(0.05)  # the commit holds the store first
            waiter = asyncio.create_task(pool._claims.next())
            await asyncio.sleep(0.05)
            release.set()
            await commit
            job = await waiter
        finally:
            await store.close()
        assert isinstance(job, Job) and job.attempts == 1
        assert clock.sleeps == []  # due when the claim ran: claimed, not slept for

    asyncio.run(body())
