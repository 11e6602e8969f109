"""Sample exchanges for the WARC writer, and an independent reader (warcio) to check them.

Shared by the tests in this folder and by the child processes of the crash test, which
import it by path.
"""

from __future__ import annotations

import gzip
import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from thresher.store.warc import WarcWriter, WrittenRecord
from thresher.store.warcrecord import Capture

__all__ = [
    "Exchange",
    "Record",
    "capture_of",
    "gzip_encoded",
    "make_exchange",
    "not_modified",
    "read_records",
    "responses",
    "warc_date",
    "write",
]

BASE_TIME = 1_714_560_000.0


@dataclass(frozen=True)
class Exchange:
    url: str
    request_head: bytes
    response_head: bytes
    payload: bytes
    ip: str | None
    fetched_at: float
    outlinks: tuple[str, ...]


def make_exchange(
    i: int, *, size: int = 1500, host: str = "example.com", links: int = 3
) -> Exchange:
    """Exchange number ``i``: an HTML page of about ``2 * size`` bytes that compresses to
    about ``size`` (hex of random bytes), so file sizes are predictable for rotation."""
    url = f"http://{host}/page/{i}.html"
    outlinks = tuple(f"http://{host}/page/{i}/{j}.html" for j in range(links))
    filler = random.Random(i).randbytes(size).hex()
    payload = f"<html><body><h1>Page {i}</h1><p>{filler}</p></body></html>".encode()
    return Exchange(
        url=url,
        request_head=(
            f"GET /page/{i}.html HTTP/1.1\r\nHost: {host}\r\nUser-Agent: Thresher-test\r\n"
            "Accept-Encoding: gzip\r\n\r\n"
        ).encode(),
        response_head=(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode(),
        payload=payload,
        ip="127.0.0.1",
        # Microseconds that a float holds exactly enough to format the same every time.
        fetched_at=BASE_TIME + i * 1.5 + 0.25,
        outlinks=outlinks,
    )


def gzip_encoded(ex: Exchange) -> Exchange:
    """``ex`` as sent with Content-Encoding: gzip: stored as transferred, still compressed."""
    body = gzip.compress(ex.payload, mtime=0)
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return replace(ex, response_head=head, payload=body)


def not_modified(ex: Exchange, i: int) -> Exchange:
    """A later conditional GET of ``ex``'s URL, number ``i``, answered 304 Not Modified."""
    later = make_exchange(i)
    etag = '"v1"'
    return replace(
        ex,
        request_head=ex.request_head.replace(
            b"\r\n\r\n", f"\r\nIf-None-Match: {etag}\r\n\r\n".encode()
        ),
        response_head=(
            f"HTTP/1.1 304 Not Modified\r\nETag: {etag}\r\nDate: Wed, 01 May 2024 12:00:00 GMT\r\n"
            "Cache-Control: max-age=60\r\n\r\n"
        ).encode(),
        payload=b"",
        fetched_at=later.fetched_at,
        outlinks=(),
    )


def capture_of(ex: Exchange, written: WrittenRecord | None = None) -> Capture:
    """``ex`` as a revisit names it: with its record id and digest if ``written`` says."""
    if written is None:
        return Capture(ex.url, warc_date(ex.fetched_at))
    return Capture(ex.url, written.date, written.record_id, written.payload_digest)


def write(writer: WarcWriter, ex: Exchange, **overrides: object) -> WrittenRecord:
    kwargs: dict[str, object] = {
        "url": ex.url,
        "request_head": ex.request_head,
        "response_head": ex.response_head,
        "payload": ex.payload,
        "ip": ex.ip,
        "fetched_at": ex.fetched_at,
        "outlinks": ex.outlinks,
    }
    kwargs.update(overrides)
    return writer.write_exchange(**kwargs)  # type: ignore[arg-type]


def warc_date(t: float) -> str:
    """WARC-Date of unix time ``t``, computed independently of the writer."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Record:
    type: str
    headers: list[tuple[str, str]]
    block: bytes  # the record block exactly as stored
    offset: int  # of its gzip member
    length: int  # of its gzip member

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        assert len(values) <= 1, f"{name} appears {len(values)} times"
        return values[0] if values else None


def read_records(path: Path) -> list[Record]:
    """Every record of a WARC file, read with warcio without interpreting the blocks."""
    out: list[Record] = []
    with open(path, "rb") as f:
        it = ArchiveIterator(f, no_record_parse=True)
        for rec in it:
            block = rec.raw_stream.read()
            it.read_to_end(rec)
            out.append(
                Record(
                    type=rec.rec_type,
                    headers=[(str(k), str(v)) for k, v in rec.rec_headers.headers],
                    block=block,
                    offset=it.get_record_offset(),
                    length=it.get_record_length(),
                )
            )
    return out


def responses(directory: Path) -> list[tuple[str, Record]]:
    """(file name, record) of every response and revisit record in the directory."""
    return [
        (path.name, rec)
        for path in sorted(directory.glob("*.warc.gz"))
        for rec in read_records(path)
        if rec.type in ("response", "revisit")
    ]
