"""Job throughput of Thresher's job system: claims + completions per second.

Every row runs the real `thresher` command in subprocesses, on a fresh home folder and a
fresh database, against one `synthetic` source: a root job, jobs/fanout group jobs, `jobs`
leaf jobs and one commit job per group plus one for the root. Each leaf and each commit
writes one result row in the transaction that completes it. Throughput is every job done
(from `thresher status --json`) divided by the wall time of the `thresher run` commands,
process start and exit included.

    python benchmarks/jobs.py            # 20000 leaves per row (about 20800 jobs)
    python benchmarks/jobs.py --quick    # 2000 leaves per row

PostgreSQL: a private throwaway server (tests/pg.py) unless THRESHER_BENCH_PG holds the
postgresql:// URL of a server on which the benchmark may create and drop databases.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import os
import platform
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import psycopg

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "bench"


@dataclass(frozen=True)
class Case:
    backend: str  # sqlite or postgres
    processes: int
    workers: int


CASES = (
    Case("sqlite", 1, 1),
    Case("sqlite", 1, 4),
    Case("postgres", 1, 1),
    Case("postgres", 1, 4),
    Case("postgres", 4, 1),
)


@dataclass(frozen=True)
class Result:
    case: Case
    jobs_done: int
    seconds: float
    client_cpu: float  # user + system seconds of the `thresher run` processes
    server_cpu: float | None  # of the private PostgreSQL server, when we run it
    # PostgreSQL: how often autovacuum vacuumed and analyzed the jobs table during the run.
    # New statistics can change the claim query's plan, and with it the throughput.
    autovacuum: tuple[int, int] | None = None

    @property
    def rate(self) -> float:
        return self.jobs_done / self.seconds


class BenchError(Exception):
    pass


def expected_jobs(leaves: int, fanout: int) -> int:
    groups = -(-leaves // fanout)
    return 1 + groups + leaves + groups + 1  # root, groups, leaves, group commits, root commit


def expected_results(leaves: int, fanout: int) -> int:
    return leaves + -(-leaves // fanout) + 1  # every leaf and every commit writes one row


# --- PostgreSQL -------------------------------------------------------------------------


class Postgres:
    """Where the PostgreSQL rows get their databases: a private server, or a given one."""

    def __init__(self, admin_url: str, data_dir: Path | None, describe: str) -> None:
        self.admin_url = admin_url
        self.data_dir = data_dir  # known only for our own server: then we measure its CPU
        self.describe = describe

    @contextlib.contextmanager
    def database(self) -> Iterator[str]:
        name = f"thresher_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        try:
            yield self.admin_url.rsplit("/", 1)[0] + f"/{name}"
        finally:
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
            total = _proc_ticks(pid, children=True)
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit() and _ppid(int(entry.name)) == pid:
                    total += _proc_ticks(int(entry.name), children=False)
        except (OSError, ValueError, IndexError):
            return None
        return total / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    # Fields after the command name, which is in parentheses and may hold spaces.
    return text[text.rindex(")") + 2 :].split()


def _ppid(pid: int) -> int | None:
    try:
        return int(_stat_fields(pid)[1])
    except (OSError, ValueError, IndexError):
        return None


def _proc_ticks(pid: int, children: bool) -> int:
    # stat(5): utime, stime, cutime, cstime are fields 14-17, i.e. 11-14 after the name.
    try:
        f = _stat_fields(pid)
    except OSError:
        return 0  # exited meanwhile: its time is in the postmaster's cutime by now
    ticks = int(f[11]) + int(f[12])
    if children:
        ticks += int(f[13]) + int(f[14])
    return ticks


class _PgServer(Protocol):
    """What we use of tests/pg.py's PgServer."""

    url: str
    data: Path

    def start(self) -> object: ...

    def stop(self) -> None: ...


@contextlib.contextmanager
def postgres() -> Iterator[Postgres]:
    url = os.environ.get("THRESHER_BENCH_PG")
    if url:
        yield Postgres(url, None, _server_version(url) + " (THRESHER_BENCH_PG)")
        return
    # tests/pg.py is the tests' server fixture; importlib keeps the script checkable alone.
    sys.path.insert(0, str(ROOT / "tests"))
    pg_module = importlib.import_module("pg")
    bindir: Path | None = pg_module.find_pg_bin()
    if bindir is None:
        raise BenchError(
            "PostgreSQL is not installed (apt-get install postgresql), and THRESHER_BENCH_PG"
            " is not set; run with --backend sqlite to skip the PostgreSQL rows"
        )
    server: _PgServer = pg_module.PgServer(bindir)
    try:
        server.start()
        describe = (
            _server_version(server.url)
            + " (private server from tests/pg.py: fsync=off, synchronous_commit=off,"
            " full_page_writes=off, otherwise default settings)"
        )
        yield Postgres(server.url, server.data, describe)
    finally:
        server.stop()


