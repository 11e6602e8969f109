"""The crawl's memory in the store, and the batches that keep it current.

A crawl commits in batches: the pages finished since the last commit, the URLs they
discovered, the robots.txt answers, the counters, and the WARC position after the last
record written for them, all in one transaction (guarded by the crawl job's lease). So
after a `kill -9` the store and the WARC files agree: a page is either committed with its
record before the committed position, or neither, and the resumed crawl cuts the WARC
file back to that position and fetches the page again.

A crawl split over shards (`Shard`) runs one ledger per shard job. Each host of the run
has one owner (`crawl_hosts`): the shard that owned the fewest hosts when a shard first
met it. Each shard keeps its own WARC position and page count (`crawl_shards`);
the run's counters are shared sums. A URL discovered on another shard's host is written
to `crawl_urls` and to that shard's inbox in the discoverer's commit; the owner takes
its inbox in its own commit, and a shard's commit also says whether the whole run is
over (`ShardState`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import LeaseLost
from ..frontier import Sieve
from ..store import Row, Tx
from ..store.warcrecord import Capture

__all__ = [
    "COUNTERS",
    "FINISHED",
    "Batch",
    "CrawlLedger",
    "Loaded",
    "Pending",
    "Shard",
    "ShardState",
    "Unowned",
    "from_signed",
    "to_signed",
]

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
    "requisites",
    "sitemaps",
    "links_dropped",
)

# The counters of URLs a run is done with (a page limit counts these: requisites too,
# sitemaps not, as robots.txt not).
FINISHED = ("pages", "errors", "redirects", "not_modified", "requisites")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` shards of a run."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"no shard {self.index} of {self.count}")

    def share(self, limit: int) -> int:
        """This shard's part of a run-wide `limit`."""
        return limit // self.count + (1 if self.index < limit % self.count else 0)


@dataclass(frozen=True)
class ShardState:
    """What a shard's commit found: URLs sent to it, the owners of the hosts it asked
    about, and whether the run is over."""

    received: list[Pending]
    done: bool
    siblings_waiting: bool
    owners: dict[str, int] = field(default_factory=dict)


# URLs of hosts without an owner yet, by host: (url, hash, depth, hop).
Unowned = Mapping[str, list[tuple[str, int, int, int]]]


def to_signed(h: int) -> int:
    """An unsigned 64-bit hash as the signed BIGINT both databases store."""
    return h - _TWO_64 if h >= _TWO_63 else h


def from_signed(h: int) -> int:
    return h + _TWO_64 if h < 0 else h


@dataclass(frozen=True, slots=True)
class Pending:
    """A known URL this run has not finished, with what the last fetch said of it."""

    url: str
    hash: int
    depth: int
    etag: str | None
    last_modified: str | None
    # The capture the validators came from, as far as the store knows it: what a 304
    # answer to them confirms.
    capture: Capture | None = None
    hop: int = 0  # thresher.frontier.Hop


@dataclass
class Loaded:
    """Everything a crawl run needs from the store to start or resume."""

    sieve: Sieve
    pending: list[Pending]
    robots: list[Row]
    digests: dict[str, Capture]
    seq: int
    run: Row
    warc: tuple[str, int] | None  # the committed WARC position of this run (or shard)
    finished: int  # URLs this run (or shard) is done with
    owners: dict[str, int]  # a shard's run: the hosts with an owner, and their owner


# A batch's rows are tuples in the order its query reads them (see queries/crawl.sql):
# the commit writes each kind in one statement, as a JSON array.
Insert = tuple[int, str, str, int, int, int]  # hash (signed), url, host, depth, seq, hop
Finish = tuple[
    int,
    str,
    int | None,
    str | None,
    int,
    str | None,
    str | None,
    str | None,
    float,
    str | None,
    int | None,
    str | None,
    str | None,
    str | None,
]  # hash, state, status, error, fresh, etag, last_modified, digest, fetched_at, warc,
#   capture (uri, date, record id)
Send = tuple[int, int, str, int, int]  # shard, hash (signed), url, depth, hop
Lastmod = tuple[int, str]  # hash (signed), lastmod


