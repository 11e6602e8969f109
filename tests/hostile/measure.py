"""Print the hostile probes' figures (peak RSS, seconds, outcome) as a Markdown table.

    .venv/bin/python tests/hostile/measure.py [--src OTHER/src] [--only TEXT] [--hosts 16]

`--src` runs another version's code (say `git archive main | tar -x -C /tmp/main`,
then `--src /tmp/main/src`); without it, this checkout's. Not a test: the tests assert
bounds on the same scenarios (test_hostile_*.py); this prints the numbers.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from hostile_server import Hostile
from scenarios import SCENARIOS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--src", help="the src folder of the code to run (default: this one)")
    parser.add_argument("--only", action="append", help="scenarios whose name has TEXT")
    args = parser.parse_args()
    print("| probe | peak RSS MiB | seconds | outcome |")
    print("|---|---|---|---|")
    for name, scenario in SCENARIOS.items():
        if args.only and not any(text in name for text in args.only):
            continue
        with tempfile.TemporaryDirectory() as tmp, Hostile(hosts=16) as server:
            result = scenario(server, Path(tmp), args.src)
        p = result.probe
        extra = f" {result.facts}" if result.facts else ""
        term = f" (ended {p.term_seconds:.1f} s after SIGTERM)" if p.term_seconds else ""
        print(
            f"| {name} | {p.rss_mib:.0f} | {p.seconds:.1f}{term} | {p.outcome()}{extra} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
