"""parse_message: keys, dates, decoded headers, and no exception on any input."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.archives.body import text_body
from thresher.archives.message import (
    decode_bytes,
    decode_header_value,
    normalize_message_id,
    parse_date,
    parse_message,
)
from thresher.archives.normal import normal_digest, normal_form

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def msg(*headers: str, body: bytes = b"body\n") -> bytes:
    return "".join(h + "\n" for h in headers).encode() + b"\n" + body


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("<abc@example.org>", "abc@example.org"),
        ("  <abc@example.org>  ", "abc@example.org"),
        ("abc@example.org", "abc@example.org"),
        ("<abc@example.org", "abc@example.org"),
        ("abc@example.org>", "abc@example.org"),
        ("<abc@exa\n mple.org>", "abc@example.org"),
        ("<abc@example.org> (added by postmaster)", "abc@example.org"),
        ("<>", None),
        ("   ", None),
        ("", None),
        (None, None),
    ],
)
def test_normalize_message_id(value: str | None, expected: str | None) -> None:
    assert normalize_message_id(value) == expected


def test_message_id_is_the_key() -> None:
    raw = msg("Message-ID:   <id-1@example.org> ", "Subject: x")
    message = parse_message(raw, now=NOW)
    assert message.message_id == "id-1@example.org"
    assert message.key == "id-1@example.org"
    assert message.raw == raw
    assert parse_message(msg("Message-Id: id-1@example.org")).key == message.key
    assert parse_message(msg("MESSAGE-ID:\n <id-1@example.org>")).key == message.key


@pytest.mark.parametrize("header", [None, "Message-ID:", "Message-ID: <>", "Message-ID:   "])
def test_key_falls_back_to_sha256(header: str | None) -> None:
    raw = msg(*([header] if header else []), "Subject: no id")
    message = parse_message(raw)
    assert message.message_id is None
    assert message.key == "sha256:" + hashlib.sha256(normal_form(raw)).hexdigest()
    # Stable across runs (a fixed digest, not hash()) and identical raw gives the same key.
    assert parse_message(bytes(raw)).key == message.key
    assert parse_message(raw + b"x").key != message.key
    # The digest is of the normal form: the same message wrapped otherwise keeps its key.
    rewrapped = b"From MAILER-DAEMON Mon Jan  1 00:00:00 2024\r\n" + raw.replace(b"\n", b"\r\n")
    assert parse_message(rewrapped + b"\r\n\r\n").key == message.key


def test_known_sha256_key() -> None:
    # Pinned: the keys of stored messages depend on it (a change needs a migration).
    assert parse_message(b"").key == (
        "sha256:01ba4719c80b6fe911b091a7c05124b64eeece964e09c058ef8f9805daca546b"
    )


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("Subject: =?utf-8?B?Y2Fmw6k=?=", "café"),
        ("Subject: =?UTF-8?Q?caf=C3=A9_au_lait?=", "café au lait"),
        ("Subject: =?utf-8?b?Y2Fmw6k?=", "café"),  # padding dropped by the client
        ("Subject: =?iso-8859-1?q?caf=E9?= =?iso-8859-1?q?_cr=E8me?=", "café crème"),
        ("Subject: Re: =?utf-8?q?caf=C3=A9?= ok", "Re: café ok"),
        ("Subject: =?utf-8?q?a?=\n =?utf-8?q?b?=", "ab"),
        ("Subject: =?no-such-charset?q?caf=C3=A9?=", "café"),
        ("Subject: =?no-such-charset?q?caf=E9?=", "café"),
        ("Subject: =?utf-8*en?q?hi?=", "hi"),
        ("Subject: =?utf-8?B?!!!not base64?=", "=?utf-8?B?!!!not base64?="),
        ("Subject: plain\n  folded", "plain  folded"),
        ("Subject:", ""),
    ],
)
def test_rfc2047_subjects(header: str, expected: str) -> None:
    assert parse_message(msg(header)).subject == expected


def test_eight_bit_headers() -> None:
    utf8 = "Subject: Grüße\nFrom: Jörg <j@example.de>\n\nx".encode()
    assert parse_message(utf8).subject == "Grüße"
    latin = "Subject: Grüße\n\nx".encode("latin-1")
    assert parse_message(latin).subject == "Grüße"
    koi8 = (
        b"Content-Type: text/plain; charset=koi8-r\nSubject: "
        + "Привет".encode("koi8-r")
        + b"\n\nx"
    )
    assert parse_message(koi8).subject == "Привет"
    mixed = "Subject: Grüße =?utf-8?q?caf=C3=A9?=\n\nx".encode()
    assert parse_message(mixed).subject == "Grüße café"


def test_decode_bytes_fallbacks() -> None:
    assert decode_bytes("é".encode()) == "é"
    assert decode_bytes(b"\x93q\x94") == "\u201cq\u201d"
    assert decode_bytes(b"\x81") == "\x81"
    assert decode_header_value("=?x?q?a?=") == "a"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Mon, 1 Jan 2024 10:00:00 +0200", datetime(2024, 1, 1, 8, tzinfo=UTC)),
        ("Mon, 1 Jan 2024 10:00:00 -0000", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("1 Jan 2024 10:00:00", datetime(2024, 1, 1, 10, tzinfo=UTC)),  # naive: UTC
        ("Mon, 1 Jan 2024 10:00:00 GMT", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("Mon, 1 Jan 2024 10:00:00 +0000 (UTC)", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("Mon, 1 Jan 2024 10:00:00 XYZ", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("Mon, 1 Jan 2024 10:00:00 +9900", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("Mon, 1 Jan 99 10:00:00 +0000", datetime(1999, 1, 1, 10, tzinfo=UTC)),
        ("Monday, 1 January 2024 10:00:00 +0100", datetime(2024, 1, 1, 9, tzinfo=UTC)),
        ("Mon Jan  1 10:00:00 2024", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01T10:00:00+01:00", datetime(2024, 1, 1, 9, tzinfo=UTC)),
        ("2024-01-01 10:00:00", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("Fri, 31 Dec 9999 23:59:59 +0100", datetime(9999, 12, 31, 22, 59, 59, tzinfo=UTC)),
        ("Fri, 31 Dec 9999 23:59:59 -0100", None),  # beyond datetime.max in UTC
        ("garbage", None),
        ("", None),
        ("Mon, 32 Jan 2024 10:00:00 +0000", None),
    ],
)
def test_parse_date(value: str, expected: datetime | None) -> None:
    assert parse_date(value) == expected


def test_date_flags() -> None:
    missing = parse_message(msg("Subject: x"), now=NOW)
    assert (missing.date, missing.date_raw, missing.date_flag) == (None, None, "missing")
    empty = parse_message(msg("Date:   "), now=NOW)
    assert empty.date_flag == "missing"
    garbage = parse_message(msg("Date: the day after tomorrow"), now=NOW)
    assert (garbage.date, garbage.date_raw, garbage.date_flag) == (
        None,
        "the day after tomorrow",
        "unparseable",
    )
    future = parse_message(msg("Date: Wed, 1 Jan 2031 00:00:00 +0000"), now=NOW)
    assert future.date == datetime(2031, 1, 1, tzinfo=UTC)
    assert future.date_flag == "future"
    far = parse_message(msg("Date: Fri, 31 Dec 9999 23:59:59 +0000"), now=NOW)
    assert far.date_flag == "future"
    ok = parse_message(msg("Date: Sat, 31 May 2025 12:00:00 +0000"), now=NOW)
    assert ok.date_flag is None
    assert ok.date is not None and ok.date.tzinfo is UTC
    soon = NOW + timedelta(hours=23)
    assert (
        parse_message(msg(f"Date: {soon:%a, %d %b %Y %H:%M:%S} +0000"), now=NOW).date_flag is None
    )
    naive_now = datetime(2025, 6, 1)
    assert parse_message(future.raw, now=naive_now).date_flag == "future"
    assert parse_message(future.raw).date_flag == "future"  # against the real clock


def test_dates_are_utc() -> None:
    message = parse_message(msg("Date: Mon, 1 Jan 2024 10:00:00 +0530"), now=NOW)
    assert message.date == datetime(2024, 1, 1, 4, 30, tzinfo=UTC)
    assert message.date is not None and message.date.utcoffset() == timedelta(0)
    assert message.date.tzinfo != timezone(timedelta(hours=5, minutes=30))


@pytest.mark.parametrize(
    ("header", "display", "addr"),
    [
        (
            "From: alice at example.org (Alice A.)",
            "alice at example.org (Alice A.)",
            "alice@example.org",
        ),
        (
            "From: alice.b at Lists.Example.ORG",
            "alice.b at Lists.Example.ORG",
            "alice.b@lists.example.org",
        ),
        ("From: Alice <Alice@Example.ORG>", "Alice <Alice@Example.ORG>", "Alice@example.org"),
        ("From: =?utf-8?q?J=C3=B6rg?= <j@example.de>", "Jörg <j@example.de>", "j@example.de"),
        ("From: nobody", "nobody", None),
        ("From:", None, None),
    ],
)
def test_from(header: str, display: str | None, addr: str | None) -> None:
    message = parse_message(msg(header))
    assert message.from_ == display
    assert message.from_addr == addr


def test_threading_headers() -> None:
    message = parse_message(
        msg(
            "In-Reply-To: Your message of Mon <parent@example.org>",
            "References: <a@x> <b@x>\n\t<c@x>  <b@x >",
        ),
        list_name="dev",
    )
    assert message.in_reply_to == "parent@example.org"
    assert message.references == ("a@x", "b@x", "c@x", "b@x")
    assert message.list_name == "dev"
    assert parse_message(msg("In-Reply-To: bare@id")).in_reply_to == "bare@id"
    assert parse_message(msg("In-Reply-To: message from Bob")).in_reply_to is None
    assert parse_message(msg("References: a@x b@x")).references == ("a@x", "b@x")
    assert parse_message(msg("Subject: x")).references == ()


def test_first_header_wins_and_envelope_and_crlf() -> None:
    raw = (
        b"From alice Mon Jan  1 00:00:00 2024\r\nSubject: one\r\nSubject: two\r\n"
        b"Message-ID: <m@x>\r\n\r\nSubject: body\r\n"
    )
    message = parse_message(raw)
    assert (message.subject, message.key) == ("one", "m@x")


def test_headers_stop_at_the_blank_line() -> None:
    message = parse_message(b"Subject: s\n\nMessage-ID: <in-body@x>\n")
    assert message.message_id is None


def test_nul_bytes_and_missing_everything() -> None:
    message = parse_message(b"Subject: a\x00b\nMessage-ID: <x\x00y@z>\n\n\x00\x00")
    assert message.subject == "a\x00b"
    assert message.key == "x\x00y@z"
    empty = parse_message(b"")
    assert (empty.message_id, empty.subject, empty.from_, empty.date_flag) == (
        None,
        None,
        None,
        "missing",
    )
    assert parse_message(b"just a body, no headers\n").subject is None


def test_ten_megabyte_message() -> None:
    body = b"x" * 79 + b"\n"
    raw = msg("Message-ID: <big@x>", "Subject: big", body=body * (10 * 1024 * 1024 // 80))
    message = parse_message(raw)
    assert (message.key, message.subject, message.raw) == ("big@x", "big", raw)
    headers_only = b"Subject: s\n" + b"X-Long: " + b"y" * (10 * 1024 * 1024)
    assert parse_message(headers_only).subject == "s"


header_names = st.sampled_from(
    ["Message-ID", "Date", "From", "Subject", "In-Reply-To", "References", "Content-Type", "X"]
)
header_values = st.one_of(
    st.binary(max_size=80),
    st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"=?utf-8?q?=FF?=",
            b"=?bogus?b?====?=",
            b'text/plain; charset="bogus"',
            b"text/plain; charset=utf-16",
            b"Fri, 31 Dec 9999 23:59:59 -2359",
            b"Mon, 1 Jan 0 00:00:00 +0000",
            b"<a@b> <c@d",
            b"x at y.z (N)",
        ]
    ),
)


@given(st.binary(max_size=2000))
@settings(max_examples=500, deadline=None)
def test_parse_message_never_raises_on_bytes(raw: bytes) -> None:
    message = parse_message(raw, now=NOW)
    assert message.raw == raw
    assert message.key == (message.message_id or "sha256:" + normal_digest(raw))
    assert message.date is None or message.date.tzinfo is UTC


@given(st.lists(st.tuples(header_names, header_values), max_size=10), st.binary(max_size=50))
@settings(max_examples=500, deadline=None)
def test_parse_message_never_raises_on_headers(
    headers: list[tuple[str, bytes]], body: bytes
) -> None:
    raw = b"".join(name.encode() + b": " + value + b"\n" for name, value in headers)
    message = parse_message(raw + b"\n" + body, now=NOW)
    assert message.message_id is None or message.message_id.strip() == message.message_id
    assert parse_message(raw + b"\n" + body, now=NOW) == message


def test_huge_from_header_is_cheap() -> None:
    message = parse_message(b"From: " + b"a" * 200_000 + b" at example.org\n\n")
    assert message.from_addr is None


@pytest.mark.parametrize(
    "from_",
    [
        "Ann <ann@Example.ORG>",
        "ann@example.org",
        "ann@example.org (Ann)",
        "=?utf-8?q?Ann?= <a@b.c>",
        "<a@b.example>",
        "Ann < a@b.example >",
        "Bob (a@b) <c@d.example>",
        '"Doe, John" <john@example.org>',
        "a@b.example, c@d.example",
    ],
)
def test_from_address_fast_path_agrees_with_getaddresses(from_: str) -> None:
    from email.utils import getaddresses

    expected = next(a for _, a in getaddresses([from_]) if "@" in a)
    local, _, domain = expected.rpartition("@")
    raw = f"From: {from_}\nSubject: x\n\nbody\n".encode()
    assert parse_message(raw).from_addr == f"{local}@{domain.lower()}"


ODD_CHARSETS = ["idna", "utf-8\x00", "undefined", "unicode_escape", "punycode", "a\x00b"]


@given(st.binary(max_size=200), st.one_of(st.sampled_from(ODD_CHARSETS), st.text(max_size=12)))
@settings(max_examples=300, deadline=None)
def test_decode_bytes_never_raises(data: bytes, charset: str) -> None:
    decode_bytes(data, charset).encode("utf-8")  # and never a lone surrogate


@pytest.mark.parametrize("charset", ODD_CHARSETS)
def test_decode_bytes_survives_codecs_that_raise(charset: str) -> None:
    # These raised UnicodeError or ValueError and stopped the month (issue 20).
    assert decode_bytes(b"caf\xe9 \\ud800 x..y", charset) == "café \\ud800 x..y"
    raw = f"Subject: =?{charset}?b?AA==?= and =?{charset}?q?x=FF?=\n".encode(
        "utf-8", "surrogateescape"
    ) + f"Content-Type: text/plain; charset={charset}\n\ncaf\xe9\n".encode("latin-1")
    message = parse_message(raw)
    assert message.subject is not None
    assert text_body(raw) == "café\n"
