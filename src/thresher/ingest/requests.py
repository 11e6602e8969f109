"""Ingest requests: read from JSON Lines or TSV dumps, validated line by line, loaded in
batches into `ingest_requests`.

Why this shape. The dumps come from elsewhere (Unpaywall, CORE, a DOI registry's
export, a script's output), run to millions of lines, arrive gzipped, and are loaded
again whenever a new dump appears. So:

- The file is streamed: one chunk and one batch of requests in memory, whatever the
  file's size. Deduplication is the store's unique key, not a set in memory.
- A bad line never stops the load. It becomes a `Rejected` with its line number and
  the reason, counted and reported (the first `MAX_REJECTS` kept), because a dump with
  a few broken lines is normal and the other million lines should still go in.
- Loading is idempotent: a request is unique by (ingest_type, base_url, link_source,
  link_source_id) and every batch is one ``INSERT … ON CONFLICT DO NOTHING`` in its own
  transaction, so loading a file twice, or again after a crash or Ctrl-C half-way,
  adds exactly what is missing. New rows are the statement's row count, which both
  SQLite and PostgreSQL give for inserted rows only; every accepted line that is not
  new is a duplicate (of the store, or of an earlier line of the same file).
- A damaged file (a gzip stream cut short, corrupt compressed data, a read error) ends
  the load with what was read before it loaded and reported, and a `DamagedInput`
  error saying where: the lines before the damage are as good as any.

The formats, and what makes a line a request, are in `thresher.ingest.request_line`.
"""

from __future__ import annotations

import gzip
import io
import math
import os
import re
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from ..errors import ThresherError
from ..store import Store
from .request_line import (
    JSON_ENCODER,
    IngestRequest,
    Parsed,
    Rejected,
    TsvHeader,
    UnreadableInput,
    as_request,
    check_source,
    parse_raw,
    parse_tsv_header,
)

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_REJECTS",
    "DamagedInput",
    "LoadReport",
    "check_file",
    "load_requests",
    "read_requests",
]

# A longer line is rejected without being held in memory whole: a file that is not text
# at all (no newline for megabytes) must not make the load grow without bound.
MAX_LINE_BYTES = 1 << 20
MAX_REJECTS = 1000
DEFAULT_BATCH = 5000

_CHUNK = 1 << 20
# Blank lines: only these bytes. A run of them (ending with a newline) is skipped at once.
_BLANK = b" \t\r"
_BLANK_BYTES = frozenset(b" \t\r\n")
_BLANK_RUN = re.compile(rb"[ \t\r\n]*\n")
_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"
# Compressions we do not read, recognised only to say so instead of "not an ingest file".
_OTHER_MAGIC = {
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"PK\x03\x04": "zip",
}


class DamagedInput(ThresherError):
    """The file ends early or is corrupt part-way: the lines before were loaded.

    `report` is the load's report up to the damage (None when raised by
    `read_requests`, which reports nothing)."""

    exit_code = 1

    def __init__(self, message: str, report: LoadReport | None = None) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class LoadReport:
    """What a load did. `rejects` keeps the first `MAX_REJECTS` rejected lines;
    `rejected` counts them all. `error` is set when the file was damaged part-way."""

    new: int = 0
    duplicate: int = 0
    rejected: int = 0
    rejects: list[Rejected] = field(default_factory=list)
    format: str | None = None  # "jsonl" or "tsv"; None for a file with no data line
    error: str | None = None

    @property
    def lines(self) -> int:
        """Request lines read: new + duplicate + rejected (blank lines and a header not)."""
        return self.new + self.duplicate + self.rejected

    def summary(self) -> str:
        return f"new {self.new}, duplicate {self.duplicate}, rejected {self.rejected}"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "new": self.new,
            "duplicate": self.duplicate,
            "rejected": self.rejected,
            "rejects": [{"line": r.line_number, "reason": r.reason} for r in self.rejects],
            "error": self.error,
        }


# --- a file -----------------------------------------------------------------------------


def check_file(path: str | os.PathLike[str]) -> None:
    """`UnreadableInput` unless `path` can be opened for reading as a file."""
    with _open(Path(path)):
        pass