def _server_version(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(b"SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'}"


# --- running `thresher` -----------------------------------------------------------------


def child_env() -> dict[str, str]:
    # Settings come from our flags only, not from the THRESHER_* variables of this shell.
    return {k: v for k, v in os.environ.items() if not k.startswith("THRESHER_")}


def thresher_cmd(home: Path, db: str | None, *args: str) -> list[str]:
    cmd = [sys.executable, "-m", "thresher", "--home", str(home)]
    if db:
        cmd += ["--db", db]
    return [*cmd, *args]


def thresher(home: Path, db: str | None, *args: str) -> str:
    proc = subprocess.run(
        thresher_cmd(home, db, *args),
        env=child_env(),
        cwd=home.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise BenchError(f"thresher {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc.stdout


def thresher_origin() -> str:
    """Which thresher the children run: its folder and, in a git checkout, the commit."""
    found = subprocess.run(
        [sys.executable, "-c", "import os, thresher; print(os.path.dirname(thresher.__file__))"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if found.returncode != 0:
        raise BenchError(f"cannot import thresher:\n{found.stderr}")
    where = found.stdout.strip()

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", "-C", where, *args], capture_output=True, text=True, timeout=60
            )
        except OSError:
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:
        return f"Thresher from {where}"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return f"Thresher from {where}, commit {commit}" + (
        " with uncommitted changes" if dirty else ""
    )


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_processes(home: Path, db: str | None, case: Case, timeout: float) -> tuple[float, float]:
    """Start `case.processes` runs of the source at once; (wall seconds, CPU seconds)."""
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    args = ["run", SOURCE, "--workers", str(case.workers), "--json", "--no-progress"]
    cpu0 = children_cpu()
    started = time.perf_counter()
    try:
        for i in range(case.processes):
            log = home.parent / f"run{i}.log"
            logs.append(log)
            with open(log, "wb") as err:
                procs.append(
                    subprocess.Popen(
                        thresher_cmd(home, db, *args),
                        env=child_env(),
                        cwd=home.parent,
                        stdout=err,
                        stderr=subprocess.STDOUT,
                    )
                )
        deadline = started + timeout
        for proc in procs:
            proc.wait(timeout=max(0.1, deadline - time.perf_counter()))
        seconds = time.perf_counter() - started
    except subprocess.TimeoutExpired:
        raise BenchError(f"{case}: the runs took longer than {timeout:.0f} s") from None
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    cpu = children_cpu() - cpu0
    for proc, log in zip(procs, logs, strict=True):
        if proc.returncode != 0:
            raise BenchError(
                f"thresher run exited {proc.returncode}:\n{log.read_text(errors='replace')}"
            )
    return seconds, cpu


def count_results(home: Path, db: str | None) -> tuple[int, int]:
    """Result rows of the synthetic source, and how many distinct jobs wrote them."""
    sql = (
        f"SELECT count(*), count(DISTINCT job_key) FROM synthetic_results WHERE source = '{SOURCE}'"
    )
    row: tuple[Any, ...] | None
    if db:
        with psycopg.connect(db) as conn:
            row = conn.execute(sql.encode()).fetchone()
    else:
        conn2 = sqlite3.connect(home / "thresher.db")
        try:
            row = conn2.execute(sql).fetchone()
        finally:
            conn2.close()
    assert row is not None
    return int(row[0]), int(row[1])


def jobs_autovacuum(db: str) -> tuple[int, int] | None:
    """(autovacuum runs, autoanalyze runs) on the jobs table of this fresh database."""
    with psycopg.connect(db) as conn:
        row = conn.execute(
            b"SELECT autovacuum_count, autoanalyze_count FROM pg_stat_user_tables"
            b" WHERE relname = 'jobs'"
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else None


def measure(
    case: Case, work: Path, pg: Postgres | None, leaves: int, fanout: int, timeout: float
) -> Result:
    row_dir = Path(tempfile.mkdtemp(prefix=f"{case.backend}-", dir=work))
    home = row_dir / "home"
    try:
        with contextlib.ExitStack() as stack:
            db = None
            if case.backend == "postgres":
                assert pg is not None
                db = stack.enter_context(pg.database())
            thresher(
                home, db, "source", "add", SOURCE, "synthetic:",
                "-o", f"jobs={leaves}", "-o", f"fanout={fanout}",
            )  # fmt: skip
            server0 = pg.cpu_seconds() if pg and db else None
            seconds, cpu = run_processes(home, db, case, timeout)
            server1 = pg.cpu_seconds() if pg and db else None
            autovacuum = jobs_autovacuum(db) if db else None
            status = json.loads(thresher(home, db, "status", "--json"))
            jobs = status["jobs"]
            want = expected_jobs(leaves, fanout)
            if jobs["done"] != want or jobs["pending"] or jobs["leased"] or jobs["failed"]:
                raise BenchError(f"{case}: expected {want} jobs done, status says {jobs}")
            rows, distinct = count_results(home, db)
            if rows != distinct or rows != expected_results(leaves, fanout):
                raise BenchError(
                    f"{case}: {rows} result rows from {distinct} jobs, expected"
                    f" {expected_results(leaves, fanout)} rows, one per leaf and commit"
                )
            server = None if server0 is None or server1 is None else server1 - server0
            return Result(case, int(jobs["done"]), seconds, cpu, server, autovacuum)
    finally:
        shutil.rmtree(row_dir, ignore_errors=True)


# --- report -----------------------------------------------------------------------------


def table(results: Sequence[Result]) -> str:
    head = (
        "| backend | processes | workers per process | jobs done | seconds | jobs/s"
        " | vs row 1 | client CPU s | server CPU s | jobs autovacuum/analyze |"
    )
    lines = [head, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    base = results[0].rate if results else 1.0
    for r in results:
        server = "n/a" if r.server_cpu is None else f"{r.server_cpu:.1f}"
        vacuum = "-" if r.autovacuum is None else f"{r.autovacuum[0]}/{r.autovacuum[1]}"
        if r.case.backend == "sqlite":
            server = "-"
        lines.append(
            f"| {r.case.backend} | {r.case.processes} | {r.case.workers} | {r.jobs_done}"
            f" | {r.seconds:.2f} | {r.rate:.0f} | {r.rate / base:.2f}"
            f" | {r.client_cpu:.1f} | {server} | {vacuum} |"
        )
    return "\n".join(lines)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--jobs", type=int, default=20000, help="leaf jobs per row (20000)")
    size.add_argument("--quick", action="store_true", help="2000 leaf jobs per row")
    parser.add_argument("--fanout", type=int, default=50, help="leaves per group job (50)")
    parser.add_argument(
        "--backend", choices=("all", "sqlite", "postgres"), default="all", help="rows to run"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds one row may take (1800)"
    )
    opts = parser.parse_args(argv)
    leaves = 2000 if opts.quick else opts.jobs
    if leaves < 1 or opts.fanout < 1:
        parser.error("--jobs and --fanout must be positive")
    cases = [c for c in CASES if opts.backend in ("all", c.backend)]

    signal.signal(signal.SIGTERM, _terminate)  # clean up on SIGTERM as on Ctrl-C
    work = Path(tempfile.mkdtemp(prefix="thresher-bench-"))
    results: list[Result] = []
    load_before = os.getloadavg()[0]
    try:
        origin = thresher_origin()
        with contextlib.ExitStack() as stack:
            pg = None
            if any(c.backend == "postgres" for c in cases):
                pg = stack.enter_context(postgres())
            for n, case in enumerate(cases, 1):
                print(
                    f"[{n}/{len(cases)}] {case.backend}, {case.processes} process(es)"
                    f" x --workers {case.workers} …",
                    end=" ",
                    file=sys.stderr,
                    flush=True,
                )
                result = measure(case, work, pg, leaves, opts.fanout, opts.timeout)
                print(f"{result.jobs_done} jobs in {result.seconds:.2f} s", file=sys.stderr)
                results.append(result)
            now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
            print(
                f"Thresher job throughput, {now}; {leaves} leaves, fanout {opts.fanout}"
                f" ({expected_jobs(leaves, opts.fanout)} jobs per row); {os.cpu_count()} CPUs,"
                f" Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
            )
            print(origin)
            if pg is not None:
                print(f"PostgreSQL: {pg.describe}")
            load_after = os.getloadavg()[0]
            print(f"Load average (1 min) before: {load_before:.2f}, after: {load_after:.2f}")
            print()
            print(table(results))
    except (BenchError, psycopg.Error) as exc:
        print(f"\nbenchmark failed: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        status = 130
    else:
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if results:
        print("\nRows measured before that:\n\n" + table(results), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
