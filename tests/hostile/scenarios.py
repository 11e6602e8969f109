"""The hostile inputs of issue 20, each served from a loopback `Hostile` server to a
`thresher` command in a child process: what the command did and what it cost.

Each scenario takes the server, a fresh folder and `src` (None: this checkout's code;
else a folder of another version's package, for measure.py's before/after table) and
returns a `Result`: the probe (exit code, output, seconds, peak RSS) and what the
scenario looked at (`facts`). The tests in test_hostile_*.py assert on them.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from hostile_server import Hostile, Probe, gzip_bomb, gzip_members, run_thresher

__all__ = ["SCENARIOS", "Result"]

MiB = 2**20


@dataclass
class Result:
    probe: Probe
    facts: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        if self.probe.returncode == 0 and self.probe.stdout.lstrip().startswith("{"):
            try:
                return dict(json.loads(self.probe.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                return {}
        return {}


def _body(body: bytes, encoding: str | None = None, ctype: str = "text/html") -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        headers = {"Content-Type": ctype}
        if encoding:
            headers["Content-Encoding"] = encoding
        return web.Response(body=body, headers=headers)

    return handler


def _crawl(h: Hostile, tmp: Path, src: str | None, *urls: str, **kw: Any) -> Probe:
    args = ["crawl", *urls, "--allow-private", "--delay", "0", "--json", "--no-progress"]
    args += kw.pop("extra", [])
    return run_thresher(tmp / "home", *args, src=src, **kw)


def crawl_gzip_members(size: int) -> Callable[[Hostile, Path, str | None], Result]:
    """A page sent as `size` bytes of empty gzip members, then the page itself."""

    def scenario(h: Hostile, tmp: Path, src: str | None) -> Result:
        h.routes["/"] = _body(gzip_members(size, b"<html><p>the page</p></html>"), "gzip")
        probe = _crawl(h, tmp, src, h.url("/"), "--max-pages", "1", timeout=90)
        return Result(probe)

    return scenario


def crawl_sigterm_while_decoding(h: Hostile, tmp: Path, src: str | None) -> Result:
    """48 MiB of empty gzip members (seconds of decoding), and SIGTERM 2 s after the
    server sent them: with a grace of 1 s the crawl must stop within seconds."""
    h.routes["/"] = _body(gzip_members(48 * MiB, b"<html>x</html>"), "gzip")
    env = {"THRESHER_GRACE_SECONDS": "1"}
    probe = _crawl(
        h,
        tmp,
        src,
        h.url("/"),
        "--max-pages",
        "1",
        env=env,
        term_when=lambda _: h.hits["/"] > 0,  # the body is sent: decoding now
        term_after=2,
        timeout=90,
    )
    return Result(probe)


def _mail(h: Hostile, tmp: Path, src: str | None, path: str, max_bytes: int) -> Probe:
    home = tmp / "home"
    add = run_thresher(
        home,
        *("source", "add", "list", h.url(path), "-t", "mbox"),
        *("-o", "allow_private=true", "-o", "delay=0", "-o", f"max_bytes={max_bytes}"),
        src=src,
    )
    assert add.returncode == 0, add.stderr
    return run_thresher(home, "run", "list", "--json", "--no-progress", src=src, timeout=240)


def mail_gzip_encoded_bomb(h: Hostile, tmp: Path, src: str | None) -> Result:
    """A 10 MB month file sent with Content-Encoding: gzip (10 GiB of zeros decoded),
    to an mbox source whose max_bytes is 64 MiB."""
    h.routes["/list.mbox"] = _body(gzip_bomb(10 * 1024 * MiB), "gzip", "application/mbox")
    return Result(_mail(h, tmp, src, "/list.mbox", 64 * MiB))


def mail_gzip_file_bomb(h: Hostile, tmp: Path, src: str | None) -> Result:
    """The same 10 MB gzip as a .mbox.gz file (no Content-Encoding): gunzipped by
    maybe_gunzip with the source's max_bytes."""
    h.routes["/list.mbox.gz"] = _body(gzip_bomb(10 * 1024 * MiB), None, "application/gzip")
    return Result(_mail(h, tmp, src, "/list.mbox.gz", 64 * MiB))


def mail_gzip_members(h: Hostile, tmp: Path, src: str | None) -> Result:
    """A .mbox.gz month file of 0.8 MB of empty members, then one message."""
    message = b"From a@b.c Mon Jan  1 00:00:00 2024\nSubject: hi\nMessage-ID: <1@b.c>\n\nhi\n"
    h.routes["/list.mbox.gz"] = _body(gzip_members(800_000, message), None, "application/gzip")
    probe = _mail(h, tmp, src, "/list.mbox.gz", 64 * MiB)
    status = run_thresher(tmp / "home", "status", "--json", src=src)
    stored = None
    if status.returncode == 0:
        for source in json.loads(status.stdout)["sources"]:
            stored = source.get("archive", {}).get("messages")
    return Result(probe, {"messages": stored})


