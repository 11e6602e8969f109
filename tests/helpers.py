"""Small builders shared by the job tests."""

from __future__ import annotations

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
