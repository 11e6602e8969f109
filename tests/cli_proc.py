"""Run the real `thresher` command in a subprocess, the way users and CI do."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

__all__ = ["Home", "kill_9", "thresher"]


class Home:
    """A home folder plus, optionally, a PostgreSQL store: one user's installation."""

    def __init__(self, path: Path, db: str | None = None, **env: str) -> None:
        self.path = path
        self.db = db
        self.env = {**os.environ, "THRESHER_HOME": str(path), **env}
        self.env.pop("THRESHER_DB", None)
        if db:
            self.env["THRESHER_DB"] = db

    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "thresher", *args]

    def run(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            self.cmd(*args), env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"thresher {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
            )
        return proc

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.cmd(*args),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def query(self, sql: str) -> list[dict[str, Any]]:
        if self.db:
            with psycopg.connect(self.db, row_factory=dict_row) as conn:
                return conn.execute(sql.encode()).fetchall()
        db = sqlite3.connect(self.path / "thresher.db", timeout=60)
        db.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in db.execute(sql)]
        finally:
            db.close()

    def count(self, sql: str) -> int:
        """The number a `SELECT count(*) AS n ...` gives."""
        return int(self.query(sql)[0]["n"])

    def start_run_until(
        self, source: str, sql: str, at_least: int, *, timeout: float = 120, poll: float = 0.02
    ) -> subprocess.Popen[str]:
        """`thresher run SOURCE`, started and left running until `sql` (a count, as in
        `count`) reaches `at_least`; it must not end before, nor take over `timeout`."""
        proc = self.start("run", source)
        deadline = time.monotonic() + timeout
        reached = 0
        while reached < at_least:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(poll)
            try:
                reached = self.count(sql)
            except Exception:  # the store or its tables do not exist yet
                continue
        return proc

    def results(self, source: str) -> Counter[str]:
        rows = self.query(f"SELECT job_key FROM synthetic_results WHERE source = '{source}'")
        return Counter(r["job_key"] for r in rows)

    def jobs(self) -> dict[str, tuple[str, str]]:
        return {
            r["key"]: (r["kind"], r["state"])
            for r in self.query("SELECT key, kind, state FROM jobs")
        }


def kill_9(proc: subprocess.Popen[str]) -> None:
    """`kill -9` the process, as a crash or the OOM killer would, and reap it."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()


def thresher(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "thresher", *args], capture_output=True, text=True, timeout=120
    )
