"""Mail archive harvest: Thresher and Perceval side by side on one pipermail archive.

Writes a deterministic Mailman 2 (pipermail) archive of one list, `bench`, to a temporary
folder (by default 50 months, 2019-01 … 2023-02, of 1000 messages each: an index page
and a `YYYY-Month.txt` and `YYYY-Month.txt.gz` per month), serves it with a private nginx
on 127.0.0.1 with an access log, then harvests it with each tool twice: a first harvest
into an empty store, and a second one with nothing changed in the archive. It prints
messages, wall and CPU seconds, messages/s, peak RSS and what the server sent (requests,
bytes, month files downloaded), and Thresher / Perceval ratios.

    python3 benchmarks/mail/run.py                            # 50 months x 1000 messages
    python3 benchmarks/mail/run.py --months 3 --per-month 50  # smoke run, seconds
    python3 benchmarks/mail/run.py --only perceval
    python3 benchmarks/mail/run.py --publicinbox              # public-inbox: against git clone
    python3 benchmarks/mail/run.py --nntp-only                # the NNTP rows alone

Then the same messages as one newsgroup, read over NNTP from Debian's public-inbox-nntpd
by Thresher's `nntp` type and Perceval's `nntp` backend (benchmarks/mail/nntp.py; skipped,
saying why, without the `public-inbox` package or with 127.0.0.1:119 taken; `--no-nntp`
leaves them out). Their results go to benchmarks/mail/results-nntp.json.

Needs nginx (Debian package `nginx`). Perceval is installed from PyPI into a venv of its
own (benchmarks/mail/.venv-peers) on first use; it is never a dependency of Thresher.
The results also go to benchmarks/mail/results.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gzip
import json
import multiprocessing
import os
import platform
import re
import resource
import shlex
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

# The modules shared by the benchmark scripts, from the folder above.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchlib import (
    BenchError,
    bench_run,
    child_env,
    cpu_model,
    find_program,
    free_port,
    measure_tree,
    nginx_process,
    peer_venv,
    python_build,
    thresher_version,
)

HERE = Path(__file__).resolve().parent
PEERS_VENV = HERE / ".venv-peers"
PERCEVAL_REQUIREMENT = "perceval>=1.0,<2"
RESULTS = HERE / "results.json"
TOOLS = ("thresher", "perceval")
LIST = "bench"
LIST_ADDRESS = f"{LIST}@lists.example.org"
FIRST_MONTH = "2019-01"
SEED = 20261201  # of the archive's generator: the same archive on every run
MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip


# --- the archive ------------------------------------------------------------------------


def month_list(first: str, count: int) -> list[str]:
    year, mon = int(first[:4]), int(first[5:7])
    out = []
    for _ in range(count):
        out.append(f"{year:04d}-{mon:02d}")
        year, mon = (year + 1, 1) if mon == 12 else (year, mon + 1)
    return out


def month_file(month: str) -> str:
    """Pipermail's name for a month's file, without the extension: `2019-January`."""
    return f"{month[:4]}-{MONTH_NAMES[int(month[5:7]) - 1]}"


def month_end(month: str) -> float:
    year, mon = int(month[:4]), int(month[5:7])
    year, mon = (year + 1, 1) if mon == 12 else (year, mon + 1)
    return datetime.datetime(year, mon, 1, tzinfo=datetime.UTC).timestamp()


@dataclass(frozen=True)
class Archive:
    docroot: Path  # holds pipermail/bench/
    port: int
    months: list[str]
    messages: int  # messages in the archive, as generated
    txt_bytes: int  # all months' .txt files
    gz_bytes: int  # all months' .txt.gz files
    index_bytes: int
    from_lines: int  # messages with a body line starting "From " (pipermail leaves it as is)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/pipermail/{LIST}/"


def build_archive(docroot: Path, port: int, months: list[str], per_month: int) -> Archive:
    """Write the list's index page and month files; deterministic for (months, per_month).

    Each month file's modification time (so nginx's Last-Modified and ETag) is one hour
    after the month's end, as if Mailman had last written it then."""
    from thresher.archives import demo  # here, in the child process that builds the archive

    folder = docroot / "pipermail" / LIST
    folder.mkdir(parents=True)
    txt_bytes = 0
    by_month = demo.generate_messages(LIST_ADDRESS, months, per_month, SEED)
    gz_sizes: dict[str, int] = {}
    for month, batch in by_month.items():
        data = demo.render_pipermail(batch)
        packed = gzip.compress(data, compresslevel=6, mtime=0)
        stamp = month_end(month) + 3600
        for name, blob in ((".txt", data), (".txt.gz", packed)):
            path = folder / f"{month_file(month)}{name}"
            path.write_bytes(blob)
            os.utime(path, (stamp, stamp))
        txt_bytes += len(data)
        gz_sizes[month] = len(packed)
    # As thresher.archives.demo serves it: the index links each month's .txt.gz, with its size.
    index = demo.pipermail_index_html(LIST, gz_sizes).encode("ascii", "xmlcharrefreplace")
    (folder / "index.html").write_bytes(index)
    total = sum(len(batch) for batch in by_month.values())
    gz_bytes = sum(gz_sizes.values())
    # The raw messages have no envelope and their headers no "From " line: any is in a body.
    from_lines = sum(1 for batch in by_month.values() for raw in batch if b"\nFrom " in raw)
    return Archive(docroot, port, months, total, txt_bytes, gz_bytes, len(index), from_lines)


