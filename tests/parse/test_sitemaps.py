"""Sitemaps read as the protocol says, within its limits, and hostile XML refused."""

from __future__ import annotations

import gzip
import time

import pytest

from thresher.parse.sitemaps import MAX_URLS, read_sitemap

URL = "http://example.com/sitemap.xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>{"".join(entries)}</urlset>'.encode()
    )


def test_urlset_with_lastmod() -> None:
    body = urlset(
        "<url><loc>http://example.com/a.html</loc><lastmod>2024-05-12</lastmod></url>",
        "<url><loc> http://example.com/b?x=1&amp;y=2 </loc><changefreq>daily</changefreq>"
        "<lastmod>2024-05-12T10:22:31+02:00</lastmod></url>",
        "<url><loc>http://example.com/c</loc><lastmod>last tuesday</lastmod></url>",
        "<!-- a comment --><url><loc>/relative.html</loc></url>",
        "<url><loc>mailto:x@example.com</loc></url><url><lastmod>2024-01-01</lastmod></url>",
        "<url><loc>http://example.com/caf\u00e9 page</loc></url>",
    )
    sitemap = read_sitemap(body, URL)
    assert sitemap.error is None
    assert sitemap.sitemaps == []
    assert sitemap.urls == [
        ("http://example.com/a.html", "2024-05-12"),
        ("http://example.com/b?x=1&y=2", "2024-05-12T10:22:31+02:00"),
        ("http://example.com/c", None),
        ("http://example.com/relative.html", None),
        ("http://example.com/caf%C3%A9%20page", None),
    ]


def test_index_gzip_and_text() -> None:
    index = (
        f"<sitemapindex {NS}><sitemap><loc>http://example.com/s1.xml.gz</loc>"
        "<lastmod>2024-01-01</lastmod></sitemap>"
        "<sitemap><loc>http://example.com/s2.txt</loc></sitemap></sitemapindex>"
    ).encode()
    assert read_sitemap(index, URL).sitemaps == [
        "http://example.com/s1.xml.gz",
        "http://example.com/s2.txt",
    ]
    body = urlset("<url><loc>http://example.com/z</loc></url>")
    assert read_sitemap(gzip.compress(body), URL).urls == [("http://example.com/z", None)]
    text = (
        b"\xef\xbb\xbfhttp://example.com/1\r\nhttps://example.com/2\n\n# no\nhttp://example.com/3"
    )
    assert [u for u, _ in read_sitemap(text, URL).urls] == [
        "http://example.com/1",
        "https://example.com/2",
        "http://example.com/3",
    ]


def test_other_namespaces_and_none_are_read() -> None:
    old = b'<urlset xmlns="http://www.google.com/schemas/sitemap/0.84"><url><loc>http://e.com/o</loc></url></urlset>'
    bare = b"<urlset><url><loc>http://e.com/b</loc></url></urlset>"
    assert read_sitemap(old, URL).urls == [("http://e.com/o", None)]
    assert read_sitemap(bare, URL).urls == [("http://e.com/b", None)]


@pytest.mark.parametrize("gzipped", [False, True])
def test_at_most_50000_urls(gzipped: bool) -> None:
    body = urlset(*(f"<url><loc>http://example.com/p{i}</loc></url>" for i in range(MAX_URLS + 5)))
    sitemap = read_sitemap(gzip.compress(body) if gzipped else body, URL)
    assert len(sitemap.urls) == MAX_URLS
    assert sitemap.urls[-1] == (f"http://example.com/p{MAX_URLS - 1}", None)
    assert sitemap.error is not None and "50000" in sitemap.error
    exactly = urlset(*(f"<url><loc>http://example.com/p{i}</loc></url>" for i in range(MAX_URLS)))
    assert read_sitemap(exactly, URL).error is None
    lines = "".join(f"http://example.com/t{i}\n" for i in range(MAX_URLS + 1)).encode()
    assert len(read_sitemap(lines, URL).urls) == MAX_URLS


def test_at_most_50_mib_uncompressed() -> None:
    filler = "<url><loc>http://example.com/x</loc></url>" * 1000
    entry = f"<url><loc>http://example.com/first</loc></url>{filler}"
    body = urlset(entry + " " * (51 * 2**20))
    sitemap = read_sitemap(gzip.compress(body), URL)
    assert sitemap.urls[0] == ("http://example.com/first", None)
    assert sitemap.error is not None


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset><url><loc>http://example.com/&lol9;</loc></url></urlset>"""


@pytest.mark.parametrize(
    "body",
    [
        BILLION_LAUGHS,
        b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
        b"<urlset><url><loc>http://example.com/&e;</loc></url></urlset>",
        b'<!DOCTYPE urlset SYSTEM "http://127.0.0.1:9/evil.dtd"><urlset></urlset>',
        b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY % p SYSTEM "http://127.0.0.1:9/x">%p;]>'
        b"<urlset/>",
    ],
)
def test_hostile_xml_is_refused(body: bytes) -> None:
    started = time.perf_counter()
    sitemap = read_sitemap(body, URL)
    assert time.perf_counter() - started < 5
    assert sitemap.urls == []
    assert sitemap.error is not None


@pytest.mark.parametrize(
    ("body", "urls", "error"),
    [
        (b"<html><body>Not found</body></html>", [], "not a sitemap"),
        (
            b"<urlset><url><loc>http://e.com/a</loc></url><url><loc>http://e.com/",
            ["http://e.com/a"],
            "malformed",
        ),
        (
            b"<urlset><url><loc>http://e.com/a</loc></url><url><loc>&nope;</loc></url>",
            ["http://e.com/a"],
            "malformed",
        ),
        (b"\x1f\x8b\x08\x00garbage", [], "gzip"),
        (gzip.compress(b"<urlset><url><loc>http://e.com/a</loc></url></urlset>")[:-30], [], "gzip"),
        (b"", [], None),
        (b"   \n", [], None),
    ],
)
def test_bad_sitemaps_keep_what_came_before(
    body: bytes, urls: list[str], error: str | None
) -> None:
    sitemap = read_sitemap(body, URL)
    assert [u for u, _ in sitemap.urls] == urls
    if error is None:
        assert sitemap.error is None
    else:
        assert sitemap.error is not None and error in sitemap.error
