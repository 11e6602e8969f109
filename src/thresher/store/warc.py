"""WARC output for the crawler: every fetched URL in the WARC files exactly once, even across
``kill -9``.

Per fetched URL the writer appends a ``request`` record, a ``response`` record (the HTTP
head and the payload as transferred, still content-encoded) and, when the page has
outlinks, a ``metadata`` record listing them; request and metadata name the response in
``WARC-Concurrent-To``. Records are WARC/1.1 with microsecond ``WARC-Date``s. Each
record is its own gzip member, so a reader can start at any record's offset; each file
starts with a ``warcinfo`` record, and a new file is started once the current one holds
``max_size`` bytes (an exchange is never split across files, so a file may exceed
``max_size`` by one exchange).

**Revisits.** Two kinds of exchange are written as a ``revisit`` record instead of a
``response``, each naming the `Capture` that holds the payload (``WARC-Refers-To-Target-URI``
always; ``WARC-Refers-To-Date``, ``WARC-Refers-To`` and the payload digest where known):

- a payload equal to an earlier capture's (``revisit_of``; WARC 1.1 profile
  *identical-payload-digest*): the HTTP head is kept, the payload is not
  (``WARC-Truncated: length``);
- a 304 answer to a conditional GET (``not_modified_of``; profile *server-not-modified*):
  the record has no block, and its ``WARC-Payload-Digest`` is the confirmed capture's (WARC
  1.1: "the payload is defined as the original payload content"). The 304's head goes
  in the ``metadata`` record instead, as ``http-status-line`` and ``http-header`` fields.
  Why not in the revisit's block, where WARC 1.1 allows it: replay tools serve a
  revisit's own HTTP head with the original's payload (pywb 2.10's ``ResolvingLoader``
  does, and returns a 3xx head at once without loading any payload), so a kept 304 head
  replays as an empty 304, the very thing a revisit is meant to avoid. Without a block,
  pywb serves the confirmed capture's head and payload. Never is the digest of the empty
  304 body written: pywb takes ``sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ`` to mean "the
  payload is empty" and looks no further.

The CDXJ line of a revisit has the fields pywb's own indexer gives it: ``mime``
``warc/revisit`` and the digest, no status.

**Crash model.** `WarcWriter.sync` flushes and fsyncs and returns a `WarcPosition`: the file
and the offset just past the last complete exchange. The crawler commits that position in
the same database transaction as "these URLs are done". After a crash it opens the writer
with ``resume=`` the last committed position, and the writer

- truncates that file to the committed offset (whatever follows belongs to URLs that were
  not committed and will be fetched again, and may end in a torn record),
- **deletes** the files of this prefix that are newer than it, with their indexes (a rotation
  after the last commit: uncommitted too), and lists them in `WarcWriter.discarded`,
- leaves every file before it alone (rebuilding an index only if one is missing), and
- appends to the committed file from there.

So each URL ends up in the WARCs once. Commit a position once right after opening, before
the first exchange: a crash before the first commit then also resumes cleanly instead of
leaving an uncommitted file behind. A prefix belongs to one writer at a time.

**Index.** A file's CDXJ index (`thresher.store.cdxj`) is written, sorted, when the file is
closed (rotation or `WarcWriter.close`). Until then its lines go to a spool file beside it
(``.cdxj.open``, ignored by pywb), so memory stays flat however large ``max_size`` is. The
spool is never fsynced and never trusted: on resume it is rebuilt by reading the WARC up to
the committed offset.

**Why records are built by hand.** The crawler must write about 1000 pages/s on two
cores alongside fetching and parsing, so writer CPU counts: record ids, base32 digests and
dates are formatted by hand (``uuid``, ``base64`` and ``datetime`` took 10 µs more a
page), the file has a 1 MiB buffer, and each record is one gzip member made by
`thresher.store.gzmember` (ISA-L where installed; the measurements are there). The
records are plain text headers around the block; the tests read them back with warcio
and FastWARC.

The writer is not thread-safe: call it from one thread at a time.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import re
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from random import getrandbits as _random_bits
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO, Literal, NamedTuple, TextIO

from ..errors import StoreError
from .cdxj import (
    RecordInfo,
    cdxj_line,
    cdxj_path,
    fsync_directory,
    http_status_and_mime,
    iter_records,
    record_line,
    write_index,
    write_lines_sorted,
)
from .gzmember import compressor, gzip_stored

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = [
    "NOT_MODIFIED_PROFILE",
    "REVISIT_PROFILE",
    "WARC_VERSION",
    "Capture",
    "PreparedExchange",
    "WarcError",
    "WarcPosition",
    "WarcWriter",
    "WrittenRecord",
    "http_head",
    "payload_digest",
]

WARC_VERSION = "WARC/1.1"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
_HTTP_REQUEST = "application/http; msgtype=request"
_HTTP_RESPONSE = "application/http; msgtype=response"
_SPOOL_SUFFIX = ".open"
_BUFFER = 1 << 20
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class WarcError(StoreError):
    """The WARC directory does not match the committed position, or the writer failed."""


@dataclass(frozen=True)
class WarcPosition:
    """A point in the WARC output: commit it with the URLs written before it."""

    filename: str  # basename within the directory
    offset: int


class Capture(NamedTuple):
    """A record that holds a payload, as a revisit names it: the fields a replay tool
    finds it by. Only ``uri`` is required; the others are written where known. (A tuple:
    one is made per page, and a frozen dataclass took twice as long to make.)"""

    uri: str  # its WARC-Target-URI
    date: str | None = None  # its WARC-Date
    record_id: str | None = None  # its WARC-Record-ID
    digest: str | None = None  # its WARC-Payload-Digest ("sha1:BASE32")

    def refers_to(self) -> str:
        """The WARC-Refers-To* fields naming this capture."""
        _check_field(self.uri, "revisited URI")
        fields = f"WARC-Refers-To-Target-URI: {self.uri}\r\n"
        if self.date:
            _check_field(self.date, "revisited date")
            fields += f"WARC-Refers-To-Date: {self.date}\r\n"
        if self.record_id:
            _check_field(self.record_id, "revisited record id")
            fields = f"WARC-Refers-To: {self.record_id}\r\n" + fields
        return fields


@dataclass(frozen=True)
class PreparedExchange:
    """An exchange's records, compressed, ready for `WarcWriter.append`."""

    url: str
    date: str
    digest: str | None
    response_id: str
    mime: str | None
    status: str | None
    request: bytes
    response: bytes
    metadata: bytes


