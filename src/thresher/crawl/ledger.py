"""The crawl's memory in the store, and the batches that keep it current.

A crawl commits in batches: the pages finished since the last commit, the URLs they
discovered, the robots.txt answers, the counters, and the WARC position after the last
record written for them, all in one transaction (guarded by the crawl job's lease). So
after a `kill -9` the store and the WARC files agree: a page is either committed with its
record before the committed position, or neither, and the resumed crawl cuts the WARC
file back to that position and fetches the page again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import LeaseLost
from ..frontier import Sieve
from ..store import Row, Tx

__all__ = ["COUNTERS", "Batch", "CrawlLedger", "Loaded", "Pending", "from_signed", "to_signed"]

_TWO_63 = 1 << 63
_TWO_64 = 1 << 64

COUNTERS = (
    "pages",
    "errors",
    "bytes",
    "redirects",
    "not_modified",
    "duplicates",
    "robots_excluded",
)


def to_signed(h: int) -> int:
    """An unsigned 64-bit hash as the signed BIGINT both databases store."""
    return h - _TWO_64 if h >= _TWO_63 else h


def from_signed(h: int) -> int:
    return h + _TWO_64 if h < 0 else h


@dataclass(frozen=True)
class Pending:
    """A known URL this run has not finished, with what the last fetch said of it."""

    url: str
    hash: int
    depth: int
    etag: str | None
    last_modified: str | None


@dataclass
class Loaded:
    """Everything a crawl run needs from the store to start or resume."""

    sieve: Sieve
    pending: list[Pending]
    robots: list[Row]
    digests: dict[str, tuple[str, float]]
    seq: int
    run: Row


@dataclass
class Batch:
    """What has happened since the last commit."""

    inserts: list[dict[str, Any]] = field(default_factory=list)
    finishes: list[dict[str, Any]] = field(default_factory=list)
    robots: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))

    def __len__(self) -> int:
        return len(self.finishes) + len(self.robots)


class CrawlLedger:
    """Reads and writes one source's crawl state for one run (no I/O of its own: it works
    on the transactions it is given)."""

    def __init__(self, source: str, run: int, *, job: int | None, owner: str | None) -> None:
        self.source = source
        self.run = run
        self.job = job
        self.owner = owner

    def load(self, tx: Tx, now: float) -> Loaded:
        tx.execute("open_crawl_run", run=self.run, source=self.source, now=now)
        run = tx.one("get_crawl_run", run=self.run)
        assert run is not None
        sieve = Sieve.from_hashes(self._hashes(tx))
        pending = [
            Pending(r["url"], from_signed(r["hash"]), r["depth"], r["etag"], r["last_modified"])
            for r in tx.stream("crawl_pending", source=self.source, run=self.run)
        ]
        digests = {
            r["digest"]: (r["url"], float(r["fetched_at"]))
            for r in tx.stream("crawl_digests", source=self.source)
        }
        seq_row = tx.one("crawl_max_seq", source=self.source)
        return Loaded(
            sieve=sieve,
            pending=pending,
            robots=tx.all("crawl_robots", source=self.source),
            digests=digests,
            seq=int(seq_row["seq"]) if seq_row else 0,
            run=run,
        )

    def _hashes(self, tx: Tx) -> Iterator[int]:
        for row in tx.stream("crawl_hashes", source=self.source):
            yield from_signed(row["hash"])

    def insert(self, batch: Batch, url: str, h: int, host: str, depth: int, seq: int) -> None:
        batch.inserts.append(
            {
                "source": self.source,
                "hash": to_signed(h),
                "url": url,
                "host": host,
                "depth": depth,
                "seq": seq,
                "run": self.run,
            }
        )

    def finish(
        self,
        batch: Batch,
        h: int,
        state: str,
        *,
        now: float,
        status: int | None = None,
        error: str | None = None,
        replace: bool = False,
        etag: str | None = None,
        last_modified: str | None = None,
        digest: str | None = None,
        warc: tuple[str, int] | None = None,
    ) -> None:
        batch.finishes.append(
            {
                "source": self.source,
                "hash": to_signed(h),
                "run": self.run,
                "state": state,
                "status": status,
                "error": error[:2000] if error else None,
                "replace": 1 if replace else 0,
                "etag": etag,
                "last_modified": last_modified,
                "digest": digest,
                "fetched_at": now,
                "warc_file": warc[0] if warc else None,
                "warc_offset": warc[1] if warc else None,
            }
        )

    def robots(self, batch: Batch, site: str, status: int | None, body: bytes, now: float) -> None:
        batch.robots.append(
            {"source": self.source, "site": site, "status": status, "body": body, "fetched_at": now}
        )

    def commit(
        self,
        tx: Tx,
        batch: Batch,
        warc: tuple[str, int] | None,
        *,
        queued: int,
        hosts: int,
        now: float,
    ) -> None:
        """Write `batch` and the WARC position that covers it; LeaseLost if another
        worker has taken the crawl over (then nothing of this batch is written)."""
        if self.job is not None and tx.one("lease_held", job=self.job, owner=self.owner) is None:
            raise LeaseLost(f"crawl run {self.run} of {self.source}: the lease was taken over")
        # Inserts first: a page finished in this batch may be one discovered in it.
        tx.execute_many("insert_crawl_url", batch.inserts)
        tx.execute_many("finish_crawl_url", batch.finishes)
        tx.execute_many("upsert_crawl_robots", batch.robots)
        tx.execute(
            "update_crawl_run",
            run=self.run,
            warc_file=warc[0] if warc else None,
            warc_offset=warc[1] if warc else None,
            queued=queued,
            hosts=hosts,
            now=now,
            **batch.counts,
        )
