"""The mail benchmark's NNTP rows: Thresher's `nntp` type and Perceval's `nntp` backend
reading one newsgroup from Debian's public-inbox-nntpd on 127.0.0.1.

The group holds the pipermail archive's messages (the same generator, seed, months and
count): an inbox made by `public-inbox-init` (v2, index level `basic`) with a
`newsgroup`, filled through public-inbox's own importer (tests/public_inbox.py),
served by `public-inbox-nntpd -W0` on 127.0.0.1:119 (Perceval's backend connects to
port 119 only). Each tool harvests it twice into an empty store or file, then once more
with nothing changed; the server's own log counts the commands each harvest sent.
Thresher runs with `delay=0` (Perceval pauses never): both read as fast as the server
answers, one connection each.

    python3 benchmarks/mail/run.py --nntp-only                       # the NNTP rows alone
    python3 benchmarks/mail/run.py --nntp-only --months 3 --per-month 50  # smoke run
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from benchlib import BenchError, child_env, measure_tree, peer_venv

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

GROUP = "test.dev"
PORT = 119  # Perceval's NNTP client takes no port


@dataclass(frozen=True)
class Harvest:
    seconds: float
    cpu_user: float
    cpu_system: float
    maxrss_kib: int
    messages: int
    commands: dict[str, int]  # what the server logged, by verb

    @property
    def cpu(self) -> float:
        return self.cpu_user + self.cpu_system


@dataclass(frozen=True)
class NNTPRow:
    tool: str
    version: str
    first: Harvest
    second: Harvest

    @property
    def rate(self) -> float:
        return self.first.messages / self.first.seconds if self.first.seconds else 0.0


def missing() -> str | None:
    from nntp_server import missing_reason

    return missing_reason()


@contextmanager
def news_group(messages: Sequence[bytes], work: Path) -> Iterator[Path]:
    """public-inbox-nntpd serving `messages` on 127.0.0.1:119; yields its log file."""
    from nntp_server import NewsServer, news_inbox

    with socket.socket() as probe:
        # As the server binds: connections of an earlier run may linger in TIME_WAIT.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", PORT))
        except OSError as exc:
            raise BenchError(
                f"127.0.0.1:{PORT} is taken ({exc.strerror}): Perceval needs it"
            ) from None
    inbox = news_inbox(work / "inbox")
    started = time.perf_counter()
    inbox.import_many(messages)
    print(
        f"inbox: {len(messages)} messages imported and indexed in"
        f" {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    try:
        server = NewsServer(inbox, port=PORT).start()
    except RuntimeError as exc:
        raise BenchError(str(exc)) from None
    try:
        yield server.log_path
    finally:
        server.stop()


_LOGGED = re.compile(r"^\[\d+\] ([A-Z]+)")


def commands(log: Path, since: int) -> tuple[dict[str, int], int]:
    """The commands public-inbox-nntpd logged after byte `since`, and the log's end."""
    data = log.read_bytes()
    found: Counter[str] = Counter()
    for line in data[since:].decode("utf-8", "replace").splitlines():
        match = _LOGGED.match(line)
        if match:
            found[match.group(1)] += 1
    return dict(found), len(data)


def measured(cmd: list[str], env: dict[str, str], out: Path) -> tuple[float, float, float, int]:
    """Wall and CPU seconds of `cmd` and its descendants, and the peak RSS of its tree
    (benchlib.measure_tree: the largest process's, or the tree's summed PSS)."""
    with open(out, "wb") as sink:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    m = measure_tree(proc, started, 7200, f"{cmd[0]} took over two hours; see {out}")
    if m.returncode != 0:
        tail = out.read_text(errors="replace")[-2000:]
        raise BenchError(f"{cmd[0]} … exited {m.returncode}:\n{tail}")
    return m.seconds, m.rusage.ru_utime, m.rusage.ru_stime, max(m.hwm_kib, m.tree_pss_kib)


