"""A worker pool's group commits and claims of many jobs at once, on both backends: short
jobs are claimed ahead and committed together, and a write that fails fails only its own
job. (That a long job is never claimed ahead of a free worker, test_worker_cli.py shows:
a worker with two slots holds two of four minute-long jobs, not four; and so do the
last two tests here, each with a moment that once let it take more made wide.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from thresher.clock import SystemClock
from thresher.config import Config
from thresher.errors import PermanentError
from thresher.jobs import Job, JobContext, JobSpec, Outcome, WorkerPool, queue
from thresher.jobs.claims import IDLE_POLL_SECONDS
from thresher.jobs.handlers import register
from thresher.store import Tx
from thresher.store.aio import AsyncStore

# What each test's store saw: the transactions and claims the pool made.
COUNTS: dict[str, int] = {}


def make_config(store_url: str, home: Path, **kw: Any) -> Config:
    db = None if store_url.startswith("sqlite") else store_url
    return Config(
        **{"home": home, "db": db, "workers": 4, "backoff_base": 0.01, "grace_seconds": 5, **kw}
    )


@register("test.group.root")
async def _root(ctx: JobContext) -> Outcome:
    n, bad = int(ctx.job.payload["n"]), int(ctx.job.payload.get("bad", -1))
    return Outcome(
        children=tuple(
            JobSpec("test.group.leaf", f"l{i}", {"i": i, "bad": i == bad}) for i in range(n)
        )
    )


@register("test.group.leaf")
async def _leaf(ctx: JobContext) -> Outcome:
    key, bad = ctx.job.key, bool(ctx.job.payload["bad"])

    def write(tx: Tx) -> None:
        if bad:
            raise PermanentError("this leaf's write breaks a rule")
        tx.execute("insert_synthetic_result", source="g", job_key=key, owner="", value="", now=0)

    return Outcome(result={"i": ctx.job.payload["i"]}, write=write)


# The long leaves: started, and released by the test.
STARTED: list[str] = []
RELEASE: dict[str, asyncio.Event] = {}


@register("test.group.long_root")
async def _long_root(ctx: JobContext) -> Outcome:
    n = int(ctx.job.payload["n"])
    await asyncio.sleep(0.2)  # the other worker, finding nothing to claim, polls
    return Outcome(children=tuple(JobSpec("test.group.long", f"l{i}", {}) for i in range(n)))


@register("test.group.long")
async def _long(ctx: JobContext) -> Outcome:
    STARTED.append(ctx.job.key)
    await RELEASE["leaves"].wait()
    return Outcome(result="done")


async def _run(config: Config, payload: dict[str, Any], counted: AsyncStore) -> Any:
    run = await counted.run(lambda tx: _open(tx, payload))
    stats = await WorkerPool(config, counted, SystemClock(), [run]).run()
    jobs = await counted.run(lambda tx: tx.all("list_jobs", run=run), False)
    rows = await counted.run(lambda tx: tx.all("synthetic_results", source="g"), False)
    return stats, jobs, rows


def _open(tx: Tx, payload: dict[str, Any], kind: str = "test.group.root") -> int:
    row = tx.one("open_source_run", source="g", now=time.time())
    assert row is not None
    run = int(row["id"])
    queue.enqueue(
        tx,
        JobSpec(kind, "root", payload),
        key=f"run{run}:root",
        now=time.time(),
        default_max_attempts=3,
        source="g",
        source_run_id=run,
    )
    return run


class CountingStore(AsyncStore):
    """An AsyncStore that counts its transactions."""

    async def run(self, fn: Any, write: bool = True) -> Any:
        COUNTS["transactions"] = COUNTS.get("transactions", 0) + 1
        return await super().run(fn, write)


def test_short_jobs_are_claimed_ahead_and_committed_in_groups(
    store_url: str, tmp_path: Path
) -> None:
    COUNTS.clear()
    n = 400

    async def body() -> Any:
        store = await CountingStore(store_url).open()
        try:
            return await _run(make_config(store_url, tmp_path, workers=1), {"n": n}, store)
        finally:
            await store.close()

    stats, jobs, rows = asyncio.run(body())
    assert stats.done == n + 2 and stats.failed == 0  # root, its leaves, its join
    assert sorted(r["job_key"] for r in rows) == sorted(j["key"] for j in jobs if "/l" in j["key"])
    assert all(j["state"] == "done" and j["attempts"] == 1 for j in jobs)
    # One worker, and yet far fewer transactions than jobs: claims of many and commits
    # of many (it was one transaction per job, a claim with the last one's commit).
    assert COUNTS["transactions"] < n / 4, COUNTS


def test_a_write_that_fails_fails_only_its_own_job(store_url: str, tmp_path: Path) -> None:
    async def body() -> Any:
        store = await AsyncStore(store_url).open()
        try:
            return await _run(make_config(store_url, tmp_path), {"n": 60, "bad": 7}, store)
        finally:
            await store.close()

    stats, jobs, rows = asyncio.run(body())
    assert len(rows) == 59 and len({r["job_key"] for r in rows}) == 59
    by_key = {j["key"].rsplit(":", 1)[1]: j for j in jobs}
    assert by_key["root/l7"]["state"] == "failed"
    assert "breaks a rule" in by_key["root/l7"]["last_error"]
    assert all(
        j["state"] == "done" for k, j in by_key.items() if k.startswith("root/l") and k != "root/l7"
    )
    assert stats.failed == 1


class LateStore(AsyncStore):
    """An AsyncStore whose transactions return `late` seconds after they committed
    when `is_late` says so of their result, the moment they opened made wide."""

    late = 0.0

    def __init__(self, url: str, is_late: Callable[[Any], bool]) -> None:
        super().__init__(url)
        self.is_late = is_late

    async def run(self, fn: Any, write: bool = True) -> Any:
        result = await super().run(fn, write)
        if self.is_late(result):
            await asyncio.sleep(self.late)
        return result


async def _states_once_two_started(
    store: LateStore, pool: WorkerPool, running: asyncio.Task[Any], run: int
) -> list[str]:
    """The long jobs' states once two have started and what any late transaction took
    has reached the pool; then every job is let finish and the pool stopped."""
    while len(STARTED) < 2:
        await asyncio.sleep(0.05)
    await asyncio.sleep(store.late)
    jobs = await store.run(lambda tx: tx.all("list_jobs", run=run), False)
    store.late = 0.0
    RELEASE["leaves"].set()
    while len(STARTED) < 4:
        await asyncio.sleep(0.05)
    pool.stop()
    await running
    return [j["state"] for j in jobs if j["kind"] == "test.group.long"]


def _a_commit_that_claimed(result: Any) -> bool:
    """What `Runner._commit_group` gets when its claim took jobs: longer than an idle
    worker's poll, which thus lands after that commit claimed jobs for the workers
    waiting and before they can see them."""
    match result:
        case (queue.Completed(), [Job(), *_]):
            return True
    return False


def test_idle_workers_and_a_group_commit_never_both_claim_for_them(
    store_url: str, tmp_path: Path
) -> None:
    """Two workers, four long jobs made by a short one: two are leased, not four. The
    group commit of the short job claimed two for the workers waiting; an idle worker's
    poll claimed the other two as well before that commit's jobs reached them (1 time in
    8 in test_worker_cli.py), and two long jobs sat leased with no worker to start them."""
    STARTED.clear()

    async def body() -> list[str]:
        RELEASE["leaves"] = asyncio.Event()
        store = LateStore(store_url, _a_commit_that_claimed)
        await store.open()
        try:
            run = await store.run(lambda tx: _open(tx, {"n": 4}, "test.group.long_root"))
            config = make_config(store_url, tmp_path, workers=2)
            # Serving: an idle worker polls every IDLE_POLL_SECONDS.
            pool = WorkerPool(config, store, SystemClock(), [run], serve=True)
            store.late = IDLE_POLL_SECONDS * 3
            running = asyncio.create_task(pool.run())
            return await _states_once_two_started(store, pool, running, run)
        finally:
            await store.close()

    states = asyncio.run(body())
    assert sorted(states) == ["leased", "leased", "pending", "pending"]


IN_FLIGHT: dict[str, asyncio.Event] = {}


@register("test.group.waits_for_a_claim")
async def _waits_for_a_claim(ctx: JobContext) -> Outcome:
    IN_FLIGHT["started"].set()
    await IN_FLIGHT["claim"].wait()  # ends while the other worker's claim is in flight
    return Outcome(result="done")


def _a_claim_of_a_long_job(result: Any) -> bool:
    """What `Claims._claim_or_lull` gets when it took a long job (a job or jobs, and the
    clock's readings): said in IN_FLIGHT, which ends the other worker's job."""
    match result:
        case (Job(kind="test.group.long") | [Job(kind="test.group.long"), *_], _, _):
            IN_FLIGHT["claim"].set()
            return True
    return False


def test_a_group_commit_claims_nothing_beside_an_idle_workers_claim(
    store_url: str, tmp_path: Path
) -> None:
    """The other way round: a worker's claim is in flight when the other's job ends.
    The group commit would claim for both workers, the one claiming included, and a long
    job would sit leased with no worker to start it."""
    STARTED.clear()

    async def body() -> list[str]:
        RELEASE["leaves"] = asyncio.Event()
        IN_FLIGHT["claim"], IN_FLIGHT["started"] = asyncio.Event(), asyncio.Event()
        store = LateStore(store_url, _a_claim_of_a_long_job)
        await store.open()
        try:
            run = await store.run(lambda tx: _open(tx, {}, "test.group.waits_for_a_claim"))
            config = make_config(store_url, tmp_path, workers=2)
            pool = WorkerPool(config, store, SystemClock(), [run], serve=True)
            store.late = IDLE_POLL_SECONDS * 3
            running = asyncio.create_task(pool.run())

            def leaves(tx: Tx) -> None:
                for i in range(4):
                    queue.enqueue(
                        tx,
                        JobSpec("test.group.long", f"l{i}", {}),
                        key=f"run{run}:l{i}",
                        now=time.time(),
                        default_max_attempts=3,
                        source="g",
                        source_run_id=run,
                    )

            # Once one worker runs the first job, the other's next poll finds them.
            await IN_FLIGHT["started"].wait()
            await store.run(leaves)
            return await _states_once_two_started(store, pool, running, run)
        finally:
            await store.close()

    states = asyncio.run(body())
    assert sorted(states) == ["leased", "leased", "pending", "pending"]
