"""The job queue's transitions, each a function of a transaction and `now`.

They are synchronous and hold no state: the async worker calls them through the store
executor, tests call them directly with a FakeClock's `now`. Every transition that ends
an attempt checks that the caller still owns the lease, so a worker whose lease expired
(and whose job another worker may now hold) can never commit a result.

A commit job is `waiting` until its last child is done, and out of the claim index
meanwhile. Whoever completes a child wakes it (`wake`) in a later transaction than the
completion: two workers finishing the last two children at once would each see, inside
their own transactions, the other's child unfinished, and neither would wake it; once
each has committed, the second to look sees both done. Waking in a transaction of its
own costs no lock, where waking inside would need a lock on the commit's row that
every sibling's completion would queue on. A worker killed between the two leaves a
commit waiting with nothing to wake it: `wake_ready` sweeps those, on each heartbeat.

A claim that takes nothing says why (`claim_or_lull`), from the same transaction and
the same `now`: every pending job it saw is due only after that `now`, so a worker that
sleeps until the `Lull`'s `next_due` never wakes to a claim that again takes nothing
(as one did when the due time was read in a transaction, and at a moment, of its own).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import LeaseLost
from ..store import Row, Tx
from .model import JOIN_KIND, Job, JobSpec, JobState, Outcome

__all__ = [
    "MAX_KEY",
    "Lull",
    "child_key",
    "claim",
    "claim_many",
    "claim_or_lull",
    "complete",
    "complete_many",
    "defer",
    "enqueue",
    "expire_dead_owners",
    "expire_leases",
    "fail",
    "hold",
    "prune",
    "release",
    "renew",
    "retry",
    "unclaim",
    "wake",
    "wake_ready",
]


# Longest job key kept as the plain path of names. A chain of jobs each spawning the
# next (a chain of pages) would otherwise grow its keys without bound, past what a unique
# index can hold (PostgreSQL: about 2700 bytes).
MAX_KEY = 200


def child_key(parent_key: str, name: str) -> str:
    """The key of child `name` of `parent_key`: the path of names, or, when that is too
    long, the run's part, the parent's digest and the name (still one key per child)."""
    key = f"{parent_key}/{name}"
    if len(key) <= MAX_KEY:
        return key
    root = parent_key.split("/", 1)[0]
    digest = hashlib.sha1(parent_key.encode()).hexdigest()[:20]
    return f"{root}/~{digest}/{name}"


def enqueue(
    tx: Tx,
    spec: JobSpec,
    *,
    key: str,
    now: float,
    default_max_attempts: int,
    parent_id: int | None = None,
    waits_for: int | None = None,
    source: str | None = None,
    source_run_id: int | None = None,
) -> int | None:
    """Insert a job; None if a job with that key exists already (idempotent). A commit
    job (`waits_for` set) starts `waiting`; see wake."""
    row = tx.one(
        "insert_job",
        state=JobState.PENDING if waits_for is None else JobState.WAITING,
        kind=spec.kind,
        key=key,
        parent_id=parent_id,
        waits_for=waits_for,
        source=source,
        source_run_id=source_run_id,
        payload=json.dumps(dict(spec.payload), sort_keys=True),
        max_attempts=spec.max_attempts or default_max_attempts,
        priority=spec.priority,
        now=now,
    )
    return int(row["id"]) if row else None


def claim(
    tx: Tx, owner: str, runs: Sequence[int], now: float, lease: float, start: int = 0
) -> Job | None:
    """Lease the next due job of the first of `runs`, from `start` on, that has one.

    Workers pass a rotating `start` so that many sources share the workers fairly and
    one large source does not starve the others."""
    for i in range(len(runs)):
        run = runs[(start + i) % len(runs)]
        row = tx.one("claim_job", owner=owner, run=run, now=now, expires=now + lease)
        if row:
            return Job.from_row(row)
    return None


def claim_many(
    tx: Tx, owner: str, runs: Sequence[int], now: float, lease: float, n: int, start: int = 0
) -> list[Job]:
    """Lease up to `n` due jobs, in one statement per run tried: those of the first of
    `runs` (from `start` on) that has some, then of the next while `n` is not reached.
    In the order a claim of one at a time would take them."""
    jobs: list[Job] = []
    for i in range(len(runs)):
        want = n - len(jobs)
        if want <= 0:
            break
        run = runs[(start + i) % len(runs)]
        rows = tx.all("claim_jobs", owner=owner, run=run, now=now, expires=now + lease, n=want)
        rows.sort(key=lambda r: (-int(r["priority"]), float(r["not_before"]), int(r["id"])))
        jobs.extend(Job.from_row(r) for r in rows)
    return jobs


def unclaim(tx: Tx, jobs: Sequence[Job], owner: str, now: float) -> int:
    """Hand back jobs just claimed and not started: pending as they were, no attempt
    counted (a claim of many keeps only the jobs its caller will run soon)."""
    if not jobs:
        return 0
    return tx.execute("unclaim_jobs", ids=_json([j.id for j in jobs]), owner=owner, now=now)


@dataclass(frozen=True)
class Lull:
    """Why a claim took nothing, as of its own transaction and `now`."""

    unfinished: bool  # a job of the runs is pending, waiting or leased
    next_due: float | None  # the earliest `not_before` of their pending jobs (after `now`)
    # Another worker is alive (it heartbeat within three leases) or holds a lease on
    # one of these jobs: it may add, wake or free jobs at any moment, unseen.
    elsewhere: bool


def claim_or_lull(
    tx: Tx, owner: str, runs: Sequence[int], now: float, lease: float, start: int = 0, n: int = 1
) -> Job | list[Job] | Lull:
    """`claim` (with `n` > 1, `claim_many`: a non-empty list), or, when no job is due,
    what the runs are waiting for (`Lull`)."""
    if n > 1:
        jobs = claim_many(tx, owner, runs, now, lease, n, start)
        if jobs:
            return jobs
    else:
        job = claim(tx, owner, runs, now, lease, start)
        if job is not None:
            return job
    row = tx.one("other_workers_alive", owner=owner, since=now - 3 * lease)
    unfinished, elsewhere = False, bool(row and row["alive"])
    next_due: float | None = None
    for run in runs:
        row = tx.one("run_lull", run=run, owner=owner)
        if row is None:
            continue
        unfinished = unfinished or bool(row["unfinished"])
        elsewhere = elsewhere or bool(row["elsewhere"])
        if row["next_due"] is not None:
            due = float(row["next_due"])
            next_due = due if next_due is None else min(next_due, due)
    return Lull(unfinished, next_due, elsewhere)


def complete(
    tx: Tx, job: Job, owner: str, outcome: Outcome, now: float, default_max_attempts: int
) -> list[int]:
    """Mark the job done and commit everything its handler produced, atomically.

    Returns the jobs whose commits may be due now: pass each to `wake` once this
    transaction has committed."""
    result = json.dumps(outcome.result) if outcome.result is not None else None
    if not tx.execute(
        "finish_job", id=job.id, owner=owner, state="done", result=result, error=None, now=now
    ):
        raise LeaseLost(f"job {job.key}: lease lost before completion; result discarded")
    if outcome.write is not None:
        outcome.write(tx)
    common: dict[str, Any] = dict(
        now=now,
        default_max_attempts=default_max_attempts,
        source=job.source,
        source_run_id=job.source_run_id,
    )
    for spec in outcome.children:
        enqueue(tx, spec, key=child_key(job.key, spec.name), parent_id=job.id, **common)
    due = [job.parent_id] if job.parent_id is not None else []
    if outcome.children or outcome.commit is not None:
        commit = outcome.commit or JobSpec(kind=JOIN_KIND, name="commit")
        enqueue(
            tx,
            commit,
            key=f"{job.key}#commit",
            parent_id=job.parent_id,
            waits_for=job.id,
            **common,
        )
        due.append(job.id)  # its children may all exist already (keys are idempotent)
    return due


@dataclass(frozen=True)
class Completed:
    """What `complete_many` did: the commits that may be due (wake each in a later
    transaction), and the jobs whose lease was lost (nothing of theirs written)."""

    due: list[int]
    lost: list[Job]


def complete_many(
    tx: Tx,
    done: Sequence[tuple[Job, Outcome]],
    owner: str,
    now: float,
    default_max_attempts: int,
) -> Completed:
    """`complete` for many jobs in one transaction (a worker process's group commit):
    one statement marks them all done, each only if `owner` still holds its lease; the
    handlers' writes follow, and one statement inserts every child and commit job. A
    job whose lease was lost writes nothing, and the others go on. An exception (a
    write that failed) rolls back the lot: the caller completes them one by one."""
    if not done:
        return Completed([], [])
    rows = [
        [job.id, json.dumps(outcome.result) if outcome.result is not None else None]
        for job, outcome in done
    ]
    finished = {int(r["id"]) for r in tx.all("finish_jobs", rows=_json(rows), owner=owner, now=now)}
    due: dict[int, None] = {}
    lost: list[Job] = []
    children: list[list[Any]] = []
    commits: list[list[Any]] = []
    for job, outcome in done:
        if job.id not in finished:
            lost.append(job)
            continue
        if outcome.write is not None:
            outcome.write(tx)
        for spec in outcome.children:
            children.append(
                _row(spec, child_key(job.key, spec.name), job, job.id, None, default_max_attempts)
            )
        if job.parent_id is not None:
            due[job.parent_id] = None
        if outcome.children or outcome.commit is not None:
            commit = outcome.commit or JobSpec(kind=JOIN_KIND, name="commit")
            commits.append(
                _row(commit, f"{job.key}#commit", job, job.parent_id, job.id, default_max_attempts)
            )
            due[job.id] = None  # its children may all exist already (keys are idempotent)
    if children or commits:
        # Children first, then the commits that wait for them, as `complete` does.
        tx.execute("insert_jobs", rows=_json(children + commits), now=now)
    return Completed(list(due), lost)


def _row(
    spec: JobSpec,
    key: str,
    job: Job,
    parent_id: int | None,
    waits_for: int | None,
    default_max_attempts: int,
) -> list[Any]:
    """An `insert_jobs` row: [state, kind, key, parent_id, waits_for, source,
    source_run_id, payload, max_attempts, priority]."""
    return [
        JobState.PENDING if waits_for is None else JobState.WAITING,
        spec.kind,
        key,
        parent_id,
        waits_for,
        job.source,
        job.source_run_id,
        json.dumps(dict(spec.payload), sort_keys=True),
        spec.max_attempts or default_max_attempts,
        spec.priority,
    ]


def _json(rows: Sequence[Any]) -> str:
    return json.dumps(rows, separators=(",", ":"))


def wake(tx: Tx, job_id: int, now: float) -> bool:
    """Make the commit waiting for `job_id`'s children claimable if none is unfinished."""
    return tx.execute("wake_commit", job=job_id, now=now) > 0


def wake_ready(tx: Tx, runs: Sequence[int], now: float) -> int:
    """Wake every commit of `runs` whose children are all done (the sweep for wake-ups
    a killed worker did not get to)."""
    return sum(tx.execute("wake_ready_commits", run=run, now=now) for run in runs)


def retry(tx: Tx, job: Job, owner: str, error: str, now: float, delay: float) -> JobState:
    """End a failed attempt: back to pending after `delay`, or failed past the limit."""
    if job.attempts + 1 >= job.max_attempts:
        fail(tx, job, owner, f"{error} (gave up after {job.attempts + 1} attempts)", now)
        return JobState.FAILED
    if not tx.execute(
        "retry_job", id=job.id, owner=owner, error=error, now=now, not_before=now + delay
    ):
        raise LeaseLost(f"job {job.key}: lease lost before retry")
    return JobState.PENDING


def hold(tx: Tx, job: Job, owner: str) -> None:
    """Check, inside a transaction that commits a handler's partial work (a checkpoint),
    that the caller still holds the job's lease: LeaseLost if not."""
    if not tx.execute("hold_lease", id=job.id, owner=owner):
        raise LeaseLost(f"job {job.key}: lease lost before a checkpoint")


def defer(tx: Tx, job: Job, owner: str, until: float, now: float) -> None:
    """Hand the job back until `until`, without counting an attempt (its host is busy)."""
    if not tx.execute("defer_job", id=job.id, owner=owner, not_before=until, now=now):
        raise LeaseLost(f"job {job.key}: lease lost before deferring")


def fail(tx: Tx, job: Job, owner: str, error: str, now: float) -> None:
    if not tx.execute(
        "finish_job", id=job.id, owner=owner, state="failed", result=None, error=error, now=now
    ):
        raise LeaseLost(f"job {job.key}: lease lost before failing")
    _fail_commits_above(tx, [(job.parent_id, job.key)], now)


def _fail_commits_above(tx: Tx, failed: Iterable[tuple[int | None, str]], now: float) -> None:
    """A child failed for good: the commit waiting on its parent can never run. Mark it
    failed (saying why), and so on up the tree, so the run ends instead of waiting forever;
    the parent's work stays uncommitted, to be done again by the next run."""
    todo = list(failed)
    while todo:
        parent_id, key = todo.pop()
        if parent_id is None:
            continue
        for row in tx.all(
            "fail_waiting_commits",
            parent_id=parent_id,
            now=now,
            error=f"not committed: {key} failed",
        ):
            todo.append((row["parent_id"], row["key"]))


def expire_leases(tx: Tx, now: float) -> int:
    """Return jobs of lost workers to pending (attempts + 1), or fail them past the limit."""
    rows = tx.all("expire_leases", now=now)
    _fail_commits_above(
        tx, [(r["parent_id"], r["key"]) for r in rows if r["state"] == JobState.FAILED], now
    )
    return len(rows)


def expire_dead_owners(tx: Tx, now: float, is_dead: Callable[[Row], bool]) -> int:
    """Like expire_leases, at once, for owners `is_dead` knows to be gone (a process of
    this machine that no longer exists): a restart need not wait out their leases."""
    count = 0
    for owner in tx.all("leased_owners"):
        if is_dead(owner):
            count += expire_owner(tx, owner["owner"], now)
    return count


def expire_owner(tx: Tx, owner: str, now: float) -> int:
    """Return the jobs `owner` (gone) held to pending, attempts + 1, as expire_leases."""
    rows = tx.all("expire_owner_leases", owner=owner, now=now)
    _fail_commits_above(
        tx, [(r["parent_id"], r["key"]) for r in rows if r["state"] == JobState.FAILED], now
    )
    return len(rows)


def take_worker_name(
    tx: Tx, name: str, now: float, alive: Callable[[Row], bool], *, host: str, pid: int,
    boot_id: str | None,
) -> str:  # fmt: skip
    """The lease owner id of a worker the user named `name`: `name` itself unless a live
    process holds it, else the first of `name-2`, `name-3`… that none does. A name last
    held by a process that is gone is taken over: the jobs it still held go back to
    pending first (attempt counted, as when a lease expires), or this process's
    heartbeats would renew them for ever."""
    for n in range(1, 10_000):
        owner = name if n == 1 else f"{name}-{n}"
        tx.one("lock_worker_name", owner=owner)
        row = tx.one("get_worker", owner=owner)
        if row is not None and alive(row):
            continue
        if row is not None:
            expire_owner(tx, owner, now)
            tx.execute("stop_waiting", owner=owner)
            tx.execute("release_host_leases", owner=owner, now=now)
        tx.execute(
            "upsert_worker", owner=owner, hostname=host, pid=pid, boot_id=boot_id,
            jobs_done=0, now=now,
        )  # fmt: skip
        return owner
    raise ValueError(f"no free worker name like {name!r}")


def renew(tx: Tx, owner: str, now: float, lease: float) -> int:
    return tx.execute("renew_leases", owner=owner, expires=now + lease)


def release(tx: Tx, owner: str, now: float) -> int:
    """Hand back every lease of `owner` unfinished, without counting an attempt."""
    return tx.execute("release_leases", owner=owner, now=now)


def prune(tx: Tx, before: float) -> int:
    """Delete the jobs of runs that finished before `before`; how many were deleted."""
    return sum(
        tx.execute("delete_run_jobs", run=r["id"]) for r in tx.all("prunable_runs", before=before)
    )
