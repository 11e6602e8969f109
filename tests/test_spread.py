"""Spreading a new run's shards over the workers alive, on both backends, with time
passed in by hand: a worker keeps no more than its share while the shards are young."""

from __future__ import annotations

from helpers import MAX, add_job, new_run
from thresher.jobs import Job, JobSpec, queue
from thresher.jobs.spread import SPREAD_SECONDS, holds_share
from thresher.store import Store

LEASE = 60.0


def three_shards(store: Store, workers: int, source: str = "src") -> tuple[int, list[int]]:
    """A run whose root job has three shard children, and `workers` workers alive."""
    run = new_run(store, source)
    with store.transaction() as tx:
        root = add_job(tx, run, "root")
        shards = [
            queue.enqueue(
                tx,
                JobSpec("web.shard", f"s{i}"),
                key=f"run{run}:root/s{i}",
                now=0,
                default_max_attempts=MAX,
                parent_id=root,
                source="src",
                source_run_id=run,
            )
            for i in range(3)
        ]
        for i in range(workers):
            tx.execute(
                "upsert_worker", owner=f"w{i}", hostname="h", pid=i, boot_id=None,
                jobs_done=0, now=0,
            )  # fmt: skip
    return run, [s for s in shards if s is not None]


def claim(store: Store, owner: str, run: int, now: float, n: int) -> list[Job]:
    with store.transaction() as tx:
        return [j for j in queue.claim_many(tx, owner, [run], now, LEASE, n) if j.kind != "k"]


def kept(store: Store, jobs: list[Job], owner: str, now: float) -> list[int]:
    """The ids of `jobs` that `owner` runs rather than hands back."""
    with store.transaction() as tx:
        return [j.id for j in jobs if not holds_share(tx, j.id, owner, 3, now, now - LEASE)]


def test_a_worker_that_claims_every_shard_keeps_one(store: Store) -> None:
    run, shards = three_shards(store, workers=3)
    jobs = claim(store, "w0", run, now=1, n=10)
    assert sorted(j.id for j in jobs) == shards
    assert kept(store, jobs, "w0", now=1) == [shards[0]]


def test_each_of_three_workers_keeps_one_shard(store: Store) -> None:
    run, shards = three_shards(store, workers=3)
    ran: dict[str, list[int]] = {}
    for t, owner in enumerate(["w0", "w0", "w1", "w0", "w1", "w2"], start=1):
        jobs = claim(store, owner, run, now=t, n=10)
        keep = kept(store, jobs, owner, now=t)
        ran.setdefault(owner, []).extend(keep)
        with store.transaction() as tx:
            for job in jobs:
                if job.id not in keep:
                    queue.defer(tx, job, owner, until=t, now=t)
    assert ran == {"w0": [shards[0]], "w1": [shards[1]], "w2": [shards[2]]}


def test_alone_or_after_the_spread_window_a_worker_takes_them_all(store: Store) -> None:
    run, shards = three_shards(store, workers=1)
    jobs = claim(store, "w0", run, now=1, n=10)
    assert kept(store, jobs, "w0", now=1) == shards
    run, shards = three_shards(store, workers=3, source="later")
    jobs = claim(store, "w0", run, now=2, n=10)
    assert kept(store, jobs, "w0", now=SPREAD_SECONDS) == shards
