"""The `urls` source type end to end: a real HTTP server on 127.0.0.1, a real store of
each backend, the real execution plan and worker pool. Every test runs twice."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from thresher.clock import SystemClock
from thresher.config import Config
from thresher.plan import ExecutionPlan, SourceReport
from thresher.sources import add_source
from thresher.sources.urls import content_path, parse_list
from thresher.store import Row
from thresher.store.aio import AsyncStore

SOURCE = "docs"
LAST_MODIFIED = "Wed, 21 Oct 2015 07:28:00 GMT"
CONDITIONAL = ("if-none-match", "if-modified-since")


# -- The web server --------------------------------------------------------------------


@dataclass
class Page:
    body: bytes = b""
    status: int = 200
    etag: str | None = None
    last_modified: str | None = None
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = False  # no Content-Length: the body is streamed in 1000-byte chunks
    unavailable: int = 0  # answer this many requests "503, Retry-After: 0" first


@dataclass(frozen=True)
class Seen:
    path: str  # with the query string
    headers: dict[str, str]  # names in lower case
    status: int


class Site:
    """Pages by path (with query), served as a careful HTTP server would: conditional
    requests are answered 304 when the validator matches. Every request is recorded."""

    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}
        self.seen: list[Seen] = []
        self.robots: list[Seen] = []  # robots.txt requests, kept apart from the pages
        self.base = ""

    def url(self, path: str) -> str:
        return self.base + path

    def counts(self) -> Counter[str]:
        return Counter(s.path for s in self.seen)

    def requests(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        resp = await self._answer(request, headers)
        seen = self.robots if request.path == "/robots.txt" else self.seen
        seen.append(Seen(request.path_qs, headers, resp.status))
        return resp

    async def _answer(self, request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
        page = self.pages.get(request.path_qs)
        if page is None:
            return web.Response(status=404, text="no such page")
        if page.unavailable > 0:
            page.unavailable -= 1
            return web.Response(status=503, text="busy", headers={"Retry-After": "0"})
        validators = {}
        if page.etag is not None:
            validators["ETag"] = page.etag
        if page.last_modified is not None:
            validators["Last-Modified"] = page.last_modified
        if page.status == 200 and _not_modified(page, headers):
            return web.Response(status=304, headers=validators)
        out = {"Content-Type": page.content_type, **validators, **page.headers}
        if not page.chunked:
            return web.Response(status=page.status, body=page.body, headers=out)
        resp = web.StreamResponse(status=page.status, headers=out)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            for i in range(0, len(page.body), 1000):
                await resp.write(page.body[i : i + 1000])
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the client hung up: it had read enough
        return resp


def _not_modified(page: Page, headers: dict[str, str]) -> bool:
    # RFC 9110 13.2.2: If-None-Match, when present, decides alone.
    if "if-none-match" in headers:
        return page.etag is not None and headers["if-none-match"] == page.etag
    if "if-modified-since" in headers:
        return page.last_modified is not None and headers["if-modified-since"] == (
            page.last_modified
        )
    return False


@contextlib.asynccontextmanager
async def serve(site: Site) -> AsyncIterator[Site]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", site.handle)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    site.base = f"http://127.0.0.1:{server.port}"
    try:
        yield site
    finally:
        await server.close()


# -- Running the harvester ----------------------------------------------------------------


def make_config(store_url: str, home: Path, **kw: Any) -> Config:
    db = None if store_url.startswith("sqlite") else store_url
    defaults: dict[str, Any] = dict(
        home=home, db=db, backoff_base=0.01, backoff_max=0.05, lease_seconds=30
    )
    return Config(**{**defaults, **kw})


@dataclass
class Harvest:
    report: SourceReport
    docs: dict[str, Row]  # by URL
    jobs: list[Row]
    started: float
    finished: float

    def job(self, key: str) -> Row:
        [row] = [j for j in self.jobs if j["key"] == key]
        return row

    @property
    def root_key(self) -> str:
        return f"run{self.report.run_id}:{SOURCE}"

    def fetch_key(self, url: str) -> str:
        return f"{self.root_key}/{hashlib.sha1(url.encode()).hexdigest()[:20]}"

    def result(self, key: str) -> Any:
        raw = self.job(key)["result"]
        return json.loads(raw) if raw is not None else None


async def add(config: Config, url: str, options: dict[str, str] | None = None) -> None:
    store = await AsyncStore(config.store_url).open()
    try:
        # The test server is on loopback, and there is no need to wait between requests.
        raw = {"allow_private": "true", "delay": "0", **(options or {})}
        await store.run(lambda tx: add_source(tx, SOURCE, url, "urls", raw, time.time()))
    finally:
        await store.close()


async def harvest(config: Config) -> Harvest:
    """One `thresher run`: its own store connection, closed at the end."""
    store = await AsyncStore(config.store_url).open()
    try:
        started = time.time()
        run = await ExecutionPlan(config, store, SystemClock()).run_once()
        finished = time.time()
        [report] = run.sources
        docs = await store.run(lambda tx: tx.all("list_documents", source=SOURCE), write=False)
        jobs = await store.run(lambda tx: tx.all("list_jobs", run=report.run_id), write=False)
    finally:
        await store.close()
    return Harvest(report, {d["url"]: d for d in docs}, jobs, started, finished)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_files(home: Path) -> dict[Path, bytes]:
    """Every file under HOME/content, temporary ones included."""
    folder = home / "content"
    if not folder.exists():
        return {}
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def expected_files(home: Path, *bodies: bytes) -> dict[Path, bytes]:
    return {content_path(home, sha(b)): b for b in bodies}


def snapshot(home: Path) -> dict[Path, tuple[int, int, bytes]]:
    return {
        p: (p.stat().st_mtime_ns, p.stat().st_ino, data) for p, data in content_files(home).items()
    }


def assert_stored(doc: Row, page: Page, h: Harvest) -> None:
    assert doc["status"] == 200
    assert doc["error"] is None
    assert doc["sha256"] == sha(page.body)
    assert doc["length"] == len(page.body)
    assert doc["content_type"] == page.content_type
    assert doc["etag"] == page.etag
    assert doc["last_modified"] == page.last_modified
    assert h.started <= doc["fetched"] <= h.finished


def umask() -> int:
    # Called before the event loop starts: os.umask sets the process's mask to read it.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- 1. A list of URLs, each fetched once ----------------------------------------------------


BODY_A = b"alpha\n" + bytes(range(256))
BODY_B = "bêta, ünïcode\n".encode()
BODY_D = bytes((i * 7 + i // 251) % 256 for i in range(200_000))  # several read chunks


def list_text(site: Site) -> bytes:
    lines = [
        "\ufeff# pages to keep (saved with a byte-order mark)",  # 1
        site.url("/a"),  # 2
        "",  # 3
        f"   {site.url('/b')}   # the second page",  # 4
        "   # an indented comment",  # 5
        site.url("/a"),  # 6: a duplicate
        "ftp://127.0.0.1/pub/file.txt",  # 7: not http(s)
        site.url("/c?q=1"),  # 8
        site.url("/d#top"),  # 9: a fragment is not a comment
        "\t",  # 10
    ]
    return ("\r\n".join(lines[:5]) + "\n" + "\n".join(lines[5:]) + "\n").encode()


@pytest.mark.parametrize("list_via", ["http", "path", "file-uri"])
def test_every_url_is_fetched_once(store_url: str, tmp_path: Path, list_via: str) -> None:
    home = tmp_path
    config = make_config(store_url, home)
    file_mode = 0o666 & ~umask()

    async def body() -> None:
        async with serve(Site()) as site:
            pages = {
                "/a": Page(BODY_A, etag='"a1"', last_modified=LAST_MODIFIED),
                "/b": Page(BODY_B, etag='"b1"', content_type="text/html; charset=utf-8"),
                "/c?q=1": Page(b"", content_type="application/octet-stream"),
                "/d": Page(BODY_D, last_modified=LAST_MODIFIED, content_type="image/png"),
            }
            site.pages.update(pages)
            folder = tmp_path / "my lists"  # a space: file: URIs quote it
            folder.mkdir()
            (folder / "list.txt").write_bytes(list_text(site))
            site.pages["/list.txt"] = Page(list_text(site))
            where = {
                "http": site.url("/list.txt"),
                "path": str(folder / "list.txt"),
                "file-uri": (folder / "list.txt").as_uri(),
            }[list_via]
            await add(config, where)
            h = await harvest(config)

            urls = [site.url(p) for p in ("/a", "/b", "/c?q=1", "/d#top")]
            assert h.report.outcome == "ok" and h.report.error is None
            assert h.report.counts == {"done": 1 + len(urls) + 1}
            assert h.result(h.root_key) == {
                "urls": 4,
                "rejected": ["line 7: not an http(s) URL: 'ftp://127.0.0.1/pub/file.txt'"],
                "rejected_count": 1,
            }
            assert h.result(f"{h.root_key}#commit") == {"documents": 4}

            # The server saw every page once, unconditionally, with our User-Agent.
            expected = Counter(["/a", "/b", "/c?q=1", "/d"])
            if list_via == "http":
                expected["/list.txt"] = 1
            assert site.counts() == expected
            for seen in site.seen:
                assert seen.headers["user-agent"] == config.user_agent
                assert not set(CONDITIONAL) & set(seen.headers)
                assert seen.status == 200

            assert sorted(h.docs) == sorted(urls)
            for url, path in zip(urls, ["/a", "/b", "/c?q=1", "/d"], strict=True):
                doc = h.docs[url]
                assert_stored(doc, pages[path], h)
                assert doc["changed"] == doc["fetched"]
                assert doc["fetches"] == 1
                result = {"status": 200, "sha256": sha(pages[path].body)}
                assert h.result(h.fetch_key(url)) == result
                assert h.job(h.fetch_key(url))["attempts"] == 1

            files = content_files(home)
            assert files == expected_files(home, *(p.body for p in pages.values()))
            for file in files:
                assert file.stat().st_mode & 0o777 == file_mode

    asyncio.run(body())


def test_parse_list_rules() -> None:
    text = (
        "\ufeffhttp://h/first\n"
        "#http://h/commented-out\n"
        "http://h/x#frag # trailing comment\n"
        "HTTPS://h/upper\n"
        "http://h/with space\n"
        "http:///no-host\n"
        "mailto:someone@h\n"
        "http://h/first\n"
    )
    urls, rejected = parse_list(text.encode())
    assert urls == ["http://h/first", "http://h/x#frag", "HTTPS://h/upper"]
    assert rejected == [
        "line 5: not an http(s) URL: 'http://h/with space'",
        "line 6: not an http(s) URL: 'http:///no-host'",
        "line 7: not an http(s) URL: 'mailto:someone@h'",
    ]


def test_list_url_scheme_is_case_insensitive(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/a"] = Page(b"a")
            site.pages["/list.txt"] = Page(site.url("/a").encode())
            await add(config, "HTTP" + site.url("/list.txt")[4:])
            h = await harvest(config)
            assert h.report.outcome == "ok", h.report.error
            assert site.counts() == {"/list.txt": 1, "/a": 1}
            assert list(h.docs) == [site.url("/a")]

    asyncio.run(body())


# -- 2. Nothing changed: conditional requests, 304, no bytes -----------------------------------


def test_unchanged_pages_cost_a_304(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            pages = {
                "/both": Page(b"both validators", etag='"e1"', last_modified=LAST_MODIFIED),
                "/etag": Page(b"an etag only", etag='W/"e2"'),
                "/lm": Page(b"last-modified only", last_modified=LAST_MODIFIED),
            }
            site.pages.update(pages)
            site.pages["/list.txt"] = Page("\n".join(map(site.url, pages)).encode())
            await add(config, site.url("/list.txt"))
            first = await harvest(config)
            assert first.report.outcome == "ok"
            before = snapshot(tmp_path)
            assert {p: data for p, (_, _, data) in before.items()} == expected_files(
                tmp_path, *(p.body for p in pages.values())
            )

            site.seen.clear()
            second = await harvest(config)
            assert second.report.outcome == "ok" and second.report.error is None
            assert second.report.counts == {"done": 5}
            assert site.counts() == {"/list.txt": 1, "/both": 1, "/etag": 1, "/lm": 1}
            sent = {s.path: {k: s.headers.get(k) for k in CONDITIONAL} for s in site.seen}
            assert sent == {
                "/list.txt": {"if-none-match": None, "if-modified-since": None},
                "/both": {"if-none-match": '"e1"', "if-modified-since": LAST_MODIFIED},
                "/etag": {"if-none-match": 'W/"e2"', "if-modified-since": None},
                "/lm": {"if-none-match": None, "if-modified-since": LAST_MODIFIED},
            }
            assert {s.path: s.status for s in site.seen if s.path != "/list.txt"} == {
                "/both": 304,
                "/etag": 304,
                "/lm": 304,
            }

            # Not a byte re-stored: the same files, untouched.
            assert snapshot(tmp_path) == before
            for path, page in pages.items():
                url = site.url(path)
                old, doc = first.docs[url], second.docs[url]
                assert_stored(doc, page, second)
                assert doc["fetches"] == 2
                assert doc["changed"] == old["changed"] == old["fetched"]
                assert doc["fetched"] > old["fetched"]
                assert second.result(second.fetch_key(url)) == {"status": 304, "sha256": None}

    asyncio.run(body())


# -- 3. A page that changed -----------------------------------------------------------------


def test_a_changed_page_gets_a_new_snapshot(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            old_body, new_body = b"version one\n", b"version two, longer\n"
            site.pages["/news"] = Page(old_body, etag='"v1"')
            site.pages["/static"] = Page(b"never changes", etag='"s"')
            site.pages["/plain"] = Page(b"no validators at all")
            site.pages["/list.txt"] = Page(
                "\n".join(map(site.url, ["/news", "/static", "/plain"])).encode()
            )
            await add(config, site.url("/list.txt"))
            first = await harvest(config)
            assert first.report.outcome == "ok"

            site.pages["/news"] = Page(new_body, etag='"v2"')
            site.seen.clear()
            second = await harvest(config)
            assert second.report.outcome == "ok"

            [news_req] = site.requests("/news")
            assert news_req.headers.get("if-none-match") == '"v1"'
            assert news_req.status == 200
            [plain_req] = site.requests("/plain")
            assert not set(CONDITIONAL) & set(plain_req.headers)  # nothing to send

            news = second.docs[site.url("/news")]
            assert_stored(news, site.pages["/news"], second)
            assert news["sha256"] != first.docs[site.url("/news")]["sha256"]
            assert news["changed"] == news["fetched"] > first.docs[site.url("/news")]["changed"]
            assert news["fetches"] == 2

            for path in ("/static", "/plain"):
                old, doc = first.docs[site.url(path)], second.docs[site.url(path)]
                assert doc["sha256"] == old["sha256"]
                assert doc["changed"] == old["changed"] < doc["fetched"]
                assert doc["fetches"] == 2

            # Content is addressed by hash: the old version stays, the new one is added.
            assert content_files(tmp_path) == expected_files(
                tmp_path, old_body, new_body, b"never changes", b"no validators at all"
            )

    asyncio.run(body())


def test_a_new_body_replaces_the_old_validators(store_url: str, tmp_path: Path) -> None:
    """A page that changes and drops its ETag must not be asked about the old ETag forever."""
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/p"] = Page(b"one", etag='"e1"', content_type="text/html")
            site.pages["/list.txt"] = Page(site.url("/p").encode())
            await add(config, site.url("/list.txt"))
            await harvest(config)
            site.pages["/p"] = Page(b"two", last_modified=LAST_MODIFIED)
            second = await harvest(config)
            doc = second.docs[site.url("/p")]
            assert doc["etag"] is None and doc["last_modified"] == LAST_MODIFIED
            assert doc["content_type"] == "text/plain; charset=utf-8"
            site.seen.clear()
            await harvest(config)
            [req] = site.requests("/p")
            assert "if-none-match" not in req.headers
            assert req.headers.get("if-modified-since") == LAST_MODIFIED and req.status == 304

    asyncio.run(body())


# -- 4. HTTP errors are results ---------------------------------------------------------------


@pytest.mark.parametrize(("status", "reason"), [(404, "Not Found"), (410, "Gone")])
def test_a_missing_page_is_recorded_not_failed(
    store_url: str, tmp_path: Path, status: int, reason: str
) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/a"] = Page(b"here")
            if status != 404:
                site.pages["/gone"] = Page(b"gone", status=status)
            site.pages["/list.txt"] = Page(f"{site.url('/a')}\n{site.url('/gone')}\n".encode())
            await add(config, site.url("/list.txt"))
            h = await harvest(config)

            assert h.report.outcome == "ok" and h.report.error is None
            assert h.report.counts == {"done": 4}
            # Not just "ok": what failed is reported with the run.
            gone = site.url("/gone")
            assert h.report.problems == f"1 URL failed: {gone}: HTTP {status} {reason}"
            assert site.counts() == {"/list.txt": 1, "/a": 1, "/gone": 1}  # not retried
            doc = h.docs[site.url("/gone")]
            assert doc["status"] == status
            assert doc["error"] == f"HTTP {status} {reason}"
            assert doc["sha256"] is None and doc["length"] is None and doc["etag"] is None
            assert doc["fetches"] == 1
            job = h.job(h.fetch_key(site.url("/gone")))
            assert (job["state"], job["attempts"], job["last_error"]) == ("done", 1, None)
            assert h.result(job["key"]) == {"status": status, "sha256": None}
            assert content_files(tmp_path) == expected_files(tmp_path, b"here")

    asyncio.run(body())


def test_a_page_that_goes_missing_and_comes_back(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            page = Page(b"the page", etag='"p1"')
            site.pages["/p"] = page
            site.pages["/list.txt"] = Page(site.url("/p").encode())
            url = site.url("/p")
            await add(config, site.url("/list.txt"))
            first = await harvest(config)

            del site.pages["/p"]
            second = await harvest(config)
            doc = second.docs[url]
            assert (doc["status"], doc["error"]) == (404, "HTTP 404 Not Found")
            # The last good snapshot is kept, and so are its validators.
            assert doc["sha256"] == sha(b"the page") and doc["etag"] == '"p1"'

            site.pages["/p"] = page
            site.seen.clear()
            third = await harvest(config)
            assert [(s.headers.get("if-none-match"), s.status) for s in site.requests("/p")] == [
                ('"p1"', 304)
            ]
            doc = third.docs[url]
            assert_stored(doc, page, third)  # status 200 again, error cleared
            assert doc["fetches"] == 3
            assert doc["changed"] == first.docs[url]["changed"]
            assert content_files(tmp_path) == expected_files(tmp_path, b"the page")

    asyncio.run(body())


def test_redirects(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/old"] = Page(status=301, headers={"Location": "/new"})
            site.pages["/new"] = Page(b"moved here", etag='"n"')
            site.pages["/loop"] = Page(status=302, headers={"Location": "/loop"})
            site.pages["/loop-a"] = Page(status=301, headers={"Location": "/loop-b"})
            site.pages["/loop-b"] = Page(status=301, headers={"Location": "/loop-a"})
            site.pages["/chain/0"] = Page(status=302, headers={"Location": "/chain/1"})
            for i in range(1, 12):
                site.pages[f"/chain/{i}"] = Page(
                    status=302, headers={"Location": f"/chain/{i + 1}"}
                )
            site.pages["/away"] = Page(status=302, headers={"Location": "ftp://127.0.0.1/x"})
            site.pages["/unasked"] = Page(status=304)
            paths = ["/old", "/loop", "/loop-a", "/chain/0", "/away", "/unasked"]
            site.pages["/list.txt"] = Page("\n".join(map(site.url, paths)).encode())
            await add(config, site.url("/list.txt"))
            h = await harvest(config)

            assert h.report.outcome == "ok", h.report.error
            assert h.report.counts == {"done": 8}
            # Followed, and stored under the URL of the list.
            assert_stored(h.docs[site.url("/old")], site.pages["/new"], h)
            # A loop is a result like a 404, from one attempt, found when a redirect
            # points back into its own chain: each URL of the loop is asked once.
            counts = site.counts()
            assert counts["/loop"] == counts["/loop-a"] == counts["/loop-b"] == 1
            loop = h.docs[site.url("/loop")]
            assert loop["status"] == 302 and loop["sha256"] is None
            assert loop["error"].startswith("TooManyRedirects: redirect loop")
            assert "back to" in h.docs[site.url("/loop-a")]["error"]
            # A chain that never comes back is given up after MAX_REDIRECTS.
            assert [counts.get(f"/chain/{i}", 0) for i in range(12)] == [1] * 11 + [0]
            assert "more than 10 redirects" in h.docs[site.url("/chain/0")]["error"]
            away = h.docs[site.url("/away")]
            assert away["sha256"] is None and "ftp://127.0.0.1/x" in away["error"]
            unasked = h.docs[site.url("/unasked")]
            assert (unasked["status"], unasked["error"]) == (304, "HTTP 304 Not Modified")
            for path in paths:
                assert h.job(h.fetch_key(site.url(path)))["attempts"] == 1
            assert content_files(tmp_path) == expected_files(tmp_path, b"moved here")

    asyncio.run(body())


# -- 5. Retried statuses ----------------------------------------------------------------------


def test_503_is_retried(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/a"] = Page(b"steady")
            site.pages["/busy"] = Page(b"finally", unavailable=1)
            site.pages["/list.txt"] = Page(f"{site.url('/a')}\n{site.url('/busy')}".encode())
            await add(config, site.url("/list.txt"))
            h = await harvest(config)

            assert h.report.outcome == "ok" and h.report.error is None
            assert h.report.counts == {"done": 4}
            assert [s.status for s in site.requests("/busy")] == [503, 200]
            assert site.counts() == {"/list.txt": 1, "/a": 1, "/busy": 2}
            url = site.url("/busy")
            assert_stored(h.docs[url], site.pages["/busy"], h)
            assert h.docs[url]["fetches"] == 1  # the failed attempt wrote nothing
            job = h.job(h.fetch_key(url))
            assert (job["state"], job["attempts"]) == ("done", 2)
            assert job["last_error"] == f"{url}: HTTP 503"
            assert content_files(tmp_path) == expected_files(tmp_path, b"steady", b"finally")

    asyncio.run(body())


def test_a_page_that_stays_unavailable_fails_the_run(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path, max_attempts=3)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/a"] = Page(b"steady")
            site.pages["/down"] = Page(b"never", unavailable=10)
            site.pages["/list.txt"] = Page(f"{site.url('/a')}\n{site.url('/down')}".encode())
            await add(config, site.url("/list.txt"))
            h = await harvest(config)

            url = site.url("/down")
            assert h.report.outcome == "failed"
            assert h.report.counts == {"done": 2, "failed": 2}  # the fetch and the commit
            key = h.fetch_key(url)
            assert h.report.error == f"{key}: {url}: HTTP 503 (gave up after 3 attempts)"
            assert site.counts()["/down"] == 3
            assert list(h.docs) == [site.url("/a")]
            assert content_files(tmp_path) == expected_files(tmp_path, b"steady")

    asyncio.run(body())


# -- 6. max_bytes -----------------------------------------------------------------------------


def test_a_body_over_max_bytes_fails_its_job(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            small, exact, big = b"s" * 500, b"e" * 1000, bytes(range(250)) * 20
            site.pages["/small"] = Page(small)
            site.pages["/exact"] = Page(exact)  # max_bytes itself is allowed
            site.pages["/big"] = Page(big)  # declared by Content-Length
            site.pages["/stream"] = Page(big, chunked=True)  # found out while reading
            paths = ["/small", "/big", "/exact", "/stream"]
            site.pages["/list.txt"] = Page("\n".join(map(site.url, paths)).encode())
            await add(config, site.url("/list.txt"), {"max_bytes": "1000"})
            h = await harvest(config)

            big_url, stream_url = site.url("/big"), site.url("/stream")
            assert h.report.outcome == "failed"
            assert h.report.counts == {"done": 3, "failed": 3}  # big, stream, commit
            assert h.report.error == (
                f"{h.fetch_key(big_url)}: TooLarge: GET {big_url}: Content-Length 5000 exceeds"
                " max_body=1000"
            )
            stream_job = h.job(h.fetch_key(stream_url))
            assert (stream_job["state"], stream_job["attempts"]) == ("failed", 1)
            assert stream_job["last_error"] == (
                f"TooLarge: GET {stream_url}: body exceeds max_body=1000"
            )
            assert h.job(h.fetch_key(big_url))["attempts"] == 1
            assert h.job(f"{h.root_key}#commit")["state"] == "failed"
            # Each asked for once: a permanent error is not retried.
            assert site.counts() == Counter(["/list.txt", *paths])

            assert sorted(h.docs) == sorted([site.url("/small"), site.url("/exact")])
            assert_stored(h.docs[site.url("/small")], site.pages["/small"], h)
            assert_stored(h.docs[site.url("/exact")], site.pages["/exact"], h)
            # No temporary file left behind.
            assert list((tmp_path / "content").rglob(".part-*")) == []
            assert content_files(tmp_path) == expected_files(tmp_path, small, exact)

    asyncio.run(body())


# -- 7. The list itself cannot be had -----------------------------------------------------------


def test_a_missing_list_fails_the_run(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/a"] = Page(b"never asked for")
            url = site.url("/nolist.txt")
            await add(config, url)
            h = await harvest(config)

            assert h.report.outcome == "failed"
            assert h.report.counts == {"failed": 1}
            assert h.report.error == f"run{h.report.run_id}:{SOURCE}: URL list {url}: HTTP 404"
            assert site.counts() == {"/nolist.txt": 1}
            assert h.docs == {}
            assert content_files(tmp_path) == {}

    asyncio.run(body())


def test_a_missing_list_file_fails_the_run(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)
    where = tmp_path / "no such list.txt"

    async def body() -> None:
        await add(config, str(where))
        h = await harvest(config)
        assert h.report.outcome == "failed"
        assert h.report.counts == {"failed": 1}
        assert h.report.error == (
            f"run{h.report.run_id}:{SOURCE}: URL list {where}: No such file or directory"
        )
        assert h.docs == {}
        assert content_files(tmp_path) == {}

    asyncio.run(body())


def test_a_list_over_max_bytes_once_decoded_fails_the_run(store_url: str, tmp_path: Path) -> None:
    # 60 KB on the wire, 64 MiB once gunzipped: the source's max_bytes (1 MiB) stops the
    # fetch's decoder, as it stops a page's (before, the list decoded to 2 GiB).
    config = make_config(store_url, tmp_path)
    bomb = gzip.compress(b"\n" * 64 * 2**20, mtime=0)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/list.txt"] = Page(bomb, headers={"Content-Encoding": "gzip"})
            url = site.url("/list.txt")
            await add(config, url, {"max_bytes": str(2**20)})
            h = await harvest(config)
            assert h.report.outcome == "failed"
            assert f"URL list {url}: " in str(h.report.error)
            assert "exceeds max_body=1048576" in str(h.report.error)
            assert h.docs == {}

    asyncio.run(body())


def test_a_list_file_over_max_bytes_fails_the_run(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)
    where = tmp_path / "list.txt"
    where.write_bytes(b"https://example.org/a\n" * 100)

    async def body() -> None:
        await add(config, str(where), {"max_bytes": "1000"})
        h = await harvest(config)
        assert h.report.outcome == "failed"
        assert str(h.report.error).endswith(f"URL list {where}: larger than max_bytes=1000")
        assert h.docs == {}

    asyncio.run(body())


def test_robots_txt_is_obeyed_and_asked_for_once(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/robots.txt"] = Page(b"User-agent: *\nDisallow: /private\n")
            site.pages["/a"] = Page(b"here")
            site.pages["/private/b"] = Page(b"secret")
            urls = [site.url("/a"), site.url("/private/b")]
            site.pages["/list.txt"] = Page("\n".join(urls).encode())
            await add(config, site.url("/list.txt"))
            h = await harvest(config)

            assert h.report.outcome == "ok"
            assert site.counts() == {"/list.txt": 1, "/a": 1}
            assert len(site.robots) == 1
            doc = h.docs[site.url("/private/b")]
            assert doc["sha256"] is None and doc["status"] is None
            assert doc["error"].startswith("RobotsDisallowed")

    asyncio.run(body())


def test_private_addresses_are_refused_unless_allowed(store_url: str, tmp_path: Path) -> None:
    config = make_config(store_url, tmp_path)

    async def body() -> None:
        async with serve(Site()) as site:
            site.pages["/a"] = Page(b"here")
            listing = tmp_path / "list.txt"
            listing.write_text(site.url("/a") + "\n")
            await add(config, str(listing), {"allow_private": "false"})
            h = await harvest(config)

            # Nothing could be fetched: failed, saying how to allow it.
            assert h.report.outcome == "failed"
            assert h.report.error == (
                f"run{h.report.run_id}:{SOURCE}: refused: loopback address 127.0.0.1;"
                " pass --allow-private (a source: -o allow_private=true);"
                " nothing was fetched (1 URL refused)"
            )
            assert not site.seen and not site.robots
            doc = h.docs[site.url("/a")]
            assert doc["sha256"] is None
            assert doc["error"].startswith("AddressRefused") and "private" in doc["error"]

    asyncio.run(body())
