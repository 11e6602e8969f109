"""This checkout against git revision REV, measured at the same time: the ratio of their
CPU per request (ingest) or per page (crawl), pair by pair.

Why. This machine's speed for CPU-bound work drifts by 30-50 % from one minute to the
next (its host is shared): the same code gave 1.04 and 1.76 ms of CPU per ingest request
an hour apart, so rows measured one after the other cannot show a change of a few per
cent. Two benchmark runs started together share every phase of the machine: an A/A pair
(the same code twice) gave ratios of 0.99-1.01 where runs one after the other differ by
a quarter. The absolute figures of a pair mean nothing (two runs share two cores); only
their ratio does. The targets are checked by `ingest/run.py` and `crawl/run.py`.

    python3 benchmarks/paired.py --baseline main --pairs 5
    python3 benchmarks/paired.py --baseline HEAD~1 --bench crawl

Each pair runs `ingest/run.py --no-pg --only sqlite --no-warc-check` (or `crawl/run.py
--only thresher`) twice at once, each with its own site and nginx, one importing this
checkout's Thresher and one REV's (exported and compiled, as `--baseline` does); which
one starts first alternates. It prints each pair and the median ratio (< 1: this
checkout takes less CPU than REV).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchlib import THIS, BenchError, Build, baseline, cpu_model, median_of

HERE = Path(__file__).resolve().parent
BENCHES = {
    "ingest": (HERE / "ingest" / "run.py", ["--no-pg", "--only", "sqlite", "--no-warc-check"]),
    "crawl": (HERE / "crawl" / "run.py", ["--only", "thresher"]),
}


def cost(bench: str, results: dict[str, Any]) -> tuple[float, float]:
    """(CPU ms per request or page, requests or pages per second) of the Thresher row."""
    row = results["rows"][0]
    if bench == "ingest":
        return float(row["cpu_ms_per_request"]), float(row["requests_per_second"])
    return 1000 * float(row["cpu_seconds"]) / int(row["pages"]), float(row["pages_per_second"])


def run_pair(bench: str, builds: tuple[Build, Build], work: Path, n: int) -> list[float]:
    script, args = BENCHES[bench]
    procs = []
    for i, build in enumerate(builds):
        out = work / f"pair{n}-{i}.json"
        log = open(work / f"pair{n}-{i}.log", "wb")  # noqa: SIM115 - closed below
        cmd = [sys.executable, str(script), *args, "--results", str(out)]
        procs.append((subprocess.Popen(cmd, env=build.env(), stdout=log, stderr=log), log, out))
    costs = []
    for proc, log, out in procs:
        code = proc.wait()
        log.close()
        if code != 0 or not out.exists():
            raise BenchError(f"{script.name} exited {code}; see {log.name}")
        costs.append(cost(bench, json.loads(out.read_text())))
    return [c for pair in costs for c in pair]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, metavar="REV", help="git revision")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of runs (3)")
    parser.add_argument("--bench", choices=sorted(BENCHES), default="ingest")
    opts = parser.parse_args()
    if opts.pairs < 1:
        parser.error("--pairs must be positive")
    unit = "request" if opts.bench == "ingest" else "page"
    print(
        f"{opts.bench}: this checkout against {opts.baseline}, {opts.pairs} pairs, {cpu_model()}",
        flush=True,
    )
    ratios = []
    with tempfile.TemporaryDirectory(prefix="thresher-paired-") as tmp:
        work = Path(tmp)
        with baseline(opts.baseline, work) as base:
            for n in range(opts.pairs):
                order = (THIS, base) if n % 2 == 0 else (base, THIS)
                got = run_pair(opts.bench, order, work, n)
                mine, theirs = (got[:2], got[2:]) if order[0] is THIS else (got[2:], got[:2])
                ratio = mine[0] / theirs[0]
                ratios.append(ratio)
                print(
                    f"pair {n + 1}: this {mine[0]:.2f} ms/{unit} ({mine[1]:.0f}/s),"
                    f" {base.label} {theirs[0]:.2f} ms/{unit} ({theirs[1]:.0f}/s):"
                    f" ratio {ratio:.3f}",
                    flush=True,
                )
    print(
        f"median ratio of CPU per {unit}, this / {opts.baseline}: {median_of(ratios):.3f}"
        f" (pairs: {', '.join(f'{r:.3f}' for r in ratios)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
