"""`ingest run` end to end: loaded requests, a loopback site with the shapes ingest meets,
the real execution plan and worker pool, a real store of each backend, WARC files read
back with warcio. Each shape's exact status is asserted."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from landing_site import LandingSite, Page, landing, pdf_bytes, png_bytes
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from cli_proc import Home
from conftest import new_pg_database
from thresher.cli.main import main
from thresher.clock import SystemClock
from thresher.config import Config
from thresher.ingest.request_line import IngestRequest
from thresher.ingest.requests import load_requests, read_requests
from thresher.ingest.walk import STATUSES
from thresher.plan import ExecutionPlan, RunReport
from thresher.sources import add_source
from thresher.sources.ingest import INGEST_URL, ingest_warc_dir
from thresher.store import open_store
from thresher.store.aio import AsyncStore

# The run's options on top of the defaults: the site is on loopback and needs no delay.
LOOPBACK = {"allow_private": True, "delay": 0.0}


def make_config(store_url: str, home: Path, **kw: Any) -> Config:
    db = None if store_url.startswith("sqlite") else store_url
    defaults: dict[str, Any] = dict(
        home=home,
        db=db,
        backoff_base=0.01,
        backoff_max=0.05,
        lease_seconds=30,
        max_attempts=3,
        http_timeout=3.0,  # a hang is 10 s; a loaded machine may be slow otherwise
    )
    return Config(**{**defaults, **kw})


def load(config: Config, urls: dict[str, str], source: str = "test", kind: str = "pdf") -> None:
    """Requests for `urls` (name → URL), loaded as `ingest load` does."""
    lines = [
        json.dumps(
            {"ingest_type": kind, "base_url": url, "link_source": source, "link_source_id": name}
        )
        for name, url in urls.items()
    ]
    path = config.home / f"requests-{source}-{kind}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    requests = [r for r in read_requests(path, None) if isinstance(r, IngestRequest)]
    assert len(requests) == len(urls)
    store = open_store(config.store_url)
    try:
        load_requests(store, path, None, time.time())
    finally:
        store.close()


def run(config: Config, **options: Any) -> RunReport:
    async def go() -> RunReport:
        store = await AsyncStore(config.store_url).open()
        try:
            await store.run(lambda tx: _ensure_source(tx))
            plan = ExecutionPlan(config, store, SystemClock())
            return await plan.run_once(("ingest",), {"ingest": {**LOOPBACK, **options}})
        finally:
            await store.close()

    return asyncio.run(go())


def _ensure_source(tx: Any) -> None:
    if tx.one("get_source", name="ingest") is None:
        add_source(tx, "ingest", INGEST_URL, "ingest", {}, time.time())


def load_dump(home: Home, urls: list[str], source: str) -> None:
    """`thresher ingest load` of a dump asking for `urls` (PDFs), numbered in order."""
    dump = home.path / f"dump-{source}.jsonl"
    dump.parent.mkdir(parents=True, exist_ok=True)
    dump.write_text(
        "".join(
            json.dumps({"ingest_type": "pdf", "base_url": url, "link_source_id": str(i)}) + "\n"
            for i, url in enumerate(urls)
        )
    )
    home.run("ingest", "load", str(dump), "--source", source)


def table(config: Config, name: str) -> list[dict[str, Any]]:
    return Home(config.home, config.db).query(f"SELECT * FROM {name}")


def by_url(config: Config) -> dict[str, dict[str, Any]]:
    return {r["base_url"]: r for r in table(config, "ingest_results")}


def warc_responses(home: Path) -> list[tuple[str, bytes]]:
    """(URL, payload) of every response record in the ingest WARC files."""
    out = []
    for path in sorted(ingest_warc_dir(home).glob("*.warc.gz")):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "response":
                    out.append(
                        (
                            record.rec_headers.get_header("WARC-Target-URI"),
                            record.content_stream().read(),
                        )
                    )
    return out


# -- the shapes ------------------------------------------------------------------------------

REDIRECTS_TOO_MANY = 11


# Server trouble, each on a host of its own: a host whose URLs keep failing is parked
# (politeness), and the other shapes must not wait for that.
FAULT_HOSTS = {"/always-503.pdf": 1, "/flaky.pdf": 2, "/hang.pdf": 3, "/reset.pdf": 4}


def shape_url(site: LandingSite, path: str) -> str:
    return site.url(path, FAULT_HOSTS.get(path, 0))


@pytest.fixture
def site() -> Iterator[LandingSite]:
    with LandingSite(hosts=5) as s:
        p = s.pages
        base = s.base
        p["/direct.pdf"] = Page(pdf_bytes("direct"), content_type="application/pdf")
        # Landing pages: an absolute and a relative citation_pdf_url.
        p["/abs/1"] = Page(landing(meta=f"{base}/files/1.pdf"))
        p["/files/1.pdf"] = Page(pdf_bytes("one"), content_type="application/octet-stream")
        p["/abs/2/view"] = Page(landing(meta="../../files/2.pdf"))
        p["/files/2.pdf"] = Page(pdf_bytes("two"), content_type="application/pdf")
        # The meta tag names the page itself: a loop, as sandcrawler says.
        p["/abs/self"] = Page(landing(meta=f"{base}/abs/self"))
        # Two hops: article → viewer page → PDF.
        p["/article/10"] = Page(landing(links='<a href="/viewer/10">PDF</a>'))
        p["/viewer/10"] = Page(landing(links='<a href="/files/10.pdf">Download</a>'))
        p["/files/10.pdf"] = Page(pdf_bytes("ten"), content_type="application/pdf")
        # A PDF link that loops back to the article.
        p["/loop/a"] = Page(landing(meta=f"{base}/loop/b.pdf"))
        p["/loop/b.pdf"] = Page(landing(meta=f"{base}/loop/a"))
        # No link at all; HTML at a .pdf URL.
        p["/nolink"] = Page(landing(links='<a href="/about">About us</a>'))
        p["/html-at.pdf"] = Page(landing(), content_type="application/pdf")
        # A login wall: the PDF link redirects to a sign-in form.
        p["/walled"] = Page(landing(meta="/protected/9.pdf"))
        p["/protected/9.pdf"] = Page(status=302, location="/login?next=/protected/9.pdf")
        p["/login?next=/protected/9.pdf"] = Page(landing(form=True))
        p["/forbidden.pdf"] = Page(b"forbidden", status=403, content_type="text/plain")
        # Redirects: a chain that ends in the file, a loop, and one hop too many.
        p["/r/1"] = Page(status=301, location="/r/2")
        p["/r/2"] = Page(status=302, location=f"{base}/r/3")
        p["/r/3"] = Page(status=307, location="/files/r.pdf")
        p["/files/r.pdf"] = Page(pdf_bytes("chain"), content_type="application/pdf")
        p["/rl/a"] = Page(status=302, location="/rl/b")
        p["/rl/b"] = Page(status=302, location="/rl/a")
        for i in range(REDIRECTS_TOO_MANY + 1):
            p[f"/rx/{i}"] = Page(status=302, location=f"/rx/{i + 1}")
        # Too many landing pages in a row.
        for i in range(6):
            p[f"/hop/{i}"] = Page(landing(meta=f"/hop/{i + 1}"))
        # Bodies: huge, empty, an image, the same PDF at another URL.
        p["/huge.pdf"] = Page(pdf_bytes("huge", 3 * 2**20), content_type="application/pdf")
        p["/empty.pdf"] = Page(b"", content_type="application/pdf")
        p["/image.pdf"] = Page(png_bytes(), content_type="application/pdf")
        p["/copy/1.pdf"] = Page(pdf_bytes("one"), content_type="application/pdf")
        # Server trouble: 404, always 503, a hang, a reset; a 503 that then recovers.
        p["/always-503.pdf"] = Page(fail_first=10**6)
        p["/flaky.pdf"] = Page(pdf_bytes("flaky"), content_type="application/pdf", fail_first=2)
        p["/hang.pdf"] = Page(pdf_bytes("hang"), hang=10)
        p["/reset.pdf"] = Page(reset=True)
        # robots.txt and the blocklist.
        s.robots = "User-agent: *\nDisallow: /private/\n"
        p["/private/x.pdf"] = Page(pdf_bytes("private"), content_type="application/pdf")
        p["/to-blocked"] = Page(landing(meta="/blocked/y.pdf"))
        yield s


EXPECTED = {
    "/direct.pdf": ("success", 200),
    "/abs/1": ("success", 200),
    "/abs/2/view": ("success", 200),
    "/abs/self": ("link-loop", 200),
    "/article/10": ("success", 200),
    "/loop/a": ("link-loop", 200),
    "/nolink": ("no-pdf-link", 200),
    "/html-at.pdf": ("no-pdf-link", 200),
    "/walled": ("blocked-wall", 200),
    "/forbidden.pdf": ("terminal-bad-status", 403),
    "/r/1": ("success", 200),
    "/rl/a": ("redirect-loop", 302),
    "/rx/0": ("redirects-exceeded", 302),
    "/hop/0": ("max-hops-exceeded", 200),
    "/huge.pdf": ("body-too-large", None),
    "/empty.pdf": ("empty-blob", 200),
    "/image.pdf": ("wrong-mimetype", 200),
    "/copy/1.pdf": ("success", 200),
    "/missing.pdf": ("terminal-bad-status", 404),
    "/always-503.pdf": ("terminal-bad-status", 503),
    "/flaky.pdf": ("success", 200),
    "/hang.pdf": ("timeout", None),
    "/reset.pdf": ("connection-error", None),
    "/private/x.pdf": ("blocked-robots", None),
    "/to-blocked": ("skip-url-blocklist", 200),
    "/blocked/z.pdf": ("skip-url-blocklist", None),
}


def test_each_shape_gets_its_exact_status(
    site: LandingSite, store_url: str, tmp_path: Path
) -> None:
    config = make_config(store_url, tmp_path / "home")
    urls = {path: shape_url(site, path) for path in EXPECTED}
    urls["dns"] = "http://nosuch-host.invalid/paper.pdf"
    load(config, urls)
    blocklist = tmp_path / "blocklist.txt"
    blocklist.write_text("# ours\n/blocked/\n")
    report = run(config, max_bytes=2**20, blocklist=str(blocklist))
    assert report.sources[0].outcome == "ok", report
    got = by_url(config)
    assert len(got) == len(urls)
    for path, (status, http) in EXPECTED.items():
        row = got[shape_url(site, path)]
        assert (path, row["status"], row["terminal_status"]) == (path, status, http), row
        assert bool(row["hit"]) == (status == "success"), path
        assert row["status"] in STATUSES
    assert got["http://nosuch-host.invalid/paper.pdf"]["status"] == "dns-error"

    # What the hops say of the walks.
    def hops(path: str) -> list[dict[str, Any]]:
        return list(json.loads(got[site.url(path)]["hops"]))

    assert [h["kind"] for h in hops("/article/10")] == ["landing", "landing", "terminal"]
    assert [h["url"] for h in hops("/abs/2/view")] == [
        site.url("/abs/2/view"),
        site.url("/files/2.pdf"),
    ]
    assert hops("/abs/1")[0]["technique"] == "citation_pdf_url"
    assert [h["status"] for h in hops("/r/1")] == [301, 302, 307, 200]
    assert len(hops("/rx/0")) == REDIRECTS_TOO_MANY
    assert got[site.url("/walled")]["terminal_url"] == site.url("/login?next=/protected/9.pdf")
    # The hanging and resetting URLs were tried max_attempts times, the 503 too; the
    # flaky one succeeded on its third request; blocked and robots-excluded URLs never.
    counts = site.counts()
    assert counts["/hang.pdf"] == counts["/always-503.pdf"] == 3
    # aiohttp sends a request again, once, when a reused keep-alive connection drops.
    assert 3 <= counts["/reset.pdf"] <= 6
    assert counts["/flaky.pdf"] == 3
    assert counts["/private/x.pdf"] == counts["/blocked/y.pdf"] == counts["/blocked/z.pdf"] == 0
    assert got[shape_url(site, "/flaky.pdf")]["attempts"] == 1

    # Bodies: one file_meta row and one WARC record per distinct body, hits and landing
    # pages alike; the same PDF at two URLs is stored once.
    files = {r["sha1"]: r for r in table(config, "file_meta")}
    one = hashlib.sha1(pdf_bytes("one")).hexdigest()
    assert got[site.url("/abs/1")]["terminal_sha1"] == one
    assert got[site.url("/copy/1.pdf")]["terminal_sha1"] == one
    assert files[one]["mimetype"] == "application/pdf"
    assert files[one]["size"] == len(pdf_bytes("one"))
    assert files[one]["sha256"] == hashlib.sha256(pdf_bytes("one")).hexdigest()
    assert files[one]["md5"] == hashlib.md5(pdf_bytes("one")).hexdigest()
    records = warc_responses(config.home)
    digests = [hashlib.sha1(payload).hexdigest() for _, payload in records]
    assert sorted(digests) == sorted(files)  # each body once, each row its record
    for row in files.values():
        assert row["warc_file"] and row["warc_offset"] is not None, row
    for row in got.values():
        if row["terminal_sha1"] is not None:
            assert row["terminal_sha1"] in files
    assert got[site.url("/empty.pdf")]["terminal_sha1"] is None


def test_a_second_run_fetches_nothing_and_retry_or_force_fetch_again(
    site: LandingSite, store_url: str, tmp_path: Path
) -> None:
    config = make_config(store_url, tmp_path / "home")
    paths = ["/direct.pdf", "/nolink", "/missing.pdf", "/abs/1"]
    load(config, {p: site.url(p) for p in paths})
    load(config, {p: site.url(p) for p in paths[:2]}, source="other")  # same URLs again
    run(config)
    first = site.counts()
    assert first == {
        "/direct.pdf": 1,
        "/nolink": 1,
        "/missing.pdf": 1,
        "/abs/1": 1,
        "/files/1.pdf": 1,
    }
    run(config)
    assert site.counts() == first  # nothing without a result: nothing fetched
    run(config, retry="no-pdf-link")
    assert site.counts() - first == {"/nolink": 1}
    assert by_url(config)[site.url("/nolink")]["attempts"] == 2
    run(config, force=True, ingest_type="pdf", link_source="other")
    assert site.counts() - first == {"/nolink": 2, "/direct.pdf": 1}
    before = site.counts()
    run(config, force=True, limit=1)  # the first URL in key order, and its PDF
    assert site.counts() - before == {"/abs/1": 1, "/files/1.pdf": 1}
    assert len(by_url(config)) == 4
    # One WARC record per body however often it was fetched.
    records = warc_responses(config.home)
    assert len(records) == len({hashlib.sha1(p).hexdigest() for _, p in records})


def test_many_urls_are_handed_out_page_by_page(
    site: LandingSite, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from thresher.ingest import engine, ledger

    # Pages of 7: the selection is queued, and each shard reads its queue, 7 at a time.
    monkeypatch.setattr(ledger, "PAGE", 7)
    monkeypatch.setattr(engine, "PAGE", 7)
    for i in range(40):
        site.pages[f"/p/{i}.pdf"] = Page(pdf_bytes(f"p{i}"), content_type="application/pdf")
    config = make_config(store_url, tmp_path / "home", workers=6)
    load(config, {f"n{i}": site.url(f"/p/{i}.pdf") for i in range(40)})
    report = run(config, limit=30)
    assert report.sources[0].outcome == "ok"
    assert len(by_url(config)) == 30
    run(config)
    got = by_url(config)
    assert len(got) == 40 and all(r["status"] == "success" for r in got.values())
    assert all(n == 1 for n in site.counts().values())
    assert len(table(config, "file_meta")) == 40
    assert len(warc_responses(config.home)) == 40


def test_a_shard_ends_only_once_its_last_commit_is_in(
    site: LandingSite, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit made in the background when the last walk ends is awaited before the
    shard says it is done: else the process ended with it in flight, the run "ok" and
    its last URLs without results (seen after a kill -9 and a rerun)."""
    from thresher.ingest import commits

    run_in_store = AsyncStore.run
    calls: list[str] = []

    async def slow_first_commit(self: AsyncStore, fn: Any, write: bool = True) -> Any:
        if getattr(fn, "__qualname__", "").startswith("Commits.commit"):
            calls.append(fn.__qualname__)
            if len(calls) == 1:  # the first, in the background: no connection free yet
                await asyncio.sleep(3.0)
        return await run_in_store(self, fn, write)

    monkeypatch.setattr(commits, "COMMIT_SECONDS", 0.01)  # each walk's result soon
    monkeypatch.setattr(AsyncStore, "run", slow_first_commit)
    for i in range(5):
        site.pages[f"/c/{i}.pdf"] = Page(
            pdf_bytes(f"c{i}"), content_type="application/pdf", hang=0.05
        )
    config = make_config(store_url, tmp_path / "home", workers=1)
    load(config, {f"c{i}": site.url(f"/c/{i}.pdf") for i in range(5)})
    report = run(config)
    assert report.sources[0].outcome == "ok"
    assert len(calls) >= 2  # the last commit was made while the first waited
    assert len(by_url(config)) == 5
    assert table(config, "ingest_queue") == []


