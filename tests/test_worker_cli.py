"""`thresher worker` and `thresher run --detach` as users run them: real processes on a
real store of each backend."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cli_proc import Home
from conftest import new_pg_database


@pytest.fixture
def home(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Home:
    db = new_pg_database(request.getfixturevalue("pg_admin_url")) if backend == "postgres" else None
    return Home(tmp_path / "home", db, THRESHER_LEASE_SECONDS="3")


def wait_for(
    check: object, what: str, timeout: float = 60, worker: subprocess.Popen[str] | None = None
) -> None:
    """Poll `check` until it holds; past `timeout`, fail with what `worker` (if given)
    wrote and whether it is still alive: a worker that died or hung says why."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() >= deadline:
            said = ""
            if worker is not None:
                alive = worker.poll() is None
                if alive:
                    worker.kill()
                out, err = worker.communicate(timeout=30)
                said = (
                    f"\nthe worker {'was still running' if alive else 'had ended'}"
                    f" (exit {worker.returncode}); stdout:\n{out[-2000:]}\nstderr:\n{err[-4000:]}"
                )
            raise AssertionError(f"timed out waiting for {what}{said}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return out, err


def run_outcomes(home: Home) -> list[str]:
    status = json.loads(home.run("status", "--json").stdout)
    return [s["last_run"]["outcome"] for s in status["sources"]]


def test_detached_runs_are_done_by_workers_who_close_them(home: Home) -> None:
    home.run("source", "add", "syn", "synthetic:", "-o", "jobs=60", "-o", "work_ms=10")
    queued = home.run("run", "--detach").stdout
    assert "syn: queued as run 1" in queued
    assert home.query("SELECT outcome FROM source_runs") == [{"outcome": "running"}]
    # No worker has taken a job of it yet: `status` says queued, not running.
    assert run_outcomes(home) == ["queued"]
    workers = [home.start("worker", "--name", f"w{i}", "-c", "3") for i in range(2)]
    try:
        wait_for(
            lambda: home.query("SELECT outcome FROM source_runs") == [{"outcome": "ok"}],
            "the workers to finish and close the run",
        )
        # A run queued while they wait is picked up too.
        home.run("run", "--detach")
        wait_for(
            lambda: (
                [r["outcome"] for r in home.query("SELECT outcome FROM source_runs")]
                == ["ok", "ok"]
            ),
            "the second run",
        )
    finally:
        outputs = [stop(w) for w in workers]
    assert all("stopped: jobs done" in out for out, _ in outputs)
    # Each run is closed, and said to be, once: not by every idle slot that saw it drained.
    logs = "".join(err for _, err in outputs)
    assert logs.count("syn: run 1 ok") == logs.count("syn: run 2 ok") == 1, logs
    leaves = home.query(
        "SELECT job_key FROM synthetic_results WHERE value LIKE 'leaf%' ORDER BY job_key"
    )
    assert len(leaves) == 120 and len({r["job_key"] for r in leaves}) == 120


def test_sigterm_hands_unfinished_jobs_back_at_once(home: Home) -> None:
    home.run("source", "add", "slow", "synthetic:", "-o", "jobs=4", "-o", "work_ms=60000")
    home.run("run", "--detach")
    worker = home.start("worker", "--name", "busy", "-c", "2", "--grace", "0")
    try:
        wait_for(
            lambda: (
                len(
                    home.query(
                        "SELECT id FROM jobs WHERE kind = 'synthetic.leaf' AND state = 'leased'"
                    )
                )
                == 2
            ),
            "two leaves in flight",
            worker=worker,
        )
        status = json.loads(home.run("status", "--json").stdout)
        # Named as the user named it.
        [mine] = [w for w in status["workers"] if w["name"] == "busy"]
        assert len(mine["jobs"]) == 2
        assert run_outcomes(home) == ["running"]
        # Another worker given the same name while this one lives gets a suffix.
        other = home.start("worker", "--name", "busy", "-c", "1", "--grace", "0")
        wait_for(
            lambda: (
                "busy-2"
                in {w["name"] for w in json.loads(home.run("status", "--json").stdout)["workers"]}
            ),
            "the second worker",
        )
        stop(other)
    finally:
        started = time.monotonic()
        # Unless wait_for ended it, to say why it never got its jobs.
        out = stop(worker)[0] if worker.returncode is None else ""
    assert time.monotonic() - started < 10  # not the minute the jobs would take
    assert "worker busy stopped" in out and "handed back 2" in out
    # Stopped with its run open: interrupted, until a worker or `run` takes it up again.
    assert run_outcomes(home) == ["interrupted"]
    leaves = home.query("SELECT state, attempts FROM jobs WHERE kind = 'synthetic.leaf'")
    assert [(r["state"], r["attempts"]) for r in leaves] == [("pending", 0)] * 4


@pytest.mark.slow
def test_a_name_is_taken_over_once_its_last_holder_is_gone(home: Home) -> None:
    """`kill -9` of worker w1, then a new w1: it is named w1 (the old one is gone: its pid
    no longer exists), and the jobs the old one held go back to the queue rather than
    being renewed for ever by the new one's heartbeats."""
    home.run("source", "add", "slow", "synthetic:", "-o", "jobs=2", "-o", "work_ms=60000")
    home.run("run", "--detach")
    first = home.start("worker", "--name", "w1", "-c", "2")
    wait_for(
        lambda: len(home.query("SELECT id FROM jobs WHERE state = 'leased'")) == 2,
        "two leaves in flight",
    )
    first.kill()
    first.communicate()
    second = home.start("worker", "--name", "w1", "-c", "2", "--grace", "0")
    try:
        wait_for(
            lambda: (
                {w["name"] for w in json.loads(home.run("status", "--json").stdout)["workers"]}
                == {"w1"}
            ),
            "the new w1",
        )
        # The dead one's jobs were handed back (an attempt counted) and taken again.
        wait_for(
            lambda: (
                [
                    r["attempts"]
                    for r in home.query("SELECT attempts FROM jobs WHERE state = 'leased'")
                ]
                == [1, 1]
            ),
            "the old jobs taken again",
        )
    finally:
        stop(second)