# --- nginx ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    method: str
    path: str
    status: int
    body_bytes: int  # $body_bytes_sent
    bytes: int  # $bytes_sent: status line, headers and body


@dataclass
class Traffic:
    """What nginx logged between two points: requests, bytes, month files sent."""

    requests: int = 0
    bytes: int = 0
    month_bodies: int = 0  # .txt / .txt.gz requests answered 200 or 206 with a body
    month_body_bytes: int = 0
    index_requests: int = 0
    statuses: dict[str, int] = field(default_factory=dict)  # "200 .txt.gz": n, …

    @classmethod
    def of(cls, hits: Sequence[Hit]) -> Traffic:
        t = cls()
        kinds: Counter[str] = Counter()
        for h in hits:
            t.requests += 1
            t.bytes += h.bytes
            kind = _kind(h.path)
            kinds[f"{h.method} {h.status} {kind}"] += 1
            if kind in (".txt", ".txt.gz") and h.status in (200, 206) and h.body_bytes > 0:
                t.month_bodies += 1
                t.month_body_bytes += h.body_bytes
            if kind == "index":
                t.index_requests += 1
        t.statuses = dict(sorted(kinds.items()))
        return t


def _kind(path: str) -> str:
    """What a request path is: "index", ".txt" or ".txt.gz" (a month file of the list),
    "robots.txt" or "other". nginx logs the index page as …/index.html ($uri after the
    `index` directive), however it was asked for."""
    folder = f"/pipermail/{LIST}/"
    if path in (folder, folder + "index.html"):
        return "index"
    if path.startswith(folder) and "/" not in path[len(folder) :]:
        for ext in (".txt.gz", ".txt"):
            if path.endswith(ext):
                return ext
    return "robots.txt" if path == "/robots.txt" else "other"


@dataclass
class Nginx:
    proc: subprocess.Popen[bytes]
    binary: str
    access_log: Path

    def mark(self) -> int:
        """Where the access log ends now; `hits(mark)` reads what came after it."""
        return self.access_log.stat().st_size

    def hits(self, since: int) -> list[Hit]:
        # nginx writes each line when the request ends, unbuffered (no buffer= in the
        # access_log directive), so every request of a finished harvest is in the file.
        with open(self.access_log, "rb") as f:
            f.seek(since)
            data = f.read()
        out = []
        for line in data.decode("latin-1").splitlines():
            parts = line.split()
            if len(parts) != 5:
                continue
            method, path, status, body, sent = parts
            out.append(Hit(method, path, int(status), int(body), int(sent)))
        return out


@contextlib.contextmanager
def nginx(archive: Archive, work: Path) -> Iterator[Nginx]:
    """A private nginx serving the archive on 127.0.0.1; config, logs and pid in `work`.
    Its workers run as `nobody` when we are root, so the archive is world-readable."""
    for path in (work, archive.docroot):
        path.chmod(0o755)
    conf_dir = work / "nginx"
    access_log = conf_dir / "access.log"
    http = f"""    log_format bench '$request_method $uri $status $body_bytes_sent $bytes_sent';
    access_log {access_log} bench;
    types {{ text/html html; text/plain txt; application/gzip gz; }}
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    server {{
        listen 127.0.0.1:{archive.port};
        root {archive.docroot};
        index index.html;
    }}
"""
    conf_dir.mkdir(parents=True, exist_ok=True)
    access_log.touch()

    def ready() -> None:
        socket.create_connection(("127.0.0.1", archive.port), timeout=1).close()

    with nginx_process(conf_dir, http, ready, connections=1024) as (proc, binary):
        yield Nginx(proc, binary, access_log)


