"""One WARC record as one gzip member: compressed (ISA-L's igzip where the ``isal`` package is
installed, else zlib), or, for a payload that does not compress (an ingest's PDFs),
deflate's stored blocks written by hand.

Compression is most of the CPU a WARC record costs, and the crawler must write about 1000
pages/s on two cores alongside fetching and parsing. Measured here (CPU time per exchange
of a 15 KB HTML page: request, response, metadata with 60 outlinks; best of 7 runs on a
busy 2-core machine; bytes per exchange on disk):

================================================  =========  ============
writer                                            µs         bytes
================================================  =========  ============
warcio ``WARCWriter`` (gzip level 9, fixed)       700        5100
FastWARC, one gzip member per record, level 6     360        5000
FastWARC, level 1 (its deflate: 20 % larger)      210        6500
thresher, stdlib zlib level 6                     600        5100
thresher, stdlib zlib level 1                     420        5500
thresher, ISA-L igzip level 2 (``isal``)          310        5470
================================================  =========  ============

Thresher's rows (records built by `thresher.store.warcrecord`, written by
`thresher.store.warc`) include the CDXJ line (SURT key and JSON, about 27 µs),
which the others do not write. Compressing the page is the largest part: 155 µs with zlib
level 1, about 300 µs at level 6, 40-70 µs with igzip level 2, which compresses about as
well as zlib level 1. So by default (``gzip_level=None``) records are compressed with igzip
level 2 when the ``isal`` package is installed, else with zlib level 1; ``gzip_level=N``
chooses zlib level N instead (6: about 8 % smaller files for 1.5 times the CPU). A caller
that passes the ``payload_digest`` it computed for deduplication saves another 20 µs.
Measured again on a quiet machine (a 17 KB page with 30 outlinks, igzip level 2): 83 µs, of
which 30 compress the response, 9 hash it and about 13 append the records and the CDXJ
line.
"""

from __future__ import annotations

import functools
import importlib
import struct
import zlib
from collections.abc import Callable
from typing import Any

__all__ = ["compressor", "gzip_stored"]


@functools.cache
def _isal_zlib() -> Any:
    """ISA-L's zlib module, or None: ``isal`` is an optional accelerator, absent from
    some installs, so it is imported by name (and only once records are written)."""
    try:
        return importlib.import_module("isal.isal_zlib")
    except ImportError:
        return None


@functools.cache
def _crc32() -> Callable[[bytes, int], int]:
    """ISA-L's CRC-32 (about 40 GB/s here) when it is installed, else zlib's (2)."""
    isal = _isal_zlib()
    return zlib.crc32 if isal is None else isal.crc32


# zlib's gzip header (no name, no time, "fastest", Unix): members read the same either way.
_GZIP_HEAD = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\x03"
_STORED_MAX = 0xFFFF  # the most a stored deflate block holds: its length is 16 bits
_STORED_BLOCK = struct.Struct("<BHH")  # final flag (and type 00), length, its complement
_GZIP_TAIL = struct.Struct("<II")  # CRC-32, length mod 2**32


def gzip_stored(*parts: bytes) -> bytes:
    """The concatenation of `parts` as one gzip member of deflate's stored blocks: what
    ``zlib.compress(b"".join(parts), 0, 31)`` makes, made by hand. zlib copies stored bytes
    through its window at 0.5 GB/s here: for an ingest's PDFs that was more CPU than any
    of their digests. In parts, so that a record's head, its payload and its end are
    copied once, into the member, and not joined first."""
    size = sum(map(len, parts))
    views = (memoryview(part) for part in parts if part)
    view = memoryview(b"")
    out: list[bytes | memoryview] = [_GZIP_HEAD]
    left = size
    while True:
        n = min(_STORED_MAX, left)
        left -= n
        out.append(_STORED_BLOCK.pack(left == 0, n, n ^ 0xFFFF))
        while n:  # the block's bytes, from one part or several
            if not view:
                view = next(views)
            piece = view[:n]
            out.append(piece)
            view = view[len(piece) :]
            n -= len(piece)
        if not left:
            break
    crc32, crc = _crc32(), 0
    for part in parts:
        crc = crc32(part, crc)
    out.append(_GZIP_TAIL.pack(crc & 0xFFFFFFFF, size & 0xFFFFFFFF))
    return b"".join(out)


def compressor(level: int | None) -> tuple[str, Callable[[bytes], bytes]]:
    """(name, function) that makes one gzip member: at ``level`` with zlib, or with None the
    fastest at about zlib level 1's size: ISA-L's igzip level 2 when ``isal`` is installed."""
    if level is None:
        isal = _isal_zlib()
        if isal is not None:
            return "isal level 2", functools.partial(isal.compress, level=2, wbits=31)
        level = 1
    if not 0 <= level <= 9:
        raise ValueError("gzip_level must be 0-9 or None")
    return f"zlib level {level}", functools.partial(zlib.compress, level=level, wbits=31)
