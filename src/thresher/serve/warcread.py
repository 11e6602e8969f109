"""One WARC record read back from a file, by the offset the crawl ledger recorded.

Why the gzip member is cut out by zlib rather than by a reader: Thresher writes one gzip
member per record, so the record's download is exactly that member's bytes (a valid
`.warc.gz` of one record, which warcio, pywb and FastWARC read). zlib finds where the
member ends; warcio (the reader the tests check our files with) parses it for display.
An uncompressed file's record ends after its Content-Length and the two CRLFs.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

__all__ = ["MAX_RECORD", "Record", "RecordError", "read_record"]

# A record larger than this is not read for display or download (the crawl's max_body is
# 50 MiB by default; a record holds the body as transferred plus its heads).
MAX_RECORD = 256 * 2**20
_CHUNK = 1 << 16


class RecordError(Exception):
    """The record cannot be read (a missing file, a bad offset, a damaged member)."""


@dataclass(frozen=True)
class Record:
    raw: bytes  # the record as stored in the file (a gzip member, or plain bytes)
    gzip: bool
    warc_type: str
    target_uri: str | None
    date: str | None
    http_status: str | None
    content_type: str | None  # of the HTTP payload
    payload: bytes  # the HTTP payload, de-chunked and decoded as warcio decodes it
    refers_to: str | None  # a revisit's WARC-Refers-To-Target-URI


def _gzip_member(f: io.BufferedReader, offset: int) -> bytes:
    f.seek(offset)
    d = zlib.decompressobj(wbits=31)
    taken = bytearray()
    total = 0
    while not d.eof:
        chunk = f.read(_CHUNK)
        if not chunk:
            raise RecordError(f"the gzip member at {offset} is cut short")
        d.decompress(chunk, 0)
        total += len(chunk)
        used = len(chunk) - len(d.unused_data) if d.eof else len(chunk)
        taken += chunk[:used]
        if total > MAX_RECORD:
            raise RecordError(f"the record at {offset} is larger than {MAX_RECORD} bytes")
    return bytes(taken)


def _plain_record(f: io.BufferedReader, offset: int) -> bytes:
    f.seek(offset)
    head = b""
    while b"\r\n\r\n" not in head:
        line = f.readline(65536)
        if not line:
            raise RecordError(f"no WARC record at {offset}")
        head += line
        if len(head) > 1 << 20:
            raise RecordError(f"no WARC record at {offset}")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or b"0")
    if length > MAX_RECORD:
        raise RecordError(f"the record at {offset} is larger than {MAX_RECORD} bytes")
    return head + f.read(length + 4)


def read_record(path: Path, offset: int) -> Record:
    """The record at `offset` of the WARC file `path`."""
    try:
        with path.open("rb") as f:
            gz = path.name.endswith(".gz")
            raw = _gzip_member(f, offset) if gz else _plain_record(f, offset)
    except (OSError, zlib.error, ValueError) as exc:
        raise RecordError(f"cannot read {path.name} at {offset}: {exc}") from None
    try:
        for rec in ArchiveIterator(io.BytesIO(raw)):
            http = rec.http_headers
            payload = rec.content_stream().read()
            return Record(
                raw=raw,
                gzip=gz,
                warc_type=str(rec.rec_type),
                target_uri=rec.rec_headers.get_header("WARC-Target-URI"),
                date=rec.rec_headers.get_header("WARC-Date"),
                http_status=http.get_statuscode() if http is not None else None,
                content_type=http.get_header("Content-Type") if http is not None else None,
                payload=payload,
                refers_to=rec.rec_headers.get_header("WARC-Refers-To-Target-URI"),
            )
    except Exception as exc:  # warcio raises a zoo of types on damaged input
        raise RecordError(f"cannot parse the record of {path.name} at {offset}: {exc}") from None
    raise RecordError(f"no WARC record in {path.name} at {offset}")
