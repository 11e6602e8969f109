"""canonicalize: the documented rules, a fixed point, and clear refusals."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from thresher.errors import PermanentError, ThresherError
from thresher.frontier import InvalidURL, canonicalize, host_of, site_of, url_hash
from thresher.frontier import canonical as canonical_module
from thresher.frontier.canonical import DEFAULT_PORTS, _canonicalize, key_of, plain_site
from thresher.weburl import resolve


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTP://Example.COM/", "http://example.com/"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:443/a", "http://example.com:443/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("http://example.com/a#frag", "http://example.com/a"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/?b=2&a=1", "http://example.com/?a=1&b=2"),
        ("http://example.com/%7Efoo", "http://example.com/~foo"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://bücher.de/ä?q=ü", "http://xn--bcher-kva.de/%C3%A4?q=%C3%BC"),
        ("http://example.com./x", "http://example.com/x"),
        ("  http://example.com/x \n", "http://example.com/x"),
        ("http://[::1]:80/x", "http://[::1]/x"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        ("http://user:pw@Example.com:81", "http://user:pw@example.com:81/"),
        # the URL Standard's hosts: UTS #46 non-transitional IDNA, IPv4 in every form
        ("http://faß.example/", "http://xn--fa-hia.example/"),
        ("http://FASS.example/", "http://fass.example/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0177.0.0.1/", "http://127.0.0.1/"),
        ("http://127.1:80/", "http://127.0.0.1/"),
        ("http://[0:0::1]/", "http://[::1]/"),
        # empty user info is no user info; an empty password is none
        ("http://@host/", "http://host/"),
        ("http://:@host/", "http://host/"),
        ("http://a:@host/", "http://a@host/"),
        # the query: sorted, every name given a value, only "&" separates
        ("http://h/?/archives/1", "http://h/?%2Farchives%2F1="),
        ("http://h/?x=1;y=2", "http://h/?x=1%3By%3D2"),
        ("http://h/list.html?sort=asc&page=2", "http://h/list.html?page=2&sort=asc"),
        ("http://h/?q='", "http://h/?q=%27"),
        ("http:///a", "http://a/"),  # slashes before a host do not count
        ("http:\\\\a\\b", "http://a/b"),
    ],
)
def test_rules(url: str, canonical: str) -> None:
    assert canonicalize(url) == canonical


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/",
        "mailto:a@example.com",
        "javascript:void(0)",
        "/relative",
        "",
        "http://",
        "http://\xa0../",  # found by Hypothesis: a no-break space as the host
        "http://exa mple.com/",
        "http://ex<a>mple.com/",
    ],
)
def test_refuses_what_cannot_be_crawled(url: str) -> None:
    with pytest.raises(InvalidURL):
        canonicalize(url)


def test_bad_port_is_refused() -> None:
    with pytest.raises(InvalidURL, match=r"(?i)port"):
        canonicalize("http://example.com:99999/")


def test_invalid_url_is_a_permanent_thresher_error() -> None:
    with pytest.raises(PermanentError) as info:
        canonicalize("ftp://example.com/")
    assert isinstance(info.value, ThresherError)
    assert "ftp" in str(info.value)


def test_url_hash_is_64_bit_and_stable() -> None:
    h = url_hash("http://example.com/")
    assert 0 <= h < 2**64
    assert h == url_hash("http://example.com/")
    assert h != url_hash("http://example.com/a")


@pytest.mark.parametrize(
    "spellings",
    [
        ["http://faß.example/", "http://FAß.EXAMPLE:80/", "http://xn--fa-hia.example/"],
        ["http://host/", "http://@host/", "http://:@host/", "HTTP://HOST./#x"],
        ["http://a@host/", "http://a:@host/"],
        ["http://127.0.0.1/", "http://0x7f.1/", "http://2130706433/", "http://0x7f000001/"],
        ["http://h/a?b=2&a=1", "http://h/a/../a?a=1&b=2", "http://h/%61?a=1&b=2"],
    ],
)
def test_spellings_of_one_url_have_one_key(spellings: list[str]) -> None:
    assert len({canonicalize(url) for url in spellings}) == 1


def test_different_urls_keep_different_keys() -> None:
    urls = [
        "http://fass.example/",
        "http://xn--fa-hia.example/",
        "http://a@host/",
        "http://host/",
        "http://a:b@host/",
        "http://host/?a",
        "http://host/?b",
    ]
    assert len({canonicalize(url) for url in urls}) == len(urls)

    assert host_of("http://example.com:8080/a") == "example.com"


URL_CHARS = st.sampled_from(
    [*"aZ09-._~%/?#&=+:;@!$'()*, äü日\t", "%7E", "%2F", "%zz", "/../", "/./"]
)
HOSTS = st.sampled_from(
    [
        "example.com",
        "EXAMPLE.com.",
        "bücher.de",
        "[::1]",
        "127.0.0.1",
        "a.b",
        "x:80",
        "y:443",
        "u@h",
    ]
)


@settings(deadline=None, max_examples=500)
@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "HtTpS"]),
    host=HOSTS,
    rest=st.lists(URL_CHARS, max_size=30).map("".join),
)
def test_canonicalize_is_idempotent_on_url_like_text(scheme: str, host: str, rest: str) -> None:
    url = f"{scheme}://{host}/{rest}"
    try:
        once = canonicalize(url)
    except InvalidURL:
        return
    assert canonicalize(once) == once


@settings(deadline=None, max_examples=500)
@given(st.text())
def test_canonicalize_is_idempotent_or_refuses_on_any_text(text: str) -> None:
    for url in (text, "http://" + text, "https://example.com/" + text):
        try:
            once = canonicalize(url)
        except InvalidURL:
            continue
        assert canonicalize(once) == once
        assert once.startswith(("http://", "https://"))


FAST_HOST_LABELS = st.sampled_from(
    ["a", "z9", "x-y", "-", "xn--bcher-kva", "127", "0x7f", "a" * 63]
)
FAST_PATH_CHARS = st.sampled_from([*"aZ09-._~!$&'()*+,;=:@/", "/.", "..", "/..", "%41", "?", "#"])


@settings(deadline=None, max_examples=1000)
@given(
    scheme=st.sampled_from(["http", "https"]),
    labels=st.lists(FAST_HOST_LABELS, min_size=1, max_size=4),
    port=st.sampled_from(["", ":80", ":443", ":8080", ":65535", ":65536", ":99999", ":0", ":08"]),
    path=st.lists(FAST_PATH_CHARS, max_size=20).map("".join),
)
def test_urls_taken_as_canonical_are_what_the_rules_make_them(
    scheme: str, labels: list[str], port: str, path: str
) -> None:
    """The shortcut for URLs already canonical agrees with the full rules."""
    url = resolve(f"{scheme}://{'.'.join(labels)}{port}/{path}")
    assume(url is not None)
    assert url is not None
    assert key_of(url) == _canonicalize(url)


@pytest.mark.parametrize(
    ("url", "shortcut"),
    [
        ("http://127.0.0.5:46559/p/1004.html", True),
        ("https://www.example-shop.com/a/b_c~d=f/", True),
        ("http://example.com/a;b", False),
        ("http://example.com/a?b", False),
        ("http://example.com/%7E", False),
        ("http://example.com./", False),
        ("http://u@example.com/", False),
    ],
)
def test_which_urls_are_taken_as_canonical(
    url: str, shortcut: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert resolve(url) == url
    monkeypatch.setattr(canonical_module, "_canonicalize", lambda url: "full rules")
    assert (key_of(url) == url) is shortcut


def _split_site(url: str) -> tuple[str, str, int] | str:
    """What `site_of` answers by urlsplit alone (or the error it raises)."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS or not parts.hostname:
            return "InvalidURL"
        return scheme, parts.hostname, parts.port or DEFAULT_PORTS[scheme]
    except ValueError as exc:
        return type(exc).__name__