def _ingest(
    h: Hostile, tmp: Path, src: str | None, urls: list[str], *run_args: str
) -> tuple[Probe, dict[str, Any]]:
    home = tmp / "home"
    lines = [
        json.dumps(
            {"ingest_type": "pdf", "base_url": u, "link_source": "t", "link_source_id": str(i)}
        )
        for i, u in enumerate(urls)
    ]
    dump = tmp / "requests.jsonl"
    dump.write_text("\n".join(lines) + "\n")
    load = run_thresher(home, "ingest", "load", str(dump), src=src)
    assert load.returncode == 0, load.stderr
    probe = run_thresher(
        home, "ingest", "run", "--delay", "0", "--json", *run_args, src=src, timeout=240
    )
    results = run_thresher(home, "ingest", "results", "--json", src=src)
    statuses: dict[str, int] = {}
    if results.returncode == 0:
        for line in results.stdout.splitlines():
            if line.strip().startswith("{"):
                status = json.loads(line)["status"]
                statuses[status] = statuses.get(status, 0) + 1
    return probe, {"statuses": statuses}


def ingest_gzip_bomb(h: Hostile, tmp: Path, src: str | None) -> Result:
    """One URL sending 10 MB gzip-encoded (10 GiB decoded), `ingest run --max-bytes
    64 MiB`."""
    h.routes["/paper.pdf"] = _body(gzip_bomb(10 * 1024 * MiB), "gzip", "application/pdf")
    probe, facts = _ingest(
        h, tmp, src, [h.url("/paper.pdf")], "--allow-private", "--max-bytes", str(64 * MiB)
    )
    return Result(probe, facts)


def ingest_loopback_urls(h: Hostile, tmp: Path, src: str | None) -> Result:
    """Twelve URLs on 127.0.0.1 without --allow-private: every one is blocked-address."""
    urls = [h.url(f"/p{i}.pdf") for i in range(12)]
    probe, facts = _ingest(h, tmp, src, urls)
    facts["server_hits"] = sum(h.hits.values())
    return Result(probe, facts)


def ingest_load_blank_lines(h: Hostile, tmp: Path, src: str | None) -> Result:
    """`ingest load` of a 1 MB gzip of 1 GiB of newlines, then one request."""
    dump = tmp / "blank.jsonl.gz"
    line = b'{"ingest_type":"pdf","base_url":"https://e.org/a.pdf","link_source":"t","link_source_id":"1"}\n'
    dump.write_bytes(gzip_bomb(1024 * MiB, b"\n") + gzip.compress(line))
    probe = run_thresher(tmp / "home", "ingest", "load", str(dump), "--json", src=src, timeout=120)
    return Result(probe, {"gzip_bytes": dump.stat().st_size})


def crawl_bombs_on_16_hosts(h: Hostile, tmp: Path, src: str | None) -> Result:
    """A 2 MB gzip bomb (2 GiB decoded) on each of 16 hosts, a web source with
    max_body 8 MiB: the crawl fetches them at once."""
    bomb = gzip_bomb(2 * 1024 * MiB)
    h.routes["/bomb"] = _body(bomb, "gzip")
    links = "".join(f'<a href="{h.url("/bomb", i)}">b</a>' for i in range(len(h.ips)))
    h.routes["/"] = _body(links.encode())
    home = tmp / "home"
    add = run_thresher(
        home,
        *("source", "add", "bombs", h.url("/"), "-t", "web"),
        *("-o", "allow_private=true", "-o", "delay=0", "-o", "scope=.*"),
        *("-o", f"max_body={8 * MiB}", "-o", "concurrency=16"),
        src=src,
    )
    assert add.returncode == 0, add.stderr
    probe = run_thresher(home, "run", "bombs", "--json", "--no-progress", src=src, timeout=240)
    with contextlib.closing(sqlite3.connect(home / "thresher.db")) as db:
        # The seed host's /sitemap.xml, which a crawl also asks for, is not a bomb.
        errors = [
            r[0]
            for r in db.execute(
                "SELECT error FROM crawl_urls WHERE state = 'error'"
                " AND url NOT LIKE '%/sitemap.xml'"
            )
        ]
    reasons = sorted({str(e).split(": GET", 1)[0] for e in errors})
    return Result(probe, {"bomb_bytes": len(bomb), "errors": len(errors), "reasons": reasons})


