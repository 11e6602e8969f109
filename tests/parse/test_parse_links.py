"""extract_links finds what a crawler should follow, as absolute http(s) URLs, and never raises."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urljoin, urlsplit

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from thresher.frontier.canonical import canonicalize
from thresher.parse import Page, extract_links, is_html
from thresher.parse import links as links_module
from thresher.weburl import resolve

URL = "http://example.com/dir/page.html"


def links(html: str | bytes, url: str = URL, content_type: str | None = None) -> list[str]:
    body = html.encode() if isinstance(html, str) else html
    return extract_links(body, url, content_type).links


def test_every_tag_kind_in_document_order() -> None:
    html = """<html><head>
      <link rel="stylesheet" href="/style.css">
      <link rel="alternate" type="application/rss+xml" href="feed.xml">
      </head><body>
      <a href="a.html">a</a>
      <map><area href="/area" shape="rect"></map>
      <iframe src="frame/inner.html"></iframe>
      <a href="b.html">b</a>
      <img src="/not-a-link.png"><script src="/not-a-link.js"></script>
      <form action="/not-a-link"></form>
    </body></html>"""
    assert links(html) == [
        "http://example.com/style.css",
        "http://example.com/dir/feed.xml",
        "http://example.com/dir/a.html",
        "http://example.com/area",
        "http://example.com/dir/frame/inner.html",
        "http://example.com/dir/b.html",
    ]


def test_frameset() -> None:
    html = '<frameset><frame src="left.html"><frame src="/right.html"></frameset>'
    assert links(html) == ["http://example.com/dir/left.html", "http://example.com/right.html"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0; url=/new/", ["http://example.com/new/"]),
        ("5;URL='next.html'", ["http://example.com/dir/next.html"]),
        ('0, url="http://other.example/x y" ', ["http://other.example/x%20y"]),
        ("0; http://other.example/", ["http://other.example/"]),
        ("3.5 ; Url = /a", ["http://example.com/a"]),
        ("0;url=javascript:alert(1)", []),
        ("30", []),  # a reload of the page itself
        ("0; url=", []),
        ("soon; url=/x", []),  # no time: browsers ignore it
        ("", []),
    ],
)
def test_meta_refresh(content: str, expected: list[str]) -> None:
    quote = "'" if '"' in content else '"'
    assert links(f"<meta http-equiv=Refresh content={quote}{content}{quote}>") == expected


def test_rel_nofollow_is_followed_but_origin_hints_are_not() -> None:
    html = """<link rel="dns-prefetch" href="//cdn.example.net">
      <link rel="preconnect dns-prefetch" href="https://fonts.example.net">
      <link rel="preload" href="/font.woff2">
      <a rel="nofollow" href="/sponsored">ad</a>"""
    assert links(html) == ["http://example.com/font.woff2", "http://example.com/sponsored"]


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        # RFC 3986 section 5.4.1, base http://a/b/c/d;p?q (minus "g:h", "" and "#s")
        ("g", "http://a/b/c/g"),
        ("./g", "http://a/b/c/g"),
        ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"),
        ("//g", "http://g/"),  # the URL Standard gives every http(s) URL a path
        ("?y", "http://a/b/c/d;p?y"),
        ("g?y", "http://a/b/c/g?y"),
        ("g#s", "http://a/b/c/g"),
        ("g?y#s", "http://a/b/c/g?y"),
        (";x", "http://a/b/c/;x"),
        ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y"),
        (".", "http://a/b/c/"),
        ("./", "http://a/b/c/"),
        ("..", "http://a/b/"),
        ("../", "http://a/b/"),
        ("../g", "http://a/b/g"),
        ("../..", "http://a/"),
        ("../../", "http://a/"),
        ("../../g", "http://a/g"),
        # section 5.4.2
        ("../../../g", "http://a/g"),
        ("../../../../g", "http://a/g"),
        ("/./g", "http://a/g"),
        ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."),
        (".g", "http://a/b/c/.g"),
        ("g..", "http://a/b/c/g.."),
        ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"),
        ("./g/.", "http://a/b/c/g/"),
        ("g/./h", "http://a/b/c/g/h"),
        ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
        ("g;x=1/../y", "http://a/b/c/y"),
        ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g?y/../x", "http://a/b/c/g?y/../x"),
        ("http:g", "http://a/b/c/g"),  # same scheme: relative, as browsers do
        # and a few of our own
        ("%2e%2E/g", "http://a/b/g"),  # browsers treat %2e as a dot
        ("HTTPS://Other.Example/x", "https://other.example/x"),
        ("http:?y", "http://a/b/c/d;p?y"),
        ("http:/g", "http://a/g"),  # same scheme: a path
        ("https:/g", "https://g/"),  # another scheme: slashes before the host do not count
        ("https:g", "https://g/"),
        ("///g/h", "http://g/h"),
        ("http:///g/h", "http://g/h"),
        ("http:", "http://a/b/c/d;p?q"),  # same scheme, empty: the base
        ("https://b/", "https://b/"),
        ("\\g\\h?x\\y", "http://a/g/h?x\\y"),  # backslash is a slash, except in the query
        ("//g\\h", "http://g/h"),
        ("?it's", "http://a/b/c/d;p?it%27s"),  # "'" is escaped in a query, not in a path
        ("it's", "http://a/b/c/it's"),
    ],
)
def test_resolution(href: str, expected: str | None) -> None:
    wanted = [] if expected is None else [expected]
    assert links(f'<a href="{href}">x</a>', "http://a/b/c/d;p?q") == wanted


@pytest.mark.parametrize(
    ("html", "base"),
    [
        ('<base href="http://other.example/sub/">', "http://other.example/sub/"),
        ('<base href="/other/">', "http://example.com/other/"),  # relative to the page
        ('<base href="../">', "http://example.com/"),
        ('<base href="sub/x?y#z">', "http://example.com/dir/sub/x?y"),
        ('<base href=" \n/other/\t">', "http://example.com/other/"),
        # per the HTML standard the first base element *with an href* counts, wherever it is
        (
            '<base target="_blank"><base href="/first/"><base href="/second/">',
            "http://example.com/first/",
        ),
        ('<body><p>text</p><base href="/in-body/">', "http://example.com/in-body/"),
        # invalid or non-http(s) bases are ignored
        ('<base href="http://[::1/">', URL),
        ('<base href="http://example.com:99999/">', URL),
        ('<base href="javascript:void(0)">', URL),
        ('<base href="mailto:x@example.com">', URL),
        ('<base href="ftp://example.com/pub/">', URL),
        ('<base href="">', URL),
        ("<base href>", URL),
    ],
)
def test_base(html: str, base: str) -> None:
    page = extract_links(f'{html}<a href="x">x</a>'.encode(), URL)
    assert page.base == base
    assert page.links == [urljoin(base, "x")]


def test_base_applies_to_links_before_it() -> None:
    html = '<a href="early">e</a><base href="http://b.example/base/"><a href="late">l</a>'
    assert links(html) == ["http://b.example/base/early", "http://b.example/base/late"]


def test_whitespace_and_newlines_in_href() -> None:
    html = (
        '<a href="  \n /a/b\n c.html?x=\t1 \r\n">x</a>'
        '<a href="\x0c\x01d.html\x1f ">y</a>'
        '<a href="java\nscript:alert(1)">z</a>'
    )
    # only tabs and newlines go from inside; a space is percent-encoded
    assert links(html) == ["http://example.com/a/b%20c.html?x=1", "http://example.com/dir/d.html"]


@pytest.mark.parametrize(
    "href",
    [
        "javascript:void(0)",
        " JavaScript:alert(1)",
        "mailto:someone@example.com",
        "MAILTO:someone@example.com",
        "data:text/html,<a href=/x>",
        "tel:+1-555-0100",
        "ftp://ftp.example.com/pub/",
        "file:///etc/passwd",
        "news:comp.lang.python",
        "localhost:8080/x",  # a scheme "localhost", as browsers read it
        "",
        "   ",
        "#",
        "#top",
        " #top ",
    ],
)
def test_links_skipped(href: str) -> None:
    assert links(f'<a href="{href}">x</a>') == []


def test_fragments_removed_and_duplicates_dropped_in_order() -> None:
    html = """<a href="/b#one">1</a><a href="/a">2</a><a href="/b#two">3</a>
      <a href="http://example.com/a">4</a><a href="/c?x#frag">5</a><a href="/a#">6</a>"""
    assert links(html) == [
        "http://example.com/b",
        "http://example.com/a",
        "http://example.com/c?x",
    ]


@pytest.mark.parametrize(
    "href",
    [
        "http://[::1/",
        "http://[fe80::1%eth0]/",
        "http://[zz::]/",
        "http://example.com:99999/",
        "http://example.com:-1/",
        "http://example.com:port/",
        "http://?no-host",
        "http://:80/",
        "https://",
        "http://exa mple.com/",
        "http://exa<mple.com/",
        "http://user@/",
        "http://a\u2488.example/",  # a code point UTS #46 disallows
        "http://xn--ls8h\ufffd.example/",
        "http://[::1]:0x50/",
    ],
)
def test_unusable_hosts_are_dropped(href: str) -> None:
    assert links(f'<a href="{href}">x</a><a href="/ok">ok</a>') == ["http://example.com/ok"]


def test_ipv6_and_ports_are_kept() -> None:
    html = '<a href="http://[::1]:8080/x">6</a><a href="https://example.com:443/y">p</a>'
    assert links(html) == ["http://[::1]:8080/x", "https://example.com/y"]


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("http://faß.example/", "http://xn--fa-hia.example/"),  # UTS #46 non-transitional
        ("http://BÜCHER.example/", "http://xn--bcher-kva.example/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0177.0.0.01:8080/", "http://127.0.0.1:8080/"),
        ("http://[0:0::1]/", "http://[::1]/"),
        ("http://@host/", "http://host/"),
        ("http://a:@host/", "http://a@host/"),  # a user, without a password
        ("http://Host.:0080/", "http://host./"),  # a trailing dot stays: the key drops it
        ("//.", "http://./"),  # names no server, but the Standard has it
        ("http://a..b/", "http://a..b/"),
    ],
)
def test_hosts_as_the_url_standard_reads_them(href: str, expected: str) -> None:
    assert links(f'<a href="{href}">x</a>') == [expected]


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("/a b/c d?q=x y", "http://example.com/a%20b/c%20d?q=x%20y"),
        ("/ä?q=ä", "http://example.com/%C3%A4?q=%C3%A4"),
        ("/100%/a%zz%4", "http://example.com/100%/a%zz%4"),  # as browsers leave it
        ("/%41%e4", "http://example.com/%41%e4"),
        ('/"quoted"<>', "http://example.com/%22quoted%22%3C%3E"),
        ("//bücher.example/ü", "http://xn--bcher-kva.example/%C3%BC"),
        ("/\x01\x7f", "http://example.com/%01%7F"),
        ("/a|b^c`d{e}", "http://example.com/a|b%5Ec%60d%7Be%7D"),
        ("/?a|b^c`d{e}", "http://example.com/?a|b^c`d{e}"),
        ("/?/archives/1;x", "http://example.com/?/archives/1;x"),  # no re-encoding
    ],
)
def test_percent_encoding(href: str, expected: str) -> None:
    assert links(f"<a href='{href}'>x</a>") == [expected]


def test_query_is_encoded_in_the_page_encoding_and_path_in_utf8() -> None:
    body = '<a href="/é?q=é">1</a>'.encode("cp1252")
    page = extract_links(body, URL, "text/html; charset=iso-8859-1")
    assert page.encoding == "cp1252"
    assert page.links == ["http://example.com/%C3%A9?q=%E9"]


def test_query_character_the_page_encoding_lacks_is_sent_as_browsers_send_it() -> None:
    # The URL Standard: "&#26085;", percent-encoded.
    page = extract_links(b'<a href="/x?q=&#26085;">1</a>', URL, "text/html; charset=latin1")
    assert page.links == ["http://example.com/x?q=%26%2326085%3B"]


def test_utf16_page_encodes_query_in_utf8() -> None:
    body = b"\xff\xfe" + '<a href="/x?q=é">x</a>'.encode("utf-16-le")
    page = extract_links(body, URL)
    assert page.encoding == "utf-16-le"
    assert page.links == ["http://example.com/x?q=%C3%A9"]


@pytest.mark.parametrize(
    ("meta", "nofollow"),
    [
        ('<meta name="robots" content="nofollow">', True),
        ('<meta name="ROBOTS" content="NoIndex, NoFollow">', True),
        ('<meta name=" robots " content="noindex,nofollow">', True),
        ('<meta name="robots" content="none">', True),
        ('<meta name="robots" content="noindex">', False),
        ('<meta name="robots" content="index, follow">', False),
        ('<meta name="googlebot" content="nofollow">', False),
        ('<meta name="description" content="nofollow">', False),
        ('<meta content="nofollow">', False),
        ('<meta name="robots">', False),
        ("", False),
    ],
)
def test_nofollow(meta: str, nofollow: bool) -> None:
    page = extract_links(f'<head>{meta}</head><a href="/x">x</a>'.encode(), URL)
    assert page.nofollow is nofollow
    assert page.links == ["http://example.com/x"]  # the caller decides


@pytest.mark.parametrize(
    ("html", "title"),
    [
        ("<title>  Hello\n  <b>World</b>  </title>", "Hello <b>World</b>"),
        ("<title>First</title><title>Second</title>", "First"),
        ("<title>Caf&eacute; &amp; more</title>", "Café & more"),
        ("<title>   </title>", None),
        ("<p>no title</p>", None),
    ],
)
def test_title(html: str, title: str | None) -> None:
    assert extract_links(html.encode(), URL).title == title


def test_page_is_what_the_interface_says() -> None:
    page = extract_links(b"<title>t</title><a href=x>", URL)
    assert page == Page(["http://example.com/dir/x"], URL, False, "utf-8", "t")
    with pytest.raises(AttributeError):
        page.title = "changed"  # type: ignore[misc]


def test_meta_charset_decides_how_links_are_read() -> None:
    body = '<meta charset="koi8-r"><a href="/мир?q=мир">x</a>'.encode("koi8-r")
    page = extract_links(body, URL)
    assert page.encoding == "koi8-r"
    assert page.links == ["http://example.com/%D0%BC%D0%B8%D1%80?q=%CD%C9%D2"]


def test_page_url_that_is_not_http_keeps_only_absolute_links() -> None:
    html = '<a href="relative">r</a><a href="https://example.org/abs">a</a>'
    for url in ("", "not a url", "ftp://example.com/", "http://[::1/"):
        page = extract_links(html.encode(), url)
        assert page.links == ["https://example.org/abs"]
        assert page.base == url
    page = extract_links((html + '<base href="http://b.example/">').encode(), "about:blank")
    assert page.links == ["http://b.example/relative", "https://example.org/abs"]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x00" * 100,
        b'<a href="/x\x00y">x</a>\x00<a href="/z">',
        b"<a href='/unclosed",
        b'<a href="/a"><div><table><tr><a href="/b"><td><a href="/c">',
        b"<html><<<>>><a href=/ok></a><//>",
        pytest.param(bytes(range(256)) * 40, id="all-bytes"),
        b"\xff\xfe\x00\xd8<\x00a\x00",  # UTF-16 with a lone surrogate
        b'<a href="/\xff\xfe\xc3">x</a>',  # invalid UTF-8
        b"<svg><a href='/svg'><title>s</title></a></svg><math><a href='/m'>",
        b"<template><a href='/t'></template><noscript><a href='/n'></noscript>",
        b"<!-- <a href='/comment'> --><script>document.write('<a href=\"/s\">')</script>",
        pytest.param(b"<a href=" + b"/" * 100_000 + b">", id="long-href"),
        pytest.param(b"<a href=/" + b"a/../" * 100_000 + b">", id="many-dot-segments"),
    ],
)
def test_malformed_input_never_raises(body: bytes) -> None:
    page = extract_links(body, URL)
    for link in page.links:
        assert_web_link(link)


def test_links_inside_comments_and_scripts_are_not_links() -> None:
    html = b"<!-- <a href='/comment'> --><script>var s = '<a href=\"/s\">';</script><a href=/y>"
    assert links(html) == ["http://example.com/y"]


def test_invalid_utf8_page_is_read_as_windows_1252() -> None:
    page = extract_links(b'<a href="/caf\xe9">x</a><title>caf\xe9</title>', URL)
    assert page.encoding == "cp1252"
    assert page.title == "café"
    assert page.links == ["http://example.com/caf%C3%A9"]


def test_five_megabytes_of_nested_divs() -> None:
    body = b"<div>" * 1_000_000 + b'<a href="/deep">x</a>' + b"</div>" * 10
    started = time.process_time()
    page = extract_links(body, URL)
    assert time.process_time() - started < 30
    for link in page.links:
        assert_web_link(link)


@pytest.mark.parametrize(
    "unit",
    [
        b"<div>",
        b"<ul><li>",
        b"<div></q>",  # bogus end tags do not hide the nesting
        b"<a href=/x><b>",
        b"<noscript><a href=/x>",
        b"<table><tr><td>",
        b"<svg><g>",
        b"<div title='",  # unterminated attribute values
        # end tags stay when flattened: ones that close nothing must cost little too
        b"<p></p></div></span></table></body></html></head></li></template></noscript>",
        b"<b><i></b></i><a href=/x></a></a></form>",
    ],
)
def test_deep_nesting_costs_linear_time(unit: bytes) -> None:
    # Unflattened, 40 000 nested <div>s take Lexbor seconds and a million take hours.
    body = unit * 200_000 + b'<a href="/deep">x</a>'
    started = time.process_time()
    page = extract_links(body, URL)
    assert time.process_time() - started < 10
    assert page.links[-1:] in ([], ["http://example.com/deep"], ["http://example.com/x"])


@pytest.mark.parametrize("tag", ["a", "div", "meta"])
def test_attribute_bombs_cost_linear_time(tag: str) -> None:
    # Unflattened, 40 000 distinct attribute names on one tag take Lexbor seconds.
    bomb = " ".join(f"a{i}" for i in range(100_000))
    html = (
        f'<{tag} {bomb} href="/y" name="robots" content="nofollow">'
        f'<{tag} href="/z" {bomb} x="a > b" {bomb}><a href="/after">'
    )
    started = time.process_time()
    page = extract_links(html.encode(), URL)
    assert time.process_time() - started < 10
    expected = {
        "a": ["http://example.com/y", "http://example.com/z", "http://example.com/after"],
        "div": ["http://example.com/after"],
        "meta": ["http://example.com/after"],
    }
    assert page.links == expected[tag]
    assert page.nofollow is (tag == "meta")


@pytest.mark.parametrize("charset", ["utf-8", "windows-1252"])
def test_a_page_too_few_tags_to_flatten_still_has_its_attribute_bombs_cut(charset: str) -> None:
    """Under _FLATTEN_TAGS, a page is not flattened, but past _FLATTEN_LENGTH its crowded
    tags are still cut down: read from the bytes (UTF-8) or from the decoded text."""
    bomb = " ".join(f"a{i}" for i in range(200_000))
    html = f'<p>caf\xe9</p><a {bomb} href="/y">y</a><a href="/after">'
    assert html.count("<") < links_module._FLATTEN_TAGS < len(html) // 8
    started = time.process_time()
    page = extract_links(html.encode(charset), URL, f"text/html; charset={charset}")
    assert time.process_time() - started < 10  # uncut: half a minute
    assert page.links == ["http://example.com/y", "http://example.com/after"]


def test_the_deepest_page_left_unflattened_costs_little() -> None:
    """_FLATTEN_TAGS bounds the depth of what Lexbor parses unflattened, and with it the
    time: 4,000 nested <div>s took 26-57 ms here (40,000 take seconds)."""
    body = b"<div>" * (links_module._FLATTEN_TAGS - 2) + b'<a href="/deep">x</a>'
    assert body.count(b"<") <= links_module._FLATTEN_TAGS
    started = time.process_time()
    page = extract_links(body, URL)
    assert time.process_time() - started < 2
    assert page.links == ["http://example.com/deep"]


def big_page(extra: str) -> bytes:
    """A page with enough tags to be flattened before parsing."""
    rows = "".join(
        f'<tr><td class="c"><a href="msg{i:05}.html" title="a > b">Re: thread {i}</a>'
        f"<br/><span>{i}</span></td></tr>\n"
        for i in range(1000)
    )
    return (
        "<!doctype html><html><head><title>Archive\n index</title>"
        '<meta name="robots" content="noindex,nofollow"><base href="/list/">'
        '<meta http-equiv="refresh" content="600; url=index.html">'
        '<link rel="stylesheet" href="/s.css"></head><body>'
        f"<table>{rows}</table>{extra}"
        '<!-- <a href="/in-comment"> --><script>x = "<a href=/in-script>";</script>'
        "<textarea><a href=/in-textarea></textarea><iframe src=/frame></iframe>"
        '<div title="<a href=/in-attribute>"><svg><a href="/svg"/></svg></div>'
        "</body></html>"
    ).encode()


def test_flattened_pages_give_what_parsing_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    body = big_page("")
    assert body.count(b"<") > links_module._FLATTEN_TAGS
    flattened = extract_links(body, URL)
    monkeypatch.setattr(links_module, "_FLATTEN_TAGS", 10**9)
    monkeypatch.setattr(links_module, "_FLATTEN_LENGTH", 10**9)
    assert extract_links(body, URL) == flattened
    assert flattened.title == "Archive index"
    assert flattened.nofollow
    assert flattened.base == "http://example.com/list/"
    assert flattened.links[:3] == [
        "http://example.com/list/index.html",
        "http://example.com/s.css",
        "http://example.com/list/msg00000.html",
    ]
    assert flattened.links[-2:] == ["http://example.com/frame", "http://example.com/svg"]
    assert len(flattened.links) == 1004


def test_threads_share_nothing() -> None:
    bodies = [big_page(f'<a href="/only-{i}">') for i in range(8)]
    expected = [extract_links(body, URL) for body in bodies]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(5):
            assert list(pool.map(lambda body: extract_links(body, URL), bodies)) == expected


def test_many_links() -> None:
    body = "".join(f'<a href="/p{i}">{i}</a>' for i in range(20_000)).encode()
    page = extract_links(body, URL)
    assert len(page.links) == 20_000
    assert page.links[-1] == "http://example.com/p19999"


def assert_web_link(link: str) -> None:
    parts = urlsplit(link)
    assert parts.scheme.lower() in ("http", "https"), link
    assert parts.hostname, link
    assert "#" not in link, link
    assert link.isascii(), link
    assert not any(c in link for c in " \t\n\r\x00"), link
    canonicalize(link)  # the crawler's next step accepts it


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=4096))
@example(b'<a href="http://[::1/">')
@example(b"<base href='//x'><a href='%'>")
def test_arbitrary_bytes_never_raise(body: bytes) -> None:
    page = extract_links(body, URL)
    for link in page.links:
        assert_web_link(link)


TAG_SOUP = st.lists(
    st.sampled_from(
        ["<a href=", "<div ", "<link rel=x href=", "<base href=", "<meta name=robots content=",
         "<title>", "</title>", "<script>", "</script>", "<!--", "-->", "<textarea>", "<svg>",
         "'", '"', "=", ">", "<", "/", " ", "x", "#", "http://h/", "nofollow", "\x00", "é"]
    ),
    max_size=40,
).map("".join)  # fmt: skip


@settings(deadline=None, max_examples=300)
@given(TAG_SOUP)
def test_flattened_tag_soup_gives_web_links(html: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(links_module, "_FLATTEN_TAGS", -1)
        page = extract_links(html.encode(), URL)
    for link in page.links:
        assert_web_link(link)


@settings(deadline=None, max_examples=300)
@given(
    TAG_SOUP,
    st.sampled_from(["utf-8", "windows-1252", "koi8-r", "utf-16le"]),
    st.sampled_from(["?q=é", "é/", "x", "?q=Ã©"]),  # the last in windows-1252: UTF-8 "é"
)
def test_bytes_given_to_lexbor_as_they_are_read_as_decoded(
    html: str, charset: str, tail: str
) -> None:
    """A UTF-8 (or ASCII) page goes to Lexbor undecoded: the same page as decoding gives."""
    body = (html + f'<a href="{tail}">').encode(charset, "replace")
    content_type = f"text/html; charset={charset}"
    page = extract_links(body, URL, content_type)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(links_module, "utf8_encoding", lambda body, content_type: None)
        assert extract_links(body, URL, content_type) == page


RESOLVE_PIECES = st.sampled_from(
    [*"aZ09-._~!$&'()*+,;=:@/%?#\\ \t[]é|^`{}\"", "http", "https", "HTTP", "://", "//", "/.",
     "..", "%2e", "%2E", "%20", "127.0.0.1", ":8080", ":80", ":443", ":0", ":065535", "[::1]",
     "u@", "u:@", "xn--", "0x", "255", "256", ".1"]
)  # fmt: skip
BASES = st.sampled_from(
    [URL, "https://h.example/a/b?q", "http://h.example", "http://h.example:81/%2e/x",
     "http://h.example/a/./b/", "https://xn--bcher-kva.example/d/e.html",
     "http://u:p@10.0.0.1:8080/a;b/c?d"]
)  # fmt: skip


HREF_STARTS = st.sampled_from(
    ["", "/", "?", "http://h.example", "https://a.b:8080/", "http://127.0.0.1:99999",
     "http://x..y", "http://1.2.3", "http://a.b.c.123", "http://EX.com", "http://a.b9",
     "http://a.0x1", "http://xn--bcher-kva.de", "https://h:443", "http://256.1.1.1"]
)  # fmt: skip


def _the_page_itself(href: str) -> bool:
    """Whether the URL Standard resolves `href` to the base as it is (or with a fragment)."""
    text = href.strip("".join(chr(c) for c in range(0x21)))
    text = text.replace("\t", "").replace("\n", "").replace("\r", "")
    return not text or text.startswith("#")


@pytest.mark.slow
@settings(deadline=None, max_examples=3000)
@given(HREF_STARTS, st.lists(RESOLVE_PIECES, max_size=10).map("".join), BASES, st.booleans())
def test_links_resolve_as_ada_url_resolves_them(
    start: str, rest: str, url: str, no_base: bool
) -> None:
    """The shortcuts for plain links give what ada-url gives (the fragment cut off, the
    page itself skipped)."""
    href = start + rest
    base = None if no_base else links_module._base_of(url, "utf-8")
    expected = None
    if not _the_page_itself(href):
        expected = resolve(href, None if base is None else base.url)
    assert links_module._resolve(href, base, "utf-8") == expected


HREF_CHARS = st.sampled_from(
    [*"abc/.?#=&%:;@[]\\ \t\n\"'<>", "..", "//", "%2e", "http:", "https://", "é", "\x00"]
)
HREFS = st.lists(HREF_CHARS, max_size=12).map("".join)


@settings(deadline=None, max_examples=300)
@given(HREFS, st.sampled_from([URL, "https://h.example/a/b?q", "http://h.example"]))
def test_arbitrary_hrefs_give_web_links(href: str, url: str) -> None:
    escaped = href.replace("&", "&amp;").replace('"', "&quot;")
    page = extract_links(f"<a href=\"{escaped}\">x</a><a href='{escaped}'>y</a>".encode(), url)
    for link in page.links:
        assert_web_link(link)


# Not ";": urljoin treats it as the start of RFC 2396 parameters and drops it.
PLAIN_HREFS = st.lists(st.sampled_from(["a", "b", "/", ".", "..", "?", "="]), max_size=10)


@settings(deadline=None, max_examples=300)
@given(PLAIN_HREFS.map("".join), st.sampled_from([URL, "https://h.example/a/b?q"]))
def test_fast_resolution_agrees_with_urljoin(href: str, url: str) -> None:
    # Where urljoin differs from RFC 3986 and browsers: it drops empty segments ("a//b"
    # -> "a/b"), resolves "//" to the base (no host: an error) and "?" to the base's query.
    assume("//" not in href and href != "?")
    page = extract_links(f'<a href="{href}">x</a>'.encode(), url)
    if not href:
        assert page.links == []
    else:
        assert [canonicalize(link) for link in page.links] == [canonicalize(urljoin(url, href))]


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("text/html", b"", True),
        ("TEXT/HTML; charset=utf-8", b"%PDF", True),
        ("application/xhtml+xml", b"", True),
        (" text/html ;x=y", b"", True),
        ("text/plain", b"<html><body>", False),
        ("image/png", b"<html>", False),
        ("application/octet-stream", b"<html>", False),  # browsers download it
        ("application/xml", b"<html>", False),
        (None, b"<!DOCTYPE html><html>", True),
        (None, b"\n\n  <!doctype HTML>", True),
        (None, b"\xef\xbb\xbf<html lang=en>", True),
        (None, b"<HTML>", True),
        (None, b"<head><title>", True),
        (None, b"<p>hello", True),
        (None, b"<a href=x>", True),
        (None, b"<!-- comment --><html>", True),
        (None, b'<?xml version="1.0"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0//EN">', True),
        (None, b'<?xml version="1.0"?><rss version="2.0">', False),
        (None, b"<pre>x", False),  # not one of the standard's patterns
        (None, b"<htmlx>", False),
        (None, b"%PDF-1.7", False),
        (None, b"\x89PNG\r\n", False),
        (None, b"", False),
        ("", b"<html>", True),
        ("*/*", b"<html>", True),
        ("application/unknown", b"<html>", True),
        ("garbage", b"<html>", True),
        ("garbage", b"GIF89a", False),
    ],
)
def test_is_html(content_type: str | None, body: bytes, expected: bool) -> None:
    assert is_html(content_type, body) is expected


def test_a_quoted_angle_bracket_does_not_hide_an_attribute_bomb() -> None:
    """'<a x=">" a0 a1 ...>': a ">" inside a quoted value does not end the tag, so the
    check for crowded tags must read quotes as the tokenizer does (it took 0.5 s at
    64 KB, growing with the square of the size)."""
    attrs = " ".join(f"a{i}" for i in range(12_000))
    html = f'<html><body><a href="/x" t=">" {attrs}>x</a><a href="/y">y</a></body></html>'
    started = time.process_time()
    page = extract_links(html.encode(), URL)
    assert time.process_time() - started < 0.2
    assert page.links == ["http://example.com/x", "http://example.com/y"]


def test_a_page_of_many_links_to_a_few_pages_gives_each_once() -> None:
    """Past _FEW_LINKS links each is resolved once per link without its fragment, but a
    space before the "#" is part of the URL ("b.html #x" is "b.html%20")."""
    many = "".join(f'<a href="a.html#m{i}">m</a>' for i in range(links_module._FEW_LINKS))
    html = f'{many}<a href="b.html #x">b</a><a href="b.html#x">b</a><a href=" a.html ">a</a>'
    page = extract_links(html.encode(), URL)
    assert page.links == [
        "http://example.com/dir/a.html",
        "http://example.com/dir/b.html%20",
        "http://example.com/dir/b.html",
    ]


def test_max_links_keeps_the_first_and_counts_the_rest() -> None:
    html = '<a href="/a">a</a><a href="/b">b</a><a href="/a">again</a><a href="/c">c</a>'
    page = extract_links(html.encode(), URL, max_links=2)
    assert page.links == ["http://example.com/a", "http://example.com/b"]
    assert page.dropped == 1  # /c; a link seen before is no new link
    assert extract_links(html.encode(), URL, max_links=3).dropped == 0
    assert extract_links(html.encode(), URL).dropped == 0


def test_a_page_of_many_links_is_cut_but_read_to_its_end() -> None:
    # 100 000 links, a base, a title and a robots meta after them: the links past the
    # budget are taken out before parsing; what else the page says is still read.
    many = "".join(f'<a href="p{i}">x</a>\n<img src="i{i}.png">' for i in range(100_000))
    html = (
        f"<html><body>{many}<base href='http://other.org/d/'>"
        '<meta name="robots" content="nofollow"><title>The end</title></body></html>'
    )
    page = extract_links(html.encode(), URL, requisites=True, max_links=100)
    assert page.links == [f"http://other.org/d/p{i}" for i in range(100)]
    assert page.requisites == [f"http://other.org/d/i{i}.png" for i in range(100)]
    assert page.nofollow and page.title == "The end"
    # Every link and image past the first hundred of each, read or not, is counted.
    assert page.dropped == 2 * (100_000 - 100)