@dataclass(frozen=True)
class WrittenRecord:
    """Where `WarcWriter.write_exchange` put the response (or revisit) record."""

    record_id: str  # the response or revisit record's WARC-Record-ID
    # "sha1:BASE32" of the payload as transferred; of a server-not-modified revisit, the
    # confirmed capture's (None if unknown)
    payload_digest: str | None
    filename: str
    offset: int  # of the response or revisit record's gzip member
    length: int  # compressed length of that member
    date: str  # its WARC-Date


# Base32 two letters (ten bits) at a time: a SHA-1 is 160 bits, 16 lookups. The standard
# library's b32encode is written in Python and takes twice as long, on every record.
_B32_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [a + b for a in _B32_ALPHABET for b in _B32_ALPHABET]


def _sha1_base32(data: bytes) -> str:
    return _base32(hashlib.sha1(data).digest())


def _base32(digest: bytes) -> str:
    n = int.from_bytes(digest, "big")
    p = _B32_PAIRS
    # Unrolled: a loop and a join took half of this, which runs four times a page.
    return (
        p[n >> 150] + p[n >> 140 & 1023] + p[n >> 130 & 1023] + p[n >> 120 & 1023]
        + p[n >> 110 & 1023] + p[n >> 100 & 1023] + p[n >> 90 & 1023] + p[n >> 80 & 1023]
        + p[n >> 70 & 1023] + p[n >> 60 & 1023] + p[n >> 50 & 1023] + p[n >> 40 & 1023]
        + p[n >> 30 & 1023] + p[n >> 20 & 1023] + p[n >> 10 & 1023] + p[n & 1023]
    )  # fmt: skip


def payload_digest(payload: bytes) -> str:
    """``sha1:`` and the base32 SHA-1 of ``payload``, as WARC-Payload-Digest writes it."""
    return "sha1:" + _sha1_base32(payload)


def sha1_digest(sha1: bytes) -> str:
    """`payload_digest` from the SHA-1 digest (20 bytes) of the payload, hashed already."""
    return "sha1:" + _base32(sha1)


