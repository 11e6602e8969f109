"""WARC records as bytes: an exchange's records and a file's ``warcinfo`` record, each
built by hand and compressed into one gzip member, touching no file. Apart from the writer
(`thresher.store.warc`), which owns the files (appending, rotation, resuming): building is
most of a record's CPU and needs no file, so any thread may do it (`prepare_exchange`),
while the writer is called from one thread at a time.

Per fetched URL there is a ``request`` record, a ``response`` record (the HTTP head and the
payload as transferred, still content-encoded) and, when the page has outlinks, a
``metadata`` record listing them; request and metadata name the response in
``WARC-Concurrent-To``. Records are WARC/1.1 with microsecond ``WARC-Date``s. Each record
is its own gzip member, so a reader can start at any record's offset.

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

**Why records are built by hand.** The crawler must write about 1000 pages/s on two
cores alongside fetching and parsing, so writer CPU counts: record ids, base32 digests and
dates are formatted by hand (``uuid``, ``base64`` and ``datetime`` took 10 µs more a
page), and each record is one gzip member made by `thresher.store.gzmember` (ISA-L where
installed; the measurements are there). The records are plain text headers around the
block; the tests read them back with warcio and FastWARC.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from random import getrandbits as _random_bits
from typing import NamedTuple

from .cdxj import http_status_and_mime
from .gzmember import gzip_stored

__all__ = [
    "NOT_MODIFIED_PROFILE",
    "REVISIT_PROFILE",
    "WARC_VERSION",
    "Capture",
    "PreparedExchange",
    "http_head",
    "payload_digest",
    "prepare_exchange",
    "sha1_digest",
    "warcinfo_fields",
    "warcinfo_record",
]

WARC_VERSION = "WARC/1.1"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
_HTTP_REQUEST = "application/http; msgtype=request"
_HTTP_RESPONSE = "application/http; msgtype=response"


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


_digest = payload_digest  # prepare_exchange's keyword argument shadows the name


def http_head(
    start_line: str | bytes,
    headers: Iterable[tuple[str | bytes, str | bytes]],
    *,
    keep_transfer_encoding: bool = False,
) -> bytes:
    """An HTTP/1.x head (start line, headers in order, blank line) for
    `WarcWriter.write_exchange`, from a client that parses the head and keeps no raw bytes
    (aiohttp: ``raw_headers``).

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


def prepare_exchange(
    compress: Callable[[bytes], bytes],
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
    """The records of `WarcWriter.write_exchange` (whose arguments these are), built and
    compressed with ``compress`` (the `WarcWriter.compress` of the writer that will append
    them) but not written: the expensive part, which touches no file, so any thread may do
    it ahead of `WarcWriter.append`.

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

    request = _member(
        compress, "request", _record_id(), http_common + concurrent, _HTTP_REQUEST, request_head
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
        response = _member(
            compress,
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
        response = _member(
            compress,
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
        response = _member(
            compress,
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
        metadata = _member(
            compress,
            "metadata",
            _record_id(),
            common + concurrent,
            "application/warc-fields",
            block,
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


def warcinfo_fields(software: str, info: Mapping[str, str] | None) -> dict[str, str]:
    """A ``warcinfo`` record's fields: ``software``, the format, then ``info``, checked."""
    fields = {"software": software, "format": "WARC File Format 1.1"}
    fields.update(info or {})
    for key, value in fields.items():
        _check_field(key + value, "warcinfo field")
        if ":" in key:
            raise ValueError(f"warcinfo field name contains ':': {key!r}")
    return fields


def warcinfo_record(
    compress: Callable[[bytes], bytes], filename: str, info: Mapping[str, str], now: float
) -> bytes:
    """The ``warcinfo`` record (of `warcinfo_fields`) that starts the WARC file
    ``filename``, as one gzip member."""
    block = "".join(f"{k}: {v}\r\n" for k, v in info.items()).encode("utf-8")
    fields = f"WARC-Date: {_warc_date(now)}\r\nWARC-Filename: {filename}\r\n"
    return _member(compress, "warcinfo", _record_id(), fields, "application/warc-fields", block)


def _member(
    compress: Callable[[bytes], bytes],
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
    return compress(b"".join((head, block, payload, b"\r\n\r\n")))
