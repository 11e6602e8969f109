"""Page requisites: what a page embeds, read in the same parse as its links."""

from __future__ import annotations

import time

import pytest

from thresher.parse import extract_links
from thresher.parse import links as links_module
from thresher.parse.requisites import is_requisite_link, srcset_urls

URL = "http://example.com/dir/page.html"
D = "http://example.com/dir/"

EVERY_KIND = """<!doctype html><html><head>
<link rel="stylesheet" href="a.css"><link rel="alternate stylesheet" href="alt.css">
<link rel="shortcut icon" href="/favicon.ico"><link rel="apple-touch-icon" href="touch.png">
<link rel="preload" as="font" href="f.woff2" crossorigin><link rel="modulepreload" href="m.js">
<link rel="preload" as="image" imagesrcset="hero-1x.jpg 1x, hero-2x.jpg 2x">
<link rel="preload" as="document" href="next.html"><link rel="next" href="p2.html">
<link rel="dns-prefetch" href="//cdn.example.net">
<style>body { background: url(bg.png) } @import "imported.css";</style>
<script src="s.js"></script><script>var x = '<img src=in-script.png>';</script>
</head><body background="body.gif">
<img src="i.png" srcset="i-1x.png 1x, i-2x.png 2x" alt="">
<picture><source srcset="p.avif" type="image/avif"><img src="p.jpg"></picture>
<video src="v.mp4" poster="poster.jpg"><source src="v.webm"><track src="t.vtt"></video>
<audio src="a.ogg"></audio>
<object data="o.svg"></object><embed src="e.swf">
<input type="image" src="go.png"><input type="text" src="not-an-image.png">
<table background="table.gif"><tr><td background="td.gif">x</td>
<th background="th.gif">y</th></tr></table>
<svg><image href="si.png"/><use xlink:href="sprite.svg#icon"/></svg>
<div style="background-image: url('div.png')">x</div>
<a href="page2.html" style="background: url(a-bg.png)">next</a>
<iframe src="frame.html"></iframe>
<img src="data:image/png;base64,AAAA"><img src="#top"><img src="i.png">
<img src="https://cdn.example.net/lib/logo.svg">
</body></html>"""

EXPECTED = [
    f"{D}a.css",
    f"{D}alt.css",
    "http://example.com/favicon.ico",
    f"{D}touch.png",
    f"{D}f.woff2",
    f"{D}m.js",
    f"{D}hero-1x.jpg",
    f"{D}hero-2x.jpg",
    f"{D}s.js",
    f"{D}body.gif",
    f"{D}i.png",
    f"{D}i-1x.png",
    f"{D}i-2x.png",
    f"{D}p.avif",
    f"{D}p.jpg",
    f"{D}v.mp4",
    f"{D}poster.jpg",
    f"{D}v.webm",
    f"{D}t.vtt",
    f"{D}a.ogg",
    f"{D}o.svg",
    f"{D}e.swf",
    f"{D}go.png",
    f"{D}table.gif",
    f"{D}td.gif",
    f"{D}th.gif",
    f"{D}si.png",
    f"{D}sprite.svg",
    "https://cdn.example.net/lib/logo.svg",
    f"{D}bg.png",
    f"{D}imported.css",
    f"{D}div.png",
    f"{D}a-bg.png",
]


def test_every_kind_of_requisite() -> None:
    page = extract_links(EVERY_KIND.encode(), URL, requisites=True)
    assert page.requisites == EXPECTED
    # Stylesheets, icons and preloads are requisites, not links; the rest stay links.
    assert page.links == [f"{D}next.html", f"{D}p2.html", f"{D}page2.html", f"{D}frame.html"]


def test_without_requisites_the_links_are_as_before() -> None:
    page = extract_links(EVERY_KIND.encode(), URL)
    assert page.requisites == []
    assert page.links[:2] == [f"{D}a.css", f"{D}alt.css"]
    assert f"{D}i.png" not in page.links


def test_requisites_resolve_against_the_base() -> None:
    html = '<base href="/static/"><img src="x.png"><style>p{background:url(../bg.png)}</style>'
    page = extract_links(html.encode(), URL, requisites=True)
    assert page.requisites == ["http://example.com/static/x.png", "http://example.com/bg.png"]