@dataclass
class Batch:
    """What has happened since the last commit."""

    inserts: list[Insert] = field(default_factory=list)
    finishes: list[Finish] = field(default_factory=list)
    robots: list[dict[str, Any]] = field(default_factory=list)
    sends: list[Send] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    lastmods: list[Lastmod] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.finishes) + len(self.robots)

    def then(self, later: Batch) -> Batch:
        """This batch and `later` as one, in that order."""
        return Batch(
            self.inserts + later.inserts,
            self.finishes + later.finishes,
            self.robots + later.robots,
            self.sends + later.sends,
            {k: self.counts[k] + later.counts[k] for k in COUNTERS},
            self.lastmods + later.lastmods,
        )

    def take(self) -> Batch:
        """What this batch holds, moved to a batch of its own for a commit to write; this
        one goes on empty, so whoever records in it keeps the same object."""
        taken = Batch(
            self.inserts, self.finishes, self.robots, self.sends, self.counts, self.lastmods
        )
        self.inserts, self.finishes, self.robots, self.sends = [], [], [], []
        self.counts, self.lastmods = dict.fromkeys(COUNTERS, 0), []
        return taken

    def put_back(self, taken: Batch) -> None:
        """A batch `take` gave that was not committed, back before what came since."""
        both = taken.then(self)
        self.inserts, self.finishes, self.robots = both.inserts, both.finishes, both.robots
        self.sends, self.counts, self.lastmods = both.sends, both.counts, both.lastmods