def _site(url: str) -> tuple[str, str, int] | str:
    try:
        return site_of(url)
    except (InvalidURL, ValueError) as exc:
        return type(exc).__name__


SITE_LABELS = st.sampled_from(["a", "z9", "x-y", "-", "", "127", "Ab", "u@h", "[::1]", "é", "_"])


@settings(deadline=None, max_examples=1500)
@given(
    scheme=st.sampled_from(["http", "https", "HTTP", "ftp", ""]),
    labels=st.lists(SITE_LABELS, min_size=1, max_size=3),
    port=st.sampled_from(["", ":80", ":443", ":0", ":08", ":65535", ":65536", ":99999", ":x", ":"]),
    rest=st.sampled_from(["", "/", "/p/1.html", "?q", "#f", "\t/", " /", "@h/", ":9/", "\\"]),
)
def test_hosts_and_sites_read_without_urlsplit_are_what_urlsplit_reads(
    scheme: str, labels: list[str], port: str, rest: str
) -> None:
    """`host_of` and `site_of` skip urlsplit for plainly written hosts: the same answers."""
    url = f"{scheme}://{'.'.join(labels)}{port}{rest}"
    assert host_of(url) == (urlsplit(url).hostname or "")
    assert _site(url) == _split_site(url)
    assert (plain_site(url) is not None) <= (host_of(url) == ".".join(labels))


@pytest.mark.parametrize(
    ("url", "plain"),
    [
        ("http://127.0.0.5:46559/p/1004.html", True),
        ("https://www.example.com", True),
        ("http://example.com?q", True),
        ("http://Example.com/", False),
        ("http://u@example.com/", False),
        ("http://[::1]/", False),
        ("HTTP://example.com/", False),
        ("http://example.com:x/", False),
    ],
)
def test_which_hosts_are_read_without_urlsplit(url: str, plain: bool) -> None:
    assert (plain_site(url) is not None) is plain
