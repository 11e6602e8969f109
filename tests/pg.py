"""A private PostgreSQL server for the tests, started from Debian's packages.

THRESHER_TEST_PG (a postgresql:// URL of a server the tests may create databases on)
skips the start. Otherwise initdb + pg_ctl run a throwaway cluster on a free loopback
port, as the `postgres` user when we are root (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PgServer", "find_pg_bin"]


def find_pg_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _free_bytes(path: str) -> int:
    try:
        if not os.access(path, os.W_OK):
            return 0
        stat = os.statvfs(path)
    except OSError:
        return 0
    return stat.f_bavail * stat.f_frsize


class PgServer:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        # In memory where there is a roomy tmpfs (a container's may be 64 MB): a test
        # suite's databases are written and thrown away, never read back after the run.
        where = "/dev/shm" if _free_bytes("/dev/shm") > 4 << 30 else None
        self.dir = Path(tempfile.mkdtemp(prefix="thresher-pg-", dir=where))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run(
            [*self._as_user, *args], check=True, capture_output=True, cwd=self.dir, timeout=120
        )

    def start(self) -> PgServer:
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            " -c max_connections=200"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.dir / "log"),
            "-w",
            "start",
        )
        return self

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