class CrawlLedger:
    """Reads and writes one source's crawl state for one run (no I/O of its own: it works
    on the transactions it is given)."""

    def __init__(
        self,
        source: str,
        run: int,
        *,
        job: int | None,
        owner: str | None,
        shard: Shard | None = None,
    ) -> None:
        self.source = source
        self.run = run
        self.job = job
        self.owner = owner
        self.shard = shard

    def load(self, tx: Tx, now: float) -> Loaded:
        tx.execute("open_crawl_run", run=self.run, source=self.source, now=now)
        run = tx.one("get_crawl_run", run=self.run)
        assert run is not None
        done = run
        shard = self.shard
        owners: dict[str, int] = {}
        if shard is not None:
            tx.execute("lock_crawl_run", run=self.run, now=now)
            args = {"run": self.run, "shard": shard.index}
            tx.execute("open_crawl_shard", shards=shard.count, now=now, **args)
            shard_row = tx.one("get_crawl_shard", **args)
            assert shard_row is not None
            done = shard_row
            owners = {r["host"]: int(r["shard"]) for r in tx.all("crawl_host_owners", run=self.run)}
        # Every shard's sieve knows every URL: a link to another shard's host is sent
        # to it once, not once per page that has it.
        sieve = Sieve.from_hashes(self._hashes(tx))
        if shard is None:
            rows = tx.stream("crawl_pending", source=self.source, run=self.run)
        else:
            # A run revisiting known URLs: their hosts get owners now, the busiest first.
            # Then only this shard's URLs are read: a big crawl's second run revisits
            # every URL it knows, and each shard needs only its share in memory.
            counts = tx.all("crawl_pending_hosts", source=self.source, run=self.run)
            waiting = sorted(
                (-int(r["urls"]), str(r["host"])) for r in counts if r["host"] not in owners
            )
            owners.update(self._assign(tx, [host for _, host in waiting]))
            rows = tx.stream(
                "crawl_pending_of_shard", source=self.source, run=self.run, shard=shard.index
            )
        digests: dict[str, Capture] = {}
        for r in tx.stream("crawl_digests", source=self.source):
            known = digests.get(r["digest"])
            # Rows of one payload name one capture; those from before migration 0014
            # name only their URL, so a row that knows more wins.
            if known is None or (known.date is None and r["capture_date"]):
                digests[r["digest"]] = _capture(r)
        pending = [
            Pending(
                r["url"],
                from_signed(r["hash"]),
                r["depth"],
                r["etag"],
                r["last_modified"],
                _capture(r, digests) if r["etag"] or r["last_modified"] else None,
                hop=int(r["hop"]),
            )
            for r in rows
        ]
        seq_row = tx.one("crawl_max_seq", source=self.source)
        return Loaded(
            sieve=sieve,
            pending=pending,
            robots=tx.all("crawl_robots", source=self.source),
            digests=digests,
            seq=int(seq_row["seq"]) if seq_row else 0,
            run=run,
            warc=None if done["warc_file"] is None else (done["warc_file"], done["warc_offset"]),
            finished=int(done["finished"]) if shard else sum(int(run[k]) for k in FINISHED),
            owners=owners,
        )

    def _assign(self, tx: Tx, hosts: Iterable[str]) -> dict[str, int]:
        """The owners of `hosts`, giving each host without one to the shard that owns the
        fewest (the caller holds the run's row, so no other shard gives out owners now)."""
        assert self.shard is not None
        count = self.shard.count
        owned = [0] * count
        for r in tx.all("crawl_host_counts", run=self.run):
            if 0 <= int(r["shard"]) < count:
                owned[int(r["shard"])] += int(r["hosts"])
        out: dict[str, int] = {}
        for host in hosts:
            row = tx.one("get_crawl_host", run=self.run, host=host)
            if row is None:
                pick = min(range(count), key=lambda i: (owned[i], i))
                tx.execute("assign_crawl_host", run=self.run, host=host, shard=pick)
                row = tx.one("get_crawl_host", run=self.run, host=host)
                assert row is not None
                owned[int(row["shard"])] += 1
            out[host] = int(row["shard"])
        return out

    def _send(self, tx: Tx, sends: list[Send]) -> None:
        if not sends:
            return
        # PostgreSQL's upsert may not touch a row twice in one statement: each URL goes
        # once, at its least depth and hop, as a row per send would leave it.
        least: dict[tuple[int, int], Send] = {}
        for row in sends:
            key = (row[0], row[1])
            earlier = least.get(key)
            if earlier is not None:
                row = (*row[:3], min(row[3], earlier[3]), min(row[4], earlier[4]))
            least[key] = row
        tx.execute("send_crawl_urls", run=self.run, rows=_json(least.values()))

    def _hashes(self, tx: Tx) -> Iterator[int]:
        for row in tx.stream("crawl_hashes", source=self.source):
            yield from_signed(row["hash"])

    def insert(
        self, batch: Batch, url: str, h: int, host: str, depth: int, seq: int, hop: int = 0
    ) -> None:
        batch.inserts.append((to_signed(h), url, host, depth, seq, hop))

    def lastmod(self, batch: Batch, h: int, lastmod: str) -> None:
        """What a sitemap says of the URL's last change (it is inserted or known)."""
        batch.lastmods.append((to_signed(h), lastmod))

    def send(self, batch: Batch, shard: int, url: str, h: int, depth: int, hop: int = 0) -> None:
        """Hand a URL of another shard's host to that shard (after `insert`)."""
        batch.sends.append(self._inbox_row(shard, url, h, depth, hop))

    def _inbox_row(self, shard: int, url: str, h: int, depth: int, hop: int) -> Send:
        return (shard, to_signed(h), url, depth, hop)

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
        capture: Capture | None = None,
    ) -> None:
        """A URL this run is done with. ``replace``: a new body came, whose validators
        (``etag``, ``last_modified``), ``digest`` and ``capture`` (the record holding the
        payload) replace the old ones; otherwise they are kept (a 304, an error)."""
        batch.finishes.append(
            (
                to_signed(h),
                state,
                status,
                _text(error[:2000]) if error else None,
                1 if replace else 0,
                _text(etag),
                _text(last_modified),
                digest,
                now,
                warc[0] if warc else None,
                warc[1] if warc else None,
                capture.uri if capture else None,
                capture.date if capture else None,
                capture.record_id if capture else None,
            )
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
        idle: bool = False,
        unowned: Unowned | None = None,
    ) -> ShardState | None:
        """Write `batch` and the WARC position that covers it; LeaseLost if another
        worker has taken the crawl over (then nothing of this batch is written).

        A shard also gives owners to the hosts of its `unowned` URLs (sending those of
        other shards' hosts on), takes the URLs sent to it and says whether it is `idle`
        (nothing in hand); its answer says whether the run is over."""
        if self.job is not None and tx.one("lease_held", job=self.job, owner=self.owner) is None:
            raise LeaseLost(f"crawl run {self.run} of {self.source}: the lease was taken over")
        shard = self.shard
        # The run's row first: it serialises the commits of a run's shards, which
        # would otherwise deadlock on the URLs and inbox rows they both write.
        tx.execute(
            "update_crawl_run",
            run=self.run,
            warc_file=warc[0] if warc and shard is None else None,
            warc_offset=warc[1] if warc and shard is None else None,
            queued=queued,
            hosts=hosts,
            now=now,
            **batch.counts,
        )
        # Inserts first: a page finished in this batch may be one discovered in it.
        if batch.inserts:
            tx.execute(
                "insert_crawl_urls", source=self.source, run=self.run, rows=_json(batch.inserts)
            )
        if batch.lastmods:
            lastmods = {row[0]: row for row in batch.lastmods}.values()  # the last one read
            tx.execute("set_crawl_lastmods", source=self.source, rows=_json(lastmods))
        if batch.finishes:
            # One row per URL, as the UPDATE joins them: should a URL finish twice in a
            # batch, the last one counts.
            finishes = {row[0]: row for row in batch.finishes}.values()
            tx.execute("finish_crawl_urls", source=self.source, run=self.run, rows=_json(finishes))
        tx.execute_many("upsert_crawl_robots", batch.robots)
        if shard is None:
            self._send(tx, batch.sends)
            return None
        owners = self._assign(tx, list(unowned or {}))
        self._send(
            tx,
            batch.sends
            + [
                self._inbox_row(owners[host], url, h, depth, hop)
                for host, urls in (unowned or {}).items()
                if owners[host] != shard.index
                for url, h, depth, hop in urls
            ],
        )
        received = [
            Pending(r["url"], from_signed(r["hash"]), r["depth"], None, None, hop=int(r["hop"]))
            for r in tx.all("drain_crawl_inbox", run=self.run, shard=shard.index)
        ]
        # Taking URLs and saying busy in one transaction: no peer can see the URLs gone
        # from the inbox while this shard still looks idle.
        idle = idle and not received
        tx.execute(
            "update_crawl_shard",
            run=self.run,
            shard=shard.index,
            warc_file=warc[0] if warc else None,
            warc_offset=warc[1] if warc else None,
            finished=sum(batch.counts[k] for k in FINISHED),
            queued=queued,
            hosts=hosts,
            idle=1 if idle else 0,
            now=now,
        )
        tx.execute("total_crawl_run", run=self.run)
        if not idle:
            return ShardState(received, done=False, siblings_waiting=False, owners=owners)
        state = tx.one("crawl_shards_state", run=self.run, job=self.job)
        assert state is not None
        done = int(state["started"]) >= shard.count and not state["busy"] and not state["mail"]
        return ShardState(
            received, done=done, siblings_waiting=bool(state["waiting"]), owners=owners
        )


def _capture(row: Row, digests: Mapping[str, Capture] | None = None) -> Capture:
    """The capture a `crawl_urls` row names (only its URL, from before migration 0014):
    the one in `digests` if it is that, so that a second run's URLs share what the digest
    map holds anyway (50,000 URLs: 11 MiB less)."""
    capture = Capture(
        row["capture_uri"] or row["url"], row["capture_date"], row["capture_id"], row["digest"]
    )
    same = digests.get(capture.digest) if digests and capture.digest else None
    if same is not None and same == capture:
        return same
    return capture


def _json(rows: Iterable[Sequence[Any]]) -> str:
    return json.dumps(list(rows), separators=(",", ":"))


def _text(value: str | None) -> str | None:
    """`value` as a database can store it: a header decoded with surrogateescape or an
    error quoting a server's bytes may hold lone surrogates or NULs, which neither UTF-8
    nor PostgreSQL's text can carry: NULs become U+FFFD, surrogates "?"."""
    if value is None or (value.isascii() and "\x00" not in value):
        return value
    return value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
