"""Bodies that ingest jobs fetched, kept once each by SHA-1: a WARC record and a `file_meta` row.

Many `ingest.fetch` jobs run at once in a process, and many processes may run them. Each
process appends to WARC files of its own **slot** (a file prefix, ``ingest-1``,
``ingest-2`` …, in the `warc_slots` table), and keeps bodies in **group commits**: the
bodies that jobs hand over while a commit is under way wait for the next one, which
writes them all, fsyncs once, and in one transaction inserts their `file_meta` rows,
records where each record is, and moves the slot's committed position past them.

Why this is exactly once, across `kill -9`:

- A body's `file_meta` row is inserted (``ON CONFLICT DO NOTHING … RETURNING``) before its
  record is written, in the same transaction: a body some other commit already holds (or
  is holding: the unique key makes the second insert wait for the first to commit) is
  not written again. So one record per SHA-1, however many requests lead to it.
- The slot row is checked and updated in that transaction too, so a process whose slot
  was taken over (it stalled past its lease) writes nothing more to its file.
- Records written by a commit that never committed lie past the slot's position. Whoever
  opens the slot next — this process after a failed commit, another after a crash —
  resumes the `WarcWriter` from that position, which cuts them off.

The ingest result itself is committed later, with its job: a crash in between leaves
the body stored and the job to be done again, which then finds the body's row and
writes nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..errors import TransientError
from ..fetch import Response
from ..store import Row, Tx
from ..store.aio import AsyncStore
from ..store.warc import PreparedExchange, WarcPosition, WarcWriter

__all__ = ["Archiver", "Kept", "SlotLost", "kept"]

log = logging.getLogger("thresher.ingest")


class SlotLost(TransientError):
    """Another process took this process's WARC slot (we stalled past our lease): the
    job is tried again, and this process takes another slot."""


@dataclass(frozen=True, slots=True)
class Kept:
    """A body to keep, with its digests and the exchange that brought it."""

    sha1: str
    sha256: str
    md5: str
    size: int
    mimetype: str | None
    response: Response


def kept(response: Response, mimetype: str | None) -> Kept:
    """A `Kept` for the decoded body of `response`."""
    body = response.content
    return Kept(
        hashlib.sha1(body).hexdigest(),
        hashlib.sha256(body).hexdigest(),
        hashlib.md5(body).hexdigest(),
        len(body),
        mimetype,
        response,
    )


class Archiver:
    """One per process and WARC directory: `keep` returns once the bodies are durable."""

    def __init__(
        self,
        directory: Path,
        store: AsyncStore,
        owner: str,
        clock: Clock,
        *,
        group: str = "ingest",
        lease_seconds: float = 60.0,
        is_dead: Callable[[Row], bool] = lambda worker: False,
        max_size: int = 1_000_000_000,
    ) -> None:
        self.directory = directory
        self.store = store
        self.owner = owner
        self.clock = clock
        self.group = group
        self.lease_seconds = lease_seconds
        self.is_dead = is_dead
        self.max_size = max_size
        self.slot: str | None = None
        self._writer: WarcWriter | None = None
        self._waiting: list[tuple[Sequence[Kept], asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        self.commits = 0  # group commits made: bodies kept per commit = kept / commits
        self.written = 0

    async def keep(self, bodies: Sequence[Kept]) -> None:
        """Store each body not stored yet; return when they are committed."""
        if self._closed:
            raise RuntimeError("the archiver is closed")
        if not bodies:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((bodies, done))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_all(), name="thresher-archiver")
        # Shielded: a cancelled job must not cancel the commit of the others' bodies.
        await asyncio.shield(done)

    async def aclose(self) -> None:
        """Finish the open file (and its index) and hand the slot back."""
        self._closed = True
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            await asyncio.to_thread(writer.close)
        except Exception as exc:
            # The slot keeps its position: whoever takes it next resumes from there.
            log.error("closing WARC slot %s failed: %s", self.slot, exc)
            writer.abort()
            return
        now = self.clock.now()
        await self.store.run(
            lambda tx: tx.execute("release_warc_slot", name=self.slot, owner=self.owner, now=now)
        )

    # --- group commit ---------------------------------------------------------------------

    async def _flush_all(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                if self._writer is None:
                    await self._open()
                unique = {body.sha1: body for bodies, _ in batch for body in bodies}
                # Compressing is most of the work: done here, beside the store's thread,
                # which only writes the new ones and commits.
                prepared = await asyncio.to_thread(self._prepare, list(unique.values()))
                await self.store.run(partial(self._commit, unique, prepared, self.clock.now()))
            except BaseException as exc:
                if self._writer is not None:
                    # Written but not committed: resume from the committed position.
                    self._writer.abort()
                    self._writer = None
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
            else:
                self.commits += 1
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)

    def _prepare(self, bodies: list[Kept]) -> dict[str, PreparedExchange]:
        writer = self._writer
        assert writer is not None
        out = {}
        for body in bodies:
            resp = body.response
            out[body.sha1] = writer.prepare_exchange(
                url=resp.url,
                request_head=resp.request_head,
                response_head=resp.http_head(),
                payload=resp.body,
                ip=resp.ip,
                fetched_at=resp.started,
            )
        return out

    def _commit(
        self,
        unique: dict[str, Kept],
        prepared: dict[str, PreparedExchange],
        now: float,
        tx: Tx,
    ) -> None:
        writer = self._writer
        assert writer is not None
        # First: the slot is still ours. Taking its row lock (PostgreSQL) also keeps a
        # process taking it over from cutting the file while we write.
        if not tx.execute("touch_warc_slot", name=self.slot, owner=self.owner, now=now):
            raise SlotLost(f"WARC slot {self.slot} was taken over by another worker")
        rows = [
            {
                "sha1": b.sha1,
                "sha256": b.sha256,
                "md5": b.md5,
                "size": b.size,
                "mimetype": b.mimetype,
            }
            for b in sorted(unique.values(), key=lambda b: b.sha1)  # one lock order
        ]
        new = tx.all("insert_file_meta", rows=json.dumps(rows), now=now)
        located = []
        for row in sorted(new, key=lambda r: str(r["sha1"])):
            record = writer.append(prepared[row["sha1"]])
            located.append(
                {"sha1": row["sha1"], "warc_file": record.filename, "warc_offset": record.offset}
            )
        if not located:
            return
        position = writer.sync()
        tx.execute_many("locate_file_meta", located)
        self._set_position(tx, position, now)
        self.written += len(located)

    # --- the slot -------------------------------------------------------------------------

    async def _open(self) -> None:
        """Take a slot (ours, a dead owner's, a free one or a new one) and open its writer
        where its last commit left it."""
        now = self.clock.now()
        slot = await self.store.run(partial(self._claim, now))
        self.slot = str(slot["name"])
        resume = WarcPosition(slot["filename"], int(slot["position"])) if slot["filename"] else None
        writer = await asyncio.to_thread(
            WarcWriter,
            self.directory,
            self.slot,
            max_size=self.max_size,
            resume=resume,
            info={"operator": "thresher ingest"},
        )
        if writer.discarded:
            log.info("WARC slot %s: discarded uncommitted %s", self.slot, writer.discarded)
        try:
            position = await asyncio.to_thread(writer.sync)
            await self.store.run(partial(self._set_position, position=position, now=now))
        except BaseException:
            writer.abort()
            raise
        self._writer = writer

    def _set_position(self, tx: Tx, position: WarcPosition, now: float) -> None:
        if not tx.execute(
            "set_warc_slot",
            name=self.slot,
            owner=self.owner,
            filename=position.filename,
            position=position.offset,
            now=now,
        ):
            raise SlotLost(f"WARC slot {self.slot} was taken over by another worker")

    def _claim(self, now: float, tx: Tx) -> Row:
        pattern = re.compile(re.escape(self.group) + r"-(\d+)")
        slots: dict[int, Row] = {}
        for s in tx.all("warc_slots_with_owners", prefix=self.group + "-%"):
            if m := pattern.fullmatch(s["name"]):
                slots[int(m[1])] = s
        for slot in slots.values():
            if slot["owner"] == self.owner:
                return slot
        stale = now - self.lease_seconds
        for _, slot in sorted(slots.items()):
            if _free(slot, stale, self.is_dead) and tx.execute(
                "claim_warc_slot", name=slot["name"], owner=self.owner, old=slot["owner"], now=now
            ):
                return {**slot, "owner": self.owner}
        name = f"{self.group}-{max(slots, default=0) + 1}"
        row = tx.one("insert_warc_slot", name=name, owner=self.owner, now=now)
        if row is None:  # another process made it just now: the next attempt sees it
            raise SlotLost(f"WARC slot {name} was made by another worker at once; try again")
        return row


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
