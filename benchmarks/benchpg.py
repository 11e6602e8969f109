"""The PostgreSQL server of the benchmarks' PostgreSQL rows (ingest/run.py, jobs.py,
workers.py): a private throwaway one from tests/pg.py, or THRESHER_BENCH_PG's.

Imported as benchlib is. psycopg is imported only where it is used, so that a script
imports it only when it has PostgreSQL rows to run.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

from benchlib import BenchError
from procstats import descendants, stat_fields

ROOT = Path(__file__).resolve().parent.parent


class _PgServer(Protocol):
    """What we use of tests/pg.py's PgServer."""

    url: str
    data: Path

    def start(self) -> object: ...

    def stop(self) -> None: ...


def tests_pg() -> ModuleType:
    # tests/pg.py is the tests' server fixture; importlib keeps the scripts checkable alone.
    sys.path.insert(0, str(ROOT / "tests"))
    return importlib.import_module("pg")


def server_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(b"SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'}"


@dataclass
class Postgres:
    """Where the PostgreSQL rows get their databases: a private server, or a given one."""

    admin_url: str
    data_dir: Path | None  # known only for our own server: then we measure its CPU
    describe: str

    @contextlib.contextmanager
    def database(self, keep: bool = False) -> Iterator[str]:
        """The URL of a new database, dropped at the end unless `keep`."""
        import psycopg

        name = f"thresher_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        try:
            yield self.admin_url.rsplit("/", 1)[0] + f"/{name}"
        finally:
            if keep:
                print(f"kept database {name}", file=sys.stderr)
            else:
                try:
                    with psycopg.connect(self.admin_url, autocommit=True) as conn:
                        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
                except psycopg.Error as exc:
                    print(f"\ncould not drop database {name}: {exc}", file=sys.stderr)

    def cpu_seconds(self) -> float | None:
        """CPU time of the server so far: the postmaster, the backends it has reaped, and
        the processes it has now (backends, autovacuum, checkpointer, WAL writer…)."""
        if self.data_dir is None:
            return None
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
            # stat(5): utime, stime, cutime, cstime are fields 14-17, i.e. 11-14 after the name.
            ticks = sum(int(x) for x in stat_fields(pid)[11:15])
            for child in descendants(pid):
                # One that exited meanwhile: its time is in the postmaster's cutime by now.
                with contextlib.suppress(OSError, ValueError, IndexError):
                    c = stat_fields(child)
                    ticks += int(c[11]) + int(c[12])
        except (OSError, ValueError, IndexError):
            return None
        return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def postgres(missing: str, settings: str = "") -> Iterator[Postgres]:
    """THRESHER_BENCH_PG's server, or a private one (BenchError(`missing`) when PostgreSQL
    is not installed), whose description names `settings` after tests/pg.py's own."""
    url = os.environ.get("THRESHER_BENCH_PG")
    if url:
        yield Postgres(url, None, server_version(url) + " (THRESHER_BENCH_PG)")
        return
    pg_module = tests_pg()
    bindir: Path | None = pg_module.find_pg_bin()
    if bindir is None:
        raise BenchError(missing)
    server: _PgServer = pg_module.PgServer(bindir)
    try:
        server.start()
        describe = (
            server_version(server.url)
            + " (private server from tests/pg.py: fsync=off, synchronous_commit=off,"
            f" full_page_writes=off{settings})"
        )
        yield Postgres(server.url, server.data, describe)
    finally:
        server.stop()