def test_cli_load_run_json_and_rerun(site: LandingSite, store_url: str, tmp_path: Path) -> None:
    if store_url.startswith("sqlite"):  # the fixture's SQLite file is HOME/thresher.db
        home = Path(store_url.removeprefix("sqlite:///")).parent
        flags = ["--home", str(home)]
    else:
        home = tmp_path / "home"
        flags = ["--home", str(home), "--db", store_url]
    dump = tmp_path / "dump.jsonl"
    dump.write_text(
        "".join(
            json.dumps({"ingest_type": "pdf", "base_url": site.url(p), "link_source_id": p}) + "\n"
            for p in ("/direct.pdf", "/abs/1", "/nolink")
        )
    )
    assert main([*flags, "ingest", "load", str(dump), "--source", "s"]) == 0
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*flags, "ingest", "run", "--allow-private", "--delay", "0", "--json"])
    assert code == 0
    summary = json.loads(out.getvalue())
    assert summary["status"] == "ok"
    assert summary["urls"] == 3 and summary["hits"] == 2
    assert summary["statuses"] == {"success": 2, "no-pdf-link": 1}
    assert Path(summary["warc_dir"]) == ingest_warc_dir(home)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*flags, "ingest", "run", "--allow-private", "--delay", "0", "--json"]) == 0
    assert json.loads(out.getvalue())["urls"] == 0
    assert main([*flags, "ingest", "run", "--retry", "no-such-status"]) == 2


