"""Undoing Content-Encoding (gzip, deflate, br, zstd) in linear time, with a cap on the
decoded size, a step at a time.

aiohttp's own decompression is turned off so that the body is kept exactly as it came
(a WARC record stores the transferred bytes) and so that decoding is bounded. Every
decoder here is *streaming*: the compressed input goes in pieces of at most `FEED_MAX`
bytes, the output comes out in pieces of at most `STEP` bytes, and the total output is
checked against the caller's cap as it grows, so a 1 MB body that would inflate to 1 GB
costs `limit` bytes and stops there with `DecodedTooLarge`.

Why pieces and not the whole body at once: zlib keeps what it did not consume as a copy
(``unused_data`` after a gzip member ends, ``unconsumed_tail`` when the output is capped).
Given the whole remaining body, every member of a multi-member gzip copied everything
after it: 0.8 MB of empty members took seconds and 6 MB never ended. Fed pieces, a copy
is at most one piece, and the piece starts small (`FEED_MIN`) after each member and
doubles while the member goes on, so a body of 20-byte members costs about 256 bytes of
copying each, and a body of one large member is fed 64 KiB at a time.

Why steps: `Decoding.run` does at most a given number of decompressor calls and of output
bytes, then returns. The fetch client runs a first short step on the event loop (most
pages end there) and the rest in a thread, checking between steps whether its task was
cancelled (a signal) or the fetch's total timeout passed; see `decode_off_loop`.

A body that does not decode (a truncated stream, garbage) is not an error of the fetch:
the bytes are kept and the problem is reported as `decode_error`, with empty content.

A cap is a refusal (`DecodedTooLarge`) unless the decoding is *partial*: the caller cut
the body on purpose (robots.txt is read to 500 KiB, RFC 9309 §2.5) and wants the start
of the content. A partial decoding stops at the cap, or where the cut input ends, keeps
what came out before, and says so (`Decoding.truncated`); garbage is still an error.
An encoding we do not know leaves the content equal to the body, also with a note.

Brotli is used when the `brotli` or `brotlicffi` module is installed and supports a
bounded output buffer (brotli ≥ 1.2); otherwise "br" is not advertised in
Accept-Encoding, and a server that sends it anyway gets the "unknown encoding" note.
zstd is decoded when `compression.zstd` (Python 3.14) or `backports.zstd` is installed,
but never asked for: WARC replay tools (pywb) cannot undo it for the pages they rewrite.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import math
import threading
import time
import zlib
from typing import Any, Protocol

__all__ = [
    "ACCEPT_ENCODING",
    "DecodeTimeout",
    "DecodedTooLarge",
    "Decoding",
    "Undecodable",
    "decode_content",
    "decode_off_loop",
    "parse_codings",
]

FEED_MAX = 64 * 1024
"""Most compressed bytes given to a decompressor at once."""
FEED_MIN = 256
"""Compressed bytes given to a new gzip member or zstd frame first (doubling after)."""
STEP = 64 * 1024
"""Most decoded bytes asked of the decoders at once."""
ON_LOOP_BYTES = 256 * 1024
"""Decoded bytes a fetch may produce on the event loop before the rest goes to a thread."""
ON_LOOP_CALLS = 64
"""Decompressor calls a fetch may make on the event loop (empty gzip members make no
output, so the output alone does not bound the work)."""
THREAD_CALLS = 256
"""Decompressor calls between two checks for a stop or the deadline, in the thread."""


def _load_brotli() -> Any:
    for name in ("brotli", "brotlicffi"):
        try:
            module = importlib.import_module(name)
            module.Decompressor().process(b"", output_buffer_limit=1)
        except (ImportError, AttributeError, TypeError):
            continue
        return module
    return None


def _load_zstd() -> Any:
    for name in ("compression.zstd", "backports.zstd"):
        try:
            module = importlib.import_module(name)
            module.ZstdDecompressor().decompress(b"", 1)
        except (ImportError, AttributeError, TypeError):
            continue
        return module
    return None


_brotli: Any = _load_brotli()
_zstd: Any = _load_zstd()

ACCEPT_ENCODING = "gzip, deflate, br" if _brotli is not None else "gzip, deflate"

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class DecodedTooLarge(Exception):
    """The decoded content would exceed the limit. The client turns it into TooLarge,
    which names the URL this module does not know."""

    def __init__(self, encoding: str, limit: int, name: str = "max_decoded") -> None:
        super().__init__(f"{encoding}-decoded content exceeds {name}={limit}")
        self.encoding = encoding
        self.limit = limit


class Undecodable(Exception):
    """The body is not valid in its encoding: cut short, or corrupt."""


class _Cut(Undecodable):
    """The input ended before the stream did: no error in a partial decoding."""


class DecodeTimeout(Exception):
    """Decoding went past its deadline (the fetch's total timeout)."""


class _Pause(Exception):
    """A step used up its decompressor calls; the decoding goes on at the next step."""


class _Stopped(Exception):
    """The task waiting for a decoding in a thread was cancelled."""


class _Source(Protocol):
    def read(self, n: int) -> bytes | memoryview | None:
        """Up to `n` bytes (a few more for brotli, whose output cap is loose), never
        empty; None at the end."""


class _Input:
    """The body itself, as a source of pieces: slices of a memoryview, never copies."""

    def __init__(self, data: bytes) -> None:
        self._view = memoryview(data)
        self._pos = 0

    def read(self, n: int) -> memoryview | None:
        if self._pos >= len(self._view):
            return None
        piece = self._view[self._pos : self._pos + n]
        self._pos += len(piece)
        return piece


class _Calls:
    """How many decompressor calls a step has left (shared by a decoding's stages).

    Each stage calls `check` at the top of its loop, before any state changes, so that
    a pause leaves every stage ready to go on where it was, and `spent` after each call
    of its decompressor: the first call of a step always gets through a chain of
    stages, so every step makes progress."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = math.inf

    def check(self) -> None:
        if self.left <= 0:
            raise _Pause

    def spent(self) -> None:
        self.left -= 1


class _Stage:
    """One coding undone: reads its input from `source` in pieces."""

    def __init__(self, source: _Source, name: str, calls: _Calls) -> None:
        self.name = name
        self._source = source
        self._calls = calls
        self._buf: memoryview = memoryview(b"")
        self._pos = 0
        self._feed = FEED_MIN
        self._pulled = 0  # buffers taken from the source

    def _piece(self) -> memoryview | None:
        """The next piece of input (at most `_feed` bytes), or None at its end."""
        if self._pos >= len(self._buf):
            data = self._source.read(FEED_MAX)
            if data is None:
                return None
            self._buf, self._pos = memoryview(data), 0
            self._pulled += 1
        piece = self._buf[self._pos : self._pos + self._feed]
        self._pos += len(piece)
        self._feed = min(FEED_MAX, self._feed * 2)
        return piece

    def _unread(self, n: int) -> None:
        # What a decompressor left over is the end of the last piece it was given.
        self._pos -= n

    def _peek(self, n: int) -> bytes:
        """The next `n` input bytes (fewer at the end), not consumed."""
        while len(self._buf) - self._pos < n:
            more = self._source.read(FEED_MAX)
            if more is None:
                break
            self._buf = memoryview(bytes(self._buf[self._pos :]) + bytes(more))
            self._pos = 0
        return bytes(self._buf[self._pos : self._pos + n])

    def _truncated(self) -> Undecodable:
        return _Cut(f"truncated {self.name} stream")

    def read(self, n: int) -> bytes | None:
        raise NotImplementedError


class _Inflate(_Stage):
    """gzip (any number of members, as `cat a.gz b.gz` makes), zlib or raw deflate."""

    def __init__(
        self, source: _Source, name: str, calls: _Calls, wbits: int | None, members: bool
    ) -> None:
        super().__init__(source, name, calls)
        self._wbits = wbits  # None: deflate, told from the first two bytes
        self._members = members
        self._d: Any = None
        self._produced = False
        self._fallback = False  # deflate with a zlib header: may yet be raw deflate
        self._zlib_error: zlib.error | None = None

    def _start(self) -> None:
        wbits = self._wbits
        if wbits is None:
            # "deflate" means a zlib stream (RFC 9110 §8.4.1.2), but some servers send
            # raw deflate; a zlib stream starts with a header whose checksum tells them
            # apart.
            head = self._peek(2)
            is_zlib = len(head) == 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
            wbits = zlib.MAX_WBITS if is_zlib else -zlib.MAX_WBITS
            self._fallback = is_zlib
        self._d = zlib.decompressobj(wbits)

    def _next_is_gzip(self) -> bool:
        pos = self._pos
        if len(self._buf) - pos >= 2:  # most often: no copy
            return self._buf[pos : pos + 2] == _GZIP_MAGIC
        return self._peek(2) == _GZIP_MAGIC

    def read(self, n: int) -> bytes | None:
        if self._d is None:
            self._start()
        while True:
            self._calls.check()
            d = self._d
            if d.eof:
                # Several gzip members one after the other are one stream (RFC 1952
                # §2.2); anything else after the end is trailing junk, ignored as
                # browsers do.
                if not (self._members and self._next_is_gzip()):
                    return None
                self._d = d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self._feed = FEED_MIN
            tail = d.unconsumed_tail
            out: bytes
            try:
                if tail:
                    out = d.decompress(tail, n)
                else:
                    piece = self._piece()
                    if piece is None:
                        raise self._truncated()
                    out = d.decompress(piece, n)
            except zlib.error as exc:
                self._calls.spent()
                if self._fallback and not self._produced and self._pulled <= 1:
                    # One raw stream in 31 starts with bytes that pass for a zlib header.
                    self._fallback = False
                    self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._pos, self._feed = 0, FEED_MIN
                    self._zlib_error = exc
                    continue
                # As a zlib stream first: that error is the one worth telling.
                raise Undecodable(f"invalid {self.name} data: {self._zlib_error or exc}") from None
            self._calls.spent()
            if d.eof and d.unused_data:
                self._unread(len(d.unused_data))
            if out:
                self._produced = True
                return out


class _Unbrotli(_Stage):
    def __init__(self, source: _Source, calls: _Calls) -> None:
        super().__init__(source, "br", calls)
        self._d = _brotli.Decompressor()
        self._feed = FEED_MAX  # one stream: nothing is copied per member

    def read(self, n: int) -> bytes | None:
        d = self._d
        while True:
            self._calls.check()
            try:
                if not d.can_accept_more_data():  # output held back by the last cap
                    out = d.process(b"", output_buffer_limit=n)
                elif d.is_finished():
                    return None
                else:
                    piece = self._piece()
                    if piece is None:
                        raise self._truncated()
                    out = d.process(piece, output_buffer_limit=n)
            except _brotli.error as exc:
                raise Undecodable(f"invalid br data: {exc}") from None
            self._calls.spent()
            if out:
                return bytes(out)


class _Unzstd(_Stage):
    """zstd, any number of frames (skippable frames included)."""

    def __init__(self, source: _Source, calls: _Calls) -> None:
        super().__init__(source, "zstd", calls)
        self._d = _zstd.ZstdDecompressor()

    def _next_frame(self) -> bool:
        head = self._peek(4)
        skippable = len(head) == 4 and head[0] & 0xF0 == 0x50 and head[1:] == b"\x2a\x4d\x18"
        return head == _ZSTD_MAGIC or skippable

    def read(self, n: int) -> bytes | None:
        while True:
            self._calls.check()
            d = self._d
            if d.eof:
                if not self._next_frame():
                    return None
                self._d = d = _zstd.ZstdDecompressor()
                self._feed = FEED_MIN
            out: bytes
            try:
                if d.needs_input:
                    piece = self._piece()
                    if piece is None:
                        raise self._truncated()
                    out = d.decompress(piece, n)
                else:  # output held back by the last cap
                    out = d.decompress(b"", n)
            except _zstd.ZstdError as exc:
                raise Undecodable(f"invalid zstd data: {exc}") from None
            self._calls.spent()
            if d.eof and d.unused_data:
                self._unread(len(d.unused_data))
            if out:
                return out


def _stage(coding: str, source: _Source, calls: _Calls) -> _Stage:
    if coding in ("gzip", "x-gzip"):
        # 32 + 15: a gzip or zlib header, detected; some servers label zlib as gzip.
        return _Inflate(source, "gzip", calls, 32 + zlib.MAX_WBITS, members=True)
    if coding == "deflate":
        return _Inflate(source, "deflate", calls, None, members=False)
    if coding == "br" and _brotli is not None:
        return _Unbrotli(source, calls)
    if coding == "zstd" and _zstd is not None:
        return _Unzstd(source, calls)
    raise LookupError(coding)


def parse_codings(content_encoding: str | None) -> list[str]:
    """The codings a Content-Encoding value lists, lower case, without "identity"."""
    if not content_encoding:
        return []
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    return [c for c in codings if c and c != "identity"]


class Decoding:
    """One body being decoded through its codings, a step at a time (`run`).

    Raises LookupError (with the coding) for a coding it does not know. `run` raises
    DecodedTooLarge once the content would exceed `limit` bytes, and Undecodable for
    a stream that is cut short or corrupt; `content` is the result once `done`.

    `partial`: `body` may be the start of a longer one, cut on purpose. The content is
    then cut to its first `limit` bytes instead of refused, a stream that ends early
    ends the decoding without an error, and either sets `truncated`."""

    def __init__(
        self,
        body: bytes,
        codings: list[str],
        limit: int,
        limit_name: str = "max_decoded",
        *,
        partial: bool = False,
    ) -> None:
        self.limit = limit
        self.partial = partial
        self.truncated = False
        """Partial only: the content is the start of a longer one (cut at `limit`, or
        where the input ended)."""
        self.done = not codings
        self._body = body
        self._name = codings[0] if codings else ""
        self._limit_name = limit_name
        self._calls = _Calls()
        self._out = io.BytesIO()
        self._size = 0
        source: _Source = _Input(body)
        # Codings are listed in the order they were applied; undo the last one first.
        for coding in reversed(codings):
            source = _stage(coding, source, self._calls)
        self._last = source

    def run(self, max_bytes: float = math.inf, max_calls: float = math.inf) -> bool:
        """Decode on until done, or until about `max_bytes` more bytes came out or
        `max_calls` decompressor calls were made; whether it is done."""
        if self.done:
            return True
        self._calls.left = max_calls
        goal = self._size + max_bytes
        try:
            while self._size < goal:
                piece = self._last.read(min(STEP, self.limit + 1 - self._size))
                if piece is None:
                    self.done = True
                    return True
                self._size += len(piece)
                if self._size > self.limit:
                    if not self.partial:
                        raise DecodedTooLarge(self._name, self.limit, self._limit_name)
                    self._out.write(piece[: len(piece) - (self._size - self.limit)])
                    self._size = self.limit
                    return self._cut()
                self._out.write(piece)
        except _Pause:
            pass
        except _Cut:
            if not self.partial:
                raise
            return self._cut()
        return False

    def _cut(self) -> bool:
        self.truncated = self.done = True
        return True

    @property
    def size(self) -> int:
        """Bytes decoded so far."""
        return self._size

    def content(self) -> bytes:
        """What was decoded (so far, if not done). The body itself without codings."""
        if not self._name:
            return self._body
        # No copy: BytesIO hands over its buffer when nothing else shares it.
        return self._out.getvalue()


def decode_content(
    body: bytes, content_encoding: str | None, limit: int, *, partial: bool = False
) -> tuple[bytes, str | None]:
    """(content, decode_error) for a body sent with `content_encoding` (the header's
    values joined by commas, or None). Raises DecodedTooLarge past `limit` bytes.
    `partial`: `body` is the start of a longer one, cut on purpose: decode what it holds,
    and keep the first `limit` bytes of the content instead of refusing more."""
    codings = parse_codings(content_encoding)
    try:
        decoding = Decoding(body, codings, limit, partial=partial)
    except LookupError as exc:
        return body, f"unsupported content-encoding {exc.args[0]!r}"
    try:
        decoding.run()
    except Undecodable as exc:
        return b"", str(exc)
    return decoding.content(), None


async def decode_off_loop(decoding: Decoding, deadline: float) -> None:
    """Finish `decoding`: a first short step here on the event loop (a typical page ends
    there, without the cost of a thread), the rest in a thread that stops when the
    calling task is cancelled (a signal stops a crawl mid-decoding) and raises
    DecodeTimeout past `deadline` (`time.monotonic()`, the loop's clock)."""
    if decoding.run(ON_LOOP_BYTES, ON_LOOP_CALLS):
        return
    stop = threading.Event()

    def rest() -> None:
        while not decoding.run(max_calls=THREAD_CALLS):
            if stop.is_set():
                raise _Stopped
            if time.monotonic() > deadline:
                raise DecodeTimeout

    try:
        await asyncio.to_thread(rest)
    except asyncio.CancelledError:
        stop.set()
        raise
