"""Crawl real pages: a documentation tree from Debian's packages, served by nginx, crawled
by Thresher and by wget2 with their page requisites, side by side.

The site of `run.py` is uniform: 15 KB pages of 250 tags, each link written once. Real
documentation is not: Python's pages (Debian's `python3.11-doc`) average 100 KB, a third
of them past 4,000 tags of syntax highlighting, and name the same pages many times over
(a sidebar, "#section" links), beside stylesheets, scripts, fonts and images. Such pages
cost a crawler more per page, in places the uniform site never reaches (Thresher's
flattening of big pages for Lexbor, its link resolution).

The tree is served as it is installed (nginx's workers run as `nobody`: it must be
world-readable), from `--start` below it; each crawler fetches every page under the
start's folder (Thresher `--scope prefix`, wget2 `--no-parent`) and what those pages embed,
anywhere on the host. robots.txt is obeyed by both (the tree has none). nginx's access log
says what each asked for: the URLs answered 200 are compared, and those only one of them
fetched are shown.

    python3 benchmarks/crawl/docs.py                  # Python's docs, 3 rounds
    python3 benchmarks/crawl/docs.py --root /usr/share/doc/rust-doc/html --start std/

Needs nginx and wget2 (Debian packages `nginx`, `wget2`) and the tree (`python3.11-doc`,
or `rust-doc` for the second example). Prints the table; no results file.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

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
    python_build,
    thresher_cmd,
    thresher_version,
)

ROOT = Path("/usr/share/doc/python3.11/html")
AGENTS = {"thresher": "thresher-docs-bench/1", "wget2": "wget2-docs-bench/1"}


@dataclass
class Round:
    crawler: str
    seconds: float
    cpu: float
    peak_rss_mib: float
    ok: set[str] = field(default_factory=set)  # URIs answered 200
    statuses: Counter[int] = field(default_factory=Counter)

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())


def access_log(path: Path, agent: str, since: int) -> tuple[set[str], Counter[int]]:
    """The URIs answered 200 and the count of each status, of `agent`'s requests logged
    after byte `since` of the access log."""
    ok: set[str] = set()
    statuses: Counter[int] = Counter()
    with open(path, "rb") as log:
        log.seek(since)
        for line in log.read().decode("utf-8", "replace").splitlines():
            uri, status, who = line.split("\t")
            if who == agent:
                statuses[int(status)] += 1
                if status == "200":
                    ok.add(uri)
    return ok, statuses


def crawl(name: str, url: str, work: Path, logfile: Path, concurrency: int) -> Round:
    out = work / f"{name}-{time.monotonic_ns()}"
    out.mkdir()
    agent = AGENTS[name]
    if name == "thresher":
        cmd = thresher_cmd(
            out / "home", None, "crawl", url, "--scope", "prefix", "--delay", "0",
            "--allow-private", "--concurrency", str(concurrency), "--host-connections",
            str(concurrency), "--user-agent", agent, "--no-sitemaps", "--no-progress", "--json",
        )  # fmt: skip
    else:
        cmd = [
            find_program("wget2", "wget2"), "-q", "-r", "-l", "inf", "--no-parent",
            "--page-requisites", f"--max-threads={concurrency}", f"--user-agent={agent}",
            "--no-host-directories", "-P", str(out / "files"), url,
        ]  # fmt: skip
    since = logfile.stat().st_size
    with open(out / "crawler.log", "wb") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=out, stdout=log, stderr=log, env=child_env(), start_new_session=True
        )
    m = measure_tree(proc, started, 1800, f"{name} took over 1800 s; see {out}/crawler.log")
    if m.returncode not in (0, 8):  # wget2: 8 when a server answered an error (a 404)
        tail = (out / "crawler.log").read_text(errors="replace")[-2000:]
        raise BenchError(f"{name} exited {m.returncode}:\n{tail}")
    if name == "thresher":
        summary = json.loads((out / "crawler.log").read_text().strip().splitlines()[-1])
        if summary.get("status") != "ok":
            raise BenchError(f"thresher: {summary}")
    time.sleep(0.2)  # nginx writes its log line after the answer
    ok, statuses = access_log(logfile, agent, since)
    cpu = m.rusage.ru_utime + m.rusage.ru_stime
    rss = max(m.hwm_kib, m.tree_pss_kib) / 1024
    return Round(name, m.seconds, cpu, rss, ok, statuses)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=ROOT, help=f"the tree to serve ({ROOT})")
    parser.add_argument("--start", default="", help="where to start, below the root ('')")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians shown (3)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight (16)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder, print it")
    opts = parser.parse_args()
    if not opts.root.is_dir():
        parser.error(f"{opts.root} is not a folder (apt-get install python3.11-doc?)")
    with bench_run("thresher-docs-bench-", opts.keep) as run:
        port = free_port()
        logfile = run.work / "access.log"
        http = (
            "    log_format bench '$request_uri\\t$status\\t$http_user_agent';\n"
            f"    access_log {logfile} bench;\n"
            "    include /etc/nginx/mime.types;\n"
            f"    server {{ listen 127.0.0.1:{port}; root {opts.root}; }}\n"
        )

        def ready() -> None:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()

        with nginx_process(run.work / "nginx", http, ready, connections=1024):
            logfile.touch()
            url = f"http://127.0.0.1:{port}/{opts.start}"
            load = os.getloadavg()[0]
            rounds: dict[str, list[Round]] = {"thresher": [], "wget2": []}
            for i in range(opts.repeat):
                for name in rounds:
                    r = crawl(name, url, run.work, logfile, opts.concurrency)
                    rounds[name].append(r)
                    print(f"[{i + 1}/{opts.repeat}] {name}: {len(r.ok)} fetched in"
                          f" {r.seconds:.2f} s, {r.cpu:.2f} s of CPU", flush=True)  # fmt: skip
            report(opts, url, rounds, load)
    return run.status


def report(opts: argparse.Namespace, url: str, rounds: dict[str, list[Round]], load: float) -> None:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"\nDocs crawl, {when}: {url} ({opts.root}{'/' + opts.start if opts.start else ''}),"
          f" concurrency {opts.concurrency}; {cpu_model()}, {os.cpu_count()} CPUs,"
          f" {python_build()}")  # fmt: skip
    print(f"Load average (1 min) before: {load:.2f}, after: {os.getloadavg()[0]:.2f};"
          f" thresher {thresher_version()}\n")  # fmt: skip
    print("| crawler | fetched (200) | requests | seconds | fetched/s | CPU s | CPU ms/fetch"
          " | peak RSS MiB |\n|---|--:|--:|--:|--:|--:|--:|--:|")  # fmt: skip
    med: dict[str, Round] = {}
    for name, runs in rounds.items():
        r = med[name] = sorted(runs, key=lambda r: r.seconds)[(len(runs) - 1) // 2]
        n = len(r.ok)
        per_fetch = 1000 * r.cpu / max(n, 1)
        print(f"| {name} | {n} | {r.requests} | {r.seconds:.2f} | {n / r.seconds:.0f} |"
              f" {r.cpu:.2f} | {per_fetch:.2f} | {r.peak_rss_mib:.0f} |")  # fmt: skip
    ours, theirs = med["thresher"], med["wget2"]
    print(f"\nThresher / wget2: {ours.seconds / theirs.seconds:.1f}x the seconds,"
          f" {ours.cpu / theirs.cpu:.1f}x the CPU (medians by seconds; rounds: thresher"
          f" {', '.join(f'{r.seconds:.2f}' for r in rounds['thresher'])} s, wget2"
          f" {', '.join(f'{r.seconds:.2f}' for r in rounds['wget2'])} s)")  # fmt: skip
    for name, r in med.items():
        bad = {s: c for s, c in sorted(r.statuses.items()) if s != 200}
        print(f"{name}: statuses other than 200: {bad or 'none'}")
    for a, b in (("thresher", "wget2"), ("wget2", "thresher")):
        only = sorted(med[a].ok - med[b].ok)
        shown = ", ".join(only[:5]) + (" …" if len(only) > 5 else "")
        print(f"answered 200 to {a} only: {len(only)}{': ' + shown if only else ''}")


if __name__ == "__main__":
    sys.exit(main())