# --- measuring a process tree (with benchlib.measure_tree) ------------------------------


@dataclass
class Usage:
    seconds: float  # wall time, process start to exit
    cpu_user: float  # of the process and every descendant it waited for
    cpu_system: float
    maxrss_kib: int  # ru_maxrss from wait4: at least this script's RSS (see measure_tree)
    hwm_kib: int  # the largest VmHWM of a process of the tree, sampled every 0.05 s
    tree_pss_kib: int  # peak of the summed PSS of the live tree, sampled likewise
    processes: int  # most processes alive at once in the tree (sampled)
    returncode: int

    @property
    def cpu(self) -> float:
        return self.cpu_user + self.cpu_system

    @property
    def peak_rss_kib(self) -> int:
        """The largest process's peak RSS or, when the tree had several processes at once
        and they needed more together, their peak summed PSS."""
        return max(self.hwm_kib, self.tree_pss_kib)


def run_measured(
    cmd: Sequence[str],
    cwd: Path,
    log: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    stdout: Path | None = None,
) -> Usage:
    """Run `cmd` to its end; wall time, CPU and memory of it and its descendants (see
    benchlib.measure_tree). Standard output goes to `stdout` when given, else with
    standard error to `log`."""
    with contextlib.ExitStack() as files:
        err = files.enter_context(open(log, "wb"))
        out = files.enter_context(open(stdout, "wb")) if stdout else err
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, stdout=out, stderr=err if stdout else subprocess.STDOUT,
            env=env, start_new_session=True,
        )  # fmt: skip
    m = measure_tree(
        proc, started, timeout, f"{cmd[0]} took longer than {timeout:.0f} s; see {log}"
    )
    return Usage(
        seconds=m.seconds,
        cpu_user=m.rusage.ru_utime,
        cpu_system=m.rusage.ru_stime,
        maxrss_kib=m.rusage.ru_maxrss,
        hwm_kib=m.hwm_kib,
        tree_pss_kib=m.tree_pss_kib,
        processes=m.processes,
        returncode=m.returncode,
    )


def tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# --- the tools --------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    archive: Archive
    out: Path  # the tool's own folder, kept from the first harvest to the second
    timeout: float


@dataclass
class Counted:
    messages: int  # what the tool holds (Thresher) or emitted (Perceval) after the harvest
    distinct: int | None = None  # distinct Message-IDs among them, when they can be read
    notes: list[str] = field(default_factory=list)


@dataclass
class Harvest:
    usage: Usage
    counted: Counted
    traffic: Traffic
    command: list[str]

    @property
    def rate(self) -> float:
        return self.counted.messages / self.usage.seconds if self.usage.seconds else 0.0


@dataclass
class Row:
    tool: str
    version: str
    first: Harvest
    second: Harvest
    notes: list[str] = field(default_factory=list)


class Tool:
    name = ""

    def available(self) -> str | None:
        """None when the tool can run, else why not."""
        return None

    def version(self) -> str:
        raise NotImplementedError

    def prepare(self, ctx: Context) -> None:
        """Set-up before the first harvest, not measured."""

    def command(self, ctx: Context, second: bool) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def stdout(self, ctx: Context, second: bool) -> Path | None:
        """Where the harvest's standard output goes (None: into its log)."""
        return None

    def count(self, ctx: Context, second: bool) -> Counted:
        raise NotImplementedError


def thresher(*args: str) -> list[str]:
    return [sys.executable, "-m", "thresher", *args]


