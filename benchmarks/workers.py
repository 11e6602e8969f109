"""Worker scaling on one PostgreSQL store: 1, 2 and 4 `thresher worker` processes.

Four steps, all on a private throwaway PostgreSQL server (as the tests start it):

1. Ingest: the synthetic repository of benchmarks/ingest/run.py (20 000 requests over 20
   loopback hosts, served by a private nginx). For each row (N workers, C jobs each): a
   fresh database and home, `thresher ingest load`, N `thresher worker -c C` processes
   started and registered, then `thresher ingest run --detach`, timed until the run is
   closed; URLs/s, CPU of the workers, of PostgreSQL and of nginx (from /proc), the
   statements and transactions per URL (pg_stat_statements), and checks: one result
   per URL with the site's status, every body stored once, no URL fetched twice.
2. Claims: a `synthetic` source (20 000 leaves, fanout 50: 20 802 jobs), `thresher run
   --detach`, N workers: jobs claimed and committed per second.
3. Sizes: a million rows each of crawl_urls, jobs (the job tree of an ingest of a
   million URLs, half-way through its last page), ingest_requests, ingest_results and
   file_meta, inserted with generate_series through the real schema (URLs of about 80
   bytes), then table and index sizes per million rows; then a million pending jobs.
4. Plans: EXPLAIN (ANALYZE, BUFFERS) of the claim (claim_job), the commit wake-ups
   (wake_commit after each job, wake_ready_commits on each heartbeat), the host lease
   read (get_host_leases) and the ingest page query (ingest_page) on those tables, with the
   parameters a worker sends (custom plan) and as a generic prepared plan.

    python3 benchmarks/workers.py                  # about 15 minutes here
    python3 benchmarks/workers.py --quick          # 2000 requests and leaves, 100 000 rows

Needs nginx (`apt-get install nginx`) and the PostgreSQL server binaries (`postgresql`).
THRESHER_BENCH_PG (a postgresql:// URL of a server where databases may be created and
dropped) uses an existing server instead; then PostgreSQL's CPU is not measured, and
statement counts only if pg_stat_statements is preloaded there. The exit status is 1
when a check fails.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as pgsql

# The other benchmarks, from this folder (run as a script, it is sys.path[0] already).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import BenchError, child_env, free_port, python_build, raise_on_sigterm, thresher_cmd
from benchpg import Postgres, server_version, tests_pg
from ingest.run import HOSTS, Nginx, Site, build_site, check_store, nginx
from jobs import expected_jobs, expected_results
from procstats import stat_fields

ROOT = Path(__file__).resolve().parent.parent
FANOUT = 50  # leaves per group job of the synthetic source
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- PostgreSQL -------------------------------------------------------------------------


def _as_postgres() -> list[str]:
    # tests/pg.py runs the server as `postgres` when we are root (it refuses root).
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _pgss_ready(url: str) -> bool:
    """pg_stat_statements is preloaded and its view exists in the admin database."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(b"SHOW shared_preload_libraries").fetchone()
            if not row or "pg_stat_statements" not in str(row[0]):
                return False
            conn.execute(b"CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    except psycopg.Error:
        return False
    return True


@contextlib.contextmanager
def postgres(statements: bool) -> Iterator[tuple[Postgres, bool]]:
    """The server the rows create their databases on, and whether pg_stat_statements
    counts their statements."""
    url = os.environ.get("THRESHER_BENCH_PG")
    if url:
        yield (
            Postgres(url, None, server_version(url) + " (THRESHER_BENCH_PG)"),
            (statements and _pgss_ready(url)),
        )
        return
    pg_module = tests_pg()
    bindir: Path | None = pg_module.find_pg_bin()
    if bindir is None:
        raise BenchError("PostgreSQL is not installed (apt-get install postgresql)")
    server = pg_module.PgServer(bindir)
    try:
        server.start()
        ready = False
        if statements:
            # The same server, restarted with pg_stat_statements preloaded: `pg_ctl
            # restart` keeps the options it was started with (postmaster.opts).
            with psycopg.connect(server.url, autocommit=True) as conn:
                conn.execute(b"ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
            subprocess.run(
                [*_as_postgres(), str(bindir / "pg_ctl"), "-D", str(server.data),
                 "-l", str(server.dir / "log"), "-w", "restart"],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            ready = _pgss_ready(server.url)
        describe = (
            server_version(server.url)
            + " (private server from tests/pg.py: fsync=off, synchronous_commit=off,"
            " full_page_writes=off, otherwise default settings"
            + (", pg_stat_statements loaded)" if ready else ")")
        )
        yield Postgres(server.url, server.data, describe), ready
    finally:
        server.stop()


@dataclass
class Statement:
    name: str
    calls: int
    total_ms: float
    rows: int

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.calls if self.calls else 0.0


def _shape(text: str) -> str:
    """A query's text with comments, parameters and literals blanked, as a key that the
    text Thresher sends and pg_stat_statements' normalised text share."""
    text = re.sub(r"--[^\n]*", " ", text.replace("%%", "%"))
    # pg_stat_statements replaces constants, NULL included, by $n.
    text = re.sub(
        r"%\(\w+\)s|\$\d+|'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b|\bnull\b", "?", text, flags=re.I
    )
    return re.sub(r"\s+", " ", text).strip().lower()


class Statements:
    """pg_stat_statements of one database, named after Thresher's queries."""

    def __init__(self, admin_url: str, enabled: bool) -> None:
        self.admin_url = admin_url
        self.enabled = enabled
        self._names: dict[str, str] = {}
        if enabled:
            from thresher.store.queries import load_queries

            self._names = {_shape(q): name for name, q in load_queries("postgres").items()}

    def reset(self) -> None:
        if self.enabled:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(b"SELECT pg_stat_statements_reset()")

    def snapshot(self, database: str) -> list[Statement]:
        if not self.enabled:
            return []
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            rows = conn.execute(
                b"SELECT s.query, s.calls, s.total_exec_time, s.rows FROM pg_stat_statements s"
                b" JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s",
                (database,),
            ).fetchall()
        merged: dict[str, Statement] = {}
        for query, calls, total, nrows in rows:
            name = self.name(str(query))
            st = merged.setdefault(name, Statement(name, 0, 0.0, 0))
            st.calls += int(calls)
            st.total_ms += float(total)
            st.rows += int(nrows)
        return sorted(merged.values(), key=lambda s: -s.total_ms)

    def name(self, query: str) -> str:
        shape = _shape(query)
        if shape in self._names:
            return self._names[shape]
        words = " ".join(re.sub(r"--[^\n]*", " ", query).split()[:4])
        return words.upper() if words.upper() in ("BEGIN", "COMMIT", "ROLLBACK") else words


# --- worker processes -------------------------------------------------------------------


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of a live process (0 if it is gone)."""
    try:
        f = stat_fields(pid)
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / CLK_TCK


class Fleet:
    """N `thresher worker -c C` processes on one home and database."""

    def __init__(self, home: Path, db: str, n: int, concurrency: int, logs: Path) -> None:
        self.home, self.db, self.n, self.concurrency, self.logs = home, db, n, concurrency, logs
        self.procs: list[subprocess.Popen[bytes]] = []
        self.returncodes: list[int] = []

    def start(self, timeout: float = 60) -> None:
        """Start the workers and wait until each has its row in `workers`."""
        for i in range(self.n):
            log = open(self.logs / f"worker{i}.log", "wb")  # noqa: SIM115 - closed at once
            with log:
                self.procs.append(
                    subprocess.Popen(
                        thresher_cmd(self.home, self.db, "worker", "-c", str(self.concurrency),
                                     "--name", f"w{i}"),
                        env=child_env(), cwd=self.home.parent, stdout=log,
                        stderr=subprocess.STDOUT, start_new_session=True,
                    )
                )  # fmt: skip
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.db, autocommit=True) as conn:
            while True:
                self.check_alive()
                row = conn.execute(b"SELECT count(*) FROM workers WHERE stopped IS NULL").fetchone()
                if row and int(row[0]) >= self.n:
                    return
                if time.monotonic() > deadline:
                    raise BenchError(f"the workers did not register within {timeout:.0f} s")
                time.sleep(0.05)

    def check_alive(self) -> None:
        for i, proc in enumerate(self.procs):
            if proc.poll() is not None:
                tail = (self.logs / f"worker{i}.log").read_text(errors="replace")[-1500:]
                raise BenchError(f"worker {i} exited {proc.returncode}:\n{tail}")

    def cpu(self) -> float:
        return sum(cpu_of(p.pid) for p in self.procs)

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM, as a scale-in would: every worker must exit 0."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        self.returncodes = [p.returncode if p.returncode is not None else -999 for p in self.procs]

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# --- one measured run -------------------------------------------------------------------


@dataclass
class Row:
    step: str  # ingest or claims
    workers: int
    concurrency: int
    done: int  # URLs (ingest) or jobs (claims)
    seconds: float  # the run's finished - started, as the store recorded them
    wall: float  # from starting the detach command until the run was seen closed
    worker_cpu: float
    pg_cpu: float | None
    nginx_cpu: float | None = None
    nginx_requests: int | None = None
    transactions: int | None = None  # BEGINs counted by pg_stat_statements
    statements: list[Statement] = field(default_factory=list)
    jobs_per_worker: list[int] = field(default_factory=list)
    log_span: tuple[int, int] = (0, 0)  # nginx's access log during the run
    # How often autovacuum vacuumed and analyzed `jobs` during the run (a fresh database):
    # until it does, every update leaves its old index entries for the claims to skip.
    autovacuum: tuple[int, int] | None = None
    sizes: dict[str, dict[str, int]] = field(default_factory=dict)  # the store after it
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0

    def line(self) -> str:
        pg = "?" if self.pg_cpu is None else f"{self.pg_cpu:.1f}"
        return (
            f"{self.done} in {self.seconds:.1f} s ({self.rate:.0f}/s); CPU s: workers"
            f" {self.worker_cpu:.1f}, PostgreSQL {pg}, nginx {self.nginx_cpu or 0:.1f}"
            + (f"; PROBLEMS: {self.problems}" if self.problems else "")
        )


@dataclass
class Bench:
    pg: Postgres
    stats: Statements
    work: Path
    timeout: float

    def db_name(self, db: str) -> str:
        return db.rsplit("/", 1)[1]

    def measure(
        self, step: str, home: Path, db: str, n: int, c: int, detach: Sequence[str],
        server: Nginx | None = None,
    ) -> tuple[Row, Fleet]:  # fmt: skip
        """Start n workers, queue the run with `detach`, wait until it is closed. The
        fleet is returned still running, for the caller to stop (in a finally)."""
        logs = home.parent
        fleet = Fleet(home, db, n, c, logs)
        try:
            fleet.start()
            self.stats.reset()
            cpu0, pg0 = fleet.cpu(), self.pg.cpu_seconds()
            nginx0 = server.cpu_seconds() if server else None
            log0 = server.log_size() if server else 0
            started = time.perf_counter()
            out = subprocess.run(
                thresher_cmd(home, db, *detach), env=child_env(), cwd=home.parent,
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            if out.returncode != 0:
                raise BenchError(f"{' '.join(detach)} exited {out.returncode}: {out.stderr}")
            run_id = _run_id(out.stdout)
            with psycopg.connect(db, autocommit=True) as conn:
                while True:
                    row = conn.execute(
                        b"SELECT outcome, finished - started FROM source_runs WHERE id = %s",
                        (run_id,),
                    ).fetchone()
                    if row and row[0] != "running":
                        break
                    fleet.check_alive()
                    if time.perf_counter() - started > self.timeout:
                        raise BenchError(f"run {run_id} still open after {self.timeout:.0f} s")
                    time.sleep(0.1)
                vacuum = conn.execute(
                    b"SELECT autovacuum_count, autoanalyze_count FROM pg_stat_user_tables"
                    b" WHERE relname = 'jobs'"
                ).fetchone()
            wall = time.perf_counter() - started
            worker_cpu, pg1 = fleet.cpu() - cpu0, self.pg.cpu_seconds()
            statements = self.stats.snapshot(self.db_name(db))
            result = Row(
                step, n, c, 0, float(row[1]), wall, worker_cpu,
                pg1 - pg0 if pg0 is not None and pg1 is not None else None,
            )  # fmt: skip
            if server is not None and nginx0 is not None:
                result.nginx_cpu = server.cpu_seconds() - nginx0
                result.log_span = (log0, server.log_size())
            result.statements = statements
            result.autovacuum = (int(vacuum[0]), int(vacuum[1])) if vacuum else None
            begins = [s.calls for s in statements if s.name == "BEGIN"]
            result.transactions = begins[0] if begins else None
            if row[0] != "ok":
                result.problems.append(f"run {run_id} ended {row[0]}")
            return result, fleet
        except BaseException:
            fleet.kill()
            raise

    def finish(self, row: Row, fleet: Fleet, db: str) -> None:
        """Stop the workers (SIGTERM) and note how the jobs were spread over them."""
        try:
            fleet.stop()
        finally:
            fleet.kill()
        bad = [rc for rc in fleet.returncodes if rc != 0]
        if bad:
            row.problems.append(f"workers exited {fleet.returncodes} after SIGTERM")
        with psycopg.connect(db, autocommit=True) as conn:
            row.jobs_per_worker = [
                int(r[0])
                for r in conn.execute(b"SELECT jobs_done FROM workers ORDER BY owner").fetchall()
            ]

    def ingest_row(self, site: Site, server: Nginx, n: int, c: int, warc: bool) -> Row:
        label = f"ingest-{n}x{c}"
        folder = self.work / label
        home = folder / "home"
        folder.mkdir()
        with self.pg.database(keep=False) as db:
            load = subprocess.run(
                thresher_cmd(home, db, "ingest", "load", str(site.dump), "--json"),
                env=child_env(), cwd=folder, capture_output=True, text=True, timeout=self.timeout,
            )  # fmt: skip
            if load.returncode != 0 or json.loads(load.stdout).get("new") != len(site.urls):
                raise BenchError(f"ingest load: {load.returncode} {load.stdout} {load.stderr}")
            detach = ("ingest", "run", "--detach", "--allow-private", "--delay", "0", "--json")
            row, fleet = self.measure("ingest", home, db, n, c, detach, server)
            self.finish(row, fleet, db)
            lines = server.lines(*row.log_span)
            row.nginx_requests = len(lines)
            asked = collections.Counter(
                (a[0], a[2]) for a in lines if len(a) >= 3 and a[2] != "/robots.txt"
            )
            twice = sum(1 for k in asked.values() if k > 1)
            if sum(asked.values()) != site.fetches or twice:
                row.problems.append(
                    f"nginx served {sum(asked.values())} requests besides robots.txt, the site"
                    f" needs {site.fetches}; {twice} URLs more than once"
                )
            check, _ = check_store(site, home, db, label, warc, folder)
            row.done = check.results
            row.problems += check.problems
            if check.statuses != site.expected_statuses():
                row.problems.append(f"statuses {check.statuses} != {site.expected_statuses()}")
            row.notes.append(
                f"{check.results} results {dict(sorted(check.statuses.items()))},"
                f" {check.file_meta} file_meta rows"
                + (f", {check.warc_records} WARC response records" if warc else "")
            )
            row.sizes = {t: s for t, s in store_sizes(db).items() if s["rows"]}
        shutil.rmtree(folder, ignore_errors=True)
        return row

    def claims_row(self, leaves: int, n: int, c: int) -> Row:
        label = f"claims-{n}x{c}"
        folder = self.work / label
        home = folder / "home"
        folder.mkdir()
        with self.pg.database(keep=False) as db:
            add = subprocess.run(
                thresher_cmd(home, db, "source", "add", "bench", "synthetic:",
                             "-o", f"jobs={leaves}", "-o", f"fanout={FANOUT}"),
                env=child_env(), cwd=folder, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            if add.returncode != 0:
                raise BenchError(f"source add: {add.stderr}")
            detach = ("run", "bench", "--detach", "--json")
            row, fleet = self.measure("claims", home, db, n, c, detach)
            self.finish(row, fleet, db)
            with psycopg.connect(db, autocommit=True) as conn:
                states: dict[str, int] = {
                    str(k): int(v)
                    for k, v in conn.execute(
                        b"SELECT state, count(*) FROM jobs GROUP BY state"
                    ).fetchall()
                }
                res = conn.execute(
                    b"SELECT count(*), count(DISTINCT job_key) FROM synthetic_results"
                ).fetchone()
            row.done = int(states.get("done", 0))
            want = expected_jobs(leaves, FANOUT)
            if states != {"done": want}:
                row.problems.append(f"jobs by state {states}, expected {want} done")
            if not res or res[0] != res[1] or res[0] != expected_results(leaves, FANOUT):
                row.problems.append(f"synthetic_results {res}: not one row per leaf and commit")
        shutil.rmtree(folder, ignore_errors=True)
        return row


def _run_id(stdout: str) -> int:
    """The run a `--detach --json` command queued."""
    for line in stdout.splitlines():
        data = json.loads(line)
        if "run" in data:  # ingest run
            return int(data["run"])
        for source in data.get("sources", []):  # run
            return int(source["run_id"])
    raise BenchError(f"no run id in {stdout!r}")


# --- sizes ------------------------------------------------------------------------------


def store_sizes(db: str) -> dict[str, dict[str, int]]:
    """Rows, heap, TOAST and index bytes of the tables that grow with the work."""
    out: dict[str, dict[str, int]] = {}
    with psycopg.connect(db, autocommit=True) as conn:
        for table in TABLES:
            row = conn.execute(
                pgsql.SQL(
                    "SELECT (SELECT count(*) FROM {t}), pg_relation_size({n}),"
                    " pg_total_relation_size({n}) - pg_relation_size({n})"
                    " - pg_indexes_size({n}), pg_indexes_size({n})"
                ).format(t=pgsql.Identifier(table), n=pgsql.Literal(table))
            ).fetchone()
            assert row is not None
            sizes = {"rows": int(row[0]), "heap": int(row[1]), "toast": int(row[2])}
            sizes["indexes"] = int(row[3])
            for name, size in conn.execute(
                b"SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i"
                b" JOIN pg_class c ON c.oid = i.indexrelid"
                b" WHERE i.indrelid = %s::regclass ORDER BY c.relname",
                (table,),
            ).fetchall():
                sizes[f"index {name}"] = int(size)
            out[table] = sizes
    return out


TABLES = ("crawl_urls", "jobs", "ingest_requests", "ingest_results", "file_meta")

# A URL of about 80 bytes: 20 011 publisher hosts, a DOI-like path. n is the row number.
_URL = (
    "'https://www.pub' || ((n::bigint * 7919) %% 20011) || '.example-journals.org/content/pdf/"
    "10.5555/j' || substr(md5(n::text), 1, 10) || '.' || n || '.pdf'"
)
_SHA1 = "(md5('s' || n) || substr(md5('t' || n), 1, 8))"
_OPTIONS = (
    '{"allow_private": false, "blocklist": "", "delay": 1.0, "force": false,'
    ' "ingest_type": null, "limit": null, "link_source": null, "max_bytes": 134217728,'
    ' "max_hops": 3, "retry": ""}'
)

FILL_SQL = {
    "crawl_urls": f"""
INSERT INTO crawl_urls (source, hash, url, host, depth, seq, discovered_run, fetched_run,
                        state, status, etag, last_modified, digest, fetched_at, warc_file,
                        warc_offset)
SELECT 'crawl-journals', ('x' || substr(md5(n::text), 1, 16))::bit(64)::bigint, {_URL},
       'www.pub' || ((n::bigint * 7919) %% 20011) || '.example-journals.org', n %% 7, n, 1, 1,
       'done', 200, '"' || substr(md5('e' || n), 1, 16) || '"',
       'Tue, 01 Dec 2026 10:00:00 GMT',
       'sha1:' || upper(substr(md5('d' || n) || md5('f' || n), 1, 32)),
       1796100000 + n / 100.0, 'crawl-journals-20261201100000-00042.warc.gz', n::bigint * 15000
FROM generate_series(1, %(rows)s) AS n""",
    "ingest_requests": f"""
INSERT INTO ingest_requests (ingest_type, base_url, link_source, link_source_id,
                             release_stage, ext_ids, created)
SELECT 'pdf', {_URL}, 'unpaywall', '10.5555/j' || substr(md5(n::text), 1, 10) || '.' || n,
       'published', '{{"doi": "10.5555/j' || substr(md5(n::text), 1, 10) || '.' || n || '"}}',
       1796100000
FROM generate_series(1, %(rows)s) AS n
ORDER BY md5(n::text)""",
    "ingest_results": f"""
INSERT INTO ingest_results (ingest_type, base_url, hit, status, terminal_url,
                            terminal_status, terminal_sha1, hops, attempts, updated)
SELECT 'pdf', u.url, CASE WHEN n %% 100 < 91 THEN 1 ELSE 0 END,
       CASE WHEN n %% 100 < 91 THEN 'success' WHEN n %% 100 < 96 THEN 'no-pdf-link'
            WHEN n %% 100 < 99 THEN 'terminal-bad-status' ELSE 'blocked-wall' END,
       u.url, 200, {_SHA1},
       '[{{"url": "' || u.url || '", "status": 200, "kind": "terminal",'
       || ' "mimetype": "application/pdf"}}]', 1, 1796100000 + n / 100.0
FROM generate_series(1, %(rows)s) AS n, LATERAL (SELECT {_URL} AS url) AS u
ORDER BY u.url""",
    "file_meta": f"""
INSERT INTO file_meta (sha1, sha256, md5, size, mimetype, warc_file, warc_offset, first_seen)
SELECT {_SHA1}, md5('a' || n) || md5('b' || n), md5('c' || n), 3000 + n %% 300000,
       'application/pdf', 'ingest-1-20261201070851-' || lpad((n / 5000)::text, 5, '0')
       || '.warc.gz', (n %% 5000) * 60000, 1796100000 + n / 100.0
FROM generate_series(1, %(rows)s) AS n""",
}

# The job table of an ingest of `pages` x 1000 URLs, half-way through its last page, as
# the job system leaves it: page p's job made its 1000 fetch jobs, the next page's job
# (priority -1) and then its own commit ('join', waiting for page p, child of page p-1;
# the root's is 'ingest.commit'), in that order of ids. Pages before the last are done
# with all their fetches; their commits are `waiting` (a commit waits until no child of
# what it waits for is unfinished, and each page has the next page's commit as a
# child). Of the last page's fetches 500 are done, 8 leased, the rest pending.
JOBS_SQL = f"""
WITH b AS (
  SELECT p, k, 2 + (p - 1) * 1002 + k AS id, (p - 1) * 1000 + k + 1 AS n,
         CASE WHEN p = 1 THEN 1 ELSE 2 + (p - 2) * 1002 + 1000 END AS page_id,
         CASE WHEN p = 1 THEN 'run1:ingest'
              ELSE 'run1:ingest/~' || substr(md5('page' || p), 1, 20) || '/next' END AS page_key,
         'run1:ingest/~' || substr(md5('page' || (p + 1)), 1, 20) || '/next' AS next_key,
         CASE WHEN p = 2 THEN 1 ELSE 2 + (p - 3) * 1002 + 1000 END AS prev_page_id
  FROM generate_series(1, %(pages)s) AS p, generate_series(0, 1001) AS k
)
INSERT INTO jobs (id, kind, key, parent_id, waits_for, source, source_run_id, payload, state,
                  attempts, max_attempts, priority, lease_owner, lease_expires, not_before,
                  result, created, updated)
SELECT 1, 'ingest.run', 'run1:ingest', NULL, NULL, 'ingest', 1,
       '{{"options": {_OPTIONS}, "url": "ingest:"}}', 'done', 1, 5, 0, NULL, NULL,
       1796100000, '{{"urls": 1000}}', 1796100000, 1796100000
UNION ALL
SELECT b.id,
       CASE WHEN k < 1000 THEN 'ingest.fetch' WHEN k = 1000 THEN 'ingest.page'
            WHEN p = 1 THEN 'ingest.commit' ELSE 'join' END,
       CASE WHEN k < 1000 THEN page_key || '/' || substr(md5('u' || n), 1, 20)
            WHEN k = 1000 THEN next_key ELSE page_key || '#commit' END,
       CASE WHEN k <= 1000 THEN page_id WHEN p = 1 THEN NULL ELSE prev_page_id END,
       CASE WHEN k = 1001 THEN page_id END,
       'ingest', 1,
       CASE WHEN k < 1000 THEN '{{"allow_private": false, "base_url": "' || {_URL}
                               || '", "blocklist": "", "delay": 1.0, "ingest_type": "pdf",'
                               || ' "max_bytes": 134217728, "max_hops": 3}}'
            WHEN k = 1000 THEN '{{"after": ["pdf", "' || {_URL} || '"], "options": '
                               || '{_OPTIONS}, "taken": ' || (p * 1000) || '}}'
            ELSE '{{}}' END,
       CASE WHEN k = 1001 THEN 'waiting'
            WHEN k = 1000 THEN CASE WHEN p < %(pages)s THEN 'done' ELSE 'pending' END
            WHEN p < %(pages)s OR k < 500 THEN 'done'
            WHEN k < 508 THEN 'leased' ELSE 'pending' END,
       CASE WHEN k = 1001 OR p = %(pages)s AND k >= 500 THEN 0 ELSE 1 END, 5,
       CASE WHEN k = 1000 THEN -1 ELSE 0 END,
       CASE WHEN p = %(pages)s AND k BETWEEN 500 AND 507 THEN 'w0:4242:abcdef' END,
       CASE WHEN p = %(pages)s AND k BETWEEN 500 AND 507 THEN 1896100000 END,
       1796100000,
       CASE WHEN k < 1000 AND (p < %(pages)s OR k < 500)
                 THEN '{{"status": "success", "sha1": "' || {_SHA1} || '"}}'
            WHEN k = 1000 AND p < %(pages)s THEN '{{"urls": 1000}}' END,
       1796100000 + p, 1796100000 + p
FROM b
ORDER BY 1"""

# A second run: a `urls`-like list of `rows` leaf jobs, all pending, under a done root.
PENDING_SQL = """
INSERT INTO jobs (kind, key, parent_id, waits_for, source, source_run_id, payload, state,
                  attempts, max_attempts, priority, not_before, created, updated)
SELECT 'urls.fetch', 'run2:list/' || substr(md5('v' || n), 1, 20), %(root)s, NULL, 'list', 2,
       '{"url": "https://www.example.org/items/' || md5(n::text) || '.html"}', 'pending',
       0, 5, 0, 1796100000, 1796100000, 1796100000
FROM generate_series(1, %(rows)s) AS n"""


@dataclass
class Fill:
    table: str
    rows: int
    seconds: float


def fill(db: str, rows: int) -> tuple[list[Fill], dict[str, dict[str, int]], int]:
    """Insert `rows` rows into each table (jobs: the ingest-shaped run), VACUUM ANALYZE;
    the timings, the sizes, and the number of pages of the ingest-shaped run."""
    pages = max(2, rows // 1000)
    fills: list[Fill] = []
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            b"INSERT INTO source_runs (id, source, started, outcome, root_job_id)"
            b" VALUES (1, 'ingest', 1796100000, 'running', 1),"
            b" (2, 'list', 1796100000, 'running', NULL)"
        )
        for table, text in [*FILL_SQL.items(), ("jobs", JOBS_SQL)]:
            print(f"{table}…", end=" ", file=sys.stderr, flush=True)
            t = time.perf_counter()
            conn.execute(text.encode(), {"rows": rows, "pages": pages})
            fills.append(Fill(table, 0, time.perf_counter() - t))
        conn.execute(b"SELECT setval(pg_get_serial_sequence('jobs', 'id'), max(id)) FROM jobs")
        # With synchronous_commit=off a commit reaches the WAL up to 0.2 s later, and until
        # then VACUUM may not mark its rows visible to all (index-only scans would visit
        # the heap): flush it first.
        conn.execute(b"CHECKPOINT")
        for table in TABLES:
            conn.execute(pgsql.SQL("VACUUM ANALYZE {}").format(pgsql.Identifier(table)))
    sizes = store_sizes(db)
    for f in fills:
        f.rows = sizes[f.table]["rows"]
    return fills, sizes, pages


def add_pending(db: str, rows: int) -> tuple[float, dict[str, int]]:
    """A second run with `rows` pending jobs; seconds, and the jobs sizes after."""
    with psycopg.connect(db, autocommit=True) as conn:
        t = time.perf_counter()
        root = conn.execute(
            b"INSERT INTO jobs (kind, key, source, source_run_id, state, attempts, max_attempts,"
            b" not_before, created, updated) VALUES ('urls.run', 'run2:list', 'list', 2, 'done',"
            b" 1, 5, 1796100000, 1796100000, 1796100000) RETURNING id"
        ).fetchone()
        assert root is not None
        conn.execute(PENDING_SQL.encode(), {"rows": rows, "root": int(root[0])})
        conn.execute(
            b"INSERT INTO jobs (kind, key, parent_id, waits_for, source, source_run_id, state,"
            b" max_attempts, not_before, created, updated) VALUES ('urls.commit',"
            b" 'run2:list#commit', NULL, %s, 'list', 2, 'waiting', 5, 1796100000, 1796100000,"
            b" 1796100000)",
            (int(root[0]),),
        )
        seconds = time.perf_counter() - t
        conn.execute(b"CHECKPOINT")
        conn.execute(b"VACUUM ANALYZE jobs")
    return seconds, store_sizes(db)["jobs"]


def host_leases(db: str, hosts: int) -> None:
    """`hosts` hosts and their addresses in host_leases, a few of them held."""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            b"INSERT INTO workers (owner, hostname, pid, started, heartbeat, boot_id)"
            b" SELECT 'w' || i || ':4242:abcdef', 'vm', 4242 + i, 1796100000, 1796100000, 'boot'"
            b" FROM generate_series(0, 3) AS i"
        )
        conn.execute(
            b"INSERT INTO host_leases (key, owner, expires, next_at)"
            b" SELECT 'host:www.pub' || n || '.example-journals.org',"
            b" CASE WHEN n %% 1000 = 0 THEN 'w' || (n %% 4) || ':4242:abcdef' END,"
            b" CASE WHEN n %% 1000 = 0 THEN 1896100000 END, 1796100000 + n"
            b" FROM generate_series(0, %s - 1) AS n"
            b" UNION ALL SELECT 'ip:10.' || (n / 65536) || '.' || (n / 256 %% 256) || '.'"
            b" || (n %% 256), NULL, NULL, 1796100000 + n FROM generate_series(0, %s - 1) AS n",
            (hosts, hosts),
        )
        conn.execute(b"CHECKPOINT")
        conn.execute(b"VACUUM ANALYZE host_leases")
        conn.execute(b"VACUUM ANALYZE workers")


# --- plans ------------------------------------------------------------------------------


@dataclass
class Plan:
    title: str
    text: str

    def essentials(self) -> list[str]:
        """The lines that say what was read and how long it took."""
        keep = re.compile(
            r"Index|Seq Scan|Bitmap|Rows Removed|Buffers: shared|Execution Time|Planning Time"
            r"|SubPlan|Limit|Nested Loop|Hash|Merge|Sort|Unique|LockRows|Update on"
        )
        return [line for line in self.text.splitlines() if keep.search(line)]


def _positional(query: str) -> tuple[str, list[str]]:
    """A query of load_queries ("%(name)s") as PREPARE wants it ($1…), and the names."""
    names: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, query).replace("%%", "%"), names


def explain(
    db: str, title: str, query_name: str, params: dict[str, Any], generic: bool = False
) -> Plan:
    """EXPLAIN (ANALYZE, BUFFERS) of a Thresher query with these parameters, in a
    transaction that is rolled back (the claim updates, the lease read locks). Custom:
    sent as Thresher sends it (the values are known to the planner); generic: a prepared
    statement's generic plan, which PostgreSQL may switch to after five executions of
    a statement that psycopg prepared (it prepares a query after five)."""
    from thresher.store.queries import load_queries

    query = load_queries("postgres")[query_name]
    with psycopg.connect(db) as conn:
        try:
            if generic:
                text, names = _positional(query)
                conn.execute(b"SET LOCAL plan_cache_mode = force_generic_plan")
                conn.execute(f"PREPARE bench_q AS {text}".encode())
                args = pgsql.SQL(", ").join(pgsql.Literal(params[n]) for n in names)
                cur = conn.execute(
                    pgsql.SQL("EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_q({})").format(args)
                )
            else:
                cur = conn.execute(("EXPLAIN (ANALYZE, BUFFERS) " + query).encode(), params)
            lines = [str(r[0]) for r in cur.fetchall()]
        finally:
            conn.rollback()
    return Plan(title + (" (generic plan)" if generic else ""), "\n".join(lines))


def plans(db: str, pages: int, rows: int) -> list[Plan]:
    now = 1796200000.0
    claim = {"owner": "w1:4243:abcdef", "expires": now + 60, "now": now}
    out = [
        explain(db, f"claim_job, run 1 (ingest of {pages} pages, in its last page)",
                "claim_job", {**claim, "run": 1}),
        explain(db, "claim_job, run 1", "claim_job", {**claim, "run": 1}, generic=True),
        explain(db, f"claim_job, run 2 ({rows} pending jobs)", "claim_job", {**claim, "run": 2}),
    ]  # fmt: skip
    with psycopg.connect(db, autocommit=True) as conn:
        # A host down: the run's first 100 000 jobs wait out a retry's backoff.
        conn.execute(
            b"UPDATE jobs SET not_before = %s WHERE id IN (SELECT id FROM jobs"
            b" WHERE source_run_id = 2 AND state = 'pending' ORDER BY id LIMIT 100000)",
            (now + 3600,),
        )
        conn.execute(b"CHECKPOINT")
        conn.execute(b"VACUUM ANALYZE jobs")
    out += [
        explain(db, "claim_job, run 2 (its first 100000 pending jobs in backoff)",
                "claim_job", {**claim, "run": 2}),
        # After every completion: the last page's commit, with 492 fetches unfinished.
        explain(db, "wake_commit (the last page's, not yet due)", "wake_commit",
                {"job": 2 + (pages - 2) * 1002 + 1000, "now": now}),
        # Every heartbeat: the sweep over the run's waiting commits (none due).
        explain(db, f"wake_ready_commits, run 1 ({pages} waiting commits)",
                "wake_ready_commits", {"run": 1, "now": now}),
    ]  # fmt: skip
    keys = json.dumps(["host:www.pub4711.example-journals.org", "ip:10.0.18.103"])
    out.append(explain(db, "get_host_leases (a host and its address)", "get_host_leases",
                       {"keys": keys}))  # fmt: skip
    with psycopg.connect(db, autocommit=True) as conn:
        # Half the requests have a result: the next page starts at the median URL.
        row = conn.execute(
            b"SELECT base_url FROM ingest_requests ORDER BY ingest_type, base_url"
            b" OFFSET %s LIMIT 1",
            (rows // 2,),
        ).fetchone()
        assert row is not None
        median = str(row[0])
        conn.execute(b"DELETE FROM ingest_results WHERE base_url > %s", (median,))
        conn.execute(b"CHECKPOINT")
        conn.execute(b"VACUUM ANALYZE ingest_results")
    page = {"ingest_type": None, "link_source": None, "force": 0, "retry": "[]", "page": 1000}
    out += [
        explain(db, "ingest_page, the page after the first half (no results past it)",
                "ingest_page", {**page, "after_type": "pdf", "after_url": median}),
        explain(db, "ingest_page", "ingest_page",
                {**page, "after_type": "pdf", "after_url": median}, generic=True),
        explain(db, "ingest_page, a new run's first page (the first half all have results)",
                "ingest_page", {**page, "after_type": "", "after_url": ""}),
    ]  # fmt: skip
    return out


# --- report -----------------------------------------------------------------------------


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def scaling_table(rows: Sequence[Row], unit: str) -> str:
    head = (
        f"| workers x -c | in flight | {unit} | seconds | {unit}/s | vs 1 worker"
        " | worker CPU s | PostgreSQL CPU s | nginx CPU s | CPU ms per item (workers + PG)"
        " | cores busy | transactions per item | claim ms | jobs autovacuum/analyze"
        " | jobs per worker |"
    )
    lines = [head, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    base = next((r.rate for r in rows if r.workers == 1), rows[0].rate if rows else 1.0)
    for r in rows:
        pg = "n/a" if r.pg_cpu is None else f"{r.pg_cpu:.1f}"
        ngx = "-" if r.nginx_cpu is None else f"{r.nginx_cpu:.1f}"
        per = (
            f"{1000 * r.worker_cpu / r.done:.2f} + {1000 * r.pg_cpu / r.done:.2f}"
            if r.done and r.pg_cpu is not None
            else "-"
        )
        busy = (r.worker_cpu + (r.pg_cpu or 0) + (r.nginx_cpu or 0)) / r.seconds
        tx = "-" if r.transactions is None or not r.done else f"{r.transactions / r.done:.2f}"
        claim = next((f"{st.mean_ms:.2f}" for st in r.statements if st.name == "claim_job"), "-")
        vacuum = "-" if r.autovacuum is None else f"{r.autovacuum[0]}/{r.autovacuum[1]}"
        lines.append(
            f"| {r.workers} x {r.concurrency} | {r.workers * r.concurrency} | {r.done}"
            f" | {r.seconds:.1f} | {r.rate:.0f} | {r.rate / base:.2f} | {r.worker_cpu:.1f}"
            f" | {pg} | {ngx} | {per} | {busy:.2f} | {tx} | {claim} | {vacuum}"
            f" | {'/'.join(map(str, r.jobs_per_worker))} |"
        )
    return "\n".join(lines)


def statements_table(row: Row, top: int = 14) -> str:
    if not row.statements:
        return "(no pg_stat_statements)"
    total = sum(s.total_ms for s in row.statements)
    calls = sum(s.calls for s in row.statements)
    lines = [
        f"{row.step} {row.workers} x {row.concurrency}: {calls} statements"
        f" ({calls / max(1, row.done):.1f} per item), {total / 1000:.1f} s of execution"
        " in the server",
        "",
        "| statement | calls | per item | mean ms | total s | share |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for s in row.statements[:top]:
        lines.append(
            f"| {s.name} | {s.calls} | {s.calls / max(1, row.done):.2f} | {s.mean_ms:.3f}"
            f" | {s.total_ms / 1000:.2f} | {100 * s.total_ms / max(total, 1e-9):.0f} % |"
        )
    return "\n".join(lines)


def sizes_table(sizes: dict[str, dict[str, int]], what: dict[str, str]) -> str:
    lines = [
        "| table | rows | heap MiB/M | TOAST MiB/M | indexes MiB/M | total MiB/M"
        " | each index MiB/M |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for table, s in sizes.items():
        per = 1e6 / max(1, s["rows"])
        idx = ", ".join(f"{k[6:]} {_mib(v * per)}" for k, v in s.items() if k.startswith("index "))
        total = s["heap"] + s["toast"] + s["indexes"]
        lines.append(
            f"| {table}{what.get(table, '')} | {s['rows']} | {_mib(s['heap'] * per)}"
            f" | {_mib(s['toast'] * per)} | {_mib(s['indexes'] * per)} | {_mib(total * per)}"
            f" | {idx} |"
        )
    return "\n".join(lines)


def _split(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        n, _, c = part.strip().partition("x")
        out.append((int(n), int(c)))
    return out


STEPS = ("ingest", "claims", "sizes")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20000, help="ingest requests (20000)")
    parser.add_argument("--jobs", type=int, default=20000, help="synthetic leaf jobs (20000)")
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="rows per table for sizes and plans (1e6)"
    )
    parser.add_argument("--quick", action="store_true", help="2000 requests and leaves, 1e5 rows")
    parser.add_argument(
        "--ingest-rows", default="1x8,2x8,4x8",
        help="ingest rows, NxC: N workers with -c C each (1x8,2x8,4x8)",
    )  # fmt: skip
    parser.add_argument(
        "--claim-rows", default="1x4,2x4,4x4", help="claims rows, NxC (1x4,2x4,4x4)"
    )
    parser.add_argument("--only", default=",".join(STEPS), help="steps (ingest,claims,sizes)")
    parser.add_argument(
        "--no-warc-check", dest="warc", action="store_false", help="do not read WARC files back"
    )
    parser.add_argument(
        "--no-statements", dest="statements", action="store_false",
        help="do not load pg_stat_statements (no statement counts)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run (900)")
    parser.add_argument("--results", type=Path, help="also write the results as JSON here")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.requests, opts.jobs, opts.rows = 2000, 2000, 100_000
    steps = [s.strip() for s in opts.only.split(",") if s.strip()]
    if set(steps) - set(STEPS):
        parser.error(f"--only: steps are {','.join(STEPS)}")
    ingest_rows, claim_rows = _split(opts.ingest_rows), _split(opts.claim_rows)

    raise_on_sigterm()
    work = Path(tempfile.mkdtemp(prefix="thresher-workers-"))
    work.chmod(0o755)  # nginx's worker runs as nobody
    load_before = os.getloadavg()
    started = time.perf_counter()
    ingest: list[Row] = []
    claims: list[Row] = []
    problems: list[str] = []
    out: dict[str, Any] = {}
    describe = "PostgreSQL ?"
    status = 0
    try:
        with postgres(opts.statements) as (pg, pgss):
            describe = pg.describe
            bench = Bench(pg, Statements(pg.admin_url, pgss), work, opts.timeout)
            print(describe, file=sys.stderr)
            if "ingest" in steps:
                t = time.perf_counter()
                port = free_port(HOSTS)
                site = build_site(work, port, opts.requests)
                print(f"site built in {time.perf_counter() - t:.0f} s", file=sys.stderr)
                with nginx(site, work) as server:
                    for n, c in ingest_rows:
                        print(f"ingest, {n} workers x -c {c} …", end=" ", file=sys.stderr)
                        sys.stderr.flush()
                        row = bench.ingest_row(site, server, n, c, opts.warc)
                        print(row.line(), file=sys.stderr)
                        ingest.append(row)
                        problems += [f"ingest {n}x{c}: {p}" for p in row.problems]
            if "claims" in steps:
                for n, c in claim_rows:
                    print(f"claims, {n} workers x -c {c} …", end=" ", file=sys.stderr)
                    sys.stderr.flush()
                    row = bench.claims_row(opts.jobs, n, c)
                    print(row.line(), file=sys.stderr)
                    claims.append(row)
                    problems += [f"claims {n}x{c}: {p}" for p in row.problems]
            if "sizes" in steps:
                with pg.database(keep=False) as db:
                    migrate = subprocess.run(
                        thresher_cmd(work / "sizes-home", db, "source", "list"),
                        env=child_env(), capture_output=True, text=True, timeout=120,
                    )  # fmt: skip
                    if migrate.returncode != 0:
                        raise BenchError(f"thresher source list: {migrate.stderr}")
                    print(f"sizes, {opts.rows} rows each:", end=" ", file=sys.stderr)
                    fills, out["sizes"], out["pages"] = fill(db, opts.rows)
                    out["fills"] = [asdict(f) for f in fills]
                    print("pending jobs…", end=" ", file=sys.stderr, flush=True)
                    out["pending_seconds"], out["jobs_with_pending"] = add_pending(db, opts.rows)
                    host_leases(db, 100_000)
                    print("plans…", file=sys.stderr, flush=True)
                    out["plans"] = [asdict(p) for p in plans(db, out["pages"], opts.rows)]
    except (BenchError, psycopg.Error, subprocess.SubprocessError, OSError) as exc:
        print(f"\nbenchmark failed: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        status = 130
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # What was measured is reported even when a later step failed.
    report(opts, describe, load_before, started, ingest, claims, out)
    if opts.results:
        data = {
            "ingest": [asdict(r) for r in ingest],
            "claims": [asdict(r) for r in claims],
            **out,
            "problems": problems,
        }
        opts.results.write_text(json.dumps(data, indent=1) + "\n")
    for p in problems:
        print(f"PROBLEM: {p}")
    return status or (1 if problems else 0)


def report(
    opts: argparse.Namespace,
    describe: str,
    load_before: tuple[float, float, float],
    started: float,
    ingest: Sequence[Row],
    claims: Sequence[Row],
    out: dict[str, Any],
) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--", "src"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(
        f"Thresher worker scaling, {now}, commit {commit or '?'}"
        + (" with uncommitted changes in src" if dirty else "")
        + f"; {os.cpu_count()} CPUs, {python_build()}; {describe}"
    )
    print(
        f"Load average before: {load_before[0]:.2f}, after: {os.getloadavg()[0]:.2f};"
        f" {time.perf_counter() - started:.0f} s in all"
    )
    if ingest:
        print(f"\n## Ingest: {opts.requests} requests, `thresher worker -c C` x N\n")
        print(scaling_table(ingest, "URLs"))
        for r in ingest:
            print(f"\n{r.workers} x {r.concurrency}: " + "; ".join(r.notes))
        for r in ingest:
            print("\n" + statements_table(r))
        real = ingest[0]
        print(
            f"\nThe store after the {real.workers} x {real.concurrency} row (a real run: rows"
            " updated in place, not vacuumed; per million rows):\n"
        )
        print(sizes_table(real.sizes, {}))
    if claims:
        n = expected_jobs(opts.jobs, FANOUT)
        print(f"\n## Claims: synthetic source, {opts.jobs} leaves, fanout {FANOUT} ({n} jobs)\n")
        print(scaling_table(claims, "jobs"))
        for r in claims:
            print("\n" + statements_table(r, top=8))
    if "plans" in out:
        rows = opts.rows
        print(f"\n## Sizes: {rows} rows per table, fresh (inserted, then VACUUM ANALYZE)\n")
        what = {"jobs": f" (ingest of {out['pages']} pages, 1002 jobs each)"}
        print(sizes_table(out["sizes"], what))
        print("\nInserting took: " + ", ".join(f"{f['table']} {f['seconds']:.1f} s"
                                              for f in out["fills"]))  # fmt: skip
        print(f"\njobs with {rows} pending jobs more ({out['pending_seconds']:.1f} s to insert):\n")
        print(sizes_table({"jobs": out["jobs_with_pending"]}, {"jobs": " (both runs)"}))
        print("\n## Plans\n")
        for p in out["plans"]:
            print(f"### {p['title']}\n\n```\n{p['text']}\n```\n")


if __name__ == "__main__":
    sys.exit(main())
