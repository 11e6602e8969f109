"""CDXJ lines and SURT keys, in the form pywb reads; and indexes of WARCs that another
writer (warcio) wrote."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from warcio.statusandheaders import StatusAndHeaders  # type: ignore[import-untyped]
from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]

from thresher.store.cdxj import (
    _surt_any,
    cdxj_line,
    cdxj_path,
    http_status_and_mime,
    parse_cdxj_line,
    surt,
    timestamp14,
    write_index,
)


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://example.com", "com,example)/"),
        ("https://www.Example.com/A/B/?b=2&a=1#top", "com,example)/a/b?a=1&b=2"),
        ("http://www2.example.com:80/", "com,example)/"),
        ("https://example.com:443/x", "com,example)/x"),
        ("http://example.com:8080/x", "com,example:8080)/x"),
        ("http://user:secret@example.com/", "com,example)/"),
        ("http://127.0.0.1/a", "1,0,0,127)/a"),
        ("http://2130706433/", "1,0,0,127)/"),
        ("http://example.com/a/./b/../c", "com,example)/a/c"),
        ("http://example.com//a//b", "com,example)/a/b"),
        ("http://example.com/%7Euser/a%20b", "com,example)/~user/a%20b"),
        ("http://example.com/a%2520b", "com,example)/a%20b"),
        ("http://bücher.de/ä", "de,xn--bcher-kva)/%c3%a4"),
        ("http://example.com/?jsessionid=0123456789abcdef0123456789abcdef", "com,example)/"),
        ("http://example.com/p?sid=0123456789abcdef0123456789abcdef&a=1", "com,example)/p?a=1"),
        ("example.com/x", "com,example)/x"),
        ("", "-"),
    ],
)
def test_surt(url: str, key: str) -> None:
    assert surt(url) == key


# URLs near the fast path's edges: hosts that canonicalise away or to an IP, odd ports,
# dot segments, doubled slashes, session ids, escapes, user info, queries.
_HOSTS = st.sampled_from(
    [
        "example.com",
        "WWW.Example.COM",
        "www2.a.b",
        "127.0.0.1",
        "2130706433",
        "0177.1",
        "a..b",
        ".",
        "www.",
        "-x-.org",
        "xn--bcher-kva.de",
        "user@h.org",
        "h.org:",
    ]
)
_PORTS = st.sampled_from(["", ":80", ":443", ":0", ":8080", ":65535", ":65536", ":99999"])
_PATH = st.lists(
    st.sampled_from(
        [
            "a",
            "B",
            ".",
            "..",
            "",
            ".x",
            "x.",
            "%41",
            "%2541",
            "~u",
            "(a(0123456789abcdef01234567))",
            "p.aspx",
            "@:;=",
            "é",
            "a b",
        ]
    ),
    max_size=5,
).map(lambda parts: "/".join(["", *parts]) if parts else "")
_TAIL = st.sampled_from(["", "/", "?b=2&a=1", "#f", "?jsessionid=0123456789abcdef0123456789abcdef"])


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(["http", "https", "HTTP"]), _HOSTS, _PORTS, _PATH, _TAIL)
@example("http", "example.com", "", "/A/", "")
@example("http", "example.com", "", "/a//b", "")
@example("http", "example.com", "", "/a/./b/..", "")
@example("https", "example.com", ":443", "", "")
def test_surt_fast_path_gives_the_general_key(
    scheme: str, host: str, port: str, path: str, tail: str
) -> None:
    url = f"{scheme}://{host}{port}{path}{tail}"
    try:
        expected: str | type[ValueError] = _surt_any(url)
    except ValueError:
        expected = ValueError
    try:
        got: str | type[ValueError] = surt(url)
    except ValueError:
        got = ValueError
    assert got == expected, url


def test_surt_refuses_a_port_that_is_not_a_number() -> None:
    with pytest.raises(ValueError, match="port"):
        surt("http://example.com:http/")
    with pytest.raises(ValueError, match="port"):
        surt("http://example.com:70000/")


def test_http_status_and_mime() -> None:
    head = b"HTTP/1.1 404 Not Found\r\nX: 1\r\ncontent-type:  text/html; charset=utf-8\r\n\r\n"
    assert http_status_and_mime(head) == ("404", "text/html")
    # No Content-Type: "unk", as pywb's indexer writes it.
    assert http_status_and_mime(b"HTTP/1.0 200 OK\r\n\r\n") == ("200", "unk")
    assert http_status_and_mime(b"HTTP/1.0 404 Not Found\r\nContent-Type: \r\n\r\n") == (
        "404",
        "unk",
    )
    # Only the head counts, not a Content-Type line in the payload.
    assert http_status_and_mime(b"HTTP/1.1 200 OK\r\n\r\nContent-Type: x/y\r\n") == ("200", "unk")
    assert http_status_and_mime(b"garbage") == (None, "unk")


def test_cdxj_line_has_pywbs_fields_in_order() -> None:
    line = cdxj_line(
        url="http://www.example.com/A?b=1&a=2",
        warc_date="2024-05-01T12:34:56.789012Z",
        mime="text/html",
        status="200",
        digest="sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
        length=1234,
        offset=567,
        filename="x.warc.gz",
    )
    assert line == (
        'com,example)/a?a=2&b=1 20240501123456 {"url": "http://www.example.com/A?b=1&a=2", '
        '"mime": "text/html", "status": "200", "digest": "3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ", '
        '"length": "1234", "offset": "567", "filename": "x.warc.gz"}'
    )
    key, stamp, fields = parse_cdxj_line(line)
    assert (key, stamp, fields["offset"]) == ("com,example)/a?a=2&b=1", "20240501123456", "567")
    # A value that is missing is left out, as pywb's indexers do.
    bare = cdxj_line(
        url="http://example.com/",
        warc_date="2024-05-01T12:34:56Z",
        mime=None,
        status=None,
        digest=None,
        length=1,
        offset=0,
        filename="x.warc.gz",
    )
    assert list(parse_cdxj_line(bare)[2]) == ["url", "length", "offset", "filename"]
    assert timestamp14("2024-05-01T12:34:56Z") == "20240501123456"


def test_write_index_of_a_warc_that_warcio_wrote(tmp_path: Path) -> None:
    warc = tmp_path / "other-tool.warc.gz"
    urls = ["http://www.example.com/b", "http://example.com/a", "https://example.org/?q=1"]
    with open(warc, "wb") as f:
        writer = WARCWriter(f, gzip=True)
        writer.write_record(writer.create_warcinfo_record(warc.name, {"software": "warcio"}))
        for url in urls:
            http = StatusAndHeaders(
                "200 OK", [("Content-Type", "text/plain; charset=ascii")], protocol="HTTP/1.1"
            )
            # With a length, warcio needs no temporary file (which it would not close).
            body = url.encode()
            record = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), length=len(body), http_headers=http
            )
            writer.write_record(record)
            request = writer.create_warc_record(
                url,
                "request",
                payload=io.BytesIO(b""),
                length=0,
                http_headers=StatusAndHeaders("GET / HTTP/1.1", [], is_http_request=True),
            )
            writer.write_record(request)
    index = write_index(warc)
    assert index == cdxj_path(warc) == tmp_path / "other-tool.cdxj"
    lines = index.read_text().splitlines()
    assert lines == sorted(lines)
    assert [parse_cdxj_line(x)[0] for x in lines] == sorted(surt(u) for u in urls)
    data = warc.read_bytes()
    for line in lines:
        _, _, fields = parse_cdxj_line(line)
        assert fields["mime"] == "text/plain"
        assert fields["status"] == "200"
        member = data[int(fields["offset"]) : int(fields["offset"]) + int(fields["length"])]
        assert member[:2] == b"\x1f\x8b"
        assert fields["url"].encode() in gzip.decompress(member)
