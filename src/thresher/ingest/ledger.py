"""An ingest run's queue in the store, and the batches that empty it.

When a run starts, its **selection** (the loaded (ingest_type, base_url) pairs without a
result, or with a status to retry, or all with `force`; narrowed by type and source, cut
at `limit`) is written to `ingest_queue` once, a page at a time (`Filler`): the run then
works through exactly that selection, however often it is interrupted, and a resumed run
does not look at the requests again.

Each row names its **shard** and its place: every URL of one host (`host_of`, the unit of
politeness) goes to one shard, the one that had been given the fewest URLs when the host
first came up, and a URL's ``turn`` is its place among its host's URLs. A shard reads its
rows in (turn, host) order, so each page of them takes every host in turn: the dumps come
sorted by URL, which puts a host's thousand URLs one after the other, and a page of them
would be a page of one host, fetched one at a time.

A shard's engine commits in **batches** (`Batch`, `commit`): the results it finished, the
bodies it fetched (`thresher.ingest.archive`: `file_meta` rows, WARC records and the WARC
position), the rows of the finished URLs deleted from the queue and the attempts of the
ones to retry, in one transaction guarded by the shard job's lease. So after a `kill -9`
the store and the WARC files agree, and the resumed shard walks again exactly the URLs
whose results were not committed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import LeaseLost
from ..frontier import host_of
from ..store import Row, Tx
from .archive import IngestArchive, Kept

__all__ = ["PAGE", "Batch", "Entry", "Filler", "Selection", "commit", "fill_page", "guard"]

PAGE = 1000
"""Rows per page: of the selection read while filling, of a shard's queue read at once."""


@dataclass(frozen=True)
class Selection:
    """Which URLs a run ingests (the source's options)."""

    ingest_type: str | None = None
    link_source: str | None = None
    force: bool = False
    retry: tuple[str, ...] = ()
    limit: int | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Selection:
        retry = [s for s in re.split(r"[\s,]+", str(options.get("retry") or "").strip()) if s]
        limit = options.get("limit")
        return cls(
            ingest_type=options.get("ingest_type"),
            link_source=options.get("link_source"),
            force=bool(options.get("force")),
            retry=tuple(dict.fromkeys(retry)),
            limit=None if limit is None else int(limit),
        )


class Filler:
    """Places the URLs of a selection, read in key order, in shards and turns."""

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self._hosts: dict[str, list[int]] = {}  # host -> [number, shard, URLs so far]
        self._load = [0] * shards  # URLs given to each shard
        self.urls = 0

    @property
    def hosts(self) -> int:
        return len(self._hosts)

    def place(self, ingest_type: str, base_url: str) -> list[Any]:
        """The queue row of one URL: [shard, turn, host_no, ingest_type, base_url]."""
        host = host_of(base_url)
        known = self._hosts.get(host)
        if known is None:
            shard = min(range(self.shards), key=self._load.__getitem__)
            known = self._hosts[host] = [len(self._hosts), shard, 0]
        number, shard, turn = known
        known[2] += 1
        self._load[shard] += 1
        self.urls += 1
        return [shard, turn, number, ingest_type, base_url]

    def loads(self) -> list[int]:
        return list(self._load)


def fill_page(
    tx: Tx, run: int, selection: Selection, after: tuple[str, str], size: int, filler: Filler
) -> list[Row]:
    """Read the next `size` URLs of `selection` after `after` and queue them for `run`;
    the URLs read (a crash and a new try read and place them the same way again)."""
    rows = tx.all(
        "ingest_page",
        after_type=after[0],
        after_url=after[1],
        ingest_type=selection.ingest_type,
        link_source=selection.link_source,
        force=1 if selection.force else 0,
        retry=json.dumps(list(selection.retry)),
        page=size,
    )
    if rows:
        placed = [filler.place(r["ingest_type"], r["base_url"]) for r in rows]
        tx.execute("insert_ingest_queue", run=run, rows=_json(placed))
    return rows


def guard(tx: Tx, job: int | None, owner: str | None) -> None:
    """LeaseLost unless the job `owner` runs still holds its lease (nothing is written)."""
    if job is not None and tx.one("lease_held", job=job, owner=owner) is None:
        raise LeaseLost(f"ingest job {job}: the lease was taken over")


@dataclass(slots=True)
class Entry:
    """A queued URL of a shard, as the engine holds it."""

    turn: int
    host_no: int
    host: str
    ingest_type: str
    base_url: str
    attempts: int


# A result as upsert_ingest_results reads it: [ingest_type, base_url, hit, status,
# terminal_url, terminal_status, terminal_sha1, hops (JSON text), error, updated].
Result = list[Any]


@dataclass
class Batch:
    """What an engine finished since its last commit."""

    results: list[Result] = field(default_factory=list)
    done: list[tuple[int, int]] = field(default_factory=list)  # (turn, host_no)
    retries: list[tuple[int, int, int, float]] = field(default_factory=list)
    bodies: dict[str, Kept] = field(default_factory=dict)
    nbytes: int = 0  # of the bodies' records

    def __bool__(self) -> bool:
        return bool(self.results or self.retries or self.bodies)

    def keep(self, body: Kept) -> None:
        if body.sha1 not in self.bodies:
            self.bodies[body.sha1] = body
            self.nbytes += body.nbytes

    def take(self) -> Batch:
        """What was recorded, in a batch of its own to commit; this one starts empty
        again (the engine and its commits record in one batch for the engine's life)."""
        taken = Batch(self.results, self.done, self.retries, self.bodies, self.nbytes)
        self.results, self.done, self.retries, self.bodies = [], [], [], {}
        self.nbytes = 0
        return taken


def commit(
    tx: Tx,
    batch: Batch,
    *,
    run: int,
    shard: int,
    archive: IngestArchive,
    now: float,
    job: int | None,
    owner: str | None,
) -> int:
    """Write `batch` (bodies first: a result names its file); LeaseLost if the shard's
    job is no longer ours. The number of bodies new to the store."""
    guard(tx, job, owner)
    written = archive.commit(tx, batch.bodies.values(), now)
    if batch.results:
        tx.execute("upsert_ingest_results", rows=_json(batch.results))
        tx.execute("finish_ingest_queue", run=run, shard=shard, rows=_json(batch.done))
    if batch.retries:
        tx.execute("retry_ingest_queue", run=run, shard=shard, rows=_json(batch.retries))
    return written


def entries(rows: Iterable[Row]) -> list[Entry]:
    return [
        Entry(
            int(r["turn"]),
            int(r["host_no"]),
            host_of(r["base_url"]),
            r["ingest_type"],
            r["base_url"],
            int(r["attempts"]),
        )
        for r in rows
    ]


def _json(rows: Sequence[Sequence[Any]]) -> str:
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
