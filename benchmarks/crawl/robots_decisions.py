"""Cost of robots.txt decisions on the crawl's hot path: µs per `RobotsCache.allowed`.

Every URL a crawl admits asks `RobotsCache.allowed(url, now)` once (and again when it is
handed out), so this is per-URL CPU. Three sites:

- ``none``: robots.txt answered 404 (allow all), the commonest case;
- ``bench``: the crawl benchmark's ``User-agent: *`` / ``Allow: /``, on its URLs;
- ``typical``: a MediaWiki-like robots.txt of 60 rules (a tenth with ``*`` or ``$``),
  groups for other crawlers before and after ours;
- ``large``: 2 000 rules in the ``*`` group, a third with ``*``.

Each is asked about 20 000 URLs of its site (paths and queries like a crawl's, a few
percent-encoded); the figure is the median CPU time of 5 rounds. Also timed: parsing
each robots.txt (`on_robots`), and a 500 KiB one.

    python3 benchmarks/crawl/robots_decisions.py
    python3 benchmarks/crawl/robots_decisions.py --json
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable

from thresher.config import DEFAULT_USER_AGENT
from thresher.frontier import RobotsCache

NOW = 1_700_000_000.0
ROUNDS = 5
URLS = 20_000

_WORDS = ("wiki", "index", "Special", "Talk", "User", "File", "Category", "history", "edit")


def typical_robots() -> bytes:
    lines = [
        "# a MediaWiki-like robots.txt",
        "User-agent: MJ12bot",
        "Disallow: /",
        "",
        "User-agent: Mediapartners-Google*",
        "Disallow: /",
        "",
        "User-agent: *",
        "Allow: /w/api.php?action=mobileview&",
        "Allow: /w/load.php?",
        "Allow: /api/rest_v1/?doc",
        "Disallow: /w/",
        "Disallow: /api/",
        "Disallow: /trap/",
        "Disallow: /*?action=edit",
        "Disallow: /*&action=edit",
        "Disallow: /*?sort=",
        "Disallow: /*.php$",
    ]
    rng = random.Random(1)
    for i in range(50):
        word = rng.choice(_WORDS)
        lines.append(f"Disallow: /wiki/{word}:{word}_{i}")
    lines += ["", "User-agent: IsraBot", "Disallow:", "Crawl-delay: 2"]
    return "\n".join(lines).encode()


def large_robots() -> bytes:
    rng = random.Random(2)
    lines = ["User-agent: *"]
    for i in range(2000):
        a, b = rng.choice(_WORDS), rng.choice(_WORDS)
        if i % 3 == 0:
            lines.append(f"Disallow: /{a}/*{b}{i}")
        else:
            lines.append(f"Disallow: /{a}/{b}/{i}/")
    return "\n".join(lines).encode()


def urls(host: str, n: int) -> list[str]:
    rng = random.Random(3)
    out = []
    for i in range(n):
        a, b = rng.choice(_WORDS), rng.choice(_WORDS)
        kind = i % 10
        if kind < 6:
            out.append(f"https://{host}/wiki/{a}_{b}_{i}")
        elif kind < 8:
            out.append(f"https://{host}/w/index.php?title={a}_{i}&action=history")
        elif kind == 8:
            out.append(f"https://{host}/wiki/{a}/%E3%83%84_{i}?from=%2F{b}")
        else:
            out.append(f"https://{host}/{a}/{b}/{i}/page.html")
    return out


def bench_urls(host: str, n: int) -> list[str]:
    return [f"https://{host}/d{i % 97}/page-{i}.html" for i in range(n)]


def cpu(fn: Callable[[], object], rounds: int = ROUNDS) -> float:
    """The median CPU seconds of `rounds` calls of `fn`: CPU time, not wall time, since
    a busy machine stretches the second far more than the first."""
    times = []
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: dict[str, dict[str, float]] = {}
    sites: dict[str, tuple[int, bytes, Callable[[str, int], list[str]]]] = {
        "none": (404, b"", urls),
        "bench": (200, b"User-agent: *\nAllow: /\n", bench_urls),
        "typical": (200, typical_robots(), urls),
        "large": (200, large_robots(), urls),
    }
    for name, (status, body, make_urls) in sites.items():
        host = f"{name}.example.org"
        robots = RobotsCache(DEFAULT_USER_AGENT)
        parse_s = cpu(lambda: robots.on_robots(f"https://{host}/", status, body, NOW))  # noqa: B023
        batch = make_urls(host, URLS)
        allowed = robots.allowed
        verdicts = [allowed(u, NOW) for u in batch]
        assert all(v is not None for v in verdicts)

        def decide(batch: list[str] = batch, allowed: Callable[..., object] = allowed) -> None:
            for u in batch:
                allowed(u, NOW)

        secs = cpu(decide)
        results[name] = {
            "rules_bytes": len(body),
            "parse_ms": round(parse_s * 1000, 3),
            "us_per_decision": round(secs / len(batch) * 1e6, 3),
            "allowed_share": round(sum(1 for v in verdicts if v) / len(verdicts), 3),
        }
    big = (typical_robots() + b"\n") * (500 * 1024 // (len(typical_robots()) + 1))
    robots = RobotsCache(DEFAULT_USER_AGENT)
    results["500KiB"] = {
        "rules_bytes": len(big),
        "parse_ms": round(cpu(lambda: robots.on_robots("https://big/", 200, big, NOW)) * 1000, 1),
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'site':<8} {'bytes':>8} {'parse ms':>9} {'µs/decision':>12} {'allowed':>8}")
    for name, r in results.items():
        print(
            f"{name:<8} {int(r['rules_bytes']):>8} {r['parse_ms']:>9} "
            f"{r.get('us_per_decision', ''):>12} {r.get('allowed_share', ''):>8}"
        )


if __name__ == "__main__":
    main()