_digest = payload_digest  # write_exchange's keyword argument shadows the name


def http_head(
    start_line: str | bytes,
    headers: Iterable[tuple[str | bytes, str | bytes]],
    *,
    keep_transfer_encoding: bool = False,
) -> bytes:
    """An HTTP/1.x head (start line, headers in order, blank line) for `write_exchange`,
    from a client that parses the head and keeps no raw bytes (aiohttp: ``raw_headers``).

    ``Transfer-Encoding`` is left out unless asked for: such clients hand over the body
    already de-chunked, and a head saying ``chunked`` over an unchunked body makes readers
    (warcio, pywb) try to de-chunk it.
    """
    parts = [start_line if isinstance(start_line, bytes) else start_line.encode("latin-1")]
    for name, value in headers:
        n = name if isinstance(name, bytes) else name.encode("latin-1")
        if not keep_transfer_encoding and n.lower() == b"transfer-encoding":
            continue
        v = value if isinstance(value, bytes) else value.encode("latin-1")
        parts.append(n + b": " + v)
    head = b"\r\n".join(parts) + b"\r\n\r\n"
    _check_head(head, "head")
    return head


class _WarcDates:
    """``datetime.fromtimestamp(t, UTC)`` formatted with microseconds, rounded the same
    way, at a quarter of the cost: the part up to the second is kept from the last call,
    as a crawl's records come many to a second. (One tuple, so threads that prepare
    exchanges at once never see a second with another second's text.)"""

    def __init__(self) -> None:
        self._last: tuple[int, str] = (0, "1970-01-01T00:00:00")

    def __call__(self, t: float) -> str:
        frac, whole = math.modf(t)
        second, us = int(whole), round(frac * 1e6)  # as datetime rounds: half to even
        if us >= 1_000_000:
            second, us = second + 1, us - 1_000_000
        elif us < 0:
            second, us = second - 1, us + 1_000_000
        last = self._last
        if last[0] != second:
            last = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
            self._last = last
        return f"{last[1]}.{us:06d}Z"


_warc_date = _WarcDates()


def _record_id() -> str:
    # uuid.uuid4() builds a UUID object only to format it: a third of the time this takes.
    # Its bits come from `random`, not os.urandom: an ID must be unique, not secret, and a
    # system call per record (three a page) showed in profiles. `random` is seeded from
    # os.urandom and again in a forked child, so shards do not repeat each other.
    h = f"{_random_bits(128):032x}"
    variant = "89ab"[int(h[16], 16) & 3]
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}>"


def _check_field(value: str, what: str) -> None:
    # A CR or LF in a header value would end the field and let the value forge headers.
    if "\r" in value or "\n" in value:
        raise ValueError(f"{what} contains a line break: {value!r}")


_HEAD_LINES = re.compile(rb"\r?\n")


def _head_fields(head: bytes) -> bytes:
    """An HTTP head as ``application/warc-fields``: ``http-status-line`` and one
    ``http-header`` field per header line, the bytes as they came."""
    status, *lines = _HEAD_LINES.split(head.rstrip(b"\r\n"))
    return (
        b"http-status-line: "
        + status
        + b"\r\n"
        + b"".join([b"http-header: " + line + b"\r\n" for line in lines])
    )


def _check_head(head: bytes, what: str) -> None:
    if not head.endswith((b"\r\n\r\n", b"\n\n")):
        raise ValueError(f"{what} must end with the blank line that ends an HTTP head")


def _read_committed(path: Path, offset: int) -> list[str]:
    """The index lines of the first ``offset`` bytes of ``path``, after checking that they
    end with a complete gzip member. (warcio reads a truncated member without complaint.)"""
    lines: list[str] = []
    last: RecordInfo | None = None
    with open(path, "rb") as f:
        for info in iter_records(_Prefix(f, offset)):
            line = record_line(info, path.name)
            if line is not None:
                lines.append(line)
            last = info
        if last is None or last.offset + last.length != offset:
            raise ValueError("the offset is not the end of a record")
        f.seek(last.offset)
        member = zlib.decompressobj(31)
        member.decompress(f.read(last.length))
        if not member.eof or member.unused_data:
            raise ValueError("the offset is not the end of a gzip member")
    return lines


