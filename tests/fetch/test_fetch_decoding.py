"""decode_content: every Content-Encoding we undo, the ways a body fails to decode, and
the decoded-size cap (the decompression bomb guard)."""

from __future__ import annotations

import asyncio
import gzip
import importlib
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from fetch_servers import gzip_bomb

from thresher.fetch.decoding import (
    ACCEPT_ENCODING,
    ON_LOOP_BYTES,
    DecodedTooLarge,
    DecodeTimeout,
    Decoding,
    Undecodable,
    decode_content,
    decode_off_loop,
)

DATA = bytes(range(256)) * 64 + b"tail"
LIMIT = 2**20


def brotli() -> Any:
    if "br" not in ACCEPT_ENCODING:
        pytest.skip("no brotli module with a bounded output buffer")
    return pytest.importorskip("brotli")


def zstd() -> Any:
    try:
        return importlib.import_module("compression.zstd")
    except ImportError:
        return pytest.importorskip("backports.zstd")


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
    "zstd": ("zstd", lambda d: zstd().compress(d)),
    "zstd-two-frames": ("zstd", lambda d: zstd().compress(d[:100]) + zstd().compress(d[100:])),
    "br-after-gzip": ("gzip, br", lambda d: bytes(brotli().compress(gzip.compress(d)))),
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
        ("gzip", gzip.compress(DATA, mtime=0)[:-10], "truncated gzip stream"),
        ("gzip", gzip.compress(DATA, mtime=0)[:5], "truncated gzip stream"),
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


@pytest.mark.parametrize("header", ["compress", "gzip, snappy"])
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


def test_accept_encoding_does_not_ask_for_zstd() -> None:
    # pywb cannot undo it when it rewrites a page for replay; we only decode it.
    assert "zstd" not in ACCEPT_ENCODING


def test_a_zstd_bomb_is_capped_and_broken_zstd_is_a_decode_error() -> None:
    z = zstd()
    bomb = z.compress(bytes(64 * 2**20))
    assert len(bomb) < 100_000
    with pytest.raises(DecodedTooLarge, match="zstd-decoded"):
        decode_content(bomb, "zstd", LIMIT)
    packed = z.compress(DATA)
    assert decode_content(packed[:-5], "zstd", LIMIT) == (b"", "truncated zstd stream")
    content, problem = decode_content(b"\x28\xb5\x2f\xfd garbage", "zstd", LIMIT)
    assert content == b"" and problem is not None and problem.startswith("invalid zstd data")
    # Junk after the last frame is ignored, as after the last gzip member.
    assert decode_content(packed + b"junk", "zstd", LIMIT) == (DATA, None)


def test_many_gzip_members_decode_whole() -> None:
    # 40 000 empty members around the data: each is read on its own, none copies the
    # rest of the body (which made this quadratic).
    empty = gzip.compress(b"", mtime=0)
    body = empty * 20_000 + gzip.compress(DATA) + empty * 20_000 + gzip.compress(b"end")
    assert decode_content(body, "gzip", LIMIT) == (DATA + b"end", None)


def test_a_member_boundary_on_a_piece_boundary() -> None:
    # The next member's magic split between two pieces of a chained coding's output.
    for cut in range(1, 40):
        first = gzip.compress(DATA[:cut], mtime=0)
        body = first + gzip.compress(DATA[cut:], mtime=0)
        assert decode_content(zlib.compress(body), "gzip, deflate", LIMIT) == (DATA, None)


def test_deflate_that_looks_like_zlib_falls_back_to_raw() -> None:
    # A raw stream starting with a stored block whose padding bits and length make its
    # first two bytes a valid zlib header (0x78 0x01): read as zlib, the block after
    # that header has lengths that do not match, so it is read again as raw deflate.
    raw = bytes([0x78, 0x01, 0x00, 0xFE, 0xFF]) + b"X" + raw_deflate(DATA)
    assert decode_content(raw, "deflate", LIMIT) == (b"X" + DATA, None)
    # Broken either way: the error is the one of reading it as zlib.
    content, problem = decode_content(raw[:6] + b"\xff" * 20, "deflate", LIMIT)
    assert content == b"" and problem is not None and "invalid stored block lengths" in problem


@pytest.mark.parametrize(
    "case", ["gzip", "gzip-two-members", "deflate-raw", "br", "zstd", "chained"]
)
def test_steps_of_one_call_give_the_same_content(case: str) -> None:
    header, encode = ENCODERS[case]
    decoding = Decoding(encode(DATA), header.replace(" ", "").split(","), LIMIT)
    steps = 0
    while not decoding.run(max_calls=1):
        steps += 1
        assert steps < 10_000
    assert steps >= 1
    assert decoding.content() == DATA


def test_a_step_stops_after_its_bytes() -> None:
    decoding = Decoding(gzip.compress(bytes(10 * 2**20)), ["gzip"], 2**30)
    assert not decoding.run(max_bytes=2**20)
    assert 2**20 <= decoding.size < 2**20 + 2**17
    assert decoding.run()
    assert decoding.content() == bytes(10 * 2**20)


