"""Page requisites end to end: a site whose pages embed images, stylesheets (one with a
background image on another host), a srcset and scripts, crawled on both stores. The
server's log proves what was fetched, and the WARC files alone must hold a 200 answer
for everything the pages need to render."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crawlsite import Page, SiteServer
from test_crawl import SOURCE, crawl, make_config
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from thresher.parse import css_urls, decode_css, extract_links, is_css, is_html
from thresher.store.warcrecord import NOT_MODIFIED_PROFILE
from wayback import get, wayback

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with SiteServer(hosts=2) as s:
        yield s


def build(site: SiteServer) -> dict[str, str]:
    """The site on host 0 (in scope) with a CDN on host 1 (out of it); names -> URLs."""
    b, cdn = site.base(0), site.base(1)
    u = {
        "home": f"{b}/",
        "page2": f"{b}/page2.html",
        "style": f"{b}/style.css",
        "theme": f"{b}/theme.css",
        "logo": f"{b}/img/logo.png",
        "a": f"{b}/img/a.png",
        "a1x": f"{b}/img/a-1x.png",
        "h1": f"{b}/img/h1.png",
        "font": f"{b}/fonts/f.woff2",
        "bg2": f"{b}/img/bg2.png",
        "moved": f"{b}/img/moved.png",
        "icon": f"{b}/favicon.ico",
        "cdn_bg": f"{cdn}/img/bg.png",
        "cdn_a2x": f"{cdn}/img/a-2x.png",
        "cdn_js": f"{cdn}/lib.js",
        "cdn_extra": f"{cdn}/extra.css",
        "cdn_p": f"{cdn}/p.png",
        "cdn_widget": f"{cdn}/widget.html",
        "cdn_final": f"{cdn}/img/moved-final.png",
        # Never to be fetched:
        "cdn_page": f"{cdn}/cdn-page.html",  # a link out of scope
        "never_page": f"{cdn}/never.html",  # linked from an out-of-scope requisite
        "never_img": f"{cdn}/never.png",  # embedded in an out-of-scope requisite
        "private": f"{cdn}/private/x.png",  # disallowed by the CDN's robots.txt
    }
    site.robots[site.ips[1]] = "User-agent: *\nDisallow: /private/\n"
    site.pages[u["home"]] = Page(
        body=f"""<!doctype html><html><head><title>Home</title>
<link rel="stylesheet" href="/style.css"><link rel="icon" href="/favicon.ico">
<script src="{u["cdn_js"]}"></script></head><body>
<img src="/img/logo.png" alt="logo">
<img src="/img/a.png" srcset="/img/a-1x.png 1x, {u["cdn_a2x"]} 2x" alt="a">
<img src="/img/moved.png"><img src="{u["private"]}">
<object data="{u["cdn_widget"]}"></object>
<a href="/page2.html">next</a> <a href="{u["cdn_page"]}">elsewhere</a>
</body></html>""".encode()
    )
    site.pages[u["page2"]] = Page(
        body=f"""<!doctype html><html><head><title>Two</title>
<link rel="stylesheet" href="/style.css"><style>@import url({u["cdn_extra"]});</style>
</head><body><img src="/img/logo.png"><div style="background: url('/img/bg2.png')">x</div>
<a href="/">home</a></body></html>""".encode()
    )
    css = "text/css"
    site.pages[u["style"]] = Page(
        body=f"""@import "theme.css";
