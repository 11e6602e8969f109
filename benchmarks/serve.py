"""How fast `thresher serve` answers each page over a big store.

```sh
python benchmarks/serve.py                      # 1,000,000 messages, SQLite
python benchmarks/serve.py --messages 100000    # quicker
python benchmarks/serve.py --keep /tmp/big      # keep (and reuse) the filled home
```

The store is filled directly with rows (generating a million messages through real
harvests would take an hour and measure the harvest): `--lists` lists of 20 years of
mail, threads of a root and its replies (In-Reply-To and References), the search index
rebuilt over them; each list's months with a few short ones and events; a crawl of
200,000 URLs on 500 hosts; 100,000 ingest requests and results; 50,000 finished jobs.
Then a real `thresher serve` subprocess answers `--rounds` requests of each page over
one keep-alive connection: the first request's time (the server is fresh, so this
reads the store, but for the aggregates it reads at start: see thresher.serve.context),
then p50 and p95 of the rest to the last byte, and whether p95 is within 100 ms, and
the p50 to the first byte of the body (what a download's reader waits for). Last, after
the cache period (the store unchanged), the aggregate pages once each: what their first
visitor of a period waits for.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import random
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import cpu_model  # this folder is sys.path[0]: run as a script

from thresher.serve.context import CACHE_SECONDS
from thresher.store import open_store

TARGET_MS = 100.0
YEARS = 20
_RNG = random.Random(7)
_WORDS = sorted(
    {
        "".join(_RNG.choice("bcdfghjklmnprstvwz") + _RNG.choice("aeiou") for _ in range(3))
        for _ in range(3000)
    }
)


def fill(home: Path, messages: int, lists: int, seed: int = 1) -> dict[str, Any]:
    """Rows straight into a migrated SQLite store; returns what the pages will ask for."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "thresher.db"
    open_store(f"sqlite:///{path}").close()
    rng = random.Random(seed)
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous=OFF")
    now = time.time()
    end_year = time.gmtime(now).tm_year
    months = [f"{y:04d}-{m:02d}" for y in range(end_year - YEARS + 1, end_year + 1)
              for m in range(1, 13)]  # fmt: skip
    per_list = messages // lists
    per_month = max(1, per_list // len(months))
    started = time.monotonic()
    msg_id = 0
    for li in range(lists):
        source = f"list{li}"
        db.execute(
            "INSERT INTO sources VALUES (?, 'pipermail', ?, '{}', ?, ?)",
            (source, f"https://lists.example.org/pipermail/{source}/", now, now),
        )
        rows = []
        month_rows = []
        for mi, month in enumerate(months):
            year, mon = int(month[:4]), int(month[5:])
            base = time.mktime((year, mon, 1, 0, 0, 0, 0, 0, 0))
            roots: list[str] = []
            for k in range(per_month):
                msg_id += 1
                mid = f"m{msg_id}.{source}@example.org"
                if roots and rng.random() < 0.8:
                    parent = rng.choice(roots[-8:])
                    reply, refs, subject = parent, parent, "Re: a thread about things"
                else:
                    reply, refs, subject = None, None, f"Thread {msg_id} on {rng.choice(_WORDS)}"
                    roots.append(mid)
                words = " ".join(rng.choice(_WORDS) for _ in range(60))
                body = f"{words}\nunique{msg_id}\n"
                raw = (f"From: Person {k % 97} <p{k % 97}@example.org>\nSubject: {subject}\n"
                       f"Message-ID: <{mid}>\n\n{body}").encode()  # fmt: skip
                digest = hashlib.sha256(raw).hexdigest()
                rows.append((
                    source, month, mid, digest, digest, mid, base + k * 600.0,
                    f"Person {k % 97}", f"p{k % 97}@example.org", subject, reply, refs,
                    body, raw, k * 500, now,
                ))  # fmt: skip
            short = 2 if mi % 37 == 5 else 0
            state = "complete" if mi < len(months) - 2 else "open"
            month_rows.append((source, month, f"https://x/{month}.txt", state, per_month + short,
                               per_month, per_month, 0, now, now))  # fmt: skip
            if len(rows) >= 20000:
                _insert_messages(db, rows)
                rows = []
        _insert_messages(db, rows)
        db.executemany(
            "INSERT INTO archive_months (source, month, url, state, expected, counted, stored,"
            " missing, checked_at, fetched_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            month_rows,
        )
        db.executemany(
            "INSERT INTO archive_events (source, month, at, kind, detail) VALUES (?,?,?,?,?)",
            [
                (source, rng.choice(months), now - i, "count_mismatch", f"event {i}")
                for i in range(2000)
            ],
        )
        for r in range(30):
            db.execute(
                "INSERT INTO source_runs (source, started, finished, outcome, counts)"
                " VALUES (?, ?, ?, 'ok', '{\"done\": 245}')",
                (source, now - (30 - r) * 3600, now - (30 - r) * 3600 + 60),
            )
    print(f"messages: {msg_id} rows in {time.monotonic() - started:.0f} s", flush=True)
    t = time.monotonic()
    db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')")
    db.commit()
    print(f"search index: {time.monotonic() - t:.0f} s", flush=True)
    crawl = _fill_crawl(db, rng, now)
    _fill_ingest(db, now)
    _fill_jobs(db, now)
    db.commit()
    db.execute("ANALYZE")
    db.commit()
    db.close()
    return {"months": months, "crawl": crawl}


def _insert_messages(db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    db.executemany(
        "INSERT INTO messages (source, month, key, sha256, norm_sha256, message_id, date,"
        " from_name, from_addr, subject, in_reply_to, refs, body, raw, position, first_seen)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        rows,
    )


def _fill_crawl(db: sqlite3.Connection, rng: random.Random, now: float) -> str:
    source = "crawl-big"
    db.execute(
        "INSERT INTO sources VALUES (?, 'web', 'https://example.org/', '{}', ?, ?)",
        (source, now, now),
    )
    db.execute(
        "INSERT INTO source_runs (source, started, finished, outcome, counts)"
        " VALUES (?, ?, ?, 'ok', '{\"done\": 1}')",
        (source, now - 3600, now),
    )
    run = db.execute("SELECT max(id) FROM source_runs").fetchone()[0]
    rows = []
    for i in range(200_000):
        host = f"h{i % 500}.example.org"
        state = "error" if i % 50 == 0 else "done"
        status = 404 if state == "error" else 200
        url = f"https://{host}/p/{i}"
        rows.append(
            (source, rng.getrandbits(63), url, host, i % 7, i, run, run, state, status, now,
             "f.warc.gz", i * 900)
        )  # fmt: skip
    db.executemany(
        "INSERT OR IGNORE INTO crawl_urls (source, hash, url, host, depth, seq, discovered_run,"
        " fetched_run, state, status, fetched_at, warc_file, warc_offset)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        rows,
    )
    db.execute(
        "INSERT INTO crawl_runs (run_id, source, pages, errors, bytes, hosts, started, updated)"
        " VALUES (?, ?, 196000, 4000, 2000000000, 500, ?, ?)",
        (run, source, now - 3600, now),
    )
    return source


def _fill_ingest(db: sqlite3.Connection, now: float) -> None:
    statuses = ["success"] * 6 + ["no-pdf-link", "terminal-bad-status", "wrong-mimetype", "timeout"]
    db.execute("INSERT INTO sources VALUES ('ingest', 'ingest', 'ingest:', '{}', ?, ?)", (now, now))
    req, res = [], []
    for i in range(100_000):
        url = f"https://doi.example.org/10.1000/{i}"
        status = statuses[i % len(statuses)]
        req.append(("pdf", url, f"src{i % 3}", str(i), now))
        res.append(("pdf", url, 1 if status == "success" else 0, status, url, 200, now))
    db.executemany(
        "INSERT INTO ingest_requests (ingest_type, base_url, link_source, link_source_id,"
        " created) VALUES (?,?,?,?,?)",
        req,
    )
    db.executemany(
        "INSERT INTO ingest_results (ingest_type, base_url, hit, status, terminal_url,"
        " terminal_status, updated) VALUES (?,?,?,?,?,?,?)",
        res,
    )


def _fill_jobs(db: sqlite3.Connection, now: float) -> None:
    run = db.execute("SELECT max(id) FROM source_runs WHERE source = 'list0'").fetchone()[0]
    db.executemany(
        "INSERT INTO jobs (kind, key, source, source_run_id, state, max_attempts, not_before,"
        " created, updated) VALUES ('archive.month', ?, 'list0', ?, 'done', 5, ?, ?, ?)",
        [(f"run{run}:list0/{i}", run, now, now, now) for i in range(50_000)],
    )


class Client:
    def __init__(self, url: str) -> None:
        m = re.match(r"http://([^:/]+):(\d+)/", url)
        assert m
        self.conn = http.client.HTTPConnection(m[1], int(m[2]), timeout=120)

    def get(self, path: str) -> tuple[int, bytes, float]:
        status, body, ms, _first = self.timed(path)
        return status, body, ms

    def timed(self, path: str) -> tuple[int, bytes, float, float]:
        """Status, body, ms to the last byte and ms to the first byte of the body."""
        t = time.perf_counter()
        self.conn.request("GET", path)
        resp = self.conn.getresponse()
        body = resp.read(1)
        first = (time.perf_counter() - t) * 1000
        body += resp.read()
        return resp.status, body, (time.perf_counter() - t) * 1000, first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--lists", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--keep", type=Path, help="home folder to fill (reused if filled)")
    args = ap.parse_args()
    import tempfile

    home = args.keep or Path(tempfile.mkdtemp(prefix="thresher-serve-bench-"))
    meta_file = home / "bench.json"
    if meta_file.exists():
        meta = json.loads(meta_file.read_text())
    else:
        meta = fill(home, args.messages, args.lists)
        meta_file.write_text(json.dumps(meta))
    env = {k: v for k, v in os.environ.items() if not k.startswith("THRESHER_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "thresher", "--home", str(home), "serve", "--port", "0"],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = re.search(r"serving (\S+)", proc.stdout.readline())[1]  # type: ignore[index]
        client = Client(url)
        month = meta["months"][len(meta["months"]) // 2]
        threads = json.loads(client.get(f"/api/lists/list0/{month}")[1])["items"]
        root = max(threads, key=lambda t: t["size"])["root"]["id"]
        reply = max(threads, key=lambda t: t["size"])["messages"][-1]["id"]
        pages = [
            ("dashboard", "/"),
            ("status JSON", "/api/status"),
            ("list (grid, events)", "/lists/list0"),
            ("month (threads)", f"/lists/list0/{meta['months'][len(meta['months']) // 2 + 1]}"),
            ("thread", f"/lists/list0/thread/{reply}"),
            ("message", f"/lists/list0/message/{root}"),
            ("search, rare word", "/search?q=unique123456"),
            ("search, common word", f"/search?q={_WORDS[5]}"),
            ("crawl", f"/crawls/{meta['crawl']}"),
            ("crawl errors, page 2", f"/crawls/{meta['crawl']}?state=error&after=2000"),
            ("ingest", "/ingest"),
            ("ingest results, status", "/ingest?status=timeout"),
            ("metrics", "/metrics"),
            ("month as mbox", f"/lists/list0/{month}.mbox"),
        ]
        stored = int(
            sqlite3.connect(f"file:{home / 'thresher.db'}?mode=ro", uri=True)
            .execute("SELECT count(*) FROM messages")
            .fetchone()[0]
        )
        print(f"store: {stored:,} messages; CPU: {cpu_model()}; {os.cpu_count()} cores")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"{'page':<26} {'first ms':>8} {'p50 ms':>8} {'p95 ms':>8}  within {TARGET_MS:.0f} ms"
            f"  {'p50 1st byte':>12}"
        )
        results: dict[str, Any] = {}
        for name, path in pages:
            status, _body, first = client.get(path)  # a fresh server's first
            times, firsts = [], []
            for _ in range(args.rounds):
                status, _body, ms, first_byte = client.timed(path)
                if status != 200:
                    raise SystemExit(f"{path}: HTTP {status}")
                times.append(ms)
                firsts.append(first_byte)
            times.sort()
            p50 = statistics.median(times)
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            ok = "yes" if p95 <= TARGET_MS else ("p50 only" if p50 <= TARGET_MS else "NO")
            ttfb = statistics.median(firsts)
            results[name] = {"first_ms": round(first, 1), "p50_ms": round(p50, 1),
                             "p95_ms": round(p95, 1),
                             "p50_first_byte_ms": round(ttfb, 1)}  # fmt: skip
            print(f"{name:<26} {first:8.1f} {p50:8.1f} {p95:8.1f}  {ok:<13} {ttfb:12.1f}",
                  flush=True)  # fmt: skip
        print(f"month as mbox: {len(_body):,} bytes")
        # The aggregates are remembered for CACHE_SECONDS at most: the first visitor of
        # the next period reads them again (the other pages read the store every time).
        time.sleep(CACHE_SECONDS + 0.5)
        again = {name: round(client.get(path)[2], 1) for name, path in
                 [("dashboard", "/"), ("ingest", "/ingest")]}  # fmt: skip
        print("after the cache period: " + ", ".join(f"{k} {v} ms" for k, v in again.items()))
        results["after the cache period"] = again
        results["load average"] = os.getloadavg()
        (home / "results.json").write_text(json.dumps(results, indent=1))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
