"""The acceptance test: kill -9 a run at random moments, restart it, and the end state
is that of an uninterrupted run. Real processes, real stores, no shortcuts."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from cli_proc import Home
from conftest import new_pg_database

JOBS = 600
SOURCE_ARGS = ("source", "add", "s", "synthetic:", "-o", f"jobs={JOBS}", "-o", "work_ms=10")
# Killed workers' leases must expire for the restart to take their jobs back: keep the
# lease short so the test does not wait a minute per kill.
FAST = {"THRESHER_LEASE_SECONDS": "1.5", "THRESHER_BACKOFF_BASE": "0.05"}


def make_home(backend: str, tmp_path: Path, name: str, request: pytest.FixtureRequest) -> Home:
    db = None
    if backend == "postgres":
        db = new_pg_database(request.getfixturevalue("pg_admin_url"))
    return Home(tmp_path / name, db, **FAST)


def end_state(home: Home) -> tuple[object, ...]:
    """Results, jobs and runs, with each run's id as its ordinal: PostgreSQL may skip a
    sequence value (a transaction that took one and was rolled back or killed), and
    job keys carry the run's id."""
    runs = home.query("SELECT id, outcome, counts FROM source_runs ORDER BY id")
    ordinal = {f"run{r['id']}:": f"run{n}:" for n, r in enumerate(runs, 1)}

    def renamed(key: str) -> str:
        prefix = key[: key.index(":") + 1]
        return ordinal.get(prefix, prefix) + key[len(prefix) :]

    results = Counter({renamed(k): v for k, v in home.results("s").items()})
    jobs = {renamed(k): v for k, v in home.jobs().items()}
    return (results, jobs, [(n, r["outcome"], r["counts"]) for n, r in enumerate(runs, 1)])


@pytest.mark.slow
def test_kill_9_at_random_moments_loses_and_repeats_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    reference = make_home(backend, tmp_path, "reference", request)
    reference.run(*SOURCE_ARGS)
    reference.run("run")
    expected = end_state(reference)
    results = expected[0]
    assert isinstance(results, dict) and len(results) == JOBS + JOBS // 10 + 1
    assert set(results.values()) == {1}

    seed = int(os.environ.get("THRESHER_CRASH_SEED", random.randrange(10**6)))
    rng = random.Random(seed)
    home = make_home(backend, tmp_path, "crashed", request)
    home.run(*SOURCE_ARGS)
    kills_mid_run = 0
    finished = False
    for round_ in range(12):
        proc = home.start("run")
        if round_ == 0:
            # Early: during start-up, the root job's claim or its first commit.
            time.sleep(rng.uniform(0.0, 1.0))
        else:
            # Later: at a random point of progress, whatever the machine's speed.
            target = len(home.results("s")) + rng.randrange(1, len(results) // 3)
            while proc.poll() is None and len(home.results("s")) < target:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.05))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.communicate()
        got = home.results("s")
        assert max(got.values(), default=1) == 1, f"a result written twice (seed {seed})"
        if 0 < len(got) < len(results):
            kills_mid_run += 1
        # A killed process may have closed the run just before it died: then the
        # interrupted run is over, and another `thresher run` would be a new pass.
        runs = home.query("SELECT outcome FROM source_runs")
        finished = any(r["outcome"] != "running" for r in runs)
        if finished:
            break
    assert kills_mid_run >= 2, f"the kills missed the run (seed {seed}); make it longer"
    if not finished:
        # Leftover leases of killed processes expire and are taken back.
        out = home.run("run")
        assert "s: ok" in out.stdout, out.stdout + out.stderr
    got_results, got_jobs, got_runs = end_state(home)
    assert got_results == expected[0], f"seed {seed}"
    assert got_jobs == expected[1], f"seed {seed}"
    assert got_runs == expected[2], f"seed {seed}"


@pytest.mark.slow
def test_two_processes_never_run_the_same_job(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = make_home(backend, tmp_path, "shared", request)
    home.run(
        "source", "add", "s", "synthetic:", "-o", "jobs=400", "-o", "work_ms=5", "-o", "trace=1"
    )
    procs = [home.start("run", "--workers", "2") for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    traces = list((home.path / "trace").glob("*.log"))
    assert len(traces) == 2, "both processes ran jobs"
    started = [line for t in traces for line in t.read_text().splitlines()]
    assert len(started) == 400 and len(set(started)) == 400, "a leaf ran twice"
    got = home.results("s")
    assert len(got) == 400 + 40 + 1 and set(got.values()) == {1}
    runs = home.query("SELECT outcome FROM source_runs")
    assert [r["outcome"] for r in runs] == ["ok"], "the processes shared one run"


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_signal_finishes_in_flight_work_releases_the_rest_and_exits_0(
    signame: str, tmp_path: Path
) -> None:
    home = Home(tmp_path / "home", None, THRESHER_GRACE_SECONDS="10")
    home.run("source", "add", "s", "synthetic:", "-o", "jobs=400", "-o", "work_ms=20")
    proc = home.start("run", "--workers", "2")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(home.results("s")) < 20:
        time.sleep(0.1)
    proc.send_signal(getattr(signal, signame))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "interrupted: what was done is committed" in out
    assert "resume with the same command" in out
    assert home.query("SELECT count(*) AS n FROM jobs WHERE state = 'leased'")[0]["n"] == 0
    partial = home.results("s")
    assert 20 <= len(partial) < 441
    home.run("run")
    got = home.results("s")
    assert len(got) == 441 and set(got.values()) == {1}
    assert [r["outcome"] for r in home.query("SELECT outcome FROM source_runs")] == ["ok"]


@pytest.mark.slow
def test_a_second_signal_stops_at_once_and_still_releases(tmp_path: Path) -> None:
    home = Home(tmp_path / "home", None, THRESHER_GRACE_SECONDS="600")
    # Leaves that take long: the first signal alone would wait for them (grace 600 s).
    home.run("source", "add", "s", "synthetic:", "-o", "jobs=40", "-o", "work_ms=3000")
    proc = home.start("run", "--workers", "4")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # Leaves, not the group jobs before them: those end at once, and so would the run.
        leased = home.query(
            "SELECT count(*) AS n FROM jobs WHERE state = 'leased' AND kind = 'synthetic.leaf'"
        )[0]["n"]
        if leased >= 4:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert proc.poll() is None, "the first signal waits for in-flight jobs"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert home.query("SELECT count(*) AS n FROM jobs WHERE state = 'leased'")[0]["n"] == 0
    pending = home.query("SELECT attempts FROM jobs WHERE state = 'pending'")
    assert pending and all(r["attempts"] == 0 for r in pending), "no attempt counted"