class _Prefix(io.RawIOBase):
    """The first ``limit`` bytes of a binary file, as a stream warcio can iterate."""

    def __init__(self, f: BinaryIO, limit: int) -> None:
        self._f = f
        self._left = limit
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self._f.read(min(len(view), self._left))
        view[: len(data)] = data
        self._left -= len(data)
        self._pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self._pos


class WarcWriter:
    """Appends exchanges to rotating ``PREFIX-TIMESTAMP-SERIAL.warc.gz`` files in ``directory``.

    ``resume`` is the last committed `WarcPosition` after a crash (see the module docstring);
    ``None`` starts a new file after any existing ones. ``info`` adds fields to each
    ``warcinfo`` record (e.g. ``{"robots": "obey", "operator": "…"}``).
    """

    def __init__(
        self,
        directory: Path,
        prefix: str = "thresher",
        *,
        max_size: int = 1_000_000_000,
        resume: WarcPosition | None = None,
        software: str = "Thresher",
        gzip_level: int | None = None,
        info: Mapping[str, str] | None = None,
    ) -> None:
        if not _PREFIX.fullmatch(prefix):
            raise ValueError(f"prefix must be letters, digits, '.', '_' or '-': {prefix!r}")
        if max_size < 1:
            raise ValueError("max_size must be positive")
        self._compression, self._compress = compressor(gzip_level)
        self._info = {"software": software, "format": "WARC File Format 1.1"}
        self._info.update(info or {})
        for key, value in self._info.items():
            _check_field(key + value, "warcinfo field")
            if ":" in key:
                raise ValueError(f"warcinfo field name contains ':': {key!r}")
        self._dir = Path(directory)
        self._prefix = prefix
        self._name_re = re.compile(re.escape(prefix) + r"-\d{14}-(\d{5,})\.warc\.gz")
        self._max_size = max_size
        self._file: BinaryIO | None = None
        self._spool: TextIO | None = None
        self._name = ""
        self._serial = 0
        self._offset = 0
        self._exchanges = 0  # in the open file, which is rotated only once it holds one
        self._dir_dirty = False
        self._failed: BaseException | None = None
        self._closed = False
        self._discarded: list[str] = []
        self._dir.mkdir(parents=True, exist_ok=True)
        existing = self._scan()
        try:
            if resume is None:
                self._open_new(max(existing, default=0) + 1)
            else:
                self._resume(resume, existing)
        except BaseException:
            self._close_handles()
            raise

    # --- public ---------------------------------------------------------------------------

    @property
    def files(self) -> list[str]:
        """This prefix's WARC files in the directory, oldest first; the open one is last."""
        return [name for _, name in sorted(self._scan().items())]

    @property
    def compression(self) -> str:
        """How records are compressed, e.g. ``"isal level 2"`` or ``"zlib level 6"``."""
        return self._compression

    @property
    def discarded(self) -> list[str]:
        """The files that resuming deleted: written after the committed position."""
        return list(self._discarded)

    def write_exchange(
        self,
        *,
        url: str,
        request_head: bytes,
        response_head: bytes,
        payload: bytes,
        ip: str | None,
        fetched_at: float,
        revisit_of: Capture | None = None,
        not_modified_of: Capture | None = None,
        payload_digest: str | None = None,
        outlinks: Sequence[str] = (),
    ) -> WrittenRecord:
        """Append one fetch: request, response (or revisit) and metadata records.

        ``request_head`` and ``response_head`` are HTTP heads ending with their blank line
        (see `http_head`); ``payload`` is the body as transferred (still content-encoded,
        not chunked). ``revisit_of`` is an earlier capture with the same payload digest: an
        identical-payload-digest revisit is written, the payload left out.
        ``not_modified_of`` is the capture a 304 answer confirms (``payload`` must be
        empty): a server-not-modified revisit is written, the 304's head going to the
        metadata record (see the module docstring). ``payload_digest`` saves hashing the
        payload again if the caller has it. Nothing is durable before the next `sync`.
        """
        self._check_usable()
        return self.append(
            self.prepare_exchange(
                url=url,
                request_head=request_head,
                response_head=response_head,
                payload=payload,
                ip=ip,
                fetched_at=fetched_at,
                revisit_of=revisit_of,
                not_modified_of=not_modified_of,
                payload_digest=payload_digest,
                outlinks=outlinks,
            )
        )

    def prepare_exchange(
        self,
        *,
        url: str,
        request_head: bytes,
        response_head: bytes,
        payload: bytes,
        ip: str | None,
        fetched_at: float,
        revisit_of: Capture | None = None,
        not_modified_of: Capture | None = None,
        payload_digest: str | None = None,
        outlinks: Sequence[str] = (),
        stored: bool = False,
        block_digest: str | None = None,
    ) -> PreparedExchange:
        """The records of `write_exchange`, built and compressed but not written: the
        expensive part, which touches no file, so any thread may do it ahead of `append`.

        ``stored``: the payload is compressed already (a PDF's streams, an image, a zip),
        so its record is a gzip member of stored blocks (deflate level 0): still a gzip
        member any reader reads, at a third of igzip's CPU and a thirtieth of zlib level
        1's on such bytes, and no larger than compressing them would make it.
        ``block_digest``: the response record's WARC-Block-Digest (of ``response_head``
        and ``payload``), when the caller hashed them already (on another thread)."""
        _check_field(url, "url")
        if ip is not None:
            _check_field(ip, "ip")
        fields = "".join([f"outlink: {link}\r\n" for link in outlinks])
        # One CR and one LF per field, or a link would end its field and forge another.
        if fields.count("\r") + fields.count("\n") != 2 * len(outlinks):
            bad = next(link for link in outlinks if "\r" in link or "\n" in link)
            raise ValueError(f"outlink contains a line break: {bad!r}")
        _check_head(request_head, "request_head")
        _check_head(response_head, "response_head")
        if payload_digest is not None:
            _check_field(payload_digest, "payload_digest")
        date = _warc_date(fetched_at)
        response_id = _record_id()
        common = f"WARC-Date: {date}\r\nWARC-Target-URI: {url}\r\n"
        http_common = common + (f"WARC-IP-Address: {ip}\r\n" if ip else "")
        concurrent = f"WARC-Concurrent-To: {response_id}\r\n"

        request = self._member(
            "request", _record_id(), http_common + concurrent, _HTTP_REQUEST, request_head
        )
        block = fields.encode("utf-8")
        digest: str | None
        if not_modified_of is not None:
            if revisit_of is not None:
                raise ValueError("an exchange is one kind of revisit, not both")
            if payload:
                raise ValueError("a 304 answer has no payload to leave out")
            digest = not_modified_of.digest
            if digest is not None:
                _check_field(digest, "confirmed capture's digest")
            response = self._member(
                "revisit",
                response_id,
                f"{http_common}WARC-Profile: {NOT_MODIFIED_PROFILE}\r\n"
                + not_modified_of.refers_to()
                + (f"WARC-Payload-Digest: {digest}\r\n" if digest else ""),
                None,
                b"",
            )
            block += _head_fields(response_head)
        elif revisit_of is not None:
            digest = payload_digest or _digest(payload)
            response = self._member(
                "revisit",
                response_id,
                # WARC 1.1 6.7.2: a block cut short of its payload says so.
                f"{http_common}WARC-Profile: {REVISIT_PROFILE}\r\nWARC-Truncated: length\r\n"
                f"{revisit_of.refers_to()}WARC-Payload-Digest: {digest}\r\n",
                _HTTP_RESPONSE,
                response_head,
            )
        else:
            digest = payload_digest or _digest(payload)
            response = self._member(
                "response",
                response_id,
                f"{http_common}WARC-Payload-Digest: {digest}\r\n",
                _HTTP_RESPONSE,
                response_head,
                payload=payload,
                stored=stored,
                digest=block_digest,
            )
        metadata = b""
        if block:
            metadata = self._member(
                "metadata", _record_id(), common + concurrent, "application/warc-fields", block
            )
        revisit = revisit_of is not None or not_modified_of is not None
        status, mime = http_status_and_mime(response_head)
        return PreparedExchange(
            url=url,
            date=date,
            digest=digest,
            response_id=response_id,
            # As pywb's indexer has it: a revisit line has no status of its own.
            mime="warc/revisit" if revisit else mime,
            status=None if revisit else status,
            request=request,
            response=response,
            metadata=metadata,
        )

    def append(self, prepared: PreparedExchange) -> WrittenRecord:
        """Write an exchange `prepare_exchange` built (of this writer: same compression)."""
        self._check_usable()
        if self._exchanges and self._offset >= self._max_size:
            self._rotate()
        offset = self._offset + len(prepared.request)
        # Before writing: the SURT key refuses some URLs (a port that is not a number).
        line = cdxj_line(
            url=prepared.url,
            warc_date=prepared.date,
            mime=prepared.mime,
            status=prepared.status,
            digest=prepared.digest,
            length=len(prepared.response),
            offset=offset,
            filename=self._name,
        )
        # One write per exchange: after a crash a file ends at an exchange boundary or in a
        # torn exchange past the last sync, which resuming cuts off.
        self._write(prepared.request + prepared.response + prepared.metadata)
        self._exchanges += 1
        assert self._spool is not None
        try:
            self._spool.write(line + "\n")
        except BaseException as exc:
            self._failed = exc  # the index would miss a record; resuming rebuilds it
            raise
        return WrittenRecord(
            prepared.response_id,
            prepared.digest,
            self._name,
            offset,
            len(prepared.response),
            prepared.date,
        )

    def sync(self) -> WarcPosition:
        """Flush and fsync; the position just past the last complete exchange."""
        self._check_usable()
        assert self._file is not None
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            if self._dir_dirty:
                fsync_directory(self._dir)
                self._dir_dirty = False
        except BaseException as exc:
            self._failed = exc
            raise
        return WarcPosition(self._name, self._offset)

    def close(self) -> None:
        """Sync, close the open file and write its index. After a failed write, only close:
        the file is repaired by resuming from the last committed position."""
        if self._closed:
            return
        self._closed = True
        if self._failed is not None:
            self._close_handles()
            return
        self._finish_file()

    def abort(self) -> None:
        """Close without finishing the file, after the records since the last committed
        position were not committed after all: the next writer, resuming from that
        position, cuts them off."""
        if not self._closed:
            self._closed = True
            self._close_handles()

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- files ----------------------------------------------------------------------------

    def _scan(self) -> dict[int, str]:
        found: dict[int, str] = {}
        for entry in os.scandir(self._dir):
            m = self._name_re.fullmatch(entry.name)
            if m:
                found[int(m.group(1))] = entry.name
        return found

    def _spool_path(self, name: str) -> Path:
        index = cdxj_path(self._dir / name)
        return index.with_name(index.name + _SPOOL_SUFFIX)

    def _side_files(self, name: str) -> list[Path]:
        index = cdxj_path(self._dir / name)
        return [index, self._spool_path(name), index.with_name(index.name + ".tmp")]

    def _open_new(self, serial: int) -> None:
        now = time.time()
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(now))
        name = f"{self._prefix}-{stamp}-{serial:05d}.warc.gz"
        # "x": a clash means two writers share the prefix; better to stop than to interleave.
        self._open(name, "xb")
        self._name, self._serial, self._offset, self._exchanges = name, serial, 0, 0
        self._dir_dirty = True
        self._write_warcinfo(now)

    def _open(self, name: str, mode: Literal["xb", "ab"]) -> None:
        """Open the WARC ``name`` for appending, and a new spool for its index lines."""
        # Both stay open across calls, until _close_handles. A large buffer: a write call
        # per exchange cost more than compressing its request; `sync` flushes anyway.
        self._file = open(self._dir / name, mode, buffering=_BUFFER)  # noqa: SIM115
        self._spool = open(self._spool_path(name), "w", encoding="utf-8", newline="\n")  # noqa: SIM115

    def _write_warcinfo(self, now: float) -> None:
        block = "".join(f"{k}: {v}\r\n" for k, v in self._info.items()).encode("utf-8")
        fields = f"WARC-Date: {_warc_date(now)}\r\nWARC-Filename: {self._name}\r\n"
        self._write(
            self._member("warcinfo", _record_id(), fields, "application/warc-fields", block)
        )

    def _rotate(self) -> None:
        try:
            self._finish_file()
            self._open_new(self._serial + 1)
        except BaseException as exc:
            self._failed = exc
            raise

    def _finish_file(self) -> None:
        """Durably close the open WARC, then write its sorted index and drop the spool."""
        assert self._file is not None and self._spool is not None
        path = self._dir / self._name
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._spool.flush()
        except BaseException as exc:
            self._failed = exc
            self._close_handles()
            raise
        self._close_handles()
        spool = self._spool_path(self._name)
        with open(spool, encoding="utf-8") as f:
            lines = f.read().splitlines()
        write_lines_sorted(lines, cdxj_path(path))  # also fsyncs the directory
        spool.unlink()
        self._dir_dirty = False

    def _close_handles(self) -> None:
        for handle in (self._file, self._spool):
            if handle is not None:
                handle.close()
        self._file = self._spool = None

    def _resume(self, position: WarcPosition, existing: dict[int, str]) -> None:
        name, offset = position.filename, position.offset
        m = self._name_re.fullmatch(name)
        if m is None:
            raise WarcError(f"{name!r} is not a WARC file of prefix {self._prefix!r}")
        serial = int(m.group(1))
        path = self._dir / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise WarcError(f"the committed WARC file {path} is missing") from None
        if not 0 <= offset <= size:
            raise WarcError(
                f"{path} has {size} bytes but {offset} were committed: "
                "the file was truncated or replaced after the commit"
            )
        # Read the committed part first: a position that is not a record boundary of a
        # readable file must be refused before anything is deleted or truncated.
        lines: list[str] = []
        if offset:
            try:
                lines = _read_committed(path, offset)
            except Exception as exc:
                raise WarcError(
                    f"{path} cannot be read up to the committed offset {offset}: {exc}"
                ) from exc
        # Newer files were started after the last commit: every exchange in them is
        # uncommitted and will be fetched again, so keeping them would store URLs twice.
        for later, later_name in sorted(existing.items()):
            if later > serial:
                for side in self._side_files(later_name):
                    side.unlink(missing_ok=True)
                (self._dir / later_name).unlink()
                self._discarded.append(later_name)
        # The committed file's index, if any, may list records past the offset.
        for side in self._side_files(name):
            side.unlink(missing_ok=True)
        with open(path, "r+b") as f:
            f.truncate(offset)
            os.fsync(f.fileno())
        fsync_directory(self._dir)
        for earlier, earlier_name in sorted(existing.items()):
            if earlier < serial:
                index, spool, tmp = self._side_files(earlier_name)
                spool.unlink(missing_ok=True)
                tmp.unlink(missing_ok=True)
                if not index.exists():
                    write_index(self._dir / earlier_name, index)
        self._open(name, "ab")
        assert self._spool is not None
        self._spool.writelines(line + "\n" for line in lines)
        self._name, self._serial, self._offset, self._exchanges = name, serial, offset, len(lines)
        if not offset:
            self._write_warcinfo(time.time())

    # --- records --------------------------------------------------------------------------

    def _member(
        self,
        rec_type: str,
        record_id: str,
        fields: str,
        content_type: str | None,
        block: bytes,
        *,
        payload: bytes = b"",
        stored: bool = False,
        digest: str | None = None,
    ) -> bytes:
        """One record as one gzip member (no Content-Type without a ``content_type``); its
        block is ``block`` then ``payload`` (an HTTP head and the body it heads, kept apart
        so that a big body is copied once, into the member). ``stored``: of deflate's
        stored blocks (level 0), for a block that will not shrink. ``digest``: the block's,
        if the caller has it."""
        if digest is None:
            hashed = hashlib.sha1(block)
            hashed.update(payload)
            digest = sha1_digest(hashed.digest())
        typed = f"Content-Type: {content_type}\r\n" if content_type else ""
        head = (
            f"{WARC_VERSION}\r\nWARC-Type: {rec_type}\r\nWARC-Record-ID: {record_id}\r\n"
            f"{fields}{typed}WARC-Block-Digest: {digest}\r\n"
            f"Content-Length: {len(block) + len(payload)}\r\n\r\n"
        ).encode()
        if stored:
            return gzip_stored(head + block, payload, b"\r\n\r\n")
        return self._compress(b"".join((head, block, payload, b"\r\n\r\n")))

    def _write(self, data: bytes) -> None:
        assert self._file is not None
        try:
            self._file.write(data)
        except BaseException as exc:
            # Part of `data` may be on disk: only a resume can tell where the file ends.
            self._failed = exc
            raise
        self._offset += len(data)

    def _check_usable(self) -> None:
        if self._closed:
            raise ValueError("the WARC writer is closed")
        if self._failed is not None:
            raise WarcError(
                f"an earlier write failed ({self._failed!r}): reopen the writer with "
                "resume= the last committed position"
            ) from self._failed