class Thresher(Tool):
    extra_args: ClassVar[list[str]] = []  # --thresher-args, for experiments

    name = "thresher"

    def __init__(self) -> None:
        self.run_help = ""

    def available(self) -> str | None:
        types = subprocess.run(
            thresher("source", "types"), capture_output=True, text=True, env=child_env(),
            timeout=120,
        )  # fmt: skip
        if types.returncode != 0:
            return f"`thresher source types` failed: {types.stderr.strip()[-500:]}"
        if not any(line.startswith("pipermail") for line in types.stdout.splitlines()):
            return "this thresher has no `pipermail` source type yet (`thresher source types`)"
        help_ = subprocess.run(
            thresher("run", "--help"), capture_output=True, text=True, env=child_env(), timeout=120
        )
        self.run_help = help_.stdout
        return None

    def version(self) -> str:
        return thresher_version(untracked=True)

    def home(self, ctx: Context) -> Path:
        return ctx.out / "home"

    def prepare(self, ctx: Context) -> None:
        cmd = thresher(
            "--home", str(self.home(ctx)), "source", "add", LIST, ctx.archive.url,
            "--type", "pipermail", "-o", "allow_private=true", "-o", "delay=0",
        )  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=120)
        if done.returncode != 0:
            raise BenchError(
                f"`{shlex.join(cmd)}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
            )

    def command(self, ctx: Context, second: bool) -> tuple[list[str], dict[str, str]]:
        cmd = thresher("--home", str(self.home(ctx)), "run", LIST)
        if "--json" in self.run_help:
            cmd.append("--json")
        if "--no-progress" in self.run_help:
            cmd.append("--no-progress")
        return cmd + self.extra_args, child_env()

    def count(self, ctx: Context, second: bool) -> Counted:
        """The messages in the store: `thresher export` when there is one, else SQLite."""
        notes = []
        log = ctx.out / ("run2.log" if second else "run1.log")
        for line in reversed(log.read_text(errors="replace").splitlines()):
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    report = json.loads(line)
                    for each in report.get("sources") or [report]:
                        notes.append(
                            f"{'second' if second else 'first'}: run report "
                            + json.dumps(each, separators=(",", ":"))
                        )
                    break
        export = ctx.out / "export.jsonl"
        cmd = thresher("--home", str(self.home(ctx)), "export", LIST, "--format", "jsonl")
        with open(export, "wb") as out:
            done = subprocess.run(
                cmd, stdout=out, stderr=subprocess.PIPE, env=child_env(), timeout=ctx.timeout
            )
        if done.returncode == 0:
            ids: set[str] = set()
            lines = 0
            with open(export, "rb") as f:
                for raw in f:
                    lines += 1
                    with contextlib.suppress(ValueError, AttributeError):
                        mid = json.loads(raw).get("message_id")
                        if mid:
                            ids.add(mid)
            export.unlink()
            notes.append("counted with `thresher export --format jsonl`")
            return Counted(lines, len(ids) if ids else None, notes)
        export.unlink(missing_ok=True)
        db = self.home(ctx) / "thresher.db"
        if not db.exists():
            raise BenchError(f"no `thresher export` ({done.stderr.decode()[-300:]}) and no {db}")
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            total, distinct = conn.execute(
                "SELECT count(*), count(DISTINCT message_id) FROM messages WHERE source = ?",
                (LIST,),
            ).fetchone()
        notes.append("counted in thresher.db (no `thresher export` yet)")
        return Counted(int(total), int(distinct), notes)


