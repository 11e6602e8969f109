"""Crawls end to end: a web of loopback hosts, the `web` source type run by the real
execution plan and worker pool, a real store of each backend, WARC files read back
with warcio. Every test runs twice (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from crawlsite import Page, SiteServer, build_site
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from thresher.clock import SystemClock
from thresher.config import Config
from thresher.plan import ExecutionPlan, SourceReport
from thresher.sources import add_source
from thresher.sources.directory import update_source
from thresher.store import Row
from thresher.store.aio import AsyncStore

SOURCE = "site"
# Loopback crawls are allowed explicitly, and fast: no politeness delay.
FAST = {"allow_private": "true", "delay": "0", "concurrency": "8"}


@dataclass
class Crawl:
    report: SourceReport
    run: Row
    urls: dict[str, Row]
    result: dict[str, Any]


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer(hosts=3) as s:
        yield s


def make_config(store_url: str, home: Path) -> Config:
    db = None if store_url.startswith("sqlite") else store_url
    return Config(home=home, db=db, backoff_base=0.01, backoff_max=0.05, lease_seconds=30)


def crawl(config: Config, seeds: list[str], **options: str) -> Crawl:
    """One `thresher run` of the web source (added on first use, updated after)."""

    async def main() -> Crawl:
        store = await AsyncStore(config.store_url).open()
        try:
            scope = rf"^http://127\.0\.0\.\d+:{seeds[0].split(':')[2].split('/')[0]}/"
            raw = {**FAST, "scope": scope, **options}
            if len(seeds) > 1:
                raw["seeds"] = " ".join(seeds[1:])

            def save(tx: Any) -> None:
                if tx.one("get_source", name=SOURCE) is None:
                    add_source(tx, SOURCE, seeds[0], "web", raw, time.time())
                else:
                    update_source(tx, SOURCE, seeds[0], raw, time.time())

            await store.run(save)
            run = await ExecutionPlan(config, store, SystemClock()).run_once([SOURCE])
            [report] = run.sources

            def read(tx: Any) -> tuple[Row, list[Row], Row]:
                row = tx.one("get_crawl_run", run=report.run_id)
                key = f"run{report.run_id}:{SOURCE}"
                # A sharded crawl's summary is its commit job's result.
                job = tx.one("get_job_by_key", key=f"{key}#commit")
                job = job or tx.one("get_job_by_key", key=key)
                return row, tx.all("crawl_url_states", source=SOURCE), job

            row, urls, job = await store.run(read, write=False)
        finally:
            await store.close()
        result = json.loads(job["result"]) if job and job["result"] else {}
        return Crawl(report, row, {u["url"]: u for u in urls}, result)

    return asyncio.run(main())


def pages_asked(site: SiteServer) -> set[str]:
    """The URLs asked for but robots.txt and sitemaps (which a page limit does not count)."""
    return {u for u in site.hit_counts() if not u.endswith("/sitemap.xml")}


def warc_records(home: Path) -> list[Any]:
    records = []
    for path in sorted((home / "warc" / SOURCE).glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit"):
                    records.append(
                        (
                            rec.rec_type,
                            rec.rec_headers.get_header("WARC-Target-URI"),
                            rec.http_headers.get_statuscode() if rec.http_headers else None,
                            rec.content_stream().read(),
                        )
                    )
    return records


@pytest.mark.parametrize(("processes", "shards"), [("0", "1"), ("1", "1"), ("0", "3")])
def test_a_crawl_fetches_every_reachable_page_once(
    site: SiteServer, store_url: str, tmp_path: Path, processes: str, shards: str
) -> None:
    """Pages parsed and archived inline (0) or by a child process (1), hosts crawled by
    one job or split over three shard jobs: the same crawl."""
    seeds = build_site(site)
    expected = site.reachable(seeds)
    c = crawl(make_config(store_url, tmp_path), seeds, parse_processes=processes, shards=shards)
    assert c.report.outcome == "ok", c.report.error

    hits = site.hit_counts()
    # Every reachable URL asked for, once; the flaky page twice (503, then 200).
    assert set(hits) == expected
    assert {u for u, n in hits.items() if n != 1} == {f"{site.base(0)}/flaky.html"}
    assert hits[f"{site.base(0)}/flaky.html"] == 2
    # robots.txt: once per host, and its Disallow honoured.
    robots = [h.url for h in site.hits if h.url.endswith("/robots.txt")]
    assert sorted(robots) == sorted(f"{site.base(i)}/robots.txt" for i in range(3))
    assert f"{site.base(0)}/private/secret.html" not in hits
    assert f"{site.base(0)}/hidden.html" not in hits  # behind <meta robots nofollow>

    # The store knows each URL once, with what became of it.
    states = {u: (r["state"], r["status"]) for u, r in c.urls.items()}
    b = site.base(0)
    assert states[f"{b}/private/secret.html"] == ("robots", None)
    assert states[f"{b}/redirect"] == ("redirect", 302)
    assert states[f"{b}/target.html"] == ("done", 200)
    assert states[f"{b}/loop-a"] == ("redirect", 301)
    assert states[f"{b}/loop-b"] == ("redirect", 301)
    assert states[f"{b}/missing"] == ("error", 404)
    assert states[f"{b}/flaky.html"] == ("done", 200)
    assert all(
        r["state"] != "queued" and r["fetched_run"] == c.report.run_id for u, r in c.urls.items()
    ), states

    # The WARC files hold each fetched URL exactly once, and duplicates as revisits.
    records = warc_records(tmp_path)
    uris = Counter(uri for _, uri, _, _ in records)
    assert set(uris) == expected | {f"{site.base(i)}/robots.txt" for i in range(3)}
    assert max(uris.values()) == 1
    by_uri = {uri: (kind, status, body) for kind, uri, status, body in records}
    kinds = sorted(by_uri[f"{b}/dup-{x}.html"][0] for x in "ab")
    assert kinds == ["response", "revisit"]
    page = f"{site.base(1)}/p/3.html"
    assert by_uri[page] == ("response", "200", site.pages[page].body)
    pages = [uri for _, uri, status, _ in records if status == "200" and "robots" not in uri]
    assert c.run["pages"] == len(pages)
    assert c.result["pages"] == c.run["pages"]
    assert c.run["duplicates"] == 1
    assert c.run["queued"] == 0
    if shards == "3":  # each host's shard wrote its pages, under its own prefix
        assert c.result["shards"] == 3
        files = {p.name for p in (tmp_path / "warc" / SOURCE).glob("*.warc.gz")}
        assert {f.split("-")[2] for f in files} == {"shard0", "shard1", "shard2"}
        assert sorted(c.result["warc_files"]) == sorted(files)


def test_a_second_crawl_costs_a_304_per_page_and_finds_new_ones(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    seeds = build_site(site, pages_per_host=8)
    config = make_config(store_url, tmp_path)
    first = crawl(config, seeds)
    assert first.report.outcome == "ok"
    fetched_first = set(site.hit_counts())
    site.hits.clear()

    # Between the runs a page gains a link to a new page.
    page_url = f"{site.base(2)}/p/5.html"
    new_url = f"{site.base(2)}/new.html"
    site.pages[new_url] = Page(body=b"<html><body>new</body></html>")
    old = site.pages[page_url]
    site.pages[page_url] = Page(
        body=old.body + f'<a href="{new_url}">new</a>'.encode(), links=(*old.links, new_url)
    )
    second = crawl(config, seeds)
    assert second.report.outcome == "ok"
    assert second.report.run_id != first.report.run_id

    hits = [h for h in site.hits if not h.url.endswith("/robots.txt")]
    assert Counter(h.url for h in hits) == Counter(fetched_first | {new_url})
    changed = {
        page_url,
        new_url,
        f"{site.base(0)}/sitemap.xml",  # 404, as /missing
        f"{site.base(0)}/missing",
        f"{site.base(0)}/redirect",
        f"{site.base(0)}/loop-a",
        f"{site.base(0)}/loop-b",
    }
    for h in hits:
        if h.url not in changed:
            assert h.status == 304, h  # asked conditionally, answered without a body
    assert second.run["not_modified"] == len([h for h in hits if h.status == 304])
    assert second.urls[new_url]["state"] == "done"
    # robots.txt answers are remembered (a day), so not asked for again.
    assert not [h for h in site.hits if h.url.endswith("/robots.txt")]


def test_max_pages_stops_early_and_leaves_the_rest_queued(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    seeds = build_site(site)
    c = crawl(make_config(store_url, tmp_path), seeds, max_pages="10")
    assert c.report.outcome == "ok"
    assert len(pages_asked(site)) == 10  # the seed host's /sitemap.xml besides
    assert c.run["queued"] > 0
    pages = [uri for _, uri, _, _ in warc_records(tmp_path) if not uri.endswith("/robots.txt")]
    # Each fetched URL is archived once, or (a 503 to try again, when the limit came
    # first) still queued for the next run: none is lost.
    assert len(pages) == len(set(pages))
    unarchived = set(site.hit_counts()) - set(pages)
    assert set(pages) <= set(site.hit_counts())
    assert all(c.urls[u]["state"] == "queued" for u in unarchived), unarchived


def test_a_sharded_crawl_keeps_to_max_pages_in_all(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    seeds = build_site(site)
    c = crawl(make_config(store_url, tmp_path), seeds, max_pages="10", shards="3")
    assert c.report.outcome == "ok"
    # Each shard fetches its share (4, 3 and 3): redirects and errors count, and so
    # does a 503 to be tried again (the flaky page), whose URL stays queued.
    assert len(pages_asked(site)) == 10
    retried = [u for u in pages_asked(site) if c.urls[u]["state"] == "queued"]
    assert c.run["pages"] + c.run["errors"] + c.run["redirects"] + len(retried) == 10
    assert c.run["queued"] > 0 and c.result["queued"] == c.run["queued"]


def test_a_sharded_crawl_keeps_to_its_concurrency_in_all(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    seeds = build_site(site, pages_per_host=15)
    site.latency = 0.02
    c = crawl(
        make_config(store_url, tmp_path), seeds, concurrency="3", shards="3", host_connections="4"
    )
    assert c.report.outcome == "ok"
    assert set(site.hit_counts()) == site.reachable(seeds)
    assert site.most_in_flight <= 3  # one each, not three each


def test_more_shards_than_worker_slots_take_turns(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    """One worker slot, three shards: a shard with nothing left to fetch hands the slot
    to a waiting sibling instead of waiting for it in the slot."""
    seeds = build_site(site, pages_per_host=6)
    config = dataclasses.replace(make_config(store_url, tmp_path), workers=1)
    c = crawl(config, seeds, shards="3")
    assert c.report.outcome == "ok"
    assert set(site.hit_counts()) == site.reachable(seeds)
    twice = {u for u, n in site.hit_counts().items() if n != 1}
    assert twice == {f"{site.base(0)}/flaky.html"}  # 503, then 200
    assert c.run["queued"] == 0
    assert max(Counter(uri for _, uri, _, _ in warc_records(tmp_path)).values()) == 1


def test_max_depth_and_scope(site: SiteServer, store_url: str, tmp_path: Path) -> None:
    seeds = build_site(site)
    c = crawl(make_config(store_url, tmp_path), seeds, max_depth="1", scope="host")
    assert c.report.outcome == "ok"
    home = site.pages[seeds[0]]
    one_hop = {u.split("#")[0] for u in home.links if u.startswith(site.base(0))}
    one_hop -= {f"{site.base(0)}/private/secret.html"}
    # A redirect's target is as many hops from the seed as the redirect.
    one_hop |= {f"{site.base(0)}/target.html", f"{site.base(0)}/loop-b"}
    one_hop |= {f"{site.base(0)}/sitemap.xml"}  # asked for whatever the depth (a 404)
    assert set(site.hit_counts()) == {seeds[0]} | one_hop


def test_private_addresses_are_refused_by_default(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    seeds = build_site(site, pages_per_host=3)
    c = crawl(make_config(store_url, tmp_path), seeds, allow_private="false")
    assert c.report.outcome == "ok"
    assert not site.hits  # not even robots.txt was asked for
    assert c.run["pages"] == 0
    assert c.run["errors"] == 1  # the seed (its /sitemap.xml is refused too, not counted)
    assert c.result["error_reasons"] == {"address refused": 1}  # nor among the reasons
    for row in c.urls.values():
        assert row["state"] == "error" and "private" in (row["error"] or "").lower()


def test_bad_servers_and_bad_pages_are_recorded_and_the_crawl_goes_on(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    b = site.base(0)
    bad = {
        "hang": Page(body=b"x" * 10_000, hang=5.0),
        "reset": Page(body=b"y" * 100_000, reset=True),
        "storm": Page(status=500, body=b"down"),
        "huge": Page(body=b"z" * 300_000),
        "binary": Page(body=bytes(range(256)) * 40, content_type="text/html"),
        "latin1": Page(
            body='<a href="caf\xe9.html">café</a>'.encode("latin-1"),
            content_type="text/html; charset=utf-8",  # a lie
        ),
        "bogus-charset": Page(body=b"<a href=x.html>x</a>", content_type="text/html; charset=nope"),
        "broken": Page(body=b"<html><a href='ok.html'<div><a href=\"odd path/\xc3\xa4 ?q=1 2\">"),
        "gzip-lie": Page(body=b"not gzip at all", headers={"Content-Encoding": "gzip"}),
    }
    # Each failing server on a host of its own: three failures on one host park it.
    where = {"hang": site.base(1), "reset": site.base(2)}
    urls = {name: f"{where.get(name, b)}/{name}" for name in bad}
    home = f"{b}/"
    site.pages[home] = Page(body="".join(f'<a href="{u}">.</a>' for u in urls.values()).encode())
    for name, page in bad.items():
        site.pages[urls[name]] = page
    for target in ("x.html", "ok.html"):
        site.pages[f"{b}/{target}"] = Page(body=b"<p>fine</p>")

    site.robots.clear()
    c = crawl(
        make_config(store_url, tmp_path),
        [home],
        timeout="1",
        max_body="200000",
        parse_processes="0",
    )
    assert c.report.outcome == "ok", c.report.error
    state = {
        "/" + u.split("/", 3)[3]: (r["state"], r["status"], r["error"]) for u, r in c.urls.items()
    }
    assert state["/hang"][0] == "error" and "timeout" in state["/hang"][2]
    assert state["/reset"][0] == "error"
    assert state["/storm"] == ("error", 500, "HTTP 500")
    assert state["/huge"][0] == "error" and "max_body" in state["/huge"][2]
    for name in ("binary", "latin1", "bogus-charset", "broken", "gzip-lie"):
        assert state[f"/{name}"][:2] == ("done", 200), name
    assert state["/x.html"][0] == "done"  # found on the page with a bogus charset
    assert state["/ok.html"][0] == "done"  # and in the broken markup
    # Three tries each for the transient failures, once for the permanent one.
    hits = site.hit_counts()
    assert [hits[urls[n]] for n in ("storm", "hang", "reset", "huge")] == [3, 3, 3, 1]
    # The page that lied about its charset links to a name with U+FFFD in it, and the
    # odd link keeps its inner space: both 404 here, recorded like any other answer.
    errors = {u for u, s in state.items() if s[0] == "error"} - {"/sitemap.xml"}  # 404
    assert errors == {
        "/hang",
        "/reset",
        "/storm",
        "/huge",
        "/caf%EF%BF%BD.html",
        "/odd%20path/%C3%A4%20?q=1%202",  # as fetched: the space in the query too
    }
    assert c.run["errors"] == len(errors)