def _open(path: Path) -> io.BufferedReader:
    try:
        if path.is_dir():
            raise UnreadableInput(f"{path} is a folder, not a file")
        return open(path, "rb")
    except OSError as exc:
        raise UnreadableInput(f"cannot read {path}: {exc.strerror or exc}") from None


class _Lines:
    """The numbered lines of an open file, gunzipped when it starts with gzip's magic.

    Yields (line number, bytes without the newline), or (number, None) for a line longer
    than MAX_LINE_BYTES, which is skipped without being kept. `position` is how far into
    the file on disk (compressed bytes for gzip) the reading is, for a progress bar."""

    def __init__(self, path: Path, raw: io.BufferedReader) -> None:
        self.path = path
        self._raw = raw
        try:
            head = raw.read(8)
            raw.seek(0)
        except OSError as exc:
            raise UnreadableInput(f"cannot read {path}: {exc.strerror or exc}") from None
        for magic, name in _OTHER_MAGIC.items():
            if head.startswith(magic):
                raise UnreadableInput(
                    f"{path} is {name}-compressed: only gzip is read as is; decompress it first"
                )
        self.gzip = head.startswith(_GZIP_MAGIC)
        # read1, not read: a read of many raw blocks that meets the damage loses all
        # it had decompressed; read1 returns what one block gave before the next fails.
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if self.gzip else raw
        self._read_chunk: Callable[[int], bytes] = stream.read1
        self.line_number = 0

    @property
    def position(self) -> int:
        return self._raw.tell()

    def _read(self) -> bytes:
        try:
            return self._read_chunk(_CHUNK)
        except EOFError:
            what = "compressed data ends early (the file is truncated)"
        except gzip.BadGzipFile as exc:
            what = f"corrupt gzip data ({exc})"
        except zlib.error as exc:
            what = f"corrupt gzip data ({exc})"
        except OSError as exc:
            what = f"read error ({exc.strerror or exc})"
        last = f"after line {self.line_number}" if self.line_number else "before the first line"
        raise DamagedInput(
            f"{self.path}: {what} at byte {self.position}, {last}; the lines before it were read"
        )

    def __iter__(self) -> Iterator[tuple[int, bytes | None]]:
        """Numbered lines; blank ones (only spaces, tabs and CRs) are counted but not
        yielded, a run of them at C speed: a 1 MB gzip of 1 GiB of newlines took 589 s
        when every one went through Python."""
        rest = b""  # the start of a line that goes on in the next chunk
        overlong = False  # that line is already longer than MAX_LINE_BYTES
        while chunk := self._read():
            pos, end = 0, len(chunk)
            if rest or overlong:
                nl = chunk.find(b"\n")
                if nl < 0:
                    if not overlong:
                        rest += chunk
                        if len(rest) > MAX_LINE_BYTES:
                            overlong, rest = True, b""
                    continue
                self.line_number += 1
                line = None if overlong else rest + chunk[:nl]
                if line is not None and len(line) > MAX_LINE_BYTES:
                    line = None
                rest, overlong, pos = b"", False, nl + 1
                if line is None or line.strip(_BLANK):
                    yield self.line_number, line
            while pos < end:
                if chunk[pos] in _BLANK_BYTES:
                    blanks = _BLANK_RUN.match(chunk, pos)
                    if blanks is not None:
                        self.line_number += chunk.count(b"\n", pos, blanks.end())
                        pos = blanks.end()
                        continue
                nl = chunk.find(b"\n", pos)
                if nl < 0:
                    rest = chunk[pos:]
                    if len(rest) > MAX_LINE_BYTES:
                        overlong, rest = True, b""
                    break
                self.line_number += 1
                line = chunk[pos:nl]
                pos = nl + 1
                yield self.line_number, (line if len(line) <= MAX_LINE_BYTES else None)
        if overlong or rest.strip(_BLANK):
            self.line_number += 1
            yield self.line_number, None if overlong else rest


