"""The normal form: one identity for a message however an archive wraps it, a different
one for a message that really differs, and no exception on any input."""

from __future__ import annotations

import base64
import email.generator
import email.policy
import io
import quopri
import re
from email.message import EmailMessage

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.archives.body import text_body
from thresher.archives.mbox import RawMessage
from thresher.archives.message import parse_message
from thresher.archives.normal import normal_digest, normal_form
from thresher.archives.rows import message_rows

TEXT = "Grüße aus Köln.\nThe release is out: 2.3 is tagged.\n>From the notes: nothing.\n" * 3
PNG = bytes(range(256)) * 8


def hyperkitty_like(
    text: str = TEXT, attachment: bytes = PNG, *, subject: str = "Ré: vote"
) -> bytes:
    """A message built the way HyperKitty builds each message of a month export anew:
    EmailMessage, set_content, make_mixed, an attachment; its MIME boundary is random,
    so two calls give different bytes for the same message."""
    msg = EmailMessage()
    msg["From"] = "Jörg Müller <joerg@example.de>"
    msg["To"] = "dev@example.org"
    msg["Subject"] = subject
    msg["Date"] = "Mon, 01 Jan 2024 10:00:00 +0100"
    msg["Message-ID"] = "<vote.1@example.de>"
    msg.set_content(text, subtype="plain")
    msg.make_mixed()
    msg.add_attachment(attachment, maintype="image", subtype="png", filename="graph.png")
    out = io.BytesIO()
    email.generator.BytesGenerator(out, mangle_from_=True).flatten(msg)
    return out.getvalue()


def rewrap_base64(raw: bytes, width: int) -> bytes:
    """Every base64 body re-wrapped at `width` characters a line."""

    def again(match: re.Match[bytes]) -> bytes:
        data = base64.b64decode(match.group(2))
        encoded = base64.b64encode(data)
        lines = [encoded[i : i + width] for i in range(0, len(encoded), width)]
        return match.group(1) + b"\n".join(lines) + b"\n"

    return re.sub(
        rb"(Content-Transfer-Encoding: base64\n(?:[^\n]+\n)*\n)((?:[A-Za-z0-9+/=]+\n)+)",
        again,
        raw,
    )


def test_fresh_boundaries_and_rewrapped_base64_are_one_message() -> None:
    first, second = hyperkitty_like(), hyperkitty_like()
    assert first != second  # the boundaries differ
    third = rewrap_base64(second, 60)
    assert third != second and b"base64" in third
    assert normal_digest(first) == normal_digest(second) == normal_digest(third)


def test_what_an_archive_changes_when_it_rewraps_is_ignored() -> None:
    raw = hyperkitty_like()
    digest = normal_digest(raw)
    crlf = raw.replace(b"\n", b"\r\n")
    enveloped = b"From joerg@example.de Mon Jan  1 09:00:00 2024\n" + raw
    trailing = raw + b"\n\n \n"
    refolded = raw.replace(b"Subject: ", b"Subject:\n   ", 1)
    for variant in (crlf, enveloped, trailing, refolded):
        assert variant != raw
        assert normal_digest(variant) == digest


def test_transfer_encodings_and_header_encodings_are_decoded() -> None:
    body = "Ünïcödé text, a long line " * 10 + "\n"
    plain = (
        b"From: =?utf-8?q?J=C3=B6rg?= <j@example.de>\nSubject: =?utf-8?b?R3LDvMOfZQ==?=\n"
        b"Message-ID: <e@x>\nContent-Type: text/plain; charset=utf-8\n"
        b"Content-Transfer-Encoding: 8bit\n\n"
    ) + body.encode()
    raw_utf8 = (
        "From: Jörg <j@example.de>\nSubject: Grüße\nMessage-ID: <e@x>\n"
        "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n"
    ).encode() + base64.encodebytes(body.encode())
    qp = (
        "From: Jörg <j@example.de>\nSubject: Grüße\nMessage-ID: <e@x>\n"
        "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\n"
    ).encode() + quopri.encodestring(body.encode())
    assert len({normal_digest(plain), normal_digest(raw_utf8), normal_digest(qp)}) == 1