class Perceval(Tool):
    """`perceval pipermail URL --mboxes-path DIR --json-line -o FILE`.

    Perceval keeps no state between runs: each run fetches the index and downloads every
    linked month file dated in or after the month of `--from-date` (all of them without
    it) with a plain GET, overwriting the copy in DIR, then parses every mbox in DIR and
    emits the messages dated at or after `--from-date`. The second harvest passes
    `--from-date` = the newest item date of the first (`updated_on`, which is what
    GrimoireLab's incremental collection does), or nothing with --perceval-rerun full."""

    name = "perceval"
    rerun: ClassVar[str] = "from-date"  # --perceval-rerun

    def __init__(self) -> None:
        self.newest: float | None = None  # the newest item date of the first harvest

    @property
    def python(self) -> Path:
        return PEERS_VENV / "bin" / "python"

    def available(self) -> str | None:
        return peer_venv(
            PEERS_VENV, PERCEVAL_REQUIREMENT, "import perceval.backends.core.pipermail"
        )

    def version(self) -> str:
        out = subprocess.run(
            [self.python, "-c", "import perceval, sys; from importlib.metadata import version;"
             " print(version('perceval'), 'Python', sys.version.split()[0])"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return out.stdout.strip()

    def items(self, ctx: Context, second: bool) -> Path:
        return ctx.out / ("items2.jsonl" if second else "items1.jsonl")

    def command(self, ctx: Context, second: bool) -> tuple[list[str], dict[str, str]]:
        cmd = [
            str(PEERS_VENV / "bin" / "perceval"), "pipermail", ctx.archive.url,
            "--mboxes-path", str(ctx.out / "mboxes"), "--json-line",
            "-o", str(self.items(ctx, second)),
        ]  # fmt: skip
        if second and self.rerun == "from-date" and self.newest is not None:
            since = datetime.datetime.fromtimestamp(self.newest, datetime.UTC)
            cmd += ["--from-date", since.isoformat()]
        # Its own HOME, so that nothing lands in ~/.perceval; temporary copies of each
        # mbox (it parses a copy) in its folder.
        tmp = ctx.out / "tmp"
        tmp.mkdir(exist_ok=True)
        return cmd, {**os.environ, "HOME": str(ctx.out), "TMPDIR": str(tmp)}

    def count(self, ctx: Context, second: bool) -> Counted:
        log = ctx.out / ("run2.log" if second else "run1.log")
        text = log.read_text(errors="replace")
        if "Error!" in text or "Traceback" in text:
            raise BenchError(f"perceval failed (it exits 0 even so); last lines of {log}:\n"
                             f"{tail(log)}")  # fmt: skip
        ids: set[str] = set()
        lines = 0
        newest: float | None = None
        with open(self.items(ctx, second), "rb") as f:
            for raw in f:
                item = json.loads(raw)
                lines += 1
                ids.add(str(item["data"].get("Message-ID") or item["data"].get("Message-Id")))
                stamp = float(item["updated_on"])
                newest = stamp if newest is None else max(newest, stamp)
        if not second:
            self.newest = newest
        notes = []
        which = "second" if second else "first"
        for line in text.splitlines():
            if "MBoxes downloaded" in line or "messages fetched" in line:
                notes.append(f"{which}: {line.split(' - ')[-1]}")
            ignored = re.search(r"messages fetched; (\d+) ignored", line)
            if ignored and int(ignored.group(1)) and not second:
                notes.append(
                    f"{which}: the {ignored.group(1)} ignored are pieces without a Message-ID:"
                    " Python's mailbox.mbox, which it reads with, starts a message at every"
                    " line beginning 'From ', so each piece is the tail of a message whose"
                    " body it emitted cut short there"
                )
        return Counted(lines, len(ids), notes)


ALL: dict[str, Tool] = {t.name: t for t in (Thresher(), Perceval())}


def run_tool(tool: Tool, archive: Archive, server: Nginx, work: Path, timeout: float) -> Row:
    out = work / tool.name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    ctx = Context(archive, out, timeout)
    version = tool.version()
    tool.prepare(ctx)
    harvests = []
    for second in (False, True):
        cmd, env = tool.command(ctx, second)
        log = out / ("run2.log" if second else "run1.log")
        mark = server.mark()
        usage = run_measured(cmd, out, log, timeout, env, tool.stdout(ctx, second))
        traffic = Traffic.of(server.hits(mark))
        if usage.returncode != 0:
            raise BenchError(
                f"{tool.name} exited {usage.returncode} in the {'second' if second else 'first'}"
                f" harvest; last lines of {log}:\n{tail(log)}"
            )
        counted = tool.count(ctx, second)
        harvests.append(Harvest(usage, counted, traffic, cmd))
        print(
            f"{'second' if second else 'first'}: {counted.messages} messages in"
            f" {usage.seconds:.1f} s, {traffic.requests} requests, {traffic.month_bodies}"
            " month bodies;",
            end=" ",
            file=sys.stderr,
        )
    return Row(tool.name, version, harvests[0], harvests[1])


# --- report -----------------------------------------------------------------------------


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def _ratio(a: float, b: float, digits: int = 2) -> str:
    if b == 0:
        return "n/a" if a == 0 else "inf"
    return f"{a / b:.{digits}f}"


def tables(rows: Sequence[Row], archive: Archive) -> str:
    lines = [
        "First harvest (empty store):",
        "",
        "| tool | messages | seconds | messages/s | CPU s (user+sys) | peak RSS MiB"
        " | requests | MiB sent | month bodies |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        h, u = r.first, r.first.usage
        lines.append(
            f"| {r.tool} | {h.counted.messages} of {archive.messages} | {u.seconds:.1f}"
            f" | {h.rate:.0f} | {u.cpu:.1f} ({u.cpu_user:.1f}+{u.cpu_system:.1f})"
            f" | {u.peak_rss_kib / 1024:.0f} | {h.traffic.requests} | {_mib(h.traffic.bytes)}"
            f" | {h.traffic.month_bodies} |"
        )
    by_name = {r.tool: r for r in rows}
    ours, peer = by_name.get("thresher"), by_name.get("perceval")
    if ours and peer:
        a, b = ours.first, peer.first
        lines.append(
            f"| **Thresher / Perceval** | | {_ratio(a.usage.seconds, b.usage.seconds)}"
            f" | **{_ratio(a.rate, b.rate)}** | {_ratio(a.usage.cpu, b.usage.cpu)}"
            f" | {_ratio(a.usage.peak_rss_kib, b.usage.peak_rss_kib)}"
            f" | {_ratio(a.traffic.requests, b.traffic.requests)}"
            f" | {_ratio(a.traffic.bytes, b.traffic.bytes)} | |"
        )
    lines += [
        "",
        "Second harvest (archive unchanged, each tool's store or folder kept):",
        "",
        "| tool | messages after | seconds | CPU s | peak RSS MiB | requests | bytes sent"
        " | month bodies | answers |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        h, u = r.second, r.second.usage
        answers = ", ".join(f"{k}: {v}" for k, v in h.traffic.statuses.items())
        lines.append(
            f"| {r.tool} | {h.counted.messages} | {u.seconds:.1f} | {u.cpu:.1f}"
            f" | {u.peak_rss_kib / 1024:.0f} | {h.traffic.requests} | {h.traffic.bytes}"
            f" | **{h.traffic.month_bodies}** | {answers} |"
        )
    if ours and peer:
        a, b = ours.second, peer.second
        lines.append(
            f"| **Thresher / Perceval** | | {_ratio(a.usage.seconds, b.usage.seconds)}"
            f" | {_ratio(a.usage.cpu, b.usage.cpu)} |"
            f" | {_ratio(a.traffic.requests, b.traffic.requests)}"
            f" | {_ratio(a.traffic.bytes, b.traffic.bytes, 4)}"
            f" | {_ratio(a.traffic.month_bodies, b.traffic.month_bodies)} | |"
        )
    return "\n".join(lines)


def checks(rows: Sequence[Row], archive: Archive) -> tuple[list[str], bool]:
    """Lines saying whether each tool got the archive's messages, and whether all did."""
    out, ok = [], True
    for r in rows:
        c = r.first.counted
        distinct = "" if c.distinct is None else f", {c.distinct} distinct Message-IDs"
        if c.messages == archive.messages and c.distinct in (None, archive.messages):
            out.append(f"{r.tool}: all {archive.messages} messages{distinct}")
        else:
            ok = False
            out.append(
                f"{r.tool}: {c.messages} messages{distinct}, the archive has {archive.messages}"
            )
        if r.tool == "thresher" and r.second.counted.messages != c.messages:
            ok = False
            out.append(
                f"thresher: {r.second.counted.messages} messages after the second harvest,"
                f" {c.messages} after the first"
            )
    return out, ok


def targets(rows: Sequence[Row]) -> list[str]:
    by_name = {r.tool: r for r in rows}
    ours, peer = by_name.get("thresher"), by_name.get("perceval")
    out = []
    if ours and peer and peer.first.rate:
        ratio = ours.first.rate / peer.first.rate
        out.append(
            f"first harvest messages/s >= 3x Perceval's: {ratio:.2f}x,"
            f" {'met' if ratio >= 3 else 'NOT met'}"
        )
    if ours:
        bodies = ours.second.traffic.month_bodies
        out.append(
            f"Thresher downloads 0 month bodies on the unchanged run: {bodies},"
            f" {'met' if bodies == 0 else 'NOT met'}"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--publicinbox" in args:  # the public-inbox row: benchmarks/mail/publicinbox.py
        args.remove("--publicinbox")
        from mail.publicinbox import main as publicinbox_main

        return publicinbox_main(args)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--months", type=int, default=50, help="months in the archive (50)")
    parser.add_argument("--per-month", type=int, default=1000, help="messages a month (1000)")
    parser.add_argument(
        "--first-month", default=FIRST_MONTH, help=f"the archive's first month ({FIRST_MONTH})"
    )
    parser.add_argument(
        "--only", default=",".join(TOOLS), help="tools to run, in order (thresher,perceval)"
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per harvest (3600)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder, print it")
    parser.add_argument(
        "--thresher-args", default="", help="more arguments for 'thresher run' (experiments)"
    )
    parser.add_argument(
        "--perceval-rerun",
        choices=("from-date", "full"),
        default="from-date",
        help="Perceval's second harvest: with --from-date the newest item date of the"
        " first (as GrimoireLab does; the default), or the same command again (full)",
    )
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help=f"JSON results file ({RESULTS.name})"
    )
    parser.add_argument("--no-nntp", action="store_true", help="leave out the NNTP rows")
    parser.add_argument(
        "--nntp-only", action="store_true", help="only the NNTP rows (no pipermail, no nginx)"
    )
    opts = parser.parse_args(args)
    Thresher.extra_args = shlex.split(opts.thresher_args)
    Perceval.rerun = opts.perceval_rerun
    names = [n.strip() for n in opts.only.split(",") if n.strip()]
    if not names or any(n not in ALL for n in names):
        parser.error(f"--only takes a comma-separated list of {', '.join(TOOLS)}")
    if opts.months < 1 or opts.per_month < 1:
        parser.error("--months and --per-month must be positive")
    try:
        months = month_list(opts.first_month, opts.months)
    except (ValueError, IndexError):
        parser.error("--first-month takes YYYY-MM")
    this_month = datetime.datetime.now(datetime.UTC).strftime("%Y-%m")
    if months[-1] >= this_month:
        parser.error(f"the archive's last month, {months[-1]}, must be before {this_month}")
    if opts.nntp_only:
        return nntp_main(opts.first_month, opts.months, opts.per_month, opts.keep)

    rows: list[Row] = []
    skipped: dict[str, str] = {}
    with bench_run("thresher-mail-bench-", opts.keep) as run:
        work = run.work
        find_program("nginx", "nginx")
        tools = []
        for name in names:
            why = ALL[name].available()
            if why:
                skipped[name] = why
                run.status = 1
                print(f"skipping {name}: {why}", file=sys.stderr)
            else:
                tools.append(ALL[name])
        started = time.perf_counter()
        # In a child process, so that this one stays small (it forks the tools).
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            archive = pool.submit(
                build_archive, work / "site", free_port(), months, opts.per_month
            ).result()
        size = archive.txt_bytes + archive.gz_bytes
        print(
            f"archive: {archive.messages} messages in {len(months)} months ({months[0]} …"
            f" {months[-1]}), .txt {_mib(archive.txt_bytes)} MiB, .txt.gz"
            f" {_mib(archive.gz_bytes)} MiB, at {archive.url}, built in"
            f" {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        load_before = os.getloadavg()
        with nginx(archive, work) as server:
            for n, tool in enumerate(tools, 1):
                print(f"[{n}/{len(tools)}] {tool.name} …", end=" ", file=sys.stderr)
                sys.stderr.flush()
                try:
                    rows.append(run_tool(tool, archive, server, work, opts.timeout))
                    print("done", file=sys.stderr)
                except BenchError as exc:
                    print("failed", file=sys.stderr)
                    skipped[tool.name] = f"failed: {exc}"
                    run.status = 1
                if not opts.keep:
                    shutil.rmtree(work / tool.name, ignore_errors=True)
            nginx_version = subprocess.run(
                [server.binary, "-v"], capture_output=True, text=True
            ).stderr.strip()
        load_after = os.getloadavg()
        own_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        now = datetime.datetime.now().astimezone()
        print(
            f"\nMail archive benchmark, {now:%Y-%m-%d %H:%M %Z}: pipermail list `{LIST}`,"
            f" {archive.messages} messages in {len(months)} months ({months[0]} … {months[-1]};"
            f" .txt {_mib(archive.txt_bytes)} MiB, .txt.gz {_mib(archive.gz_bytes)} MiB),"
            f" {os.cpu_count()} CPUs, {python_build()}, {nginx_version}"
        )
        print(
            f"Load average (1 min) before: {load_before[0]:.2f}, after: {load_after[0]:.2f};"
            f" this script's own peak RSS {own_rss:.0f} MiB"
        )
        for r in rows:
            print(f"  {r.tool}: {r.version}")
        if rows:
            print()
            print(tables(rows, archive))
            print()
        lines, ok = checks(rows, archive)
        run.status = run.status or (0 if ok else 1)
        for line in lines:
            print(line)
        for r in rows:
            for note in [*r.first.counted.notes, *r.second.counted.notes]:
                print(f"{r.tool}: {note}")
            if r.tool == "perceval":
                cmd = r.second.command
                how = (
                    f"with --from-date {cmd[cmd.index('--from-date') + 1]}"
                    if "--from-date" in cmd
                    else "with the first one's command (no --from-date)"
                )
                print(f"perceval: second harvest {how}")
        if archive.from_lines:
            print(
                f"archive: {archive.from_lines} messages have a body line starting 'From ',"
                " unescaped as pipermail writes them; a reader that splits at every such line"
                " cuts them short there"
            )
        for line in targets(rows):
            print(f"target: {line}")
        for name, why in skipped.items():
            print(f"{name}: not run, {why}")
        opts.results.write_text(
            json.dumps(
                {
                    "date": now.isoformat(timespec="seconds"),
                    "months": len(months),
                    "per_month": opts.per_month,
                    "messages": archive.messages,
                    "txt_bytes": archive.txt_bytes,
                    "gz_bytes": archive.gz_bytes,
                    "from_lines": archive.from_lines,
                    "archive_bytes": size,
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "nginx": nginx_version,
                    "load_before": load_before[0],
                    "load_after": load_after[0],
                    "script_peak_rss_mib": own_rss,
                    "perceval_rerun": opts.perceval_rerun,
                    "skipped": skipped,
                    "rows": [
                        {
                            **asdict(r),
                            "first_messages_per_second": r.first.rate,
                            "first_cpu_seconds": r.first.usage.cpu,
                            "first_peak_rss_mib": r.first.usage.peak_rss_kib / 1024,
                            "second_peak_rss_mib": r.second.usage.peak_rss_kib / 1024,
                        }
                        for r in rows
                    ],
                },
                indent=2,
            )
            + "\n"
        )
        print(f"\nwritten to {opts.results}", file=sys.stderr)
    if not opts.no_nntp:
        run.status = nntp_main(opts.first_month, opts.months, opts.per_month, opts.keep) or (
            run.status
        )
    return run.status


def nntp_main(first_month: str, count: int, per_month: int, keep: bool) -> int:
    """The NNTP rows: the same messages as a newsgroup of public-inbox-nntpd."""
    from mail import nntp  # benchmarks/mail/nntp.py, beside this file
    from thresher.archives import demo

    months = month_list(first_month, count)
    by_month = demo.generate_messages(LIST_ADDRESS, months, per_month, SEED)
    messages = [raw for month in months for raw in by_month[month]]
    with bench_run("thresher-nntp-bench-", keep) as run:
        load_before = os.getloadavg()
        try:
            rows, skipped = nntp.nntp_rows(
                messages, run.work, thresher_version(untracked=True), PEERS_VENV,
                PERCEVAL_REQUIREMENT,
            )  # fmt: skip
        except BenchError as exc:
            rows, skipped = [], {"nntp": str(exc)}
        load_after = os.getloadavg()
        cpu = cpu_model()
        now = datetime.datetime.now().astimezone()
        print(
            f"\nNNTP benchmark, {now:%Y-%m-%d %H:%M %Z}: {len(messages)} messages in"
            f" {len(months)} months as one group, {cpu}, {os.cpu_count()} CPUs,"
            f" {python_build()}; load average (1 min) before {load_before[0]:.2f},"
            f" after {load_after[0]:.2f}"
        )
        if rows:
            print()
            print(nntp.table(rows, len(messages)))
        for row in rows:
            if row.first.messages != len(messages):
                run.status = 1
                print(f"{row.tool}: {row.first.messages} messages, the group has {len(messages)}")
        for name, why in skipped.items():
            run.status = 1
            print(f"{name}: not run, {why}")
        (HERE / "results-nntp.json").write_text(
            json.dumps(
                {
                    "date": now.isoformat(timespec="seconds"),
                    "messages": len(messages),
                    "cpu": cpu,
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "load_before": load_before[0],
                    "load_after": load_after[0],
                    "skipped": skipped,
                    "rows": nntp.as_json(rows),
                },
                indent=2,
            )
            + "\n"
        )
    return run.status


if __name__ == "__main__":
    sys.exit(main())
