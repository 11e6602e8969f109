"""The job queue's transitions, on both backends, with time passed in by hand."""

from __future__ import annotations

import pytest

from helpers import MAX, add_job, new_run, states
from thresher.errors import LeaseLost
from thresher.jobs import Job, JobSpec, JobState, Outcome, queue
from thresher.store import Store, Tx

LEASE = 60.0


def claim(store: Store, owner: str, run: int, now: float) -> Job | None:
    with store.transaction() as tx:
        return queue.claim(tx, owner, [run], now, LEASE)


def test_enqueue_is_idempotent_by_key(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        first = add_job(tx, run, "a")
        again = queue.enqueue(
            tx,
            JobSpec("k", "a"),
            key=f"run{run}:a",
            now=0,
            default_max_attempts=MAX,
            source_run_id=run,
        )
    assert first and again is None


def test_claim_leases_one_job_to_one_owner(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a")
    job = claim(store, "w1", run, now=10)
    assert job is not None and job.state is JobState.LEASED
    assert job.lease_owner == "w1" and job.lease_expires == 10 + LEASE
    assert claim(store, "w2", run, now=11) is None


def test_claim_respects_not_before_and_run_scope(store: Store) -> None:
    run, other = new_run(store, "a"), new_run(store, "b")
    with store.transaction() as tx:
        add_job(tx, other, "x")
    assert claim(store, "w", run, now=0) is None
    with store.transaction() as tx:
        add_job(tx, run, "later", now=100)  # not_before = now of insertion
    assert claim(store, "w", run, now=50) is None
    assert claim(store, "w", run, now=100) is not None


def test_complete_commits_result_writes_and_children_once(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "root")
    job = claim(store, "w", run, now=1)
    assert job is not None

    def write(tx: Tx) -> None:
        tx.execute(
            "insert_synthetic_result", source="src", job_key=job.key, owner="w", value="v", now=1
        )

    outcome = Outcome(
        result={"n": 2}, write=write, children=(JobSpec("k", "c1"), JobSpec("k", "c2"))
    )
    with store.transaction() as tx:
        queue.complete(tx, job, "w", outcome, now=2, default_max_attempts=MAX)
    with pytest.raises(LeaseLost), store.transaction() as tx:
        queue.complete(tx, job, "w", outcome, now=3, default_max_attempts=MAX)
    with store.transaction() as tx:
        assert len(tx.all("synthetic_results", source="src")) == 1
        done = tx.one("get_job", id=job.id)
        assert done is not None and done["state"] == "done" and done["attempts"] == 1
    assert states(store, run) == {
        f"run{run}:root": "done",
        f"run{run}:root/c1": "pending",
        f"run{run}:root/c2": "pending",
        f"run{run}:root#commit": "waiting",
    }


def claimed_root(store: Store) -> tuple[int, Job]:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "root")
    root = claim(store, "w", run, 0)
    assert root is not None
    return run, root


def done(store: Store, job: Job | None, *children: str, commit: JobSpec | None = None) -> None:
    """Complete `job` as owner w, spawning the named children."""
    assert job is not None
    outcome = Outcome(children=tuple(JobSpec("k", c) for c in children), commit=commit)
    with store.transaction() as tx:
        due = queue.complete(tx, job, "w", outcome, 0, MAX)
    with store.transaction() as tx:  # after the commit, as a worker does
        for job_id in due:
            queue.wake(tx, job_id, 0)


def test_commit_runs_only_after_every_child_is_done(store: Store) -> None:
    run, root = claimed_root(store)
    done(store, root, "a", "b", commit=JobSpec("c", "commit"))
    a = claim(store, "w", run, 1)
    b = claim(store, "w", run, 1)
    assert a is not None and b is not None
    assert {a.key, b.key} == {f"run{run}:root/a", f"run{run}:root/b"}
    assert claim(store, "w", run, 1) is None, "commit must wait for both children"
    done(store, a)
    assert claim(store, "w", run, 2) is None, "commit must wait for the second child"
    done(store, b)
    commit = claim(store, "w", run, 3)
    assert commit is not None and commit.kind == "c" and commit.is_commit


def test_nested_commits_wait_for_the_whole_subtree(store: Store) -> None:
    run, root = claimed_root(store)
    done(store, root, "month")
    month = claim(store, "w", run, 0)
    assert month is not None and month.key.endswith("/month")
    # The month spawns messages without naming a commit: a join is added for it.
    done(store, month, "msg")
    msg = claim(store, "w", run, 0)
    assert msg is not None and msg.key.endswith("/month/msg")
    assert claim(store, "w", run, 0) is None, "neither the month's join nor the root's commit"
    done(store, msg)
    join = claim(store, "w", run, 0)
    assert join is not None and join.key.endswith("/month#commit")
    assert claim(store, "w", run, 0) is None
    done(store, join)
    top = claim(store, "w", run, 0)
    assert top is not None and top.key == f"run{run}:root#commit"


def test_permanent_child_failure_blocks_commits_up_the_tree(store: Store) -> None:
    run, root = claimed_root(store)
    done(store, root, "m")
    done(store, claim(store, "w", run, 0), "x", "y")
    x = claim(store, "w", run, 0)
    assert x is not None
    with store.transaction() as tx:
        queue.fail(tx, x, "w", "404 for good", 0)
    final = states(store, run)
    assert final[f"run{run}:root/m#commit"] == "failed"
    assert final[f"run{run}:root#commit"] == "failed"
    assert final[f"run{run}:root/m/y"] == "pending", "siblings still run"
    with store.transaction() as tx:
        row = tx.one("get_job_by_key", key=f"run{run}:root#commit")
        assert row is not None and "not committed" in row["last_error"]
        failure = tx.one("first_failure", run=run)
        assert failure is not None and failure["last_error"] == "404 for good"


def test_expired_lease_returns_job_with_one_more_attempt(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a")
    job = claim(store, "dead", run, 0)
    assert job is not None
    with store.transaction() as tx:
        assert queue.expire_leases(tx, LEASE - 1) == 0
        assert queue.expire_leases(tx, LEASE + 1) == 1
    again = claim(store, "alive", run, LEASE + 1)
    assert again is not None and again.attempts == 1 and "lease expired" in (again.last_error or "")
    # The dead worker wakes up and tries to commit: refused, nothing written.
    with pytest.raises(LeaseLost), store.transaction() as tx:
        queue.complete(tx, job, "dead", Outcome(result=1), LEASE + 2, MAX)


def test_a_checkpoint_is_refused_once_the_lease_is_lost(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a")
    job = claim(store, "w1", run, 0)
    assert job is not None
    with store.transaction() as tx:
        queue.hold(tx, job, "w1")  # held: the checkpoint may commit
        with pytest.raises(LeaseLost):
            queue.hold(tx, job, "w2")
    with store.transaction() as tx:
        queue.expire_leases(tx, LEASE + 1)
    with pytest.raises(LeaseLost), store.transaction() as tx:
        queue.hold(tx, job, "w1")


def test_heartbeat_renewal_keeps_the_lease(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a")
    assert claim(store, "w", run, 0) is not None
    for t in (20, 40, 60, 80):
        with store.transaction() as tx:
            assert queue.renew(tx, "w", t, LEASE) == 1
            assert queue.expire_leases(tx, t + 1) == 0


def test_lease_expiry_past_the_limit_fails_and_says_why(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a", max_attempts=2)
    now = 0.0
    for _ in range(2):
        assert claim(store, "w", run, now) is not None
        now += LEASE + 1
        with store.transaction() as tx:
            queue.expire_leases(tx, now)
    with store.transaction() as tx:
        row = tx.one("get_job_by_key", key=f"run{run}:a")
    assert row is not None and row["state"] == "failed" and row["attempts"] == 2
    assert "lease expired" in row["last_error"]


def test_retry_backs_off_then_fails_past_the_limit(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a")
    now = 0.0
    for attempt in range(1, MAX + 1):
        job = claim(store, "w", run, now)
        assert job is not None and job.attempts == attempt - 1
        with store.transaction() as tx:
            state = queue.retry(tx, job, "w", "timeout", now, delay=10)
        if attempt < MAX:
            assert state is JobState.PENDING
            assert claim(store, "w", run, now + 9) is None, "not before the backoff"
            now += 10
        else:
            assert state is JobState.FAILED
    with store.transaction() as tx:
        row = tx.one("get_job_by_key", key=f"run{run}:a")
    assert row is not None and row["attempts"] == MAX
    assert row["last_error"] == f"timeout (gave up after {MAX} attempts)"


def test_release_hands_back_without_counting_an_attempt(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a")
        add_job(tx, run, "b")
    assert claim(store, "w", run, 0) and claim(store, "w", run, 0)
    with store.transaction() as tx:
        assert queue.release(tx, "w", 1) == 2
    job = claim(store, "other", run, 1)
    assert job is not None and job.attempts == 0


def test_a_dead_local_worker_loses_its_leases_at_once(store: Store) -> None:
    import subprocess

    from thresher.liveness import BOOT_ID as _BOOT_ID
    from thresher.liveness import HOST as _HOST
    from thresher.liveness import is_dead_here

    if _BOOT_ID is None:
        pytest.skip("no boot id on this system: only lease expiry applies")
    dead = subprocess.Popen(["true"])
    dead.wait()
    alive = subprocess.Popen(["sleep", "30"])
    try:
        run = new_run(store)
        with store.transaction() as tx:
            add_job(tx, run, "a")
            add_job(tx, run, "b")
            for owner, pid in (("dead", dead.pid), ("alive", alive.pid)):
                tx.execute(
                    "upsert_worker",
                    owner=owner,
                    hostname=_HOST,
                    pid=pid,
                    boot_id=_BOOT_ID,
                    jobs_done=0,
                    now=0,
                )
        assert claim(store, "dead", run, 0) and claim(store, "alive", run, 0)
        with store.transaction() as tx:
            assert queue.expire_dead_owners(tx, 1, is_dead_here) == 1
        final = states(store, run)
        assert sorted(final.values()) == ["leased", "pending"]
        again = claim(store, "new", run, 1)
        assert again is not None and again.attempts == 1
        assert "died without finishing" in (again.last_error or "")
    finally:
        alive.kill()
        alive.wait()


def test_child_keys_of_a_long_chain_stay_short_and_distinct() -> None:
    from thresher.jobs.queue import MAX_KEY, child_key

    key, seen = "run1:ingest", set()
    for _ in range(2000):  # an ingest of two million URLs: a chain of 2000 pages
        key = child_key(key, "next")
        assert len(key) <= MAX_KEY + 60
        assert key not in seen
        seen.add(key)
        assert child_key(key, "f1") != child_key(key, "f2")
    assert key.startswith("run1:ingest/~")
    assert child_key("run1:x", "a") == "run1:x/a"


def test_commits_wait_out_of_the_claim_path(store: Store) -> None:
    """A chain of pages (each spawning a fetch and the next page) leaves one commit per
    page waiting until the chain ends. They must be `waiting`, not `pending`: every
    claim would otherwise step over all of them, a cost that grows with the run."""
    run, root = claimed_root(store)
    done(store, root, "f", "next")
    pages = 1
    while (job := claim(store, "w", run, 0)) is not None:
        if job.key.endswith("/next") and pages < 30:
            pages += 1
            done(store, job, "f", "next")
        else:
            done(store, job)
        for key, state in (now := states(store, run)).items():
            if key.endswith("#commit"):
                below = key.removesuffix("#commit") + "/"
                busy = any(k.startswith(below) and s != "done" for k, s in now.items())
                assert (state == "waiting") == busy, key
    final = states(store, run)
    assert len([k for k in final if k.endswith("#commit")]) == 30
    assert set(final.values()) == {"done"}


def test_a_commit_is_waiting_until_its_last_child_is_done(store: Store) -> None:
    run, root = claimed_root(store)
    done(store, root, "a", "b")
    commit = f"run{run}:root#commit"
    assert states(store, run)[commit] == "waiting"
    a, b = claim(store, "w", run, 1), claim(store, "w", run, 1)
    done(store, a)
    assert states(store, run)[commit] == "waiting"
    done(store, b)
    assert states(store, run)[commit] == "pending"


def test_a_commit_whose_children_exist_already_is_not_left_waiting(store: Store) -> None:
    """Children are inserted by key, idempotently: if every one exists and is done, the
    commit must still become claimable."""
    run, root = claimed_root(store)
    with store.transaction() as tx:
        child = queue.enqueue(
            tx,
            JobSpec("k", "a"),
            key=f"run{run}:root/a",
            now=0,
            default_max_attempts=MAX,
            parent_id=root.id,
            source_run_id=run,
        )
        assert child is not None
    done(store, claim(store, "w", run, 0))
    done(store, root, "a")
    assert states(store, run)[f"run{run}:root#commit"] == "pending"


def test_children_finishing_at_once_wake_their_commit(store_url: str) -> None:
    """Two workers finish the last two children in overlapping transactions: inside
    them each sees the other's child unfinished, yet the commit must wake (no lost
    wake-up), because each wakes after its own commit."""
    import threading

    from thresher.store import open_store

    one, two = open_store(store_url), open_store(store_url)
    try:
        run, root = claimed_root(one)
        done(one, root, "a", "b")
        a, b = claim(one, "w", run, 1), claim(one, "w", run, 1)
        assert a is not None and b is not None
        inside, release, second_done = threading.Event(), threading.Event(), threading.Event()

        def finish(store: Store, job: Job, hold: bool) -> None:
            with store.transaction() as tx:
                due = queue.complete(tx, job, "w", Outcome(), 2, MAX)
                if hold:  # still uncommitted while the other completes and wakes
                    inside.set()
                    release.wait(10)
            with store.transaction() as tx:
                for job_id in due:
                    queue.wake(tx, job_id, 2)

        def first() -> None:
            finish(one, a, hold=True)

        def second() -> None:
            inside.wait(10)
            finish(two, b, hold=False)  # SQLite: waits for the first's write lock
            second_done.set()

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        second_done.wait(1)  # PostgreSQL: done, and it saw `a` leased
        release.set()
        for t in threads:
            t.join(15)
        assert states(one, run)[f"run{run}:root#commit"] == "pending"
    finally:
        one.close()
        two.close()


def test_a_sweep_wakes_commits_a_killed_worker_did_not(store: Store) -> None:
    run, root = claimed_root(store)
    done(store, root, "a")
    a = claim(store, "w", run, 1)
    assert a is not None
    with store.transaction() as tx:  # then killed before waking the commit
        queue.complete(tx, a, "w", Outcome(), 2, MAX)
    assert states(store, run)[f"run{run}:root#commit"] == "waiting"
    with store.transaction() as tx:
        assert queue.wake_ready(tx, [run], 3) == 1
        assert queue.wake_ready(tx, [run], 3) == 0
    commit = claim(store, "w", run, 3)
    assert commit is not None and commit.key == f"run{run}:root#commit"


def test_claims_take_the_job_due_longest_first(store: Store) -> None:
    """Within a priority, the job that has been due longest goes first: a job back from
    a retry's backoff queues behind those due before it, and the claim index does not
    hold jobs still waiting out their backoff ahead of everything due."""
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a", now=0)
        add_job(tx, run, "b", now=0)
        add_job(tx, run, "c", now=50)
    a = claim(store, "w", run, now=1)
    assert a is not None and a.key.endswith(":a")
    with store.transaction() as tx:
        queue.retry(tx, a, "w", "503", now=1, delay=99)  # due again at 100
    order = [claim(store, "w", run, now=200) for _ in range(3)]
    assert [j.key.rsplit(":", 1)[1] for j in order if j] == ["b", "c", "a"]


def test_a_claim_that_takes_nothing_says_when_the_next_job_is_due(store: Store) -> None:
    """The lull is read in the claim's transaction at the claim's `now`: the least
    not_before of every pending job whatever its priority (a lower-priority job due
    sooner is not hidden behind the job claims take first), later than that `now`."""
    run, other = new_run(store, "a"), new_run(store, "b")
    with store.transaction() as tx:
        add_job(tx, run, "soon", now=20)
        for name, priority, due in (("urgent", 1, 50), ("bulk", -1, 40)):
            queue.enqueue(
                tx,
                JobSpec("k", name, priority=priority),
                key=f"run{run}:{name}",
                now=due,
                default_max_attempts=MAX,
                source_run_id=run,
            )
        add_job(tx, other, "b", now=30)
    with store.transaction() as tx:
        one = queue.claim_or_lull(tx, "w", [run], now=10, lease=LEASE)
        both = queue.claim_or_lull(tx, "w", [run, other], now=10, lease=LEASE)
        none = queue.claim_or_lull(tx, "w", [], now=10, lease=LEASE)
    assert one == queue.Lull(unfinished=True, next_due=20, elsewhere=False)
    assert both == queue.Lull(unfinished=True, next_due=20, elsewhere=False)
    assert none == queue.Lull(unfinished=False, next_due=None, elsewhere=False)
    with store.transaction() as tx:
        got = queue.claim_or_lull(tx, "w", [run, other], now=35, lease=LEASE)
    assert isinstance(got, Job) and got.key == f"run{run}:soon"


def test_a_lull_tells_leases_held_elsewhere_from_our_own(store: Store) -> None:
    """Another worker's lease means jobs may appear at any moment (an idle worker
    polls); our own alone means our own completions will wake us (no poll)."""
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a")
    assert claim(store, "us", run, now=1) is not None
    with store.transaction() as tx:
        ours = queue.claim_or_lull(tx, "us", [run], now=2, lease=LEASE)
        theirs = queue.claim_or_lull(tx, "them", [run], now=2, lease=LEASE)
    assert ours == queue.Lull(unfinished=True, next_due=None, elsewhere=False)
    assert theirs == queue.Lull(unfinished=True, next_due=None, elsewhere=True)


@pytest.mark.parametrize("priorities", [(0,), (1, 0, -1), (5, 3, 0, -2, -7)])
def test_the_next_due_time_is_the_least_of_every_priority(
    store: Store, priorities: tuple[int, ...]
) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        for i, priority in enumerate(priorities):
            for j in range(3):
                queue.enqueue(
                    tx,
                    JobSpec("k", f"p{i}-{j}", priority=priority),
                    key=f"run{run}:p{i}-{j}",
                    now=100 + 10 * ((i * 7 + j * 3) % 11),
                    default_max_attempts=MAX,
                    source_run_id=run,
                )
        due = min(float(r["not_before"]) for r in tx.all("list_jobs", run=run))
        lull = queue.claim_or_lull(tx, "w", [run], now=0, lease=LEASE)
    assert lull == queue.Lull(unfinished=True, next_due=due, elsewhere=False)


def test_a_lull_says_whether_a_worker_elsewhere_is_alive(store: Store) -> None:
    """A live worker of another process may add work to any run at any moment."""
    run = new_run(store)

    def lull(now: float) -> queue.Lull:
        with store.transaction() as tx:
            got = queue.claim_or_lull(tx, "us", [run], now=now, lease=LEASE)
        assert isinstance(got, queue.Lull)
        return got

    def beat(owner: str, now: float) -> None:
        with store.transaction() as tx:
            tx.execute(
                "upsert_worker",
                owner=owner,
                hostname="h",
                pid=1,
                boot_id=None,
                jobs_done=0,
                now=now,
            )

    beat("us", 100)
    assert not lull(100).elsewhere  # ourselves
    beat("them", 100)
    assert lull(100).elsewhere
    assert not lull(100 + 3 * LEASE + 1).elsewhere  # silent for three leases: dead
    with store.transaction() as tx:
        tx.execute("stop_worker", owner="them", now=101, jobs_done=0)
    assert not lull(102).elsewhere


# -- Many jobs per statement: a worker process's claims and group commits -----------------


def test_claim_many_takes_the_next_n_in_claim_order_and_no_job_twice(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        for name, now in [("a", 3.0), ("b", 1.0), ("c", 2.0), ("d", 0.0), ("e", 9.0)]:
            add_job(tx, run, name, now=now)
    with store.transaction() as tx:
        first = queue.claim_many(tx, "w1", [run], 5.0, LEASE, 3)
    assert [j.key.rsplit(":", 1)[1] for j in first] == ["d", "b", "c"]
    assert all(j.state is JobState.LEASED and j.lease_owner == "w1" for j in first)
    with store.transaction() as tx:
        second = queue.claim_many(tx, "w2", [run], 5.0, LEASE, 9)
    assert [j.key.rsplit(":", 1)[1] for j in second] == ["a"]  # e is not due yet
    with store.transaction() as tx:
        assert queue.claim_many(tx, "w2", [run], 5.0, LEASE, 9) == []


def test_claim_many_goes_on_to_the_next_run(store: Store) -> None:
    one, two = new_run(store, "one"), new_run(store, "two")
    with store.transaction() as tx:
        add_job(tx, one, "x")
        add_job(tx, two, "y")
        add_job(tx, two, "z")
    with store.transaction() as tx:
        jobs = queue.claim_many(tx, "w", [one, two], 1.0, LEASE, 2)
    assert [j.source_run_id for j in jobs] == [one, two]


def test_unclaimed_jobs_are_pending_as_before_without_an_attempt(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a")
        add_job(tx, run, "b")
    with store.transaction() as tx:
        jobs = queue.claim_many(tx, "w", [run], 1.0, LEASE, 2)
        assert queue.unclaim(tx, jobs[1:], "someone else", 1.0) == 0  # not theirs
        assert queue.unclaim(tx, jobs[1:], "w", 1.0) == 1
    assert states(store, run) == {f"run{run}:a": "leased", f"run{run}:b": "pending"}
    again = claim(store, "w2", run, 2.0)
    assert again is not None and again.key == f"run{run}:b" and again.attempts == 0


def test_complete_many_commits_each_once_and_skips_a_lost_lease(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        for name in ("p", "q", "r"):
            add_job(tx, run, name)
    with store.transaction() as tx:
        p, q, r = queue.claim_many(tx, "w", [run], 1.0, LEASE, 3)
    with store.transaction() as tx:  # r's lease was lost: expired and taken elsewhere
        tx.execute("expire_owner_leases", owner="w", now=2.0)
        p, q = queue.claim_many(tx, "w", [run], 2.0, LEASE, 2)
        taken = queue.claim(tx, "elsewhere", [run], 2.0, LEASE)
        assert taken is not None and taken.id == r.id

    def write(key: str) -> Outcome:
        def w(tx: Tx) -> None:
            tx.execute(
                "insert_synthetic_result", source="src", job_key=key, owner="w", value="v", now=3
            )

        return Outcome(result={"k": key}, write=w)

    children = Outcome(children=(JobSpec("k", "c1"), JobSpec("k", "c2")))
    batch = [(p, children), (q, write(q.key)), (r, write(r.key))]
    with store.transaction() as tx:
        got = queue.complete_many(tx, batch, "w", 3.0, MAX)
    assert [j.id for j in got.lost] == [r.id]
    assert set(got.due) == {p.id}  # p's join may be due at once (its children may exist)
    with store.transaction() as tx:
        assert [row["job_key"] for row in tx.all("synthetic_results", source="src")] == [q.key]
        row = tx.one("get_job", id=q.id)
        assert row is not None and row["result"] == '{"k": "' + q.key + '"}'
    assert states(store, run) == {
        f"run{run}:p": "done",
        f"run{run}:q": "done",
        f"run{run}:r": "leased",
        f"run{run}:p/c1": "pending",
        f"run{run}:p/c2": "pending",
        f"run{run}:p#commit": "waiting",
    }
    # Completing them again (a retried commit): nothing more is written.
    with store.transaction() as tx:
        again = queue.complete_many(tx, batch, "w", 4.0, MAX)
    assert {j.id for j in again.lost} == {p.id, q.id, r.id} and again.due == []


def test_a_write_that_fails_rolls_back_the_whole_group(store: Store) -> None:
    run = new_run(store)
    with store.transaction() as tx:
        add_job(tx, run, "a")
        add_job(tx, run, "b")
    with store.transaction() as tx:
        a, b = queue.claim_many(tx, "w", [run], 1.0, LEASE, 2)

    def broken(tx: Tx) -> None:
        raise ValueError("a constraint")

    with pytest.raises(ValueError), store.transaction() as tx:
        queue.complete_many(tx, [(a, Outcome()), (b, Outcome(write=broken))], "w", 2.0, MAX)
    assert states(store, run) == {f"run{run}:a": "leased", f"run{run}:b": "leased"}