def test_mbox_quoting_of_from_lines_is_ignored() -> None:
    raw = b"Message-ID: <q@x>\n\nFrom the start.\n>From quoted.\n>>From twice.\n"
    mboxo = b"Message-ID: <q@x>\n\n>From the start.\n>From quoted.\n>>From twice.\n"
    mboxrd = b"Message-ID: <q@x>\n\n>From the start.\n>>From quoted.\n>>>From twice.\n"
    assert normal_digest(raw) == normal_digest(mboxo) == normal_digest(mboxrd)


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.replace(b"is tagged", b"is tugged"),  # a word of the text
        lambda r: re.sub(rb"Subject: [^\n]*", b"Subject: vote", r),
        lambda r: r.replace(b"graph.png", b"graph2.png"),  # the attachment's name
        lambda r: r.replace(b"Message-ID: <vote.1", b"Message-ID: <vote.2"),
        lambda r: r + b"\nP.S. one more line\n",  # after the closing boundary: the epilogue
    ],
)
def test_messages_that_really_differ_stay_apart(change: object) -> None:
    raw = hyperkitty_like()
    changed = change(raw)  # type: ignore[operator]
    assert changed != raw
    if changed.endswith(b"P.S. one more line\n"):
        # Text after the closing delimiter is no part of any message a reader sees.
        assert normal_digest(changed) == normal_digest(raw)
    else:
        assert normal_digest(changed) != normal_digest(raw)


def test_a_different_attachment_or_part_order_differs() -> None:
    assert normal_digest(hyperkitty_like(attachment=PNG[:-1] + b"x")) != normal_digest(
        hyperkitty_like()
    )
    assert normal_digest(hyperkitty_like(text=TEXT + "one more\n")) != normal_digest(
        hyperkitty_like()
    )


def test_nested_multipart_and_attached_message() -> None:
    inner = hyperkitty_like()
    outer = EmailMessage()
    outer["Message-ID"] = "<fwd@x>"
    outer["Subject"] = "Fwd: vote"
    outer.set_content("See below.\n")
    outer.add_attachment(email.message_from_bytes(inner, policy=email.policy.default))
    one, two = outer.as_bytes(), outer.as_bytes()
    again = EmailMessage()
    again["Message-ID"] = "<fwd@x>"
    again["Subject"] = "Fwd: vote"
    again.set_content("See below.\n")
    again.add_attachment(email.message_from_bytes(hyperkitty_like(), policy=email.policy.default))
    assert one == two and again.as_bytes() != one
    assert normal_digest(again.as_bytes()) == normal_digest(one)
    assert b"\x00message\n" in normal_form(one) and b"\x00multipart\n" in normal_form(one)


def test_missing_closing_delimiter_and_boundary_prefixes() -> None:
    raw = (
        b'Content-Type: multipart/mixed; boundary="b"\n\npreamble\n--b\n\none\n'
        b"--bb not a delimiter\n--b\n\ntwo\n"
    )
    closed = raw + b"--b--\n"
    assert normal_digest(raw) == normal_digest(closed)
    form = normal_form(raw)
    assert b"one\n--bb not a delimiter" in form and b"preamble" not in form
    # A multipart without its boundary anywhere is compared as text.
    lost = b'Content-Type: multipart/mixed; boundary="zz"\n\nno parts here\n'
    assert b"no parts here" in normal_form(lost)


def test_a_message_of_headers_only() -> None:
    raw = b"Subject: x\nContent-Transfer-Encoding: base64"
    assert normal_form(raw) == b"Subject:x\n\n"
    assert normal_digest(raw + b"\n") == normal_digest(raw.replace(b"base64", b"8bit"))


def test_pinned_digest() -> None:
    # Stored messages carry this digest: a change of the rules needs a migration.
    raw = (
        b"From: Ann <ann@example.org>\nSubject: Hello\nMessage-ID: <p@x>\n"
        b'Content-Type: text/plain; charset="utf-8"\n\nHi.\n'
    )
    assert normal_form(raw) == (
        b"From:Ann <ann@example.org>\nSubject:Hello\nMessage-ID:<p@x>\n"
        b'Content-Type:text/plain; charset="utf-8"\n\nHi.'
    )
    assert normal_digest(raw) == "bfe0120f15ce49866639aa0235782ef0655bce9632b94b289dbdd82deefd7eae"


# --- never raises ------------------------------------------------------------------------

CHARSETS = st.one_of(
    st.sampled_from(
        [
            "utf-8",
            "idna",
            "punycode",
            "utf-8\x00",
            "undefined",
            "unicode_escape",
            "raw_unicode_escape",
            "utf-16",
            "utf-7",
            "rot13",
            "base64",
            "zlib",
            "hex",
            "x-unknown",
            "uft-8",
            "utf-8*en",
            "",
            "\x00",
            "iso-2022-jp",
            "cp1252",
            "latin-1",
            "ascii",
            "shift_jis",
            "utf-32",
            "mbcs",
        ]
    ),
    st.text(min_size=0, max_size=12),
)
WORD_TEXT = st.binary(max_size=40)
HEADER_BYTES = st.binary(max_size=80)