def test_a_page_without_requisites() -> None:
    assert extract_links(b"<p>plain <a href=x>x</a></p>", URL, requisites=True).requisites == []


@pytest.mark.parametrize(
    ("srcset", "urls"),
    [
        ("a.png", ["a.png"]),
        ("a.png 1x, b.png 2x", ["a.png", "b.png"]),
        ("  a.png  100w ,b.png 200w,  ", ["a.png", "b.png"]),
        ("a.png, b.png 2x", ["a.png", "b.png"]),  # a URL ending in a comma
        ("a.png,b.png 2x", ["a.png,b.png"]),  # one URL: the standard splits at spaces
        ("a,b.png 1x, c.png 2x", ["a,b.png", "c.png"]),  # a comma inside a URL
        ("a.png (min-width: 1px, 2px) 1x, b.png", ["a.png", "b.png"]),
        ("a.png,,, b.png", ["a.png", "b.png"]),
        (",,,", []),
        ("", []),
        ("data:image/png;base64,AAAA 1x, c.png 2x", ["data:image/png;base64,AAAA", "c.png"]),
    ],
)
def test_srcset(srcset: str, urls: list[str]) -> None:
    assert srcset_urls(srcset) == urls


@pytest.mark.parametrize(
    ("rel", "as_", "expected"),
    [
        ("stylesheet", None, True),
        ("alternate stylesheet", None, True),
        ("icon", None, True),
        ("shortcut icon", None, True),
        ("mask-icon", None, True),
        ("preload", "style", True),
        ("preload", None, True),
        ("preload", " Document ", False),
        ("modulepreload", None, True),
        ("canonical", None, False),
        ("next", None, False),
        ("prefetch", None, False),
    ],
)
def test_which_links_are_requisites(rel: str, as_: str | None, expected: bool) -> None:
    assert is_requisite_link(set(rel.lower().split()), as_) is expected


def big(extra: str) -> bytes:
    rows = "".join(
        f'<tr><td><a href="m{i}.html">m{i}</a><img src="icon{i % 7}.png" alt=""></td></tr>'
        for i in range(1000)
    )
    return (EVERY_KIND.replace("</body>", f"<table>{rows}</table>{extra}</body>")).encode()


def test_flattened_pages_give_the_same_requisites(monkeypatch: pytest.MonkeyPatch) -> None:
    body = big('<div class="x" data-a="1" style="background:URL(late.png)"><p>t</p></div>')
    assert body.count(b"<") > links_module._FLATTEN_TAGS
    flattened = extract_links(body, URL, requisites=True)
    monkeypatch.setattr(links_module, "_FLATTEN_TAGS", 10**9)
    monkeypatch.setattr(links_module, "_FLATTEN_LENGTH", 10**9)
    parsed = extract_links(body, URL, requisites=True)
    assert flattened.links == parsed.links
    assert sorted(flattened.requisites) == sorted(parsed.requisites)
    assert set(EXPECTED) | {f"{D}late.png"} | {f"{D}icon{i}.png" for i in range(7)} == set(
        parsed.requisites
    )


@pytest.mark.parametrize(
    "unit",
    [
        b"<video poster=p.jpg>",
        b"<object data=o.svg>",
        b"<table background=t.gif><tr><td background=d.gif>",
        b'<div style="background:url(d.png)">',
        b"<picture><source srcset=s.png>",
        b"<svg><g><image href=i.png>",
        b"<div title='",
    ],
)
def test_deep_nesting_costs_linear_time_with_requisites(unit: bytes) -> None:
    body = unit * 100_000 + b'<img src="/last.png">'
    started = time.process_time()
    page = extract_links(body, URL, requisites=True)
    assert time.process_time() - started < 20
    assert len(page.requisites) <= 4


def test_an_attribute_bomb_costs_linear_time_with_requisites() -> None:
    bomb = " ".join(f"a{i}" for i in range(100_000))
    html = f'<img {bomb} src="/y.png" srcset="/z.png 2x"><video {bomb} poster="/p.jpg">'
    started = time.process_time()
    page = extract_links(html.encode(), URL, requisites=True)
    assert time.process_time() - started < 20
    assert page.requisites == [
        "http://example.com/y.png",
        "http://example.com/z.png",
        "http://example.com/p.jpg",
    ]
