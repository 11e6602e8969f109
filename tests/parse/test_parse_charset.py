"""decode_text picks the encoding a browser would, and never raises."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.parse import (
    decode_text,
    encoding_from_content_type,
    encoding_from_document,
    lookup_label,
)
from thresher.parse.charset import utf8_encoding

CAFE_1252 = "café".encode("cp1252")
CAFE_UTF8 = "café".encode()


def test_utf8_bom_wins_over_header_and_is_stripped() -> None:
    body = codecs.BOM_UTF8 + b'<meta charset="koi8-r">' + CAFE_UTF8
    text, encoding = decode_text(body, "text/html; charset=iso-8859-1")
    assert encoding == "utf-8"
    assert text == '<meta charset="koi8-r">café'


@pytest.mark.parametrize(
    ("bom", "codec"),
    [(codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")],
)
def test_utf16_bom(bom: bytes, codec: str) -> None:
    body = bom + "<p>café ☕</p>".encode(codec)
    assert decode_text(body, "text/html; charset=utf-8") == ("<p>café ☕</p>", codec)


def test_header_charset_wins_over_meta() -> None:
    body = b'<meta charset="utf-8"><p>' + CAFE_1252
    assert decode_text(body, "text/html; charset=windows-1252") == (
        '<meta charset="utf-8"><p>café',
        "cp1252",
    )


@pytest.mark.parametrize(
    ("content_type", "codec"),
    [
        ("text/html; charset=UTF-8", "utf-8"),
        ('text/html; charset="ISO-8859-1"', "cp1252"),  # browsers read latin-1 as 1252
        ("text/html;charset=us-ascii", "cp1252"),
        ("text/html; Charset = Shift_JIS", "cp932"),
        ("text/html; charset=gb2312", "gb18030"),
        ("text/html; charset=euc-kr", "cp949"),
        ("text/html; charset=utf-16", "utf-16-le"),
        ("text/html; charset=iso_8859-1:1987", "cp1252"),
        ("text/html; foo=bar; charset=koi8-r; charset=utf-8", "koi8-r"),
        ("text/html", None),
        ("", None),
        (None, None),
        ("text/html; charset=", None),
        ("text/html; charset=klingon", None),
        ("text/html; charset=utf-7", None),  # no web encoding: rewrites "<" as ASCII
        ("text/html; charset=base64", None),
        ("text/html; charset=unicode_escape", None),
        ("text/html; charset=replacement", None),
        ("charset=utf-8", None),  # not a parameter
    ],
)
def test_encoding_from_content_type(content_type: str | None, codec: str | None) -> None:
    assert encoding_from_content_type(content_type) == codec


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        (" Latin1 ", "cp1252"),
        ("UTF8", "utf-8"),
        ("unicode-1-1-utf-8", "utf-8"),
        ("gbk", "gb18030"),
        ("x-sjis", "cp932"),
        ("iso-8859-8-i", "iso8859-8"),
        ("tis-620", "cp874"),
        ("x-user-defined", "cp1252"),
        ("utf-16be", "utf-16-be"),
        ("utf8 ", "utf-8"),
        ("utf_8", None),  # Python's alias, not a WHATWG label
        ("rot13", None),
        ("", None),
    ],
)
def test_lookup_label_follows_the_whatwg_table(label: str, codec: str | None) -> None:
    assert lookup_label(label) == codec


def test_meta_charset() -> None:
    body = b'<!doctype html><html><head><meta charset="windows-1251">' + "Привет".encode("cp1251")
    text, encoding = decode_text(body)
    assert encoding == "cp1251"
    assert text.endswith("Привет")


@pytest.mark.parametrize(
    "meta",
    [
        b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">',
        b"<META HTTP-EQUIV=content-type CONTENT='text/html;charset=iso-8859-1'>",
        b'<meta content="text/html; charset=latin1" http-equiv="content-type" />',
        b"<meta charset=latin1>",
        b'<meta\ncharset = "latin1"\n/>',
    ],
)
def test_meta_declarations(meta: bytes) -> None:
    text, encoding = decode_text(b"<head>" + meta + b"</head>" + CAFE_1252)
    assert encoding == "cp1252"
    assert text.endswith("café")


@pytest.mark.parametrize(
    "head",
    [
        # content charset without the http-equiv pragma does not count
        b'<meta name="description" content="charset=koi8-r">',
        # a declaration inside a comment or an attribute value does not count
        b'<!-- <meta charset="koi8-r"> -->',
        b'<div title="<meta charset=koi8-r>">',
        b"<script><!-- <meta charset=koi8-r> --></script>",
    ],
)
def test_things_that_are_not_declarations(head: bytes) -> None:
    assert encoding_from_document(head + CAFE_UTF8) is None
    assert decode_text(head + CAFE_UTF8)[1] == "utf-8"


def test_first_valid_meta_wins_and_unknown_labels_are_skipped() -> None:
    body = b'<meta charset="klingon"><meta charset="koi8-r"><meta charset="cp1251">'
    assert encoding_from_document(body) == "koi8-r"


def test_meta_after_the_first_1024_bytes_is_not_seen() -> None:
    body = b"<head>" + b" " * 1024 + b'<meta charset="koi8-r">' + CAFE_1252
    assert encoding_from_document(body) is None
    assert decode_text(body)[1] == "cp1252"  # and not koi8-r


def test_meta_claiming_utf16_means_utf8() -> None:
    body = b'<meta charset="utf-16">' + CAFE_UTF8
    assert decode_text(body) == ('<meta charset="utf-16">café', "utf-8")


def test_xml_declaration() -> None:
    body = b'<?xml version="1.0" encoding="ISO-8859-1"?><html>' + CAFE_1252
    assert decode_text(body)[1] == "cp1252"


def test_bogus_header_falls_back_to_meta() -> None:
    body = b'<meta charset="koi8-r">' + "Мир".encode("koi8-r")
    assert decode_text(body, "text/html; charset=x-bogus-42") == (
        '<meta charset="koi8-r">Мир',
        "koi8-r",
    )


def test_bogus_everything_falls_back_to_sniffing() -> None:
    body = b'<meta charset="unicode_escape">\\x41' + CAFE_1252
    text, encoding = decode_text(body, "text/html; charset=base64")
    assert encoding == "cp1252"
    assert text == '<meta charset="unicode_escape">\\x41café'


def test_undeclared_valid_utf8_is_utf8() -> None:
    assert decode_text(b"<p>" + CAFE_UTF8) == ("<p>café", "utf-8")


def test_undeclared_invalid_utf8_is_windows_1252_with_c1_controls() -> None:
    # 0x81 is unassigned in Python's cp1252; the Encoding Standard maps it to U+0081.
    assert decode_text(b"<p>\x81" + CAFE_1252 + b" \x80") == ("<p>\x81caf\xe9 \u20ac", "cp1252")


def test_declared_encoding_with_invalid_bytes_uses_replacement_characters() -> None:
    text, encoding = decode_text(b"ok \xff\xfe\xc3 end", "text/html; charset=utf-8")
    assert encoding == "utf-8"
    assert text.startswith("ok ")
    assert text.endswith(" end")
    assert "\ufffd" in text


def test_empty_body() -> None:
    assert decode_text(b"") == ("", "utf-8")


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=2048), st.one_of(st.none(), st.text(max_size=60)))
def test_decode_text_never_raises(body: bytes, content_type: str | None) -> None:
    text, encoding = decode_text(body, content_type)
    assert isinstance(text, str)
    assert codecs.lookup(encoding).name == encoding


LABELS = st.sampled_from(
    ["utf-8", "latin1", "koi8-r", "shift_jis", "gbk", "big5", "euc-jp", "iso-2022-jp",
     "utf-16", "utf-16be", "x-user-defined", "replacement", "bogus", "utf-7", "hz-gb-2312"]
)  # fmt: skip


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=512), LABELS, LABELS)
def test_decode_text_never_raises_for_any_declaration(body: bytes, header: str, meta: str) -> None:
    document = f'<meta charset="{meta}">'.encode() + body
    text, encoding = decode_text(document, f"text/html; charset={header}")
    assert isinstance(text, str)
    assert codecs.lookup(encoding).name == encoding


@pytest.mark.parametrize(
    ("body", "content_type", "codec"),
    [
        (b"<p>plain", None, "utf-8"),
        (b"<p>plain", "text/html; charset=iso-8859-1", "cp1252"),
        (b'<meta charset="koi8-r"><p>plain', None, "koi8-r"),
        (b"<p>plain", "text/html; charset=utf-16le", None),  # ASCII means other text there
        (b"<p>\x1b$B$3\x1b(B", "text/html; charset=iso-2022-jp", None),
        (CAFE_UTF8, "text/html; charset=utf-8", "utf-8"),
        (CAFE_UTF8, None, "utf-8"),
        (CAFE_UTF8, "text/html; charset=windows-1252", None),
        (CAFE_1252, None, None),  # invalid UTF-8: read as windows-1252
        (CAFE_1252, "text/html; charset=utf-8", None),  # invalid: replacement characters
        (codecs.BOM_UTF8 + b"<p>plain", None, None),  # the text leaves the BOM out
    ],
)
def test_utf8_encoding_says_when_the_bytes_are_the_text(
    body: bytes, content_type: str | None, codec: str | None
) -> None:
    assert utf8_encoding(body, content_type) == codec


@given(
    st.binary(max_size=512), st.one_of(st.none(), LABELS.map(lambda x: f"text/html; charset={x}"))
)
@settings(deadline=None)
def test_utf8_encoding_agrees_with_decode_text(body: bytes, content_type: str | None) -> None:
    codec = utf8_encoding(body, content_type)
    if codec is not None:
        assert decode_text(body, content_type) == (body.decode("utf-8"), codec)
