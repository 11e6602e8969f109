"""The URL fetched is the URL linked: resolved as a browser resolves it, nothing
re-ordered or re-encoded, robots.txt matched against it; two spellings of one URL are
fetched once. The server's log of request lines is what proves it. Every test runs on
both stores (SQLite, PostgreSQL)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from crawlsite import Page, SiteServer, _html
from test_crawl import crawl, make_config, warc_records

from thresher.store.cdxj import cdxj_path, parse_cdxj_line

ROBOTS = "User-agent: *\nDisallow: /*?sort=\nDisallow: /search?q=\nDisallow: /*&action=edit\n"

# Links on the home page, as written in its HTML, and what each must become.
FORBIDDEN = [  # robots.txt disallows them as linked (their canonical forms it would not)
    "list.html?sort=asc&page=2",
    "/search?q=thresher&lang=en",
    "wiki.php?title=Main&action=edit",
]
AS_LINKED = {  # href -> the request target the server must see, exactly
    "router.php?/archives/1": "/router.php?/archives/1",
    "semi?x=1;y=2": "/semi?x=1;y=2",
    "flag?b": "/flag?b",
    "order?z=1&a=2": "/order?z=1&a=2",
    "enc?q=%7e%41&r=a+b": "/enc?q=%7e%41&r=a+b",
    "odd?a|b^c{d}": "/odd?a|b^c{d}",
    "caf\u00e9/x y?q=\u00e9": "/caf%C3%A9/x%20y?q=%C3%A9",
    "/go": "/go",  # a redirect to ?/archives/2, and one to a forbidden URL
    "/go-sort": "/go-sort",
    "/go-mail": "/go-mail",  # a redirect to no http(s) URL: recorded, nothing followed
}
# Other spellings of URLs above: each of these URLs is fetched once, as first linked.
SPELLINGS = [
    "./router.php?/archives/1#top",
    "order?a=2&z=1",
    "flag?b=",
    "HTTP://{host}:{port}/semi?x=1;y=2",
    "http://@{host}:{port}/order?z=1&a=2",
    "http://0x7f.1:{port}/order?z=1&a=2",  # 127.0.0.1 as the URL Standard reads 0x7f.1
    "http://2130706433:{port}/router.php?/archives/1",
    "dir/../semi?x=1%3By%3D2",
]


def _site(site: SiteServer) -> str:
    """The home page of host 0 (127.0.0.1) with the links above; returns the seed."""
    b = site.base(0)
    host, port = site.ips[0], site.port
    site.robots[host] = ROBOTS
    hrefs = [*FORBIDDEN, *AS_LINKED, *(s.format(host=host, port=port) for s in SPELLINGS)]
    anchors = "".join(f'<a href="{h}">x</a>' for h in hrefs)
    site.pages[f"{b}/"] = Page(body=f"<!doctype html><title>home</title>{anchors}".encode())
    for target in AS_LINKED.values():
        site.pages[f"{b}{target}"] = Page(body=_html(target, []))
    site.pages[f"{b}/go"] = Page(status=302, headers={"Location": "?/archives/2"})
    site.pages[f"{b}/go?/archives/2"] = Page(body=_html("archives 2", []))
    site.pages[f"{b}/go-sort"] = Page(status=301, headers={"Location": "list.html?sort=desc"})
    site.pages[f"{b}/go-mail"] = Page(status=302, headers={"Location": "mailto:a@example.org"})
    return f"{b}/"


@pytest.mark.parametrize("shards", ["1", "2"])
def test_the_url_fetched_is_the_url_linked(store_url: str, tmp_path: Path, shards: str) -> None:
    with SiteServer(hosts=2) as site:
        seed = _site(site)
        b = site.base(0)
        config = make_config(store_url, tmp_path)
        c = crawl(config, [seed], shards=shards)
        assert c.report.outcome == "ok", c.report.error

        asked = Counter(h.url.removeprefix(b) for h in site.hits)
        # And the seed host's /sitemap.xml (a 404 here), which a crawl reads by default.
        expected = {"/", "/robots.txt", "/sitemap.xml", *AS_LINKED.values(), "/go?/archives/2"}
        assert set(asked) == expected
        assert max(asked.values()) == 1  # two spellings of one URL: one request
        # What robots.txt forbids as linked was not asked for, in any spelling.
        assert not [u for u in asked if "sort=" in u or "search" in u or "action=" in u]

        # The ledger holds the URLs as fetched; what robots.txt forbade, as linked.
        states = {u.removeprefix(b): r["state"] for u, r in c.urls.items()}
        assert states["/router.php?/archives/1"] == "done"
        assert states["/list.html?sort=asc&page=2"] == "robots"
        assert states["/search?q=thresher&lang=en"] == "robots"
        assert states["/wiki.php?title=Main&action=edit"] == "robots"
        assert states["/list.html?sort=desc"] == "robots"  # a redirect's target too
        assert states["/go"] == states["/go-mail"] == "redirect"
        assert c.run["robots_excluded"] == 4

        # WARC-Target-URI and the CDXJ index name the URL as fetched.
        uris = {uri for _, uri, _, _ in warc_records(tmp_path)}
        assert {f"{b}{t}" for t in expected} <= uris
        assert f"{b}/router.php?/archives/1" in uris
        assert not [u for u in uris if "%2F" in u or "%3B" in u]
        indexed = {
            parse_cdxj_line(line)[2]["url"]
            for warc in (tmp_path / "warc" / "site").glob("*.warc.gz")
            for line in cdxj_path(warc).read_text().splitlines()
        }
        assert uris <= indexed

        # A second run revisits every known URL as it was fetched.
        site.hits.clear()
        again = crawl(config, [seed], shards=shards)
        assert again.report.outcome == "ok", again.report.error
        asked = Counter(h.url.removeprefix(b) for h in site.hits)
        assert set(asked) - {"/robots.txt"} == expected - {"/robots.txt"}
        assert max(asked.values()) == 1