def crawl_redirect_chain(h: Hostile, tmp: Path, src: str | None) -> Result:
    """A chain of 400 redirects from the seed, crawled with --max-depth 0."""

    async def hop(request: web.Request) -> web.StreamResponse:
        n = int(request.query.get("n", "0"))
        return web.Response(status=302, headers={"Location": f"/hop?n={n + 1}"})

    h.routes["/hop"] = hop
    probe = _crawl(h, tmp, src, h.url("/hop?n=0"), "--max-depth", "0", timeout=120)
    return Result(probe, {"hops_fetched": h.hits["/hop"]})


def crawl_error_reasons(h: Hostile, tmp: Path, src: str | None) -> Result:
    """A page linking to a 404, a 500 and a chain of redirects: the summary says why
    each failed, in JSON and in the line printed without --json."""

    async def fail(request: web.Request) -> web.StreamResponse:
        return web.Response(status=500)

    async def hop(request: web.Request) -> web.StreamResponse:
        n = int(request.query.get("n", "0"))
        return web.Response(status=302, headers={"Location": f"/hop?n={n + 1}"})

    h.routes.update({"/fail": fail, "/hop": hop})
    h.routes["/"] = _body(b'<a href="/missing">m</a> <a href="/fail">f</a> <a href="/hop">h</a>')
    probe = _crawl(h, tmp, src, h.url("/"))
    text = run_thresher(
        tmp / "home2", "crawl", h.url("/"), "--allow-private", "--delay", "0", src=src
    )
    return Result(probe, {"text": text.stdout})


def crawl_million_links(h: Hostile, tmp: Path, src: str | None) -> Result:
    """One page of 1,000,000 links (24 MB), crawled with --max-pages 3."""
    links = b"".join(b'<a href="/p%d">x</a>\n' % i for i in range(1_000_000))
    h.routes["/"] = _body(b"<html><body>" + links + b"</body></html>")
    probe = _crawl(h, tmp, src, h.url("/"), "--max-pages", "3", timeout=240)
    return Result(probe)


def search_huge_limit(h: Hostile, tmp: Path, src: str | None) -> Result:
    probe = run_thresher(tmp / "home", "search", "word", "--limit", str(2**63), src=src)
    return Result(probe)


def run_a_million_workers(h: Hostile, tmp: Path, src: str | None) -> Result:
    """`run --workers 1000000` on a synthetic source, stopped by SIGTERM after 5 s."""
    home = tmp / "home"
    add = run_thresher(home, "source", "add", "syn", "synthetic://x", "-t", "synthetic", src=src)
    probe = run_thresher(
        home,
        *("run", "syn", "--workers", "1000000", "--no-progress"),
        src=src,
        term_when=lambda err: "syn" in err,  # started
        term_after=5,
        timeout=60,
    )
    return Result(probe, {"added": add.returncode})


# Fetches one URL while a ticker measures the longest stall of the event loop.
_LOOP_STALL = """
import asyncio, sys, time
from thresher.fetch import Fetcher, FetchSettings

async def main():
    stall = 0.0
    async def tick():
        nonlocal stall
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.001)
            stall = max(stall, time.monotonic() - before)
    ticker = asyncio.ensure_future(tick())
    async with Fetcher(FetchSettings(allow_private=True)) as fetcher:
        try:
            await fetcher.get(sys.argv[1])
            outcome = "decoded"
        except Exception as exc:
            outcome = type(exc).__name__
    ticker.cancel()
    print(f"longest loop stall {stall * 1000:.0f} ms; {outcome}")

asyncio.run(main())
"""


def fetch_brotli_bomb(h: Hostile, tmp: Path, src: str | None) -> Result:
    """A 405-byte brotli body that decodes to 256 MiB, fetched with the default caps
    (max_decoded 200 MiB): how long the event loop stalls."""
    brotli = importlib.import_module("brotli")  # FastWARC's dependency, in the test extras
    h.routes["/br"] = _body(brotli.compress(bytes(256 * MiB), quality=5), "br")
    probe = run_thresher(tmp, h.url("/br"), code=_LOOP_STALL, src=src)
    return Result(probe)


SCENARIOS: dict[str, Callable[[Hostile, Path, str | None], Result]] = {
    "crawl: 0.8 MB of empty gzip members": crawl_gzip_members(800_000),
    "crawl: 6 MB of empty gzip members": crawl_gzip_members(6_000_000),
    "crawl: SIGTERM while decoding 48 MiB of members": crawl_sigterm_while_decoding,
    "mail: 10 MB gzip-encoded month, max_bytes 64 MiB": mail_gzip_encoded_bomb,
    "mail: 10 MB .mbox.gz month, max_bytes 64 MiB": mail_gzip_file_bomb,
    "mail: .mbox.gz of 0.8 MB of empty members": mail_gzip_members,
    "ingest run: 10 MB gzip-encoded body, --max-bytes 64 MiB": ingest_gzip_bomb,
    "ingest run: 12 loopback URLs": ingest_loopback_urls,
    "ingest load: 1 MB gzip of 1 GiB of newlines": ingest_load_blank_lines,
    "crawl: 2 MB gzip bombs on 16 hosts, max_body 8 MiB": crawl_bombs_on_16_hosts,
    "fetch: 405-byte brotli body of 256 MiB, default caps": fetch_brotli_bomb,
    "crawl: 400 redirects, --max-depth 0": crawl_redirect_chain,
    "crawl: errors (404, 500, 400 redirects)": crawl_error_reasons,
    "crawl: one page of 1,000,000 links, --max-pages 3": crawl_million_links,
    "search --limit 2**63": search_huge_limit,
    "run --workers 1000000, SIGTERM 5 s in": run_a_million_workers,
}


