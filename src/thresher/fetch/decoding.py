"""Undoing Content-Encoding (gzip, deflate, br) with a cap on the decoded size.

aiohttp's own decompression is turned off so that the body is kept exactly as it came
(a WARC record stores the transferred bytes) and so that decoding is bounded: a 1 MB
gzip body can inflate to 1 GB, so output is produced at most `limit + 1` bytes at a
time and a larger result is refused with TooLarge instead of exhausting memory.

A body that does not decode (a truncated stream, garbage) is not an error of the fetch:
the bytes are kept and the problem is reported as `decode_error`, with empty content.
An encoding we do not know leaves the content equal to the body, also with a note.

Brotli is used when the `brotli` or `brotlicffi` module is installed and supports a
bounded output buffer (brotli ≥ 1.2); otherwise "br" is not advertised in
Accept-Encoding, and a server that sends it anyway gets the "unknown encoding" note.
"""

from __future__ import annotations

import importlib
import zlib
from typing import Any

__all__ = ["ACCEPT_ENCODING", "DecodedTooLarge", "decode_content"]


def _load_brotli() -> Any:
    for name in ("brotli", "brotlicffi"):
        try:
            module = importlib.import_module(name)
            module.Decompressor().process(b"", output_buffer_limit=1)
        except (ImportError, AttributeError, TypeError):
            continue
        return module
    return None


_brotli: Any = _load_brotli()

ACCEPT_ENCODING = "gzip, deflate, br" if _brotli is not None else "gzip, deflate"

_GZIP_MAGIC = b"\x1f\x8b"


class DecodedTooLarge(Exception):
    """The decoded content would exceed the limit. The client turns it into TooLarge,
    which names the URL this module does not know."""

    def __init__(self, encoding: str, limit: int) -> None:
        super().__init__(f"{encoding}-decoded content exceeds max_decoded={limit}")


class _Undecodable(Exception):
    pass


def _inflate(data: bytes, wbits: int, limit: int, name: str, partial: bool) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        d = zlib.decompressobj(wbits)
        try:
            # At most limit + 1 bytes: one byte over is enough to know it is too large.
            out = d.decompress(data, limit + 1 - total)
        except zlib.error as exc:
            raise _Undecodable(f"invalid {name} data: {exc}") from None
        total += len(out)
        if total > limit:
            if not partial:
                raise DecodedTooLarge(name, limit)
            parts.append(out[: len(out) - (total - limit)])
            break
        parts.append(out)
        if not d.eof:
            if partial:
                break
            raise _Undecodable(f"truncated {name} stream")
        # Several gzip members one after the other are one stream (RFC 1952 §2.2);
        # anything else after the end is trailing junk, ignored as browsers do.
        data = d.unused_data
        if not (name == "gzip" and data.startswith(_GZIP_MAGIC)):
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _deflate(data: bytes, limit: int, partial: bool) -> bytes:
    # "deflate" means a zlib stream (RFC 9110 §8.4.1.2), but some servers send raw
    # deflate; a zlib stream starts with a header whose checksum tells them apart.
    if not (len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0):
        return _inflate(data, -zlib.MAX_WBITS, limit, "deflate", partial)
    try:
        return _inflate(data, zlib.MAX_WBITS, limit, "deflate", partial)
    except _Undecodable as as_zlib:
        # One raw stream in 31 starts with bytes that pass for a zlib header.
        try:
            return _inflate(data, -zlib.MAX_WBITS, limit, "deflate", partial)
        except _Undecodable:
            raise as_zlib from None


def _unbrotli(data: bytes, limit: int, partial: bool) -> bytes:
    d = _brotli.Decompressor()
    try:
        out: bytes = d.process(data, output_buffer_limit=limit + 1)
    except _brotli.error as exc:
        raise _Undecodable(f"invalid br data: {exc}") from None
    if len(out) > limit or not d.can_accept_more_data():
        if partial:
            return out[:limit]
        raise DecodedTooLarge("br", limit)
    if not d.is_finished() and not partial:
        raise _Undecodable("truncated br stream")
    return out


def _decode_one(data: bytes, coding: str, limit: int, partial: bool) -> bytes:
    if coding in ("gzip", "x-gzip"):
        # 32 + 15: a gzip or zlib header, detected; some servers label zlib as gzip.
        return _inflate(data, 32 + zlib.MAX_WBITS, limit, "gzip", partial)
    if coding == "deflate":
        return _deflate(data, limit, partial)
    if coding == "br" and _brotli is not None:
        return _unbrotli(data, limit, partial)
    raise LookupError(coding)


def decode_content(
    body: bytes, content_encoding: str | None, limit: int, *, partial: bool = False
) -> tuple[bytes, str | None]:
    """(content, decode_error) for a body sent with `content_encoding` (the header's
    values joined by commas, or None). Raises DecodedTooLarge past `limit` bytes.
    `partial`: `body` is the start of a longer one, cut on purpose: decode what it holds,
    and keep the first `limit` bytes of the content instead of refusing more."""
    if not content_encoding:
        return body, None
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return body, None
    content = body
    # Codings are listed in the order they were applied; undo the last one first.
    for coding in reversed(codings):
        try:
            content = _decode_one(content, coding, limit, partial)
        except LookupError:
            return body, f"unsupported content-encoding {coding!r}"
        except _Undecodable as exc:
            return b"", str(exc)
    return content, None