class _Parser:
    """Lines to requests: tells the format from the first non-blank line."""

    def __init__(self, lines: _Lines, source: str | None) -> None:
        if source is not None:
            check_source(source)
        self.lines = lines
        self.source = source
        self.format: str | None = None
        self._header: TsvHeader | None = None

    def __iter__(self) -> Iterator[Parsed | Rejected]:
        source, first = self.source, True
        for n, line in self.lines:
            if line is None:
                yield Rejected(n, f"line longer than {MAX_LINE_BYTES} bytes")
                continue
            if first:
                line, first = line.removeprefix(_BOM), False
            if line.endswith(b"\r"):
                line = line[:-1]
            if self.format is None:
                if not line.strip():
                    continue
                if line.lstrip().startswith(b"{"):
                    self.format = "jsonl"
                else:
                    try:
                        text = line.decode("utf-8")
                    except UnicodeDecodeError:
                        raise UnreadableInput(
                            f"{self.lines.path}: line {n} is not UTF-8, nor a TSV header"
                        ) from None
                    try:
                        self._header = parse_tsv_header(text, source)
                    except UnreadableInput as exc:
                        raise UnreadableInput(f"{self.lines.path}: {exc}") from None
                    self.format = "tsv"
                    continue
            if self._header is None:
                if not line.strip():
                    continue
            elif not line:
                continue
            yield parse_raw(line, n, self._header, source)


def read_requests(
    path: str | os.PathLike[str], source: str | None = None
) -> Iterator[IngestRequest | Rejected]:
    """Each request line of the file, in order, as a request or a `Rejected`.

    Streams: memory stays flat whatever the file's size. Raises `UnreadableInput` when
    the file cannot be opened or is neither JSON Lines nor TSV (before yielding
    anything), and `DamagedInput` when it turns out damaged part-way (after yielding
    every line before the damage)."""
    with _open(Path(path)) as raw:
        for parsed in _Parser(_Lines(Path(path), raw), source):
            yield as_request(parsed)


# --- into the store ---------------------------------------------------------------------


_KEY = itemgetter("ingest_type", "base_url", "link_source", "link_source_id")


def _insert(store: Store, rows: list[dict[str, Any]], now: float) -> int:
    """One batch, one transaction, one statement; the number of rows it added.

    The rows go in sorted by key (a stable sort: of two lines with one key, the first
    in the file is the one stored). Two loads at once of dumps that share requests
    then take the key locks in the same order; in file order, PostgreSQL could find
    each transaction waiting for the other and abort one as a deadlock."""
    rows.sort(key=_KEY)
    payload = JSON_ENCODER.encode(rows)
    with store.transaction() as tx:
        return tx.execute("insert_ingest_requests", rows=payload, now=now)


def load_requests(
    store: Store,
    path: str | os.PathLike[str],
    source: str | None = None,
    now: float | None = None,
    batch: int = DEFAULT_BATCH,
    progress: Callable[[int, LoadReport], None] | None = None,
) -> LoadReport:
    """Load the requests of the file into the store; what happened, line by line counted.

    Each `batch` of accepted requests is inserted in one transaction, so an interrupted
    load keeps whole batches and loading the file again completes it. `progress`, when
    given, is called every `batch` lines and at the end with the bytes of the file read
    so far (of the file on disk: compressed bytes for gzip) and the report so far.
    `now` (default: the time now) is the rows' `created`.

    Raises `UnreadableInput` (nothing loaded) or `DamagedInput` (what came before the
    damage loaded; the exception's `report` says how much)."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    created = time.time() if now is None else now
    if not math.isfinite(created):
        raise ValueError("now must be a finite time")
    report = LoadReport()
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        if pending:
            added = _insert(store, pending, created)
            report.new += added
            report.duplicate += len(pending) - added
            pending.clear()

    file = Path(path)
    with _open(file) as raw:
        lines = _Lines(file, raw)
        parser = _Parser(lines, source)
        try:
            for seen, item in enumerate(parser, 1):
                if isinstance(item, Rejected):
                    report.rejected += 1
                    if len(report.rejects) < MAX_REJECTS:
                        report.rejects.append(item)
                else:
                    pending.append(item[0])
                    if len(pending) >= batch:
                        flush()
                if progress is not None and seen % batch == 0:
                    report.format = parser.format
                    progress(lines.position, report)
        except DamagedInput as exc:
            flush()
            report.format = parser.format
            report.error = str(exc)
            raise DamagedInput(str(exc), report) from None
        flush()
        report.format = parser.format
        if progress is not None:
            progress(lines.position, report)
    return report