def export_big_message(h: Hostile, tmp: Path, src: str | None) -> Result:
    """`export --format jsonl` of a list whose one message is 48 MiB (harvested from an
    mbox file first)."""
    line = ("word " * 15 + "é\n").encode()
    body = line * (48 * MiB // len(line))
    message = b"From a@b.c Mon Jan  1 00:00:00 2024\nSubject: big\nMessage-ID: <big@b.c>\n\n"
    h.routes["/list.mbox"] = _body(message + body, None, "application/mbox")
    harvest = _mail(h, tmp, src, "/list.mbox", 256 * MiB)
    assert harvest.returncode == 0, harvest.stderr
    out = tmp / "list.jsonl"
    probe = run_thresher(
        tmp / "home", "export", "list", "--format", "jsonl", "-o", str(out), src=src
    )
    size = out.stat().st_size if out.exists() else 0
    return Result(probe, {"message_mib": len(message + body) // MiB, "output_mib": size // MiB})


SCENARIOS["export --format jsonl of a 48 MiB message"] = export_big_message


def mail_big_message(h: Hostile, tmp: Path, src: str | None) -> Result:
    """A month file holding a 200 MiB message between two small ones, harvested by an
    mbox source (max_bytes 256 MiB; max_message_bytes its default, 32 MiB)."""
    line = ("word " * 15 + "é\n").encode()
    body = line * (200 * MiB // len(line))
    head = b"From a@b.c Mon Jan  1 00:00:00 2024\nSubject: big\nMessage-ID: <big@b.c>\n\n"
    small = b"From a@b.c Mon Jan  1 00:00:00 2024\nSubject: %s\nMessage-ID: <%s@b.c>\n\nhi\n"
    month = small % (b"one", b"one") + b"\n" + head + body + b"\n" + small % (b"two", b"two")
    h.routes["/list.mbox"] = _body(month, None, "application/mbox")
    probe = _mail(h, tmp, src, "/list.mbox", 256 * MiB)
    whole = head[head.index(b"\n") + 1 :] + body
    facts: dict[str, Any] = {"message_mib": len(whole) // MiB}
    with contextlib.closing(sqlite3.connect(tmp / "home" / "thresher.db")) as db:
        columns = {r[1] for r in db.execute("PRAGMA table_info(messages)")}
        flag = "truncated" if "truncated" in columns else "NULL"
        facts["rows"] = [
            (r[0], r[1] // MiB, r[2])
            for r in db.execute(f"SELECT key, length(raw), {flag} FROM messages ORDER BY id")
        ]
    digest = hashlib.sha256(whole).hexdigest()
    kept = tmp / "home" / "messages" / digest[:2] / digest
    facts["whole_file"] = kept.exists() and kept.stat().st_size == len(whole)
    out = tmp / "list.mbox"
    export = run_thresher(tmp / "home", "export", "list", "-o", str(out), src=src)
    facts["export"] = f"{export.rss_mib:.0f} MiB, {export.seconds:.1f} s"
    facts["export_has_whole"] = out.exists() and out.stat().st_size > len(whole)
    return Result(probe, facts)


SCENARIOS["mail: a 200 MiB message in a month file"] = mail_big_message


def urls_list_bomb(h: Hostile, tmp: Path, src: str | None) -> Result:
    """A `urls` source whose URL list is 10 MB gzip-encoded (10 GiB of newlines),
    max_bytes 64 MiB."""
    h.routes["/list.txt"] = _body(gzip_bomb(10 * 1024 * MiB, b"\n"), "gzip", "text/plain")
    home = tmp / "home"
    add = run_thresher(
        home,
        *("source", "add", "list", h.url("/list.txt"), "-t", "urls"),
        *("-o", "allow_private=true", "-o", "delay=0", "-o", f"max_bytes={64 * MiB}"),
        src=src,
    )
    assert add.returncode == 0, add.stderr
    probe = run_thresher(home, "run", "list", "--json", "--no-progress", src=src, timeout=240)
    return Result(probe)


SCENARIOS["urls: 10 MB gzip-encoded URL list, max_bytes 64 MiB"] = urls_list_bomb
