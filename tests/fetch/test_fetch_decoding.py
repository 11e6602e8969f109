"""decode_content: every Content-Encoding we undo, the ways a body fails to decode, and
the decoded-size cap (the decompression bomb guard)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from fetch_servers import gzip_bomb

from thresher.fetch.decoding import ACCEPT_ENCODING, DecodedTooLarge, decode_content

DATA = bytes(range(256)) * 64 + b"tail"
LIMIT = 2**20


def brotli() -> Any:
    if "br" not in ACCEPT_ENCODING:
        pytest.skip("no brotli module with a bounded output buffer")
    return pytest.importorskip("brotli")


def raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


ENCODERS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": ("gzip", gzip.compress),
    "x-gzip": ("x-gzip", gzip.compress),
    "gzip-upper-case": ("GZip", gzip.compress),
    "gzip-holding-zlib": ("gzip", zlib.compress),
    "gzip-two-members": ("gzip", lambda d: gzip.compress(d[:100]) + gzip.compress(d[100:])),
    "deflate-zlib": ("deflate", zlib.compress),
    "deflate-raw": ("deflate", raw_deflate),
    "br": ("br", lambda d: bytes(brotli().compress(d))),
    "chained": ("deflate, gzip", lambda d: gzip.compress(zlib.compress(d))),
    "identity-listed": ("identity, gzip", gzip.compress),
}


@pytest.mark.parametrize("case", list(ENCODERS))
def test_encodings_are_undone(case: str) -> None:
    header, encode = ENCODERS[case]
    assert decode_content(encode(DATA), header, LIMIT) == (DATA, None)


@pytest.mark.parametrize("header", [None, "", "identity", " , identity"])
def test_no_encoding_leaves_the_body_itself(header: str | None) -> None:
    content, error = decode_content(DATA, header, LIMIT)
    assert content is DATA and error is None


def test_trailing_junk_after_the_stream_is_ignored() -> None:
    assert decode_content(gzip.compress(DATA) + b"\n\x00junk", "gzip", LIMIT) == (DATA, None)


@pytest.mark.parametrize(
    ("header", "body", "error"),
    [
        ("gzip", gzip.compress(DATA)[:-10], "truncated gzip stream"),
        ("gzip", gzip.compress(DATA)[:5], "truncated gzip stream"),
        ("gzip", b"", "truncated gzip stream"),
        ("deflate", zlib.compress(DATA)[:-50], "truncated deflate stream"),
        ("gzip", b"this is not gzip at all", "invalid gzip data"),
    ],
    ids=["gzip-cut", "gzip-header-only", "empty", "deflate-cut", "garbage"],
)
def test_broken_bodies_give_a_decode_error_and_no_content(
    header: str, body: bytes, error: str
) -> None:
    content, problem = decode_content(body, header, LIMIT)
    assert content == b""
    assert problem is not None and problem.startswith(error)


def test_broken_brotli_gives_a_decode_error() -> None:
    data = bytes(brotli().compress(DATA))
    assert decode_content(data[:-5], "br", LIMIT) == (b"", "truncated br stream")
    content, problem = decode_content(b"\xff" * 40, "br", LIMIT)
    assert content == b"" and problem is not None and problem.startswith("invalid br data")


@pytest.mark.parametrize("header", ["compress", "zstd", "gzip, snappy"])
def test_unknown_encodings_leave_the_body_as_content(header: str) -> None:
    body = gzip.compress(DATA)
    content, problem = decode_content(body, header, LIMIT)
    assert content is body
    assert problem is not None and problem.startswith("unsupported content-encoding")


def test_decoded_size_is_capped() -> None:
    assert decode_content(gzip.compress(DATA), "gzip", len(DATA)) == (DATA, None)
    with pytest.raises(
        DecodedTooLarge, match=f"gzip-decoded content exceeds max_decoded={len(DATA) - 1}"
    ):
        decode_content(gzip.compress(DATA), "gzip", len(DATA) - 1)
    two = gzip.compress(DATA) + gzip.compress(DATA)  # the cap spans the members
    with pytest.raises(DecodedTooLarge):
        decode_content(two, "gzip", len(DATA) + 10)
    with pytest.raises(DecodedTooLarge):
        decode_content(raw_deflate(DATA), "deflate", 100)


def test_a_brotli_bomb_is_capped() -> None:
    bomb = bytes(brotli().compress(bytes(64 * 2**20), quality=1))
    assert len(bomb) < 100_000
    with pytest.raises(DecodedTooLarge, match="br-decoded"):
        decode_content(bomb, "br", LIMIT)


def test_a_gzip_bomb_is_capped() -> None:
    with pytest.raises(DecodedTooLarge):
        decode_content(gzip_bomb(256 * 2**20), "gzip", LIMIT)


def test_accept_encoding_lists_what_we_decode() -> None:
    assert ACCEPT_ENCODING.startswith("gzip, deflate")