def thresher_row(work: Path, log: Path, version: str) -> NNTPRow:
    home = work / "thresher-home"
    shutil.rmtree(home, ignore_errors=True)
    base = [sys.executable, "-m", "thresher", "--home", str(home)]
    url = f"nntp://127.0.0.1/{GROUP}"
    add = [*base, "source", "add", "bench", url, "-o", "allow_private=true", "-o", "delay=0"]
    subprocess.run(add, env=child_env(), check=True, capture_output=True, timeout=120)
    harvests = []
    _, mark = commands(log, 0)
    for n in (1, 2):
        wall, user, system, rss = measured(
            [*base, "run", "bench", "--json"], child_env(), work / f"thresher-{n}.log"
        )
        sent, mark = commands(log, mark)
        export = subprocess.run(
            [*base, "export", "bench", "--format", "jsonl"],
            env=child_env(),
            capture_output=True,
            check=True,
            timeout=3600,
        )
        stored = len(export.stdout.splitlines())
        harvests.append(Harvest(wall, user, system, rss, stored, sent))
    return NNTPRow("thresher", version, harvests[0], harvests[1])


def perceval_row(work: Path, log: Path, venv: Path) -> NNTPRow:
    perceval = venv / "bin" / "perceval"
    version = subprocess.run(
        [venv / "bin" / "python", "-c", "from importlib.metadata import version;"
         " print(version('perceval'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    env = {**child_env(), "HOME": str(work / "perceval-home")}
    harvests = []
    _, mark = commands(log, 0)
    offset = 1
    for n in (1, 2):
        items = work / f"perceval-{n}.jsonl"
        # The second harvest from the article after the first's last, as GrimoireLab
        # does with the offset it keeps.
        cmd = [str(perceval), "nntp", "127.0.0.1", GROUP, "--offset", str(offset),
               "--json-line", "-o", str(items)]  # fmt: skip
        wall, user, system, rss = measured(cmd, env, work / f"perceval-{n}.log")
        sent, mark = commands(log, mark)
        offsets = [json.loads(line)["data"]["offset"] for line in items.open("rb")]
        if offsets:
            offset = max(offsets) + 1
        harvests.append(Harvest(wall, user, system, rss, len(offsets), sent))
    return NNTPRow("perceval", version, harvests[0], harvests[1])


def nntp_rows(
    messages: Sequence[bytes], work: Path, thresher_version: str, peers: Path, requirement: str
) -> tuple[list[NNTPRow], dict[str, str]]:
    """Harvest the group with each tool; the rows, and why a tool did not run."""
    skipped: dict[str, str] = {}
    rows: list[NNTPRow] = []
    why = missing()
    if why:
        return rows, {"nntp": why}
    with news_group(messages, work) as log:
        rows.append(thresher_row(work, log, thresher_version))
        why = peer_venv(peers, requirement, "import perceval.backends.core.nntp")
        if why:
            skipped["perceval nntp"] = why
        else:
            rows.append(perceval_row(work, log, peers))
    return rows, skipped


def table(rows: Sequence[NNTPRow], messages: int) -> str:
    lines = [
        "NNTP, public-inbox-nntpd on 127.0.0.1 (first harvest, then one with nothing new):",
        "",
        "| tool | messages | seconds | messages/s | CPU s (user+sys) | peak RSS MiB"
        " | commands sent | unchanged run: seconds, commands |",
        "|---|--:|--:|--:|--:|--:|---|---|",
    ]
    for r in rows:
        f, s = r.first, r.second
        sent = ", ".join(f"{k} {v}" for k, v in sorted(f.commands.items()))
        again = ", ".join(f"{k} {v}" for k, v in sorted(s.commands.items()))
        lines.append(
            f"| {r.tool} {r.version} | {f.messages} of {messages} | {f.seconds:.1f}"
            f" | {r.rate:.0f} | {f.cpu:.1f} ({f.cpu_user:.1f}+{f.cpu_system:.1f})"
            f" | {f.maxrss_kib / 1024:.0f} | {sent} | {s.seconds:.1f} s: {again} |"
        )
    by_name = {r.tool: r for r in rows}
    if "thresher" in by_name and "perceval" in by_name and by_name["perceval"].rate:
        ratio = by_name["thresher"].rate / by_name["perceval"].rate
        lines.append(f"| **Thresher / Perceval** | | | **{ratio:.2f}** | | | | |")
    return "\n".join(lines)


def as_json(rows: Sequence[NNTPRow]) -> list[dict[str, object]]:
    return [{**asdict(r), "first_messages_per_second": r.rate} for r in rows]
