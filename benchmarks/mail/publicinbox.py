"""Mail archive harvest, public-inbox: Thresher against `git clone` of the same epochs.

Makes one public-inbox v2 inbox with Debian's `public-inbox` (`public-inbox-init`, the
messages of `generate_messages` handed to public-inbox's own importer, a second epoch
begun halfway as public-inbox does when one is full), serves it with
`public-inbox-httpd` on 127.0.0.1, then harvests it twice with each tool, first into
nothing and then with nothing changed:

- Thresher: `thresher run` of a `publicinbox` source (`delay=0`): the epochs fetched
  into its mirrors, every message parsed, keyed and stored in SQLite with its search
  index;
- the natural peer, what a mirror of public-inbox is made with: `git clone --mirror`
  of each epoch, then every message read out of the clones (`git rev-list` of the
  commits, `git cat-file --batch` of each commit's `m`, written to one file), by a
  shell script; its second harvest is `git fetch` in each clone (what grokmirror and
  `public-inbox-fetch` do), then the same read.

It prints messages, seconds, messages/s, CPU s, peak RSS and the requests the server
logged (with the POSTs to git-upload-pack among them: a pack, or with git's protocol v2 a
ref listing too), and the CPU model.

    python3 benchmarks/mail/run.py --publicinbox                   # 50 000 messages
    python3 benchmarks/mail/run.py --publicinbox --messages 2000   # smoke run

Needs public-inbox and git (Debian's packages `public-inbox`, `git`). The results also
go to benchmarks/mail/results-publicinbox.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
# The public-inbox installation the tests make: the same tools, the same server.
sys.path.insert(0, str(HERE.parent.parent / "tests"))
from benchlib import BenchError, bench_run, child_env, cpu_model, python_build, thresher_version  # noqa: E402

from mail.run import Usage, run_measured, tail  # noqa: E402
from public_inbox import (  # noqa: E402
    Logged,
    PublicInboxes,
    PublicInboxHTTPD,
    missing_reason,
)

RESULTS = HERE / "results-publicinbox.json"
INBOX = "bench"
ADDRESS = f"{INBOX}@example.org"
SEED = 20261202
MONTHS = [f"{y}-{m:02d}" for y in (2019, 2020, 2021, 2022) for m in range(1, 13)] + [
    f"2023-{m:02d}" for m in range(1, 3)
]


def build_inbox(root: Path, messages: int) -> tuple[int, list[int]]:
    """The inbox, in two epochs; its message count and epochs. Run in a child process."""
    from thresher.archives.demo_messages import generate_messages

    inboxes = PublicInboxes(root)
    inbox = inboxes.init(INBOX)
    per_month = -(-messages // len(MONTHS))
    by_month = generate_messages(ADDRESS, MONTHS, per_month, seed=SEED)
    mail = [raw for month in MONTHS for raw in by_month[month]][:messages]
    half = len(mail) // 2
    for start in range(0, half, 5000):
        inbox.import_many(mail[start : min(half, start + 5000)])
    inbox.new_epoch()
    for start in range(half, len(mail), 5000):
        inbox.import_many(mail[start : start + 5000])
    return len(inbox.message_ids()), inbox.epochs()


@dataclass
class Harvest:
    usage: Usage
    messages: int
    requests: int
    packs: int
    statuses: dict[str, int]

    @property
    def rate(self) -> float:
        return self.messages / self.usage.seconds if self.usage.seconds else 0.0


@dataclass
class Row:
    tool: str
    version: str
    first: Harvest
    second: Harvest


def _traffic(hits: Sequence[Logged]) -> tuple[int, int, dict[str, int]]:
    statuses: dict[str, int] = {}
    for h in hits:
        what = h.path.split("?")[0].rsplit("/", 1)[-1] or "inbox"
        key = f"{h.method} {h.status} {what}"
        statuses[key] = statuses.get(key, 0) + 1
    packs = sum(1 for h in hits if h.path.endswith("/git-upload-pack"))
    return len(hits), packs, dict(sorted(statuses.items()))


def _thresher(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "thresher", "--home", str(home), *args]


def run_thresher(server: PublicInboxHTTPD, work: Path, timeout: float) -> Row:
    out = work / "thresher"
    out.mkdir()
    home = out / "home"
    add = _thresher(
        home, "source", "add", INBOX, server.url(f"/{INBOX}/"), "--type", "publicinbox",
        "-o", "allow_private=true", "-o", "delay=0",
    )  # fmt: skip
    subprocess.run(add, check=True, capture_output=True, env=child_env(), timeout=120)
    harvests = []
    for n in (1, 2):
        server.reset_log()
        log = out / f"run{n}.log"
        cmd = _thresher(home, "run", INBOX, "--json", "--no-progress")
        usage = run_measured(cmd, out, log, timeout, child_env())
        if usage.returncode != 0:
            raise BenchError(f"thresher run exited {usage.returncode}:\n{tail(log)}")
        requests, packs, statuses = _traffic(server.requests())
        export = subprocess.run(
            _thresher(home, "export", INBOX, "--format", "jsonl"),
            capture_output=True, env=child_env(), timeout=timeout, check=True,
        )  # fmt: skip
        count = export.stdout.count(b"\n")
        harvests.append(Harvest(usage, count, requests, packs, statuses))
    return Row("thresher", thresher_version(untracked=True), harvests[0], harvests[1])


# Clone (or fetch) every epoch, then read every message out: each commit's `m`.
_PEER = r"""
set -euo pipefail
base=$1 out=$2
shift 2
for n in "$@"; do
    repo=$out/git/$n.git
    if [ -d "$repo" ]; then
        git --git-dir="$repo" fetch -q
    else
        git clone -q --mirror "$base/git/$n.git" "$repo"
    fi