body {{ background: #fff url({u["cdn_bg"]}) no-repeat }}
@font-face {{ font-family: F; src: url(/fonts/f.woff2) format("woff2") }}""".encode(),
        content_type=css,
    )
    site.pages[u["theme"]] = Page(body=b"h1 { background: url(img/h1.png) }", content_type=css)
    site.pages[u["cdn_extra"]] = Page(body=b"p { background: url(p.png) }", content_type=css)
    site.pages[u["cdn_js"]] = Page(body=b"console.log('hi')", content_type="text/javascript")
    site.pages[u["cdn_widget"]] = Page(
        body=f'<p><a href="{u["never_page"]}">x</a><img src="{u["never_img"]}"></p>'.encode()
    )
    site.pages[u["moved"]] = Page(status=301, headers={"Location": u["cdn_final"]})
    for name in ("logo", "a", "a1x", "h1", "bg2", "icon", "cdn_bg", "cdn_a2x", "cdn_p"):
        site.pages[u[name]] = Page(body=PNG + name.encode(), content_type="image/png")
    site.pages[u["cdn_final"]] = Page(body=PNG + b"final", content_type="image/png")
    site.pages[u["font"]] = Page(body=b"wOF2" + bytes(32), content_type="font/woff2")
    for name in ("cdn_page", "never_page"):
        site.pages[u[name]] = Page(body=b"<p>not to be crawled</p>")
    site.pages[u["never_img"]] = Page(body=PNG, content_type="image/png")
    site.pages[u["private"]] = Page(body=PNG, content_type="image/png")
    return u


REQUISITES = [
    "style", "theme", "logo", "a", "a1x", "h1", "font", "bg2", "moved", "icon", "cdn_bg",
    "cdn_a2x", "cdn_js", "cdn_extra", "cdn_p", "cdn_widget", "cdn_final",
]  # fmt: skip


def asked(site: SiteServer) -> dict[str, int]:
    """Requests per URL but robots.txt and the /sitemap.xml every seed host is asked for
    (a 404 here: test_crawl_sitemaps has sitemaps)."""
    return {u: n for u, n in site.hit_counts().items() if not u.endswith("/sitemap.xml")}


def records(home: Path) -> dict[str, tuple[int, dict[str, str], bytes]]:
    """URL -> (status, headers, body) of every response record of the crawl's WARC files."""
    out: dict[str, tuple[int, dict[str, str], bytes]] = {}
    for path in sorted((home / "warc" / SOURCE).glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response":
                    uri = rec.rec_headers.get_header("WARC-Target-URI")
                    headers = {k.lower(): v for k, v in rec.http_headers.headers}
                    status = int(rec.http_headers.get_statuscode())
                    out[uri] = (status, headers, rec.content_stream().read())
    return out


def replay_gaps(
    archive: dict[str, tuple[int, dict[str, str], bytes]], pages: list[str]
) -> list[str]:
    """What `pages` need to render that the archive cannot answer with a 200, following
    redirects and stylesheets' own URLs, as a replay of the WARC files alone would."""
    missing: list[str] = []
    todo: list[str] = []
    for page in pages:
        status, headers, body = archive[page]
        assert status == 200 and is_html(headers.get("content-type"), body)
        todo += extract_links(body, page, headers.get("content-type"), requisites=True).requisites
    seen: set[str] = set()
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        answer = archive.get(url)
        if answer is None:
            missing.append(url)
            continue
        status, headers, body = answer
        if 300 <= status < 400:
            todo.append(headers["location"])
        elif status != 200:
            missing.append(url)
        elif is_css(headers.get("content-type"), url):
            text = decode_css(body, headers.get("content-type"))
            todo += [link for link in (_join(url, raw) for raw in css_urls(text)) if link]
    return missing


def _join(base: str, raw: str) -> str | None:
    from thresher.parse.links import resolver

    return resolver(base)(raw)


def test_requisites_are_fetched_once_and_replay_from_the_warc_files(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    u = build(site)
    c = crawl(make_config(store_url, tmp_path), [u["home"]], scope="host")
    assert c.report.outcome == "ok", c.report.error

    hits = asked(site)
    wanted = {u["home"], u["page2"], *(u[n] for n in REQUISITES)}
    assert set(hits) == wanted  # nothing else: not the CDN's links, nor its page's embeds
    assert set(hits.values()) == {1}  # each once, the stylesheet and logo of two pages too
    # robots.txt of both hosts, and the CDN's Disallow obeyed for a requisite too.
    robots = sorted(h.url for h in site.hits if h.url.endswith("/robots.txt"))
    assert robots == [f"{site.base(0)}/robots.txt", f"{site.base(1)}/robots.txt"]
    assert c.urls[u["private"]]["state"] == "robots"

    # Counted apart: two pages; every requisite but the redirect stored with a 2xx.
    assert (c.run["pages"], c.run["requisites"], c.run["redirects"]) == (2, 16, 1)
    assert c.result["requisites"] == 16 and c.result["pages"] == 2
    assert c.run["errors"] == 0
    hops = {url: row["hop"] for url, row in c.urls.items()}
    assert {hops[u[n]] for n in REQUISITES} == {1}
    assert hops[u["home"]] == hops[u["page2"]] == 0
    assert c.urls[u["cdn_bg"]]["depth"] == 0  # the home page's depth: no hop counted

    archive = records(tmp_path)
    for name in REQUISITES:
        status = archive[u[name]][0]
        assert status == (301 if name == "moved" else 200), name
    # Everything replays but the image the CDN's robots.txt forbade.
    assert replay_gaps(archive, [u["home"], u["page2"]]) == [u["private"]]


def test_requisites_do_not_count_against_max_depth(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    u = build(site)
    c = crawl(make_config(store_url, tmp_path), [u["home"]], scope="host", max_depth="0")
    assert c.report.outcome == "ok", c.report.error
    hits = set(asked(site))
    assert u["page2"] not in hits  # a link: one hop too far
    home_needs = set(REQUISITES) - {"bg2", "cdn_extra", "cdn_p"}  # those are page2's
    assert hits == {u["home"], *(u[n] for n in home_needs)}
    assert replay_gaps(records(tmp_path), [u["home"]]) == [u["private"]]


def test_no_requisites(site: SiteServer, store_url: str, tmp_path: Path) -> None:
    u = build(site)
    c = crawl(make_config(store_url, tmp_path), [u["home"]], scope="host", requisites="false")
    assert c.report.outcome == "ok", c.report.error
    # Stylesheets and icons are links then, followed only in scope; nothing else embedded.
    assert set(asked(site)) == {u["home"], u["page2"], u["style"], u["icon"]}
    assert c.run["requisites"] == 0


def test_a_second_crawl_revisits_requisites_conditionally(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    u = build(site)
    config = make_config(store_url, tmp_path)
    first = crawl(config, [u["home"]], scope="host")
    assert first.report.outcome == "ok"
    site.hits.clear()
    # Between the runs the CDN's background image changes: fetched again, as what it
    # was found as (the run knows its URLs' hops from the store).
    site.pages[u["cdn_bg"]] = Page(body=PNG + b"new", content_type="image/png")
    second = crawl(config, [u["home"]], scope="host")
    assert second.report.outcome == "ok"
    assert set(asked(site).values()) == {1}
    hits: dict[str, Any] = {h.url: h for h in site.hits if h.url in asked(site)}
    assert set(hits) == {u["home"], u["page2"]} | {u[n] for n in REQUISITES}
    status = {url: 301 if url == u["moved"] else 304 for url in hits}
    status[u["cdn_bg"]] = 200
    assert {url: h.status for url, h in hits.items()} == status
    assert (second.run["pages"], second.run["requisites"], second.run["not_modified"]) == (0, 1, 17)

    # Each 304 is a revisit of the first run's capture, as a page's is; the store keeps
    # every requisite's capture, which the next 304 will confirm.
    found = captures(tmp_path)
    for url, answer in status.items():
        first_row, row = first.urls[url], second.urls[url]
        if answer == 301:  # a redirect holds no payload: no capture, no revisit
            assert row["capture_id"] is None and [r["type"] for r in found[url]] == ["response"] * 2
            continue
        original, latest = found[url]
        assert original["type"] == "response"
        assert (first_row["capture_date"], first_row["capture_id"]) == (
            original["WARC-Date"],
            original["WARC-Record-ID"],
        )
        if answer == 200:  # changed: the new body is the capture now
            assert latest["type"] == "response"
            assert (row["capture_date"], row["capture_id"]) == (
                latest["WARC-Date"],
                latest["WARC-Record-ID"],
            )
            continue
        assert latest["type"] == "revisit"
        assert latest["WARC-Profile"] == NOT_MODIFIED_PROFILE
        assert latest["WARC-Refers-To"] == original["WARC-Record-ID"]
        assert latest["WARC-Refers-To-Target-URI"] == url
        assert latest["WARC-Refers-To-Date"] == original["WARC-Date"]
        assert row["capture_id"] == original["WARC-Record-ID"]


def captures(home: Path) -> dict[str, list[dict[str, str]]]:
    """URL -> the WARC headers (and "type") of its response and revisit records, oldest
    first."""
    out: dict[str, list[dict[str, str]]] = {}
    for path in sorted((home / "warc" / SOURCE).glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit"):
                    headers = {**dict(rec.rec_headers.headers), "type": rec.rec_type}
                    out.setdefault(headers["WARC-Target-URI"], []).append(headers)
    return {url: sorted(h, key=lambda x: x["WARC-Date"]) for url, h in out.items()}


def test_requisites_and_sitemap_entries_are_fetched_as_written(
    site: SiteServer, store_url: str, tmp_path: Path
) -> None:
    """What a page embeds, what its stylesheets load and what robots.txt and a sitemap
    list are fetched as written, resolved as a browser resolves them (nothing re-ordered
    or re-encoded), and keyed by their canonical form: two spellings of one image, or of
    one listed page, are fetched once, as first met. The server's log says so."""
    b, cdn = site.base(0), site.base(1)
    css = "text/css"
    u = {
        "home": f"{b}/",
        "style": f"{b}/css/s.css?/v1",  # a router's query: never "?%2Fv1="
        "imported": f"{b}/css/t.css?b",  # never "?b="
        "bg": f"{b}/img/s.png?x=1;y=2",  # never "?x=1%3By%3D2"
        "q": f"{b}/img/q.png?z=1&a=2",  # never sorted
        "w": f"{b}/img/w.png?b",
        "tilde": f"{cdn}/img/%7Ec.png?x=1;y=2",  # never "~": the escape goes as written
        "sitemap": f"{b}/maps/s.xml?b&a=1",
        "listed": f"{b}/listed.html?z=1&a=2",
    }
    site.robots[site.ips[0]] = "User-agent: *\nDisallow: /*?a=2&z=1\nSitemap: /maps/s.xml?b&a=1\n"
    site.pages[u["home"]] = Page(
        body=f"""<!doctype html><title>t</title><link rel="stylesheet" href="/css/s.css?/v1">
<img src="/img/q.png?z=1&amp;a=2"><img src="/img/Q.png/../q.png?a=2&z=1#x">
<img srcset="/img/w.png?b 2x, {u["tilde"]} 3x"></p>""".encode()
    )
    site.pages[u["style"]] = Page(
        body=b'@import "t.css?b"; p { background: url("../img/s.png?x=1;y=2") }',
        content_type=css,
    )
    site.pages[u["imported"]] = Page(body=b"h1 { color: red }", content_type=css)
    for name in ("bg", "q", "w", "tilde"):
        site.pages[u[name]] = Page(body=PNG + name.encode(), content_type="image/png")
    site.pages[u["sitemap"]] = Page(
        body=(
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>{b}/listed.html?z=1&amp;a=2</loc></url>"
            f"<url><loc>{b}/listed.html?a=2&amp;z=1</loc></url></urlset>"
        ).encode(),
        content_type="application/xml",
    )
    site.pages[u["listed"]] = Page(body=b"<!doctype html><title>listed</title>")

    c = crawl(make_config(store_url, tmp_path), [u["home"]], scope="host")
    assert c.report.outcome == "ok", c.report.error
    assert asked(site) == dict.fromkeys(u.values(), 1)
    # The ledger keeps each URL as fetched; robots.txt matched it as fetched, too (its
    # Disallow names the other order only).
    assert set(u.values()) <= set(c.urls)
    assert (c.run["pages"], c.run["requisites"], c.run["sitemaps"]) == (2, 6, 1)
    assert {name: c.urls[url]["hop"] for name, url in u.items()} == {
        **dict.fromkeys(u, 1),
        "home": 0,
        "listed": 0,
        "sitemap": 2,
    }
    # The records are under the URLs as fetched. The second spelling of the image is
    # under the first (a replay tool finds it by its own canonical key: see the pywb test).
    assert replay_gaps(records(tmp_path), [u["home"]]) == [f"{b}/img/q.png?a=2&z=1"]


@pytest.mark.slow
def test_the_page_replays_through_pywb_from_the_warc_files_alone(
    site: SiteServer, store_url: str, tmp_path: Path, pywb_bin: Path
) -> None:
    """pywb, given only the WARC files, replays the page as a browser would load it:
    every requisite named by the page pywb serves, and by the stylesheets it serves, is
    answered 200 (redirects followed), but the image robots.txt kept us from. A second
    spelling of an image (fetched once, as first written) replays too."""
    u = build(site)
    b = site.base(0)
    spelled = f"{b}/img/a.png?v=1&w=2"
    home = site.pages[u["home"]]
    site.pages[u["home"]] = Page(
        body=home.body.replace(
            b"</body>", b'<img src="/img/a.png?v=1&amp;w=2"><img src="/img/a.png?w=2&v=1"></body>'
        )
    )
    site.pages[spelled] = Page(body=PNG + b"spelled", content_type="image/png")
    c = crawl(make_config(store_url, tmp_path), [u["home"]], scope="host")
    assert c.report.outcome == "ok", c.report.error
    assert asked(site)[spelled] == 1 and f"{b}/img/a.png?w=2&v=1" not in asked(site)

    warc_dir = tmp_path / "warc" / SOURCE
    folder = tmp_path / "replay"
    folder.mkdir()
    (folder / "config.yaml").write_text(
        f"collections:\n  site:\n    index_paths: {warc_dir}\n    archive_paths: {warc_dir}/\n"
    )
    site.hits.clear()
    with wayback(pywb_bin, folder) as base:
        coll = f"{base}/site"
        # As archived (id_): the page, and each requisite with its own status and bytes.
        reply = get(f"{coll}/id_/{u['home']}")
        assert (reply.status, reply.body) == (200, site.pages[u["home"]].body)
        for name in REQUISITES:
            reply = get(f"{coll}/id_/{u[name]}")
            page = site.pages[u[name]]
            assert (reply.status, reply.body) == (page.status, page.body), name
        reply = get(f"{coll}/id_/{b}/img/a.png?w=2&v=1")
        assert (reply.status, reply.body) == (200, PNG + b"spelled")

        # As a browser loads it: pywb's rewritten page (mp_: the frame's content), and what
        # it names.
        page_url = f"{coll}/mp_/{u['home']}"
        reply = get(page_url)
        assert reply.status == 200 and is_html(reply.headers.get("content-type"), reply.body)
        todo = extract_links(reply.body, page_url, reply.headers["content-type"], requisites=True)
        unanswered = pywb_gaps(coll, todo.requisites)
    assert unanswered == [u["private"]]
    assert not site.hits  # the live site was not asked for anything


_REPLAYED_RE = re.compile(r"/site/[0-9]*(?:[a-z]{2}_)?/(https?://.*)")


def pywb_gaps(coll: str, urls: list[str]) -> list[str]:
    """The original URLs of the replay URLs `urls` (and of what replayed stylesheets
    load) that pywb does not answer 200, redirects followed. pywb's own scripts (not
    under the collection) are left out."""
    missing: list[str] = []
    todo = [url for url in urls if url.startswith(coll + "/")]
    seen: set[str] = set()
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        reply = get(url)
        for _ in range(5):
            if not 300 <= reply.status < 400:
                break
            reply = get(_join(url, reply.headers["location"]) or "")
        if reply.status != 200:
            match = _REPLAYED_RE.search(url)
            missing.append(match.group(1) if match else url)
        elif is_css(reply.headers.get("content-type"), url):
            text = decode_css(reply.body, reply.headers.get("content-type"))
            found = (_join(url, raw) for raw in css_urls(text))
            todo += [link for link in found if link and link.startswith(coll + "/")]
    return sorted(missing)


def test_requisites_in_shards(site: SiteServer, store_url: str, tmp_path: Path) -> None:
    """The CDN is another shard's host: its requisites are sent there as requisites."""
    u = build(site)
    c = crawl(make_config(store_url, tmp_path), [u["home"]], scope="host", shards="2")
    assert c.report.outcome == "ok", c.report.error
    assert set(asked(site)) == {u["home"], u["page2"], *(u[n] for n in REQUISITES)}
    assert set(asked(site).values()) == {1}
    assert (c.run["pages"], c.run["requisites"]) == (2, 16)
    assert replay_gaps(records(tmp_path), [u["home"], u["page2"]]) == [u["private"]]
