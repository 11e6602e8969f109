"""Small builders shared by the job tests, and the yardstick of timing asserts."""

from __future__ import annotations

import functools
import time

from thresher.jobs import JobSpec, queue
from thresher.store import Store, Tx

MAX = 3


def new_run(store: Store, source: str = "src", now: float = 0.0) -> int:
    with store.transaction() as tx:
        row = tx.one("open_source_run", source=source, now=now)
        assert row is not None
        return int(row["id"])


def add_job(
    tx: Tx, run: int, name: str, kind: str = "k", now: float = 0.0, max_attempts: int = MAX
) -> int:
    job_id = queue.enqueue(
        tx,
        JobSpec(kind, name, max_attempts=max_attempts),
        key=f"run{run}:{name}",
        now=now,
        default_max_attempts=MAX,
        source="src",
        source_run_id=run,
    )
    assert job_id is not None
    return job_id


def states(store: Store, run: int) -> dict[str, str]:
    with store.transaction(write=False) as tx:
        return {r["key"]: r["state"] for r in tx.all("list_jobs", run=run)}


@functools.cache
def reference_seconds() -> float:
    """CPU seconds a fixed piece of pure-Python work takes on this machine (the least of
    three tries; about 0.06 s on the 2-core development machine). A test that bounds
    how long something takes bounds it as a multiple of this, so that a machine twice
    as slow allows twice the time, rather than by a figure measured on a quiet one."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        table: dict[int, str] = {}
        total = 0
        for i in range(300_000):
            table[i % 1000] = str(i)
            total += len(table[i % 1000])
        best = min(best, time.process_time() - started)
    assert total > 0
    return best