done
: > "$out/messages"
for n in "$@"; do
    repo=$out/git/$n.git
    git --git-dir="$repo" rev-list --reverse HEAD | sed 's/$/:m/' |
        git --git-dir="$repo" cat-file --batch >> "$out/messages"
done
"""


def run_git(server: PublicInboxHTTPD, epochs: list[int], work: Path, timeout: float) -> Row:
    out = work / "git"
    out.mkdir()
    script = out / "peer.sh"
    script.write_text(_PEER)
    harvests = []
    for n in (1, 2):
        server.reset_log()
        log = out / f"run{n}.log"
        cmd = ["bash", str(script), server.url(f"/{INBOX}"), str(out), *map(str, epochs)]
        usage = run_measured(cmd, out, log, timeout, child_env())
        if usage.returncode != 0:
            raise BenchError(f"the git peer exited {usage.returncode}:\n{tail(log)}")
        requests, packs, statuses = _traffic(server.requests())
        # `cat-file --batch` writes "<id> blob <size>" before each object.
        count = 0
        with open(out / "messages", "rb") as f:
            while header := f.readline():
                parts = header.split()
                if len(parts) == 3 and parts[1] == b"blob":
                    count += 1
                    f.seek(int(parts[2]) + 1, os.SEEK_CUR)
        harvests.append(Harvest(usage, count, requests, packs, statuses))
    version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout
    return Row("git clone + cat-file", version.strip(), harvests[0], harvests[1])


def table(rows: Sequence[Row], total: int) -> str:
    lines = [
        "| tool | harvest | messages | seconds | messages/s | CPU s (user+sys) | peak RSS MiB"
        " | requests | upload-pack POSTs |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        for name, h in (("first", r.first), ("unchanged", r.second)):
            u = h.usage
            lines.append(
                f"| {r.tool} | {name} | {h.messages} of {total} | {u.seconds:.1f}"
                f" | {h.rate:.0f} | {u.cpu:.1f} ({u.cpu_user:.1f}+{u.cpu_system:.1f})"
                f" | {u.peak_rss_kib / 1024:.0f} | {h.requests} | {h.packs} |"
            )
    if len(rows) == 2:
        a, b = rows[0].first, rows[1].first
        lines.append(
            f"| **Thresher / git** | first | | {a.usage.seconds / b.usage.seconds:.2f}"
            f" | **{a.rate / b.rate:.2f}** | {a.usage.cpu / b.usage.cpu:.2f}"
            f" | {a.usage.peak_rss_kib / max(1, b.usage.peak_rss_kib):.2f} | | |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=50_000, help="in the inbox (50000)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per harvest")
    parser.add_argument("--keep", action="store_true", help="keep the work folder, print it")
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON results file")
    opts = parser.parse_args(argv)
    why = missing_reason()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 1
    with bench_run("thresher-publicinbox-bench-", opts.keep) as run:
        work = run.work
        started = time.perf_counter()
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            total, epochs = pool.submit(build_inbox, work / "public-inbox", opts.messages).result()
        sizes = {
            n: sum(f.stat().st_size for f in (work / "public-inbox" / "inboxes" / INBOX / "git"
                                               / f"{n}.git").rglob("*") if f.is_file())
            for n in epochs
        }  # fmt: skip
        print(
            f"inbox: {total} messages in epochs {epochs} ({sum(sizes.values()) / 2**20:.1f} MiB"
            f" of git), built in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        load_before = os.getloadavg()
        rows = []
        server = PublicInboxHTTPD(PublicInboxes(work / "public-inbox")).start()
        try:
            print("thresher …", file=sys.stderr)
            rows.append(run_thresher(server, work, opts.timeout))
            print("git clone + cat-file …", file=sys.stderr)
            rows.append(run_git(server, epochs, work, opts.timeout))
        finally:
            server.stop()
        load_after = os.getloadavg()
        now = datetime.datetime.now().astimezone()
        print(
            f"\npublic-inbox benchmark, {now:%Y-%m-%d %H:%M %Z}: inbox `{INBOX}`, {total}"
            f" messages in {len(epochs)} epochs ({sum(sizes.values()) / 2**20:.1f} MiB of git),"
            f" {cpu_model()}, {os.cpu_count()} CPUs, {python_build()}"
        )
        print(f"Load average (1 min) before: {load_before[0]:.2f}, after: {load_after[0]:.2f}")
        for r in rows:
            print(f"  {r.tool}: {r.version}")
        print()
        print(table(rows, total))
        print()
        for r in rows:
            for name, h in (("first", r.first), ("unchanged", r.second)):
                print(f"{r.tool} {name}: {', '.join(f'{k}: {v}' for k, v in h.statuses.items())}")
        ok = all(r.first.messages == total for r in rows) and rows[0].second.packs == 0
        print(f"\nevery tool read all {total} messages, Thresher fetched no pack when unchanged:"
              f" {'yes' if ok else 'NO'}")  # fmt: skip
        run.status = 0 if ok else 1
        opts.results.write_text(
            json.dumps(
                {
                    "date": now.isoformat(timespec="seconds"),
                    "messages": total,
                    "epochs": epochs,
                    "git_bytes": sizes,
                    "cpu": cpu_model(),
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "load_before": load_before[0],
                    "load_after": load_after[0],
                    "rows": [
                        {**asdict(r), "first_messages_per_second": r.first.rate} for r in rows
                    ],
                },
                indent=2,
            )
            + "\n"
        )
        print(f"written to {opts.results}", file=sys.stderr)
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)
    return run.status


if __name__ == "__main__":
    sys.exit(main())
