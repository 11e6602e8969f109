"""Property tests of the job state machine: random interleavings of two workers'
claims, completions, retries, failures, lease expiries and releases, against the real
store, checking the invariants that make "no job lost, none done twice" true."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from conftest import new_pg_database
from thresher.errors import LeaseLost
from thresher.jobs import Job, JobSpec, Outcome, queue
from thresher.store import Store, open_store

LEASE = 10.0
MAX_ATTEMPTS = 3
OWNERS = ("A", "B")


class JobMachine(RuleBasedStateMachine):
    make_store: Callable[[], Store]

    def __init__(self) -> None:
        super().__init__()
        self.store = type(self).make_store()
        self.now = 0.0
        self.held: dict[str, list[Job]] = {o: [] for o in OWNERS}
        self.done: dict[int, int] = {}  # id -> attempts when done
        self.seen = 0
        self.names = 0
        self.due: list[int] = []  # completions' commits to wake, in a later transaction

    def teardown(self) -> None:
        self.store.close()

    @initialize()
    def open_run(self) -> None:
        with self.store.transaction() as tx:
            row = tx.one("open_source_run", source="p", now=0)
            assert row is not None
            self.run = int(row["id"])

    def _rows(self) -> list[dict[str, object]]:
        with self.store.transaction(write=False) as tx:
            return tx.all("list_jobs", run=self.run)

    @rule()
    def add(self) -> None:
        self.names += 1
        with self.store.transaction() as tx:
            queue.enqueue(
                tx,
                JobSpec("k", f"j{self.names}"),
                key=f"r{self.run}:j{self.names}",
                now=self.now,
                default_max_attempts=MAX_ATTEMPTS,
                source_run_id=self.run,
            )

    @rule(owner=st.sampled_from(OWNERS))
    def claim(self, owner: str) -> None:
        with self.store.transaction() as tx:
            job = queue.claim(tx, owner, [self.run], self.now, LEASE)
        if job is not None:
            assert job.not_before <= self.now
            assert job.id not in self.done
            # Older copies of this job (from leases since lost) are stale, ours included.
            self.held[owner] = [h for h in self.held[owner] if h.id != job.id]
            self.held[owner].append(job)

    def _take(self, owner: str, index: int) -> Job:
        return self.held[owner].pop(index % len(self.held[owner]))

    @precondition(lambda self: any(self.held.values()))
    @rule(owner=st.sampled_from(OWNERS), index=st.integers(0, 5), children=st.integers(0, 2))
    def complete(self, owner: str, index: int, children: int) -> None:
        if not self.held[owner]:
            return
        job = self._take(owner, index)
        outcome = Outcome(children=tuple(JobSpec("k", f"c{i}") for i in range(children)))
        try:
            with self.store.transaction() as tx:
                due = queue.complete(tx, job, owner, outcome, self.now, MAX_ATTEMPTS)
        except LeaseLost:
            self._assert_not_ours(job, owner)
            return
        self.done[job.id] = job.attempts + 1
        self.due += due

    @precondition(lambda self: self.due)
    @rule(lose=st.booleans())
    def wake(self, lose: bool) -> None:
        """The completing worker wakes the commits, or is killed before it can."""
        due, self.due = self.due, []
        if not lose:
            with self.store.transaction() as tx:
                for job_id in due:
                    queue.wake(tx, job_id, self.now)

    @rule()
    def sweep(self) -> None:
        with self.store.transaction() as tx:
            queue.wake_ready(tx, [self.run], self.now)
        rows = self._rows()
        for r in rows:
            if r["state"] == "waiting":
                kids = [k for k in rows if k["parent_id"] == r["waits_for"]]
                assert any(k["state"] != "done" for k in kids), "a due commit left waiting"

    @precondition(lambda self: any(self.held.values()))
    @rule(owner=st.sampled_from(OWNERS), index=st.integers(0, 5), permanent=st.booleans())
    def fail(self, owner: str, index: int, permanent: bool) -> None:
        if not self.held[owner]:
            return
        job = self._take(owner, index)
        try:
            with self.store.transaction() as tx:
                if permanent:
                    queue.fail(tx, job, owner, "permanent", self.now)
                else:
                    queue.retry(tx, job, owner, "transient", self.now, delay=5)
        except LeaseLost:
            self._assert_not_ours(job, owner)

    def _assert_not_ours(self, job: Job, owner: str) -> None:
        with self.store.transaction(write=False) as tx:
            row = tx.one("get_job", id=job.id)
        assert row is not None
        assert not (row["state"] == "leased" and row["lease_owner"] == owner)

    @rule(dt=st.sampled_from([1.0, 5.0, 11.0]))
    def advance(self, dt: float) -> None:
        self.now += dt

    @rule()
    def expire(self) -> None:
        with self.store.transaction() as tx:
            queue.expire_leases(tx, self.now)

    @rule(owner=st.sampled_from(OWNERS))
    def renew(self, owner: str) -> None:
        with self.store.transaction() as tx:
            queue.renew(tx, owner, self.now, LEASE)

    @rule(owner=st.sampled_from(OWNERS))
    def release(self, owner: str) -> None:
        with self.store.transaction() as tx:
            queue.release(tx, owner, self.now)
        self.held[owner].clear()

    @invariant()
    def states_are_consistent(self) -> None:
        if not hasattr(self, "run"):
            return
        rows = self._rows()
        by_id = {int(str(r["id"])): r for r in rows}
        assert len(rows) >= self.seen, "a job was lost"
        self.seen = len(rows)
        for r in rows:
            attempts = int(str(r["attempts"]))
            assert 0 <= attempts <= int(str(r["max_attempts"]))
            if r["state"] == "leased":
                assert r["lease_owner"] in OWNERS
            else:
                assert r["lease_owner"] is None
            if r["state"] == "pending":
                assert attempts < MAX_ATTEMPTS
            if r["waits_for"] is not None and r["state"] == "done":
                kids = [k for k in rows if k["parent_id"] == r["waits_for"]]
                assert all(k["state"] == "done" for k in kids), "commit before its children"
        for job_id, attempts in self.done.items():
            row = by_id[job_id]
            assert row["state"] == "done", "a done job changed state"
            assert row["attempts"] == attempts, "a done job was attempted again"
        for r in rows:
            if r["state"] == "waiting":
                assert r["waits_for"] is not None, "only commits wait"
                assert by_id[int(str(r["waits_for"]))]["state"] == "done"
            if r["waits_for"] is not None and r["state"] == "pending":
                kids = [k for k in rows if k["parent_id"] == r["waits_for"]]
                assert all(k["state"] != "failed" for k in kids), "commit kept after a failure"
                assert all(k["state"] == "done" for k in kids), "commit due before its children"


def _run(make_store: Callable[[], Store], examples: int) -> None:
    JobMachine.make_store = staticmethod(make_store)
    run_state_machine_as_test(  # type: ignore[no-untyped-call,unused-ignore]
        JobMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_job_state_machine_sqlite() -> None:
    with TemporaryDirectory() as tmp:
        counter = iter(range(10**6))
        _run(lambda: open_store(f"sqlite:///{Path(tmp) / f'{next(counter)}.db'}"), 100)


@pytest.mark.usefixtures("pg_admin_url")
def test_job_state_machine_postgres(pg_admin_url: str) -> None:
    _run(lambda: open_store(new_pg_database(pg_admin_url)), 15)