@st.composite
def hostile_messages(draw: st.DrawFn) -> bytes:
    charset = draw(CHARSETS).encode("utf-8", "surrogateescape")
    encoding = draw(st.sampled_from([b"b", b"q", b"B", b"Q", b"x"]))
    payload = draw(WORD_TEXT)
    if encoding in (b"b", b"B"):
        payload = base64.b64encode(payload)[: draw(st.integers(0, 80))]
    word = b"=?" + charset + b"?" + encoding + b"?" + payload.replace(b"?", b"") + b"?="
    cte = draw(st.sampled_from([b"base64", b"quoted-printable", b"8bit", b"x-uuencode", b""]))
    ctype = draw(
        st.sampled_from([b"text/plain", b"text/html", b"multipart/mixed", b"message/rfc822"])
    )
    boundary = draw(st.sampled_from([b"b", b"", b'"q q"', b"=?x?="]))
    headers = [
        b"From: " + word + b" <a@b.c>",
        b"Subject: " + draw(HEADER_BYTES) + b" " + word,
        b"Content-Type: " + ctype + b"; charset=" + charset + b"; boundary=" + boundary,
        b"Content-Transfer-Encoding: " + cte,
        draw(HEADER_BYTES),
    ]
    if draw(st.booleans()):
        headers.append(b"Message-ID: <" + draw(HEADER_BYTES) + b">")
    body = draw(st.binary(max_size=200))
    if draw(st.booleans()):
        body = b"--" + boundary.strip(b'"') + b"\n" + b"\n".join(headers[2:4]) + b"\n\n" + body
    newline = draw(st.sampled_from([b"\n", b"\r\n"]))
    return newline.join(headers) + newline + newline + body


@given(hostile_messages())
@settings(max_examples=400, deadline=None)
def test_nothing_raises_on_hostile_charsets_and_encodings(raw: bytes) -> None:
    assert isinstance(normal_digest(raw), str)
    parsed = parse_message(raw)
    assert parsed.raw == raw
    text_body(raw)
    [row] = message_rows("dev", "2024-01", [RawMessage(0, raw)], 1.7e9)
    assert row["raw"] == raw and row["norm_sha256"] == normal_digest(raw)
    # Whatever was decoded can be stored: no lone surrogates, no NUL in text.
    for name in ("subject", "from_name", "from_addr", "date_raw", "body", "key"):
        value = row[name]
        if value is not None:
            value.encode("utf-8")
            assert "\x00" not in value


@given(st.binary(max_size=3000))
@settings(max_examples=300, deadline=None)
def test_normal_form_never_raises_on_bytes(raw: bytes) -> None:
    assert normal_form(raw) == normal_form(bytes(raw))


def test_a_message_that_cannot_be_read_is_kept_with_its_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever raises while reading one message (here injected into the header parser
    and the text extractor) is recorded on that message; its bytes are kept and the
    other messages of the month are read as usual."""
    from thresher.archives import rows

    real_parse, real_body = parse_message, text_body

    def parse(raw: bytes, **kwargs: object) -> object:
        if b"broken" in raw:
            raise UnicodeError("a codec nobody foresaw")
        return real_parse(raw, **kwargs)  # type: ignore[arg-type]

    def body(raw: bytes) -> str:
        if b"broken" in raw:
            raise ValueError("no text")
        return real_body(raw)

    monkeypatch.setattr(rows, "parse_message", parse)
    monkeypatch.setattr(rows, "text_body", body)
    broken = b"Subject: broken\nMessage-ID: <b@x>\n\ntext\n"
    good = b"Subject: fine\nMessage-ID: <g@x>\n\ntext\n"
    bad_row, good_row = message_rows(
        "dev", "2024-01", [RawMessage(0, broken), RawMessage(50, good)], 1.7e9
    )
    assert bad_row["raw"] == broken and bad_row["key"] == "sha256:" + normal_digest(broken)
    assert bad_row["parse_error"] == (
        "headers: UnicodeError: a codec nobody foresaw; body: ValueError: no text"
    )
    assert bad_row["subject"] is None and bad_row["body"] is None
    assert good_row["parse_error"] is None and good_row["key"] == "g@x"
    assert good_row["subject"] == "fine" and good_row["body"] == "text\n"
