"""Sitemaps end to end, on both stores: robots.txt Sitemap: lines and /sitemap.xml of
the seed host, an index pointing to a gzip sitemap and a text sitemap, out-of-scope URLs
dropped, the 50,000 limit, lastmod kept with the URL, hostile XML refused."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest
from crawlsite import Page, SiteServer
from test_crawl import crawl, make_config

from thresher.parse.sitemaps import MAX_URLS

XML = "application/xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer(hosts=2) as s:
        yield s


def urlset(*entries: tuple[str, str | None]) -> bytes:
    rows = "".join(
        f"<url><loc>{loc}</loc>{f'<lastmod>{mod}</lastmod>' if mod else ''}</url>"
        for loc, mod in entries
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>{rows}</urlset>'.encode()


def fetched(site: SiteServer) -> list[str]:
    return [h.url for h in site.hits if not h.url.endswith("/robots.txt")]


def html(title: str) -> bytes:
    return f"<!doctype html><title>{title}</title><p>{title}</p>".encode()


def build(site: SiteServer) -> dict[str, str]:
    b, other = site.base(0), site.base(1)
    u = {
        "home": f"{b}/",
        "default": f"{b}/sitemap.xml",
        "index": f"{b}/maps/index.xml",
        "gz": f"{b}/maps/pages.xml.gz",
        "text": f"{b}/maps/more.txt",
        "cross": f"{other}/cross.xml",
        "from_default": f"{b}/from-default.html",
        "listed1": f"{b}/listed/1.html",
        "listed2": f"{b}/listed/2.html",
        "listed3": f"{b}/listed/3.html",
        "cross_listed": f"{b}/cross-listed.html",
        "private": f"{b}/private/p.html",
        "out1": f"{other}/out-of-scope.html",
        "out2": f"{other}/elsewhere.html",
    }
    site.robots[site.ips[0]] = (
        f"User-agent: *\nDisallow: /private/\nSitemap: {u['index']}\nSitemap: {u['cross']}\n"
    )
    site.pages[u["home"]] = Page(body=html("home"))
    # /sitemap.xml, sent gzipped with Content-Encoding (the fetcher decodes it).
    default = urlset(
        (u["from_default"], "2024-05-12"), (u["out1"], "2024-05-12"), (u["private"], None)
    )
    site.pages[u["default"]] = Page(
        body=gzip.compress(default), content_type=XML, headers={"Content-Encoding": "gzip"}
    )
    site.pages[u["index"]] = Page(
        body=(
            f"<sitemapindex {NS}><sitemap><loc>{u['gz']}</loc><lastmod>2024-01-01</lastmod>"
            f"</sitemap><sitemap><loc>{u['text']}</loc></sitemap></sitemapindex>"
        ).encode(),
        content_type=XML,
    )
    # A .xml.gz file as such (no Content-Encoding): gunzipped by the reader.
    site.pages[u["gz"]] = Page(
        body=gzip.compress(urlset((u["listed1"], "2024-01-02T03:04:05Z"), (u["listed2"], None))),
        content_type="application/gzip",
    )
    site.pages[u["text"]] = Page(
        body=f"{u['listed3']}\n{u['out2']}\n".encode(), content_type="text/plain"
    )
    site.pages[u["cross"]] = Page(body=urlset((u["cross_listed"], None)), content_type=XML)
    for name in ("from_default", "listed1", "listed2", "listed3", "cross_listed", "private"):
        site.pages[u[name]] = Page(body=html(name))
    for name in ("out1", "out2"):
        site.pages[u[name]] = Page(body=html(name))
    return u


SITEMAPS = ("default", "index", "gz", "text", "cross")
LISTED = ("from_default", "listed1", "listed2", "listed3", "cross_listed")


def test_sitemaps_are_read(site: SiteServer, store_url: str, tmp_path: Path) -> None:
    u = build(site)
    c = crawl(make_config(store_url, tmp_path), [u["home"]], scope="host")
    assert c.report.outcome == "ok", c.report.error
    hits = fetched(site)
    assert sorted(hits) == sorted(u[n] for n in ("home", *SITEMAPS, *LISTED))  # each once
    assert c.urls[u["private"]]["state"] == "robots"
    assert u["out1"] not in c.urls and u["out2"] not in c.urls  # out of scope: dropped
    assert (c.run["pages"], c.run["sitemaps"], c.run["errors"]) == (6, 5, 0)
    assert c.result["sitemaps"] == 5
    # lastmod kept with the URL; the pages a sitemap lists are one hop from the seeds.
    assert c.urls[u["from_default"]]["lastmod"] == "2024-05-12"
    assert c.urls[u["listed1"]]["lastmod"] == "2024-01-02T03:04:05Z"
    assert c.urls[u["listed2"]]["lastmod"] is None
    assert {c.urls[u[n]]["depth"] for n in LISTED} == {1}
    assert {c.urls[u[n]]["hop"] for n in SITEMAPS} == {2}


def test_no_sitemaps(site: SiteServer, store_url: str, tmp_path: Path) -> None:
    u = build(site)
    c = crawl(make_config(store_url, tmp_path), [u["home"]], scope="host", sitemaps="false")
    assert c.report.outcome == "ok", c.report.error
    assert fetched(site) == [u["home"]]
    assert c.run["sitemaps"] == 0


def test_sitemap_pages_are_a_hop_from_the_seed(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    u = build(site)
    c = crawl(make_config(store_url, tmp_path), [u["home"]], scope="host", max_depth="0")
    assert c.report.outcome == "ok", c.report.error
    assert sorted(fetched(site)) == sorted(u[n] for n in ("home", *SITEMAPS))


def test_a_second_run_asks_again_conditionally(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    u = build(site)
    config = make_config(store_url, tmp_path)
    assert crawl(config, [u["home"]], scope="host").report.outcome == "ok"
    site.hits.clear()
    new = f"{site.base(0)}/listed/4.html"
    site.pages[new] = Page(body=html("new"))
    site.pages[u["text"]] = Page(
        body=f"{u['listed3']}\n{new}\n".encode(), content_type="text/plain"
    )
    c = crawl(config, [u["home"]], scope="host")
    assert c.report.outcome == "ok", c.report.error
    status = {h.url: h.status for h in site.hits if not h.url.endswith("/robots.txt")}
    assert status.pop(u["text"]) == 200 and status.pop(new) == 200
    assert set(status.values()) == {304}  # every other page and sitemap: unchanged
    assert c.run["sitemaps"] == 1
    assert c.urls[u["listed1"]]["lastmod"] == "2024-01-02T03:04:05Z"


def test_at_most_50000_urls_a_sitemap(site: SiteServer, store_url: str, tmp_path: Path) -> None:
    b, other = site.base(0), site.base(1)
    site.robots[site.ips[0]] = ""
    home = f"{b}/"
    site.pages[home] = Page(body=html("home"))
    entries: list[tuple[str, str | None]] = [(f"{b}/big/first.html", None)]
    entries += [(f"{other}/x{i}", None) for i in range(1, MAX_URLS - 1)]  # out of scope
    entries += [(f"{b}/big/at-limit.html", "2025-01-01"), (f"{b}/big/past-limit.html", None)]
    site.pages[f"{b}/sitemap.xml"] = Page(body=urlset(*entries), content_type=XML)
    for loc, _ in (entries[0], *entries[-2:]):
        site.pages[loc] = Page(body=html(loc))
    c = crawl(make_config(store_url, tmp_path), [home], scope="host")
    assert c.report.outcome == "ok", c.report.error
    assert sorted(fetched(site)) == sorted(
        [home, f"{b}/sitemap.xml", f"{b}/big/first.html", f"{b}/big/at-limit.html"]
    )
    assert c.urls[f"{b}/big/at-limit.html"]["lastmod"] == "2025-01-01"
    assert "50000" in (c.urls[f"{b}/sitemap.xml"]["error"] or "")


def test_a_hostile_sitemap_is_refused(site: SiteServer, store_url: str, tmp_path: Path) -> None:
    b = site.base(0)
    site.robots[site.ips[0]] = ""
    site.pages[f"{b}/"] = Page(body=html("home"))
    laughs = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    site.pages[f"{b}/sitemap.xml"] = Page(
        body=(
            f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY l0 "lol">{laughs}]>'
            f"<urlset {NS}><url><loc>{b}/&l9;</loc></url></urlset>"
        ).encode(),
        content_type=XML,
    )
    c = crawl(make_config(store_url, tmp_path), [f"{b}/"], scope="host")
    assert c.report.outcome == "ok", c.report.error
    assert sorted(fetched(site)) == [f"{b}/", f"{b}/sitemap.xml"]
    row = c.urls[f"{b}/sitemap.xml"]
    assert row["status"] == 200 and "DOCTYPE" in (row["error"] or "")
