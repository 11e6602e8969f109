"""Job throughput of Thresher's job system: claims + completions per second.

Every row runs the real `thresher` command in subprocesses, on a fresh home folder and a
fresh database, against one `synthetic` source: a root job, jobs/fanout group jobs, `jobs`
leaf jobs and one commit job per group plus one for the root. Each leaf and each commit
writes one result row in the transaction that completes it. Throughput is every job done
(from `thresher status --json`) divided by the wall time of the `thresher run` commands,
process start and exit included.

    python benchmarks/jobs.py            # 20000 leaves per row (about 20800 jobs)
    python benchmarks/jobs.py --quick    # 2000 leaves per row
    python benchmarks/jobs.py --rounds 3 --baseline main   # beside main's, 3 rounds each

PostgreSQL: a private throwaway server (tests/pg.py) unless THRESHER_BENCH_PG holds the
postgresql:// URL of a server on which the benchmark may create and drop databases.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

# The modules shared by the benchmark scripts, from this folder (sys.path[0] when run).
from benchlib import (
    THIS,
    BenchError,
    Build,
    baseline,
    cpu_model,
    precompile,
    python_build,
    raise_on_sigterm,
    thresher_cmd,
    thresher_folder,
    verdict,
)
from benchpg import Postgres, postgres

SOURCE = "bench"
# The targets (issue 22): jobs/s of the median round.
SQLITE_TARGET = 3000  # each SQLite row (one process: SQLite has one writer)
POSTGRES_TARGET = 2000  # PostgreSQL with 4 worker processes


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
    build: Build
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


def expected_jobs(leaves: int, fanout: int) -> int:
    groups = -(-leaves // fanout)
    return 1 + groups + leaves + groups + 1  # root, groups, leaves, group commits, root commit


def expected_results(leaves: int, fanout: int) -> int:
    return leaves + -(-leaves // fanout) + 1  # every leaf and every commit writes one row


# --- running `thresher` -----------------------------------------------------------------


def thresher(home: Path, db: str | None, *args: str, build: Build = THIS) -> str:
    proc = subprocess.run(
        thresher_cmd(home, db, *args),
        env=build.env(),
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
    where = thresher_folder()

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


def run_processes(
    home: Path, db: str | None, case: Case, timeout: float, build: Build
) -> tuple[float, float]:
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
                        env=build.env(),
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
    case: Case,
    work: Path,
    pg: Postgres | None,
    leaves: int,
    fanout: int,
    timeout: float,
    build: Build = THIS,
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
                "-o", f"jobs={leaves}", "-o", f"fanout={fanout}", build=build,
            )  # fmt: skip
            server0 = pg.cpu_seconds() if pg and db else None
            seconds, cpu = run_processes(home, db, case, timeout, build)
            server1 = pg.cpu_seconds() if pg and db else None
            autovacuum = jobs_autovacuum(db) if db else None
            status = json.loads(thresher(home, db, "status", "--json", build=build))
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
            return Result(case, build, int(jobs["done"]), seconds, cpu, server, autovacuum)
    finally:
        shutil.rmtree(row_dir, ignore_errors=True)


# --- report -----------------------------------------------------------------------------


def table(results: Sequence[Result]) -> str:
    """One line per case and build: its median round (by seconds), and every round's rate."""
    head = (
        "| thresher | backend | processes | workers per process | jobs done | seconds | jobs/s"
        " | rounds (jobs/s) | client CPU ms/job | server CPU ms/job | jobs autovacuum/analyze |"
    )
    lines = [head, "|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|"]
    for group in groups(results):
        r = median_result(group)
        server = "n/a" if r.server_cpu is None else f"{1000 * r.server_cpu / r.jobs_done:.2f}"
        vacuum = "-" if r.autovacuum is None else f"{r.autovacuum[0]}/{r.autovacuum[1]}"
        if r.case.backend == "sqlite":
            server = vacuum = "-"
        rounds = ", ".join(f"{g.rate:.0f}" for g in group)
        lines.append(
            f"| {r.build.label or 'this'} | {r.case.backend} | {r.case.processes}"
            f" | {r.case.workers} | {r.jobs_done} | {r.seconds:.2f} | {r.rate:.0f} | {rounds}"
            f" | {1000 * r.client_cpu / r.jobs_done:.2f} | {server} | {vacuum} |"
        )
    return "\n".join(lines)