def test_small_bodies_decode_on_the_loop_and_bombs_in_a_thread() -> None:
    loop_thread = threading.get_ident()
    where: list[tuple[int, int]] = []

    async def decode(body: bytes, limit: int) -> Decoding:
        decoding = Decoding(body, ["gzip"], limit)
        original = decoding.run

        def run(max_bytes: float = float("inf"), max_calls: float = float("inf")) -> bool:
            before = decoding.size
            try:
                return original(max_bytes, max_calls)
            finally:
                where.append((threading.get_ident(), decoding.size - before))

        decoding.run = run  # type: ignore[method-assign]
        await decode_off_loop(decoding, time.monotonic() + 60)
        return decoding

    small = asyncio.run(decode(gzip.compress(DATA), LIMIT))
    assert small.content() == DATA and [t for t, _ in where] == [loop_thread]
    where.clear()
    with pytest.raises(DecodedTooLarge):
        asyncio.run(decode(gzip_bomb(64 * 2**20), 16 * 2**20))
    on_loop = sum(n for t, n in where if t == loop_thread)
    assert on_loop <= ON_LOOP_BYTES + 2**16
    assert sum(n for t, n in where if t != loop_thread) > 8 * 2**20


def test_a_cancelled_decoding_stops_in_its_thread() -> None:
    decoding = Decoding(gzip_bomb(2**30), ["gzip"], 2**30)

    async def main() -> None:
        task = asyncio.ensure_future(decode_off_loop(decoding, time.monotonic() + 600))
        while decoding.size < 4 * 2**20:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())  # returns once the default executor's thread has ended
    stopped_at = decoding.size
    assert stopped_at < 2**30
    time.sleep(0.05)
    assert decoding.size == stopped_at


def test_a_decoding_past_its_deadline_stops() -> None:
    decoding = Decoding(gzip_bomb(2**30), ["gzip"], 2**30)
    with pytest.raises(DecodeTimeout):
        asyncio.run(decode_off_loop(decoding, time.monotonic() - 1))
    assert decoding.size < 2**30


def test_undecodable_is_raised_by_steps() -> None:
    with pytest.raises(Undecodable, match="truncated gzip stream"):
        Decoding(gzip.compress(DATA)[:-10], ["gzip"], LIMIT).run()


# -- Partial decoding: the cap is a cut (robots.txt's first 500 KiB) ---------------------


@pytest.mark.parametrize(
    "case", ["gzip", "gzip-two-members", "deflate-raw", "br", "zstd", "chained"]
)
def test_a_partial_decoding_stops_at_its_limit_and_says_so(case: str) -> None:
    header, encode = ENCODERS[case]
    codings = header.replace(" ", "").split(",")
    decoding = Decoding(encode(DATA), codings, 1000, partial=True)
    assert decoding.run()
    assert decoding.truncated and decoding.size == 1000 and decoding.content() == DATA[:1000]
    whole = Decoding(encode(DATA), codings, len(DATA), partial=True)
    assert whole.run() and not whole.truncated and whole.content() == DATA
    with pytest.raises(DecodedTooLarge):  # the same cap, not partial: a refusal
        Decoding(encode(DATA), codings, 1000).run()


def test_a_partial_decoding_of_a_bomb_decodes_no_further_than_its_limit() -> None:
    # 1 GiB of zeros in 1 MiB: decoded to the limit and not a step beyond, in steps too.
    decoding = Decoding(gzip_bomb(2**30), ["gzip"], 500 * 2**10, partial=True)
    steps = 0
    while not decoding.run(max_calls=1):
        steps += 1
        assert steps < 10_000
    assert decoding.truncated and decoding.size == 500 * 2**10
    assert decoding.content() == bytes(500 * 2**10)


@pytest.mark.parametrize("case", ["gzip", "deflate-raw", "br", "zstd", "br-after-gzip"])
def test_a_partial_decoding_of_a_cut_stream_keeps_what_it_holds(case: str) -> None:
    header, encode = ENCODERS[case]
    # Long enough for several zstd blocks (it gives out whole blocks only).
    text = b"".join(b"line %d\n" % i for i in range(200_000))
    packed = encode(text)
    decoding = Decoding(packed[: len(packed) // 2], header.replace(" ", "").split(","), 10**8)
    with pytest.raises(Undecodable, match="truncated"):  # not partial: an error
        decoding.run()
    cut = Decoding(
        packed[: len(packed) // 2], header.replace(" ", "").split(","), 10**8, partial=True
    )
    assert cut.run() and cut.truncated
    assert 0 < cut.size < len(text) and text.startswith(cut.content())
    # Garbage is garbage, partial or not.
    content, problem = decode_content(
        b"\x1f\x8b\x08\x00" + b"\xff" * 40, "gzip", LIMIT, partial=True
    )
    assert content == b"" and problem is not None and problem.startswith("invalid gzip data")
