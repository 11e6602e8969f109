"""Memory per seen URL of Thresher's sieve, against a Python set of the URL strings.

Offers 5 000 000 distinct, realistic URLs (generated in batches, so the generator never
holds more than one batch) to `thresher.frontier.Sieve`, and reports the process's
resident memory at 0.5 M, 1 M, 2 M and 5 M URLs: RSS (VmRSS of /proc/self/status) minus a
baseline taken before the first URL, divided by the URLs seen. The same run with a plain
``set`` of the URL strings is the reference. Each structure is measured in a fresh child
process, so neither inherits the other's heap.

    python3 benchmarks/crawl/sieve_memory.py               # 5 000 000 URLs, both
    python3 benchmarks/crawl/sieve_memory.py --urls 1000000 --only sieve

Target: at most 50 bytes of RSS per seen URL for the sieve.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

BATCH = 10_000
CHECKPOINTS = (500_000, 1_000_000, 2_000_000, 5_000_000)
TARGET = 50  # bytes of RSS per seen URL
STRUCTURES = ("sieve", "set")

_TLDS = ("com", "org", "net", "de", "fr", "io", "co.uk", "edu", "info", "nl")
_SECTIONS = (
    "archives", "pipermail", "wiki", "blog", "news", "docs", "forum", "lists", "p", "users",
)  # fmt: skip
_SYLLABLES = (
    "ka", "ro", "mi", "ten", "sa", "lo", "ve", "dur", "an", "is", "pel", "tho", "rin", "gar",
    "mu", "ne", "sol", "vi", "qua", "bes", "tor",
)  # fmt: skip


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(n)]


class URLs:
    """Distinct URLs that look like a crawl's: some 100 000 hosts, archive, wiki and blog
    paths, a query now and then; 60-110 characters, each made unique by its number."""

    def __init__(self, seed: int = 5) -> None:
        rng = random.Random(seed)
        words = _words(rng, 5000)
        self.words = words
        self.hosts = [
            f"{rng.choice(('www.', 'lists.', 'blog.', '', 'mail.'))}{rng.choice(words)}"
            f"{rng.choice(('', '-', ''))}{rng.choice(words)}.{rng.choice(_TLDS)}"
            for _ in range(100_000)
        ]
        self.seed = seed

    def batches(self, total: int, size: int = BATCH) -> Iterator[list[str]]:
        words, hosts = self.words, self.hosts
        for start in range(0, total, size):
            rng = random.Random(self.seed * 1_000_003 + start)
            batch = []
            for i in range(start, min(total, start + size)):
                scheme = "https" if rng.random() < 0.7 else "http"
                host = rng.choice(hosts)
                section = rng.choice(_SECTIONS)
                kind = rng.random()
                if kind < 0.35:
                    year, month = rng.randint(1998, 2026), rng.randint(1, 12)
                    path = f"/{section}/{rng.choice(words)}/{year}-{month:02d}/msg{i:08d}.html"
                elif kind < 0.6:
                    path = f"/{section}/{rng.choice(words).capitalize()}_{rng.choice(words)}_{i}"
                elif kind < 0.85:
                    path = (
                        f"/{section}/{rng.randint(2005, 2026)}/{rng.randint(1, 12):02d}/"
                        f"{rng.choice(words)}-{rng.choice(words)}-{i:x}/"
                    )
                else:
                    path = f"/{section}/view.php?id={i}&lang={rng.choice(('en', 'de', 'fr'))}"
                batch.append(f"{scheme}://{host}{path}")
            yield batch


def rss_kib(field: str = "VmRSS") -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(structure: str, total: int) -> None:
    """In this process: grow `structure` to `total` URLs; print one JSON line per checkpoint."""
    from thresher.frontier import Sieve

    urls = URLs()
    checkpoints = sorted({c for c in CHECKPOINTS if c < total} | {total})
    sieve = Sieve()
    strings: set[str] = set()
    next(urls.batches(BATCH))  # warm the generator up before the baseline
    base = rss_kib()
    started = time.perf_counter()
    seen = 0
    chars = 0
    for batch in urls.batches(total):
        if structure == "sieve":
            sieve.offer(batch)
        else:
            strings.update(batch)
        seen += len(batch)
        chars += sum(map(len, batch))
        if seen in checkpoints:
            size = len(sieve) if structure == "sieve" else len(strings)
            if size != seen:
                raise RuntimeError(f"{structure} holds {size} URLs after {seen} distinct ones")
            rss = rss_kib()
            print(
                json.dumps(
                    {
                        "structure": structure,
                        "urls": seen,
                        "rss_kib": rss,
                        "delta_kib": rss - base,
                        "bytes_per_url": (rss - base) * 1024 / seen,
                        "peak_bytes_per_url": (rss_kib("VmHWM") - base) * 1024 / seen,
                        "seconds": time.perf_counter() - started,
                        "mean_url_chars": chars / seen,
                    }
                ),
                flush=True,
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--urls", type=int, default=CHECKPOINTS[-1], help="URLs (5000000)")
    parser.add_argument("--only", choices=STRUCTURES, help="measure one structure only")
    parser.add_argument("--child", choices=STRUCTURES, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.urls < BATCH or opts.urls % BATCH:
        parser.error(f"--urls must be a positive multiple of {BATCH}")
    if opts.child:
        measure(opts.child, opts.urls)
        return 0

    rows: dict[tuple[str, int], dict[str, float]] = {}
    for structure in [opts.only] if opts.only else STRUCTURES:
        print(f"{structure}: offering {opts.urls} URLs …", file=sys.stderr, flush=True)
        proc = subprocess.Popen(
            [sys.executable, __file__, "--urls", str(opts.urls), "--child", structure],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            row = json.loads(line)
            rows[structure, row["urls"]] = row
            print(
                f"  {row['urls']:>9} URLs: RSS +{row['delta_kib'] / 1024:.0f} MiB,"
                f" {row['bytes_per_url']:.1f} B/URL, {row['seconds']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        if proc.wait():
            print(f"{structure}: the child exited {proc.returncode}", file=sys.stderr)
            return 1

    counts = sorted({n for _, n in rows})
    mean_chars = next(iter(rows.values()))["mean_url_chars"]
    print(
        f"Memory per seen URL, {opts.urls} distinct URLs of {mean_chars:.0f} characters on"
        " average; RSS above a baseline taken before the first URL"
    )
    print()
    print(
        "| URLs seen | Sieve RSS MiB | Sieve B/URL | Sieve peak B/URL | Sieve s"
        " | set RSS MiB | set B/URL | set s |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|")
    for n in counts:
        cells = [f"{n:,}".replace(",", " ")]
        for structure in STRUCTURES:
            row = rows.get((structure, n))
            if row is None:
                cells += ["-", "-", "-", "-"] if structure == "sieve" else ["-", "-", "-"]
                continue
            cells += [f"{row['delta_kib'] / 1024:.0f}", f"{row['bytes_per_url']:.1f}"]
            if structure == "sieve":
                cells.append(f"{row['peak_bytes_per_url']:.1f}")
            cells.append(f"{row['seconds']:.1f}")
        print("| " + " | ".join(cells) + " |")
    last = rows.get(("sieve", counts[-1]))
    if last is not None:
        ok = last["bytes_per_url"] <= TARGET
        print(
            f"\ntarget: sieve <= {TARGET} B of RSS per seen URL:"
            f" {last['bytes_per_url']:.1f} B at {counts[-1]} URLs, {'met' if ok else 'NOT met'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