def _children(pid: int) -> set[int]:
    try:
        return {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:  # it has ended
        return set()


@pytest.mark.parametrize("shards", [1, 2])
def test_kill_9_in_the_middle_then_run_again_gives_one_result_and_one_record_each(
    backend: str, shards: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """With two shards one runs in the command's process and the other in a process of
    its own, which dies with the command: nothing writes on after the kill."""
    import os
    import signal

    db = new_pg_database(request.getfixturevalue("pg_admin_url")) if backend == "postgres" else None
    home = Home(tmp_path / "home", db)
    n = 400
    with LandingSite() as site:
        for i in range(n):
            body = pdf_bytes(f"k{i % 300}", 20_000)  # 100 bodies reached from two URLs
            if i % 2:
                site.pages[f"/k/{i}"] = Page(landing(meta=f"/kf/{i}.pdf"), hang=0.005)
                site.pages[f"/kf/{i}.pdf"] = Page(body, content_type="application/pdf", hang=0.005)
            else:
                site.pages[f"/k/{i}"] = Page(body, content_type="application/pdf", hang=0.005)
        load_dump(home, [site.url(f"/k/{i}") for i in range(n)], "k")
        args = (
            "ingest",
            "run",
            "--allow-private",
            "--delay",
            "0",
            "-w",
            "8",
            "--shards",
            str(shards),
        )
        proc = home.start(*args)
        deadline = time.monotonic() + 120
        done = 0
        children: set[int] = set()
        while done < 60:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
            children |= _children(proc.pid)
            try:
                done = len(home.query("SELECT base_url FROM ingest_results"))
            except Exception:  # the store or its tables do not exist yet
                continue
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        if shards > 1:  # its other shards' processes (forked first thing), gone with it
            assert len(children) >= shards - 1
            deadline = time.monotonic() + 30
            while any(Path(f"/proc/{c}").exists() for c in children):
                assert time.monotonic() < deadline, "a shard's process outlived the kill"
                time.sleep(0.02)
        assert 60 <= len(home.query("SELECT base_url FROM ingest_results")) < n
        home.run(*args)
        fetched = site.counts()
    rows = home.query("SELECT base_url, status, terminal_sha1, attempts FROM ingest_results")
    assert len(rows) == n
    assert {r["base_url"] for r in rows} == {site.url(f"/k/{i}") for i in range(n)}
    assert all(r["status"] == "success" and r["attempts"] == 1 for r in rows)
    files = {r["sha1"]: r for r in home.query("SELECT * FROM file_meta")}
    landings = {hashlib.sha1(landing(meta=f"/kf/{i}.pdf")).hexdigest() for i in range(1, n, 2)}
    pdfs = {hashlib.sha1(pdf_bytes(f"k{i}", 20_000)).hexdigest() for i in range(300)}
    assert set(files) == pdfs | landings
    # The WARC files hold each body once (nothing the crash left half-committed stays),
    # and each file_meta row points at its own record.
    records = warc_responses(home.path)
    digests = [hashlib.sha1(payload).hexdigest() for _, payload in records]
    assert sorted(digests) == sorted(files)
    for sha1, row in files.items():
        with open(ingest_warc_dir(home.path) / row["warc_file"], "rb") as f:
            f.seek(row["warc_offset"])
            record = next(iter(ArchiveIterator(f)))
            assert hashlib.sha1(record.content_stream().read()).hexdigest() == sha1
    # Few URLs were fetched twice: only those in flight at the kill.
    assert sum(c - 1 for c in fetched.values() if c > 1) < 60
    assert [r["outcome"] for r in home.query("SELECT outcome FROM source_runs")] == ["ok"]


def test_two_shards_run_in_two_processes_each_with_a_warc_slot_of_its_own(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The shards of one worker used to share its WARC slot once each had a process of
    its own: one took the slot from the other (SlotLost) and the run limped on retries."""
    db = new_pg_database(request.getfixturevalue("pg_admin_url")) if backend == "postgres" else None
    home = Home(tmp_path / "home", db)
    n = 200
    with LandingSite(hosts=4) as site:
        for i in range(n):
            site.pages[f"/s/{i}.pdf"] = Page(pdf_bytes(f"s{i}"), content_type="application/pdf")
        load_dump(home, [site.url(f"/s/{i}.pdf", i % 4) for i in range(n)], "s")
        args = ("ingest", "run", "--allow-private", "--delay", "0", "-c", "4", "--shards", "2")
        out = json.loads(home.run(*args, "--json").stdout)
        assert out["status"] == "ok" and out["statuses"] == {"success": n}
        assert all(c == 1 for c in site.counts().values()) and len(site.counts()) == n
    shards = home.query("SELECT attempts, result FROM jobs WHERE kind = 'ingest.shard'")
    assert [s["attempts"] for s in shards] == [1, 1]  # none lost its slot and was retried
    # A slot each (the second shard, in a process that starts later, takes the first's
    # slot again if that shard ended already), each given back (no owner) as it ended.
    slots = home.query("SELECT name, owner FROM warc_slots ORDER BY name")
    assert [s["name"] for s in slots] in (["ingest-1"], ["ingest-1", "ingest-2"])
    assert all(s["owner"] is None for s in slots)
    records = warc_responses(home.path)
    assert len(records) == n == len({hashlib.sha1(p).hexdigest() for _, p in records})


@pytest.mark.parametrize("delay", ["0", "0.05"])
def test_hops_to_hosts_of_the_other_shard_fail_nothing_and_fetch_each_url_once(
    backend: str, delay: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A landing page's PDF on a host of the other shard. With no delay, the hop (and its
    robots.txt) goes without the host's hold: waiting for the other shard, which holds
    its hosts for seconds at a time, took a 20 000-URL run from 16 s to 10 minutes. With a
    delay, holds are per request and the hop waits for one. A host busy while its
    robots.txt was asked for used to count as robots.txt unavailable: `host-backoff`."""
    db = new_pg_database(request.getfixturevalue("pg_admin_url")) if backend == "postgres" else None
    home = Home(tmp_path / "home", db)
    n = 24
    with LandingSite(hosts=4) as site:
        site.robots = "User-agent: *\nAllow: /\n"
        for i in range(n):
            other = site.url(f"/x/{i}.pdf", (i + 1) % 4)
            site.pages[f"/l/{i}"] = Page(landing(meta=other))
            site.pages[f"/x/{i}.pdf"] = Page(pdf_bytes(f"x{i}"), content_type="application/pdf")
        load_dump(home, [site.url(f"/l/{i}", i % 4) for i in range(n)], "s")
        args = ("ingest", "run", "--allow-private", "--delay", delay, "-c", "4", "--shards", "2")
        out = json.loads(home.run(*args, "--json").stdout)
        counts = site.counts()
    assert out["statuses"] == {"success": n}
    rows = home.query("SELECT attempts FROM ingest_results")
    assert [r["attempts"] for r in rows] == [1] * n
    assert len(counts) == 2 * n and set(counts.values()) == {1}  # no walk began again


def test_ingest_run_detached_is_done_by_two_workers(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    import signal

    db = new_pg_database(request.getfixturevalue("pg_admin_url")) if backend == "postgres" else None
    home = Home(tmp_path / "home", db)
    with LandingSite() as site:
        for i in range(30):
            site.pages[f"/d/{i}.pdf"] = Page(pdf_bytes(f"d{i}"), content_type="application/pdf")
        load_dump(home, [site.url(f"/d/{i}.pdf") for i in range(30)], "s")
        out = home.run("ingest", "run", "--allow-private", "--delay", "0", "--detach").stdout
        assert out.startswith("ingest: queued as run 1")
        workers = [home.start("worker", "-c", "3") for _ in range(2)]
        deadline = time.monotonic() + 60
        while home.query("SELECT outcome FROM source_runs") != [{"outcome": "ok"}]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for w in workers:
            w.send_signal(signal.SIGTERM)
            w.communicate(timeout=30)
        assert all(n == 1 for n in site.counts().values()) and len(site.counts()) == 30
    rows = home.query("SELECT status FROM ingest_results")
    assert [r["status"] for r in rows] == ["success"] * 30
    # Each worker process wrote to its own WARC slot, and every body is there once.
    assert len(warc_responses(home.path)) == 30