def groups(results: Sequence[Result]) -> list[list[Result]]:
    """The results by (build, case), in the order first measured."""
    by: dict[tuple[str, Case], list[Result]] = {}
    for r in results:
        by.setdefault((r.build.label, r.case), []).append(r)
    return list(by.values())


def median_result(group: Sequence[Result]) -> Result:
    """The median round; of an even number, the slower of the middle two (a round is
    shown whole, not averaged), so that two rounds never quote the faster one."""
    ordered = sorted(group, key=lambda r: r.seconds)
    return ordered[len(ordered) // 2]


def targets(results: Sequence[Result]) -> list[str]:
    """The targets' lines for this checkout's rows: median rate against each target, and
    against the baseline's median when there is one."""
    lines = []
    medians = {(g[0].build.label, g[0].case): median_result(g) for g in groups(results)}
    for (label, case), r in medians.items():
        if label:
            continue
        if case.backend == "sqlite":
            target = SQLITE_TARGET
        elif case.processes == 4:
            target = POSTGRES_TARGET
        else:
            continue
        before = [b for (lb, c), b in medians.items() if lb and c == case]
        vs = "".join(f"; {b.build.label}: {b.rate:.0f}, x{r.rate / b.rate:.2f}" for b in before)
        lines.append(
            f"target: {case.backend}, {case.processes} process(es) x --workers {case.workers}:"
            f" >= {target} jobs/s: {r.rate:.0f} (median of {len(groups_of(results, r))}"
            f" rounds){vs}: {verdict(r.rate >= target)}"
        )
    return lines


def groups_of(results: Sequence[Result], r: Result) -> list[Result]:
    return [x for x in results if x.build == r.build and x.case == r.case]


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
        "--rounds", type=int, default=1, help="measure each row this many times (1)"
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also measure the Thresher of git revision REV (e.g. main), row for row",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds one row may take (1800)"
    )
    opts = parser.parse_args(argv)
    leaves = 2000 if opts.quick else opts.jobs
    if leaves < 1 or opts.fanout < 1 or opts.rounds < 1:
        parser.error("--jobs, --fanout and --rounds must be positive")
    cases = [c for c in CASES if opts.backend in ("all", c.backend)]

    raise_on_sigterm()
    work = Path(tempfile.mkdtemp(prefix="thresher-bench-"))
    results: list[Result] = []
    load_before = os.getloadavg()[0]
    try:
        origin = thresher_origin()
        precompile(thresher_folder())
        with contextlib.ExitStack() as stack:
            builds = [THIS]
            if opts.baseline:
                builds.append(stack.enter_context(baseline(opts.baseline, work)))
            pg = None
            if any(c.backend == "postgres" for c in cases):
                missing = (
                    "PostgreSQL is not installed (apt-get install postgresql), and"
                    " THRESHER_BENCH_PG is not set; run with --backend sqlite to skip the"
                    " PostgreSQL rows"
                )
                pg = stack.enter_context(postgres(missing, ", otherwise default settings"))
            steps = [(r, c, b) for r in range(opts.rounds) for c in cases for b in builds]
            for n, (round_, case, build) in enumerate(steps, 1):
                print(
                    f"[{n}/{len(steps)}] round {round_ + 1}, {build.label or 'this'},"
                    f" {case.backend}, {case.processes} process(es) x --workers {case.workers} …",
                    end=" ",
                    file=sys.stderr,
                    flush=True,
                )
                result = measure(case, work, pg, leaves, opts.fanout, opts.timeout, build)
                print(
                    f"{result.jobs_done} jobs in {result.seconds:.2f} s ({result.rate:.0f}/s),"
                    f" load {os.getloadavg()[0]:.2f}",
                    file=sys.stderr,
                )
                results.append(result)
            now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
            print(
                f"Thresher job throughput, {now}; {leaves} leaves, fanout {opts.fanout}"
                f" ({expected_jobs(leaves, opts.fanout)} jobs per row), {opts.rounds} round(s);"
                f" {os.cpu_count()} CPUs ({cpu_model()}), {python_build()},"
                f" SQLite {sqlite3.sqlite_version}"
            )
            print(origin)
            for build in builds[1:]:
                print(f"Baseline {build.label}: exported from git, same Python and packages")
            if pg is not None:
                print(f"PostgreSQL: {pg.describe}")
            load_after = os.getloadavg()[0]
            print(f"Load average (1 min) before: {load_before:.2f}, after: {load_after:.2f}")
            print()
            print(table(results))
            print()
            for line in targets(results):
                print(line)
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
