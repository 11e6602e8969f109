"""Bodies an ingest fetched, kept once each by SHA-1: a WARC record and a `file_meta` row.

Each ingest engine (`thresher.ingest.engine`: one shard of a run, in some process) appends
to WARC files of its own **slot** (a file prefix, ``ingest-1``, ``ingest-2`` …, in the
`warc_slots` table), and keeps its bodies in its own batch commits: `IngestArchive.commit`,
inside the batch's transaction, inserts the bodies' `file_meta` rows, writes the records of
the new ones, fsyncs once, records where each record is, and moves the slot's committed
position past them.

Why this is exactly once, across `kill -9`:

- A body's `file_meta` row is inserted (``ON CONFLICT DO NOTHING … RETURNING``) before its
  record is written, in the same transaction: a body some other commit already holds (or
  is holding: the unique key makes the second insert wait for the first to commit) is
  not written again. So one record per SHA-1, however many requests lead to it.
- The slot row is checked and updated in that transaction too, so an engine whose slot
  was taken over (its process stalled past its lease) writes nothing more to its file.
- Records written by a commit that never committed lie past the slot's position. Whoever
  opens the slot next — this engine after a failed commit, another after a crash —
  resumes the `WarcWriter` from that position, which cuts them off.

The work that needs no file is done before the commit, by whoever fetched the body: the
body's digests (`digest`: three for `file_meta`, and the record's block digest), on a
thread beside the event loop, as hashing lets go of the GIL; then its records, built
and compressed (`record`). Bodies
that are compressed already (PDFs, images, archives, a content-encoded transfer) go in
gzip members of stored blocks (``stored``): compressing incompressible bytes was most
of a PDF's archiving cost, for nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import queue
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..errors import TransientError
from ..fetch import Response
from ..store import Row, Tx
from ..store.warc import WarcPosition, WarcWriter
from ..store.warcrecord import PreparedExchange, prepare_exchange, sha1_digest

__all__ = [
    "Digests",
    "Hasher",
    "IngestArchive",
    "Kept",
    "SlotLost",
    "digest",
    "engine_owner",
]

log = logging.getLogger("thresher.ingest")

# Sniffed types whose bytes are compressed already: their records are stored, not deflated.
_COMPRESSED = frozenset(
    {"application/pdf", "application/zip", "application/gzip", "image/png", "image/jpeg",
     "image/gif"}
)  # fmt: skip

# Slots in use by an engine of this process, by (directory, slot name): two engines of
# one process (two shards in one worker) share its owner id, not a slot. Engines in
# processes of their own (the shards of a run of several) cannot see each other's: they
# own their slots as `engine_owner(worker, shard)`.
_IN_USE: set[tuple[Path, str]] = set()


# New slot names tried in turn, when others are making theirs at the same moment.
NEW_SLOT_TRIES = 16


def engine_owner(worker: str, shard: int) -> str:
    """The owner of the slot of a worker's engine for `shard`, when engines of one worker
    run in processes of their own: its own, and still alive or dead with its worker."""
    return f"{worker}#{shard}"


class SlotLost(TransientError):
    """Another process took this engine's WARC slot (it stalled past its lease): the
    shard is tried again, and takes another slot."""


@dataclass(frozen=True, slots=True)
class Kept:
    """A body to keep: its digests, its sniffed type and its records, ready to write."""

    sha1: str
    sha256: str
    md5: str
    size: int
    mimetype: str | None
    record: PreparedExchange

    @property
    def nbytes(self) -> int:
        """What its records hold in memory until they are written."""
        r = self.record
        return len(r.request) + len(r.response) + len(r.metadata)


@dataclass(frozen=True, slots=True)
class Digests:
    """What hashing a body gives: every digest of its decoded bytes that `file_meta`
    keeps, and those of its WARC record (raw SHA-1s, 20 bytes each)."""

    sha1: bytes
    sha256: bytes
    md5: bytes
    block: bytes  # of the response record's block: the HTTP head and the payload
    payload: bytes | None  # of the bytes as transferred, when they are content-encoded
    head: bytes  # the HTTP head the block digest covers


def digest(response: Response) -> Digests:
    """Hash a response's body: C calls that let go of the GIL for all but a few
    microseconds, so a thread of its own does this beside the event loop."""
    content, body = response.content, response.body
    head = response.http_head()
    block = hashlib.sha1(head)
    block.update(body)
    plain = body is content or body == content
    return Digests(
        hashlib.sha1(content).digest(),
        hashlib.sha256(content).digest(),
        hashlib.md5(content).digest(),
        block.digest(),
        None if plain else hashlib.sha1(body).digest(),
        head,
    )


class Hasher:
    """A thread that keeps bodies (`IngestArchive.keep`: their digests and their WARC
    records, C calls that let go of the GIL for all but a few microseconds) beside the
    event loop, handing the results back in batches: one wake-up of the loop for all the
    results ready by then. An executor's future per call cost the loop about as much as
    hashing a page itself."""

    def __init__(self, loop: asyncio.AbstractEventLoop, archive: IngestArchive) -> None:
        self._loop = loop
        self._archive = archive
        self._in: queue.SimpleQueue[tuple[Response, str | None, asyncio.Future[Kept]] | None] = (
            queue.SimpleQueue()
        )
        self._out: list[tuple[asyncio.Future[Kept], Kept | Exception]] = []
        self._lock = threading.Lock()
        self._waking = False
        self._thread = threading.Thread(target=self._run, name="thresher-hash", daemon=True)
        self._thread.start()

    def keep(self, response: Response, mimetype: str | None) -> asyncio.Future[Kept]:
        """`response`'s body digested and its records built, to come (once the archive
        is open)."""
        done: asyncio.Future[Kept] = self._loop.create_future()
        self._in.put((response, mimetype, done))
        return done

    def close(self) -> None:
        self._in.put(None)

    def _run(self) -> None:
        while (item := self._in.get()) is not None:
            response, mimetype, done = item
            result: Kept | Exception
            try:
                result = self._archive.keep(response, mimetype)
            except Exception as exc:  # a bug: the walk that asked gets it
                result = exc
            with self._lock:
                self._out.append((done, result))
                wake, self._waking = not self._waking, True
            if wake:
                try:
                    self._loop.call_soon_threadsafe(self._deliver)
                except RuntimeError:  # the loop is closed: nobody waits any more
                    return

    def _deliver(self) -> None:
        with self._lock:
            out, self._out = self._out, []
            self._waking = False
        for done, result in out:
            if done.done():  # its walk was cancelled
                continue
            if isinstance(result, Exception):
                done.set_exception(result)
            else:
                done.set_result(result)


class IngestArchive:
    """One engine's WARC slot. `open` it, `keep` bodies from any thread, and `commit` them
    in the engine's transactions, which run one at a time on the store's thread."""

    def __init__(
        self,
        directory: Path,
        owner: str,
        clock: Clock,
        *,
        group: str = "ingest",
        lease_seconds: float = 60.0,
        is_dead: Callable[[Row], bool] = lambda worker: False,
        max_size: int = 1_000_000_000,
    ) -> None:
        self.directory = directory
        self.owner = owner
        self.clock = clock
        self.group = group
        self.lease_seconds = lease_seconds
        self.is_dead = is_dead
        self.max_size = max_size
        self.slot: str | None = None
        self._writer: WarcWriter | None = None
        # Records are built with a writer's compressor, which no file or state of it
        # touches: the first writer's, whichever writer is open now.
        self._compress: Callable[[bytes], bytes] | None = None
        self.commits = 0
        self.written = 0  # records written (bodies new to the store)

    # --- any thread, then the loop's -------------------------------------------------------

    def keep(self, response: Response, mimetype: str | None) -> Kept:
        """Digest the decoded body of `response` and build its records (once `open`)."""
        return self.record(response, mimetype, digest(response))

    def record(self, response: Response, mimetype: str | None, digests: Digests) -> Kept:
        """The body's records, built from its `digests` (`digest`, on any thread)."""
        compress = self._compress
        assert compress is not None, "open() the archive first"
        plain = digests.payload is None
        record = prepare_exchange(
            compress,
            url=response.url,
            request_head=response.request_head,
            response_head=digests.head,
            payload=response.body,
            ip=response.ip,
            fetched_at=response.started,
            # The payload digest is of the bytes as transferred: the body's own SHA-1,
            # unless they were content-encoded.
            payload_digest=sha1_digest(digests.payload or digests.sha1),
            stored=not plain or mimetype in _COMPRESSED,
            block_digest=sha1_digest(digests.block),
        )
        return Kept(
            digests.sha1.hex(),
            digests.sha256.hex(),
            digests.md5.hex(),
            len(response.content),
            mimetype,
            record,
        )

    # --- the store's thread, in a transaction ---------------------------------------------

    def open_in(self, tx: Tx) -> None:
        """Take a slot (ours, a dead owner's, a free one or a new one) and open its writer
        where its last commit left it, committing that position in `tx`."""
        now = self.clock.now()
        slot = self._claim(now, tx)
        name = str(slot["name"])
        resume = WarcPosition(slot["filename"], int(slot["position"])) if slot["filename"] else None
        writer = WarcWriter(
            self.directory,
            name,
            max_size=self.max_size,
            resume=resume,
            info={"operator": "thresher ingest"},
        )
        if writer.discarded:
            log.info("WARC slot %s: discarded uncommitted %s", name, writer.discarded)
        try:
            self._set_position(tx, name, writer.sync(), now)
        except BaseException:
            writer.abort()
            raise
        if self.slot is not None and self.slot != name:
            _IN_USE.discard((self.directory, self.slot))
        self.slot = name
        _IN_USE.add((self.directory, name))
        self._writer = writer
        self._compress = self._compress or writer.compress

    def commit(self, tx: Tx, bodies: Iterable[Kept], now: float) -> int:
        """Keep each of `bodies` the store does not hold yet: its `file_meta` row, its
        record, and the slot's position past it, in `tx`; how many were new. After an
        exception the transaction must be rolled back (the records are cut off when the
        slot is opened again, by the next commit)."""
        if self._writer is None:
            self.open_in(tx)
        writer = self._writer
        assert writer is not None and self.slot is not None
        try:
            # First: the slot is still ours. Taking its row lock (PostgreSQL) also keeps
            # a process taking it over from cutting the file while we write.
            if not tx.execute("touch_warc_slot", name=self.slot, owner=self.owner, now=now):
                raise SlotLost(f"WARC slot {self.slot} was taken over by another worker")
            unique = {b.sha1: b for b in bodies}
            if not unique:
                return 0
            rows = [
                [b.sha1, b.sha256, b.md5, b.size, b.mimetype]
                for b in sorted(unique.values(), key=lambda b: b.sha1)  # one lock order
            ]
            new = sorted(
                str(r["sha1"]) for r in tx.all("insert_files_meta", rows=_json(rows), now=now)
            )
            located = []
            for sha1 in new:
                record = writer.append(unique[sha1].record)
                located.append([sha1, record.filename, record.offset])
            if located:
                tx.execute("locate_files_meta", rows=_json(located))
                self._set_position(tx, self.slot, writer.sync(), now)
        except BaseException:
            # Written but not committed: the next commit reopens the slot, which cuts it.
            self._writer = None
            writer.abort()
            raise
        self.commits += 1
        self.written += len(located)
        return len(located)

    def close_in(self, tx: Tx) -> None:
        """Finish the open file (and its index) and hand the slot back."""
        writer, self._writer = self._writer, None
        slot = self.slot
        if slot is not None:
            _IN_USE.discard((self.directory, slot))
        if writer is None:
            return
        try:
            writer.close()
        except Exception as exc:
            # The slot keeps its position: whoever takes it next resumes from there.
            log.error("closing WARC slot %s failed: %s", slot, exc)
            writer.abort()
            return
        tx.execute("release_warc_slot", name=slot, owner=self.owner, now=self.clock.now())

    def abandon(self) -> None:
        """Leave the slot as its last commit left it (an engine that stops on an error):
        whoever opens it next, this process or another, resumes from there."""
        writer, self._writer = self._writer, None
        if self.slot is not None:
            _IN_USE.discard((self.directory, self.slot))
        if writer is not None:
            writer.abort()

    # --- the slot -------------------------------------------------------------------------

    def _set_position(self, tx: Tx, slot: str, position: WarcPosition, now: float) -> None:
        if not tx.execute(
            "set_warc_slot",
            name=slot,
            owner=self.owner,
            filename=position.filename,
            position=position.offset,
            now=now,
        ):
            raise SlotLost(f"WARC slot {slot} was taken over by another worker")

    def _claim(self, now: float, tx: Tx) -> Row:
        pattern = re.compile(re.escape(self.group) + r"-(\d+)")
        slots: dict[int, Row] = {}
        for s in tx.all("warc_slots_with_owners", prefix=self.group + "-%"):
            if m := pattern.fullmatch(s["name"]):
                slots[int(m[1])] = s
        mine = [s for s in slots.values() if s["owner"] == self.owner]
        for slot in mine:
            if slot["name"] == self.slot or (self.directory, slot["name"]) not in _IN_USE:
                return slot
        stale = now - self.lease_seconds
        for _, slot in sorted(slots.items()):
            if _free(slot, stale, self.is_dead) and tx.execute(
                "claim_warc_slot", name=slot["name"], owner=self.owner, old=slot["owner"], now=now
            ):
                return {**slot, "owner": self.owner}
        # A new one. Engines starting together (a run's shards) make new slots at once:
        # the one that finds its name taken tries the next.
        first = max(slots, default=0) + 1
        for number in range(first, first + NEW_SLOT_TRIES):
            name = f"{self.group}-{number}"
            row = tx.one("insert_warc_slot", name=name, owner=self.owner, now=now)
            if row is not None:
                return row
        raise SlotLost(f"WARC slot {name} was made by another worker at once; try again")


def _free(slot: Row, stale: float, is_dead: Callable[[Row], bool]) -> bool:
    if slot["owner"] is None or slot["hostname"] is None or slot["stopped"] is not None:
        return True
    if float(slot["heartbeat"]) < stale:
        return True
    worker: dict[str, Any] = {
        "hostname": slot["hostname"],
        "pid": slot["pid"],
        "boot_id": slot["boot_id"],
    }
    return is_dead(worker)


def _json(rows: list[list[Any]]) -> str:
    return json.dumps(rows, separators=(",", ":"))
