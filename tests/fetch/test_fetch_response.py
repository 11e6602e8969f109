"""Response as a value (headers, redirect targets, Retry-After) and the error tree."""

from __future__ import annotations

import pickle
import time
from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import pytest

from thresher.errors import JobError, PermanentError, ThresherError, TransientError
from thresher.fetch import (
    AddressRefused,
    BadResponse,
    ConnectionFailed,
    DNSError,
    FetchError,
    FetchSettings,
    FetchTimeout,
    InvalidRequestURL,
    Response,
    TooLarge,
    parse_retry_after,
)

NOW = 1_700_000_000.0


def response(status: int = 200, *headers: tuple[str, str], url: str = "http://h/a/b") -> Response:
    return Response(
        url=url,
        status=status,
        reason="OK",
        version="1.1",
        headers=headers,
        body=b"",
        content=b"",
        decode_error=None,
        ip="93.184.216.34",
        request_head=b"GET /a/b HTTP/1.1\r\nHost: h\r\n\r\n",
        started=NOW,
        elapsed=0.1,
    )


def test_a_response_is_frozen() -> None:
    r = response()
    with pytest.raises(FrozenInstanceError):
        r.status = 404  # type: ignore[misc]


def test_http_head_rebuilds_the_status_line_and_headers() -> None:
    r = response(200, ("Content-Type", "text/html"), ("X-Odd", "caf\xe9"))
    assert r.http_head() == b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Odd: caf\xe9\r\n\r\n"
    old = replace(r, version="1.0", status=599, reason="", headers=())
    assert old.http_head() == b"HTTP/1.0 599\r\n\r\n"


@pytest.mark.parametrize(
    ("status", "location", "expected"),
    [
        (301, "/x", "http://h/x"),
        (302, "c?d=1", "http://h/a/c?d=1"),
        (303, "  ../up  ", "http://h/up"),
        (307, "https://other/p#f", "https://other/p"),  # the fragment is never sent
        (308, "//cdn.example/z", "http://cdn.example/z"),
        (302, "", None),
        (200, "/x", None),
        (404, "/x", None),
        (302, "caf\xc3\xa9", "http://h/a/caf%C3%A9"),  # UTF-8 bytes read as Latin-1, repaired
        (302, "caf\xe9", "http://h/a/caf%C3%A9"),  # not UTF-8: read as Latin-1
        # resolved as browsers resolve it, nothing re-ordered or re-encoded
        (302, "?/archives/1", "http://h/a/b?/archives/1"),
        (302, "list?sort=asc&page=2", "http://h/a/list?sort=asc&page=2"),
        (302, "HTTP://0x7f.1:80/x", "http://127.0.0.1/x"),
        (302, "\\\\faß.example\\x", "http://xn--fa-hia.example/x"),
        (302, "mailto:a@b.example", "mailto:a@b.example"),  # for the error it gives
        (302, "http://[::1/", "http://[::1/"),  # the Standard fails it: joined as written
    ],
)
def test_location(status: int, location: str, expected: str | None) -> None:
    assert response(status, ("Location", location)).location == expected


def test_a_redirect_without_location_has_none() -> None:
    assert response(302).location is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        ("Wed, 15 Nov 2023 00:13:20 GMT", 7200.0),  # NOW + 2 h
        ("Tue, 14 Nov 2023 20:13:20 GMT", 0.0),  # in the past: now
        ("Wednesday, 15-Nov-23 00:13:20 GMT", 7200.0),  # RFC 850, still allowed
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("Wed, 15 Nov 2023 00:13:20 -0000", None),
        ("٣", None),  # a digit, but not ASCII
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_retry_after_is_counted_from_now() -> None:
    later = format_datetime(datetime.fromtimestamp(time.time() + 60, UTC), usegmt=True)
    wait = response(503, ("Retry-After", later)).retry_after
    assert wait is not None and 57 <= wait <= 60
    assert response(429, ("retry-after", "7")).retry_after == 7.0
    assert response(503, ("Retry-After", "whenever")).retry_after is None
    assert response(503).retry_after is None


ERRORS: list[tuple[type[FetchError], type[JobError]]] = [
    (AddressRefused, PermanentError),
    (DNSError, TransientError),
    (FetchTimeout, TransientError),
    (ConnectionFailed, TransientError),
    (TooLarge, PermanentError),
    (BadResponse, TransientError),
    (InvalidRequestURL, PermanentError),
]


@pytest.mark.parametrize(("cls", "kind"), ERRORS)
def test_errors_are_one_tree_and_say_whether_to_retry(
    cls: type[FetchError], kind: type[JobError]
) -> None:
    error = cls("http://h/x", "it went\n  wrong")
    assert isinstance(error, FetchError) and isinstance(error, kind)
    assert isinstance(error, ThresherError)
    other = PermanentError if kind is TransientError else TransientError
    assert not isinstance(error, other)
    assert str(error) == "GET http://h/x: it went wrong"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and str(copy) == str(error) and copy.url == "http://h/x"
    moved = error.for_url("http://h/y")
    assert type(moved) is cls and str(moved) == "GET http://h/y: it went wrong"
    if isinstance(error, TransientError):
        assert error.retry_after is None


def test_long_reasons_are_cut() -> None:
    assert len(BadResponse("http://h/", "x" * 5000).reason) == 300


@pytest.mark.parametrize(
    "field",
    [
        "connect_timeout",
        "read_timeout",
        "stall_timeout",
        "total_timeout",
        "dns_ttl",
        "max_body",
        "limit",
    ],
)
def test_settings_are_checked(field: str) -> None:
    zero: dict[str, Any] = {field: 0}
    with pytest.raises(ValueError, match=field):
        FetchSettings(**zero)
    with pytest.raises(ValueError, match="limit_per_host"):
        FetchSettings(limit_per_host=-1)


def test_http_head_leaves_out_transfer_encoding_the_body_no_longer_has() -> None:
    r = response(200, ("Transfer-Encoding", "chunked"), ("Content-Type", "text/html"))
    assert r.http_head() == b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
