"""WARC output for the crawler: every fetched URL in the WARC files exactly once, even across
``kill -9``.

Per fetched URL the writer appends the records `thresher.store.warcrecord` builds
(``request``, ``response`` or ``revisit``, ``metadata``), in one write. Each file starts
with a ``warcinfo`` record, and a new file is started once the current one holds
``max_size`` bytes (an exchange is never split across files, so a file may exceed
``max_size`` by one exchange). The file has a 1 MiB buffer: writer CPU counts (see
`thresher.store.warcrecord`).

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

The writer is not thread-safe: call it from one thread at a time.
"""

from __future__ import annotations

import io
import os
import re
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO, Literal, TextIO

from ..errors import StoreError
from .cdxj import (
    RecordInfo,
    cdxj_line,
    cdxj_path,
    fsync_directory,
    iter_records,
    record_line,
    write_index,
    write_lines_sorted,
)
from .gzmember import compressor
from .warcrecord import (
    Capture,
    PreparedExchange,
    prepare_exchange,
    warcinfo_fields,
    warcinfo_record,
)

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["WarcError", "WarcPosition", "WarcWriter", "WrittenRecord"]

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
        self._info = warcinfo_fields(software, info)
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
        (see `thresher.store.warcrecord.http_head`); ``payload`` is the body as transferred
        (still content-encoded, not chunked). ``revisit_of`` is an earlier capture with the
        same payload digest: an identical-payload-digest revisit is written, the payload
        left out. ``not_modified_of`` is the capture a 304 answer confirms (``payload`` must
        be empty): a server-not-modified revisit is written, the 304's head going to the
        metadata record (see `thresher.store.warcrecord`). ``payload_digest`` saves hashing
        the payload again if the caller has it. Nothing is durable before the next `sync`.
        """
        self._check_usable()
        return self.append(
            prepare_exchange(
                self._compress,
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

    @property
    def compress(self) -> Callable[[bytes], bytes]:
        """How this writer makes a record's gzip member: what
        `thresher.store.warcrecord.prepare_exchange` takes to build records for `append`,
        on any thread (it touches no file)."""
        return self._compress

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
        self._write(warcinfo_record(self._compress, self._name, self._info, now))

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
