"""Bulk ingest load: `thresher ingest load` on a million requests, twice.

Writes a deterministic JSON Lines dump of ingest requests (by default 1 000 000 lines,
each a distinct request: publisher PDFs named by Unpaywall, arXiv and PubMed Central
copies, DOI landing pages, Zenodo datasets, with DOIs and identifiers of the real shapes)
to a temporary folder, then runs `python3 -m thresher --home H ingest load FILE --json`
twice into one store: a first load into an empty store, and a second one of the same
file, which must add nothing. For each load it prints lines/s, wall and CPU seconds and
the peak RSS of the process (`VmHWM` from /proc, sampled every 0.05 s), and the store's
size after it.

    python3 benchmarks/ingest/load.py                        # SQLite, 1 000 000 lines
    python3 benchmarks/ingest/load.py --lines 50000          # smoke run
    python3 benchmarks/ingest/load.py --db postgresql://postgres@127.0.0.1:5432/postgres

With --db, the same two loads run on PostgreSQL too, in a new database the script
creates on that server (and drops afterwards, unless --keep). --gzip writes the dump
gzipped. The exit status is 1 when a load fails or its counts are not the expected ones.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import resource
import secrets
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

# The /proc readers shared by the benchmark scripts, from the folder above.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchlib import python_build
from procstats import hwm_kib

SEED = 20261201  # the same dump on every run

# (DOI prefix, URL template, DOI suffix template): publishers' PDF links as Unpaywall
# gives them. {n} is unique per line, the rest varies with it.
PUBLISHERS = (
    ("10.1016", "https://www.sciencedirect.com/science/article/pii/S{pii}/pdfft?isDTMRedir=true",
     "j.{journal}.{year}.{month:02d}.{n:06d}"),
    ("10.1007", "https://link.springer.com/content/pdf/{doi}.pdf", "s{issn}-0{yy}-{n:05d}-{c}"),
    ("10.1002", "https://onlinelibrary.wiley.com/doi/pdfdirect/{doi}", "{journal}.{year}{n:05d}"),
    ("10.1371", "https://journals.plos.org/plosone/article/file?id={doi}&type=printable",
     "journal.pone.{n:07d}"),
    ("10.3390", "https://www.mdpi.com/{issn4}/{vol}/{issue}/{art}/pdf",
     "{journal}{vol}{issue:02d}{n:05d}"),
    ("10.1093", "https://academic.oup.com/{journal}/article-pdf/{vol}/{issue}/{n}/{c}/{journal}{n}.pdf",
     "{journal}/{code}{n}"),
    ("10.1038", "https://www.nature.com/articles/{suffix}.pdf", "s{issn}-{yy}-{n:05d}-{c}"),
    ("10.1080", "https://www.tandfonline.com/doi/pdf/{doi}?download=true",
     "{issn}.{year}.{n:07d}"),
)  # fmt: skip
JOURNALS = ("cell", "jbc", "neuron", "anie", "chem", "ijms", "nar", "bioinformatics", "ejor")
STAGES = ("published", "published", "published", "accepted", "submitted")


def _publisher(rnd: random.Random, n: int) -> tuple[str, str]:
    prefix, url, suffix = PUBLISHERS[n % len(PUBLISHERS)]
    year = rnd.randint(1995, 2025)
    values: dict[str, Any] = {
        "n": n,
        "journal": rnd.choice(JOURNALS),
        "year": year,
        "yy": year % 100,
        "month": rnd.randint(1, 12),
        "issn": rnd.randint(10000, 99999),
        "issn4": f"{rnd.randint(1000, 9999)}-{rnd.randint(1000, 9999)}",
        "vol": rnd.randint(1, 60),
        "issue": rnd.randint(1, 24),
        "art": rnd.randint(1, 999),
        "c": rnd.randint(0, 9),
        "code": rnd.choice(("gkz", "btz", "mnras", "jxb")),
        "pii": f"{rnd.randint(0, 9999):04d}{rnd.randint(0, 9999):04d}{n:08d}",
    }
    values["suffix"] = suffix.format(**values)
    doi = f"{prefix}/{values['suffix']}"
    return doi, url.format(doi=doi, **values)


def request_line(rnd: random.Random, i: int) -> dict[str, Any]:
    """The i-th request of the dump: distinct from every other by construction."""
    kind = rnd.random()
    if kind < 0.70:
        doi, url = _publisher(rnd, i)
        line: dict[str, Any] = {
            "ingest_type": "pdf",
            "base_url": url,
            "link_source": "unpaywall",
            "link_source_id": doi,
            "release_stage": rnd.choice(STAGES),
            "ext_ids": {"doi": doi},
        }
        if rnd.random() < 0.5:
            line["request"] = {"oa_status": rnd.choice(("gold", "green", "hybrid", "bronze"))}
        return line
    if kind < 0.80:
        arxiv = f"{rnd.randint(7, 25):02d}{rnd.randint(1, 12):02d}.{i:07d}v{rnd.randint(1, 4)}"
        return {
            "ingest_type": "pdf",
            "base_url": f"https://arxiv.org/pdf/{arxiv}",
            "link_source": "arxiv",
            "link_source_id": arxiv,
            "release_stage": "submitted",
            "ext_ids": {"arxiv": arxiv},
        }
    if kind < 0.88:
        pmcid = f"PMC{1_000_000 + i}"
        xml = rnd.random() < 0.25
        url = (
            f"https://www.ebi.ac.uk/europepmc/webservices/rest/{pmcid}/fullTextXML"
            if xml
            else f"https://europepmc.org/articles/{pmcid}?pdf=render"
        )
        doi, _ = _publisher(rnd, i)
        return {
            "ingest_type": "xml" if xml else "pdf",
            "base_url": url,
            "link_source": "pmc",
            "link_source_id": pmcid,
            "release_stage": "published",
            "ext_ids": {"pmcid": pmcid, "doi": doi},
        }
    if kind < 0.95:
        doi, _ = _publisher(rnd, i)
        return {
            "ingest_type": "html",
            "base_url": f"https://doi.org/{doi}",
            "link_source": "doi",
            "link_source_id": doi,
            "ext_ids": {"doi": doi},
        }
    record = 3_000_000 + i
    name = rnd.choice(("data", "supplementary", "code", "raw-measurements"))
    return {
        "ingest_type": "dataset",
        "base_url": f"https://zenodo.org/record/{record}/files/{name}.zip",
        "link_source": "datacite",
        "link_source_id": f"10.5281/zenodo.{record}",
        "ext_ids": {"doi": f"10.5281/zenodo.{record}"},
    }


def write_dump(path: Path, lines: int, packed: bool) -> int:
    """Write the dump; its size in bytes."""
    rnd = random.Random(SEED)
    opener: Any = gzip.open if packed else open
    out: TextIO
    with opener(path, "wt", encoding="utf-8") as out:
        for i in range(lines):
            out.write(json.dumps(request_line(rnd, i), separators=(",", ":")) + "\n")
    return path.stat().st_size


# --- measuring (as benchmarks/mail/run.py) ----------------------------------------------


@dataclass
class Load:
    seconds: float
    cpu: float
    hwm_kib: int
    returncode: int
    report: dict[str, Any]
    store_bytes: int = 0


def run_measured(cmd: Sequence[str], env: dict[str, str], log: Path, timeout: float) -> Load:
    """Run `cmd`, sampling its VmHWM every 0.05 s while a thread waits for it (wait4
    stops the clock at once and gives its CPU time)."""
    out_path = log.with_suffix(".json")
    with open(log, "wb") as err, open(out_path, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=env)
        ended: list[tuple[float, int, resource.struct_rusage]] = []

        def reap() -> None:
            _, status, usage = os.wait4(proc.pid, 0)
            ended.append((time.perf_counter(), status, usage))

        waiter = threading.Thread(target=reap, daemon=True)
        waiter.start()
        hwm = 0
        try:
            while waiter.is_alive():
                if time.perf_counter() - started > timeout:
                    raise SystemExit(f"{shlex.join(cmd)} took longer than {timeout:.0f} s")
                hwm = max(hwm, hwm_kib(proc.pid))
                waiter.join(0.05)
        finally:
            if waiter.is_alive():
                proc.kill()
                waiter.join()
    end, status, usage = ended[0]
    proc.returncode = os.waitstatus_to_exitcode(status)
    report: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        report = json.loads(out_path.read_text() or "{}")
    return Load(end - started, usage.ru_utime + usage.ru_stime, hwm, proc.returncode, report)


# --- the stores -------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    # Settings come from our flags only, not from the THRESHER_* variables of this shell.
    return {k: v for k, v in os.environ.items() if not k.startswith("THRESHER_")}


@contextlib.contextmanager
def pg_database(admin_url: str, keep: bool) -> Iterator[str]:
    """A new database on the server of `admin_url`, dropped at the end unless `keep`."""
    import psycopg

    name = f"thresher_bench_ingest_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        if not keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
        else:
            print(f"kept database {name}", file=sys.stderr)


def store_bytes(home: Path, db: str | None) -> int:
    if db is None:
        return sum(p.stat().st_size for p in home.glob("thresher.db*"))
    import psycopg

    with psycopg.connect(db) as conn:
        row = conn.execute("SELECT pg_total_relation_size('ingest_requests')").fetchone()
    return int(row[0]) if row else 0


def versions(db: str | None) -> str:
    parts = [f"{python_build()}", f"SQLite {sqlite3.sqlite_version}"]
    if db:
        import psycopg

        with psycopg.connect(db) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        parts.append(f"PostgreSQL {row[0] if row else '?'}")
    commit = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "status", "--porcelain", "--", "../../src"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    parts.append(f"commit {commit or '?'}" + (" + changes" if dirty else ""))
    return ", ".join(parts)


def run_backend(
    label: str, dump: Path, home: Path, db: str | None, lines: int, timeout: float
) -> tuple[list[Load], list[str]]:
    """Two loads of the dump into one store; the loads and what went wrong."""
    cmd = [sys.executable, "-m", "thresher", "--home", str(home)]
    if db:
        cmd += ["--db", db]
    cmd += ["ingest", "load", str(dump), "--json"]
    loads: list[Load] = []
    problems: list[str] = []
    for n in (1, 2):
        load = run_measured(cmd, child_env(), home.parent / f"{label}-load{n}.log", timeout)
        load.store_bytes = store_bytes(home, db)
        loads.append(load)
        r = load.report
        expected = (lines, 0, 0) if n == 1 else (0, lines, 0)
        got = (r.get("new"), r.get("duplicate"), r.get("rejected"))
        if load.returncode != 0:
            log = (home.parent / f"{label}-load{n}.log").read_text(errors="replace")
            problems.append(f"{label} load {n} exited {load.returncode}: {log[-500:]}")
        elif got != expected:
            problems.append(f"{label} load {n}: new, duplicate, rejected {got}, not {expected}")
    return loads, problems


def table(rows: list[tuple[str, int, Load]], lines: int) -> str:
    out = [
        "| store | load | new | duplicate | rejected | seconds | lines/s | CPU s"
        " | peak RSS MiB | store MiB |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for label, n, load in rows:
        r = load.report
        out.append(
            f"| {label} | {n} | {r.get('new', '?')} | {r.get('duplicate', '?')}"
            f" | {r.get('rejected', '?')} | {load.seconds:.1f} | {lines / load.seconds:,.0f}"
            f" | {load.cpu:.1f} | {load.hwm_kib / 1024:.0f} | {load.store_bytes / 2**20:.0f} |"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--lines", type=int, default=1_000_000, help="requests (1000000)")
    parser.add_argument(
        "--db", metavar="URL", help="also PostgreSQL: a server where a database may be created"
    )
    parser.add_argument("--gzip", action="store_true", help="write the dump gzipped")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per load (3600)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (and database)")
    opts = parser.parse_args(argv)
    if opts.lines < 1:
        parser.error("--lines must be positive")
    work = Path(tempfile.mkdtemp(prefix="thresher-ingest-bench-"))
    status = 0
    try:
        dump = work / ("requests.jsonl.gz" if opts.gzip else "requests.jsonl")
        started = time.perf_counter()
        size = write_dump(dump, opts.lines, opts.gzip)
        print(
            f"dump: {opts.lines} requests, {size / 2**20:.1f} MiB{' gzipped' if opts.gzip else ''},"
            f" written in {time.perf_counter() - started:.1f} s; {os.cpu_count()} cores,"
            f" {versions(opts.db)}",
            file=sys.stderr,
        )
        load_before = os.getloadavg()[0]
        rows: list[tuple[str, int, Load]] = []
        problems: list[str] = []
        backends: list[tuple[str, str | None]] = [("sqlite", None)]
        if opts.db:
            backends.append(("postgres", opts.db))
        for label, admin in backends:
            home = work / f"home-{label}"
            print(f"{label} …", end=" ", file=sys.stderr, flush=True)
            with contextlib.ExitStack() as stack:
                db = stack.enter_context(pg_database(admin, opts.keep)) if admin else None
                loads, trouble = run_backend(label, dump, home, db, opts.lines, opts.timeout)
            print("done" if not trouble else "FAILED", file=sys.stderr)
            rows += [(label, n, load) for n, load in enumerate(loads, 1)]
            problems += trouble
        print(
            f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after",
            file=sys.stderr,
        )
        print(table(rows, opts.lines))
        for label, n, load in rows:
            if n == 2 and load.report.get("new") == 0:
                print(f"{label}: the second load added 0 (duplicate {load.report['duplicate']})")
        for problem in problems:
            print(f"PROBLEM: {problem}")
            status = 1
    finally:
        if opts.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
