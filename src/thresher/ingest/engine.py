"""The ingest engine: one shard of an ingest run, walked by one async loop.

A run's URLs wait in `ingest_queue` (`thresher.ingest.ledger`), split over its shards by
host. An engine reads its shard's rows a page at a time and keeps `concurrency` walks
going, one host per walk at a time, taking the hosts in turn (`thresher.ingest.hosts`):
each walk (`thresher.ingest.walk`, which decides every step) fetches through the
engine's `PoliteFetcher` (robots.txt, the per-host and per-address delays, Retry-After,
parking and, with `leases`, the turns every worker of the store takes on a host). Every
2xx body, once the walk has read (sniffed) it, is hashed and made into its WARC records
on a thread of its own (`Hasher`, `IngestArchive.keep`: SHA-1, SHA-256 and MD5 of the
body, the record's block digest and its gzip members, a third of the CPU an ingest
takes, most of it without the GIL) while the walk goes on. The engine commits in
batches, beside the walks (`thresher.ingest.commits`): about every `COMMIT_SECONDS`, or
sooner once `COMMIT_BYTES` of records wait, the results finished since, their bodies
(file_meta, the records and the WARC position) and the queue rows they empty go in one
transaction.

A transient failure (timeout, reset, 5xx, a host that asks for more than an hour) is
tried again after a backoff (`backoff_delay`, the server's Retry-After honoured), up to
`max_attempts`, and only the last attempt's status becomes the result, as the job system
did for each URL before. A host whose turn is far away (`PoliteFetcher`'s `HostBusy`: its
delay behind other requests, parking, a Retry-After) keeps its URL back until then,
without counting an attempt; when nothing else is left to do and the earliest such turn is
more than `HAND_BACK_SECONDS` away, the engine commits and hands its job back until then
(`Deferred`), so that a worker's slot is not held by waiting.

Stopping (the job cancelled: SIGTERM, Ctrl-C) cancels the walks in flight and commits what
was finished; a `kill -9` loses only what was not committed yet (the walks in flight and
at most one batch), which the resumed engine walks again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..clock import Clock
from ..errors import Deferred, HostBusy, Interrupted, TransientError
from ..fetch import (
    AddressRefused,
    BadResponse,
    ConnectionFailed,
    DNSError,
    FetchError,
    FetchTimeout,
    InvalidRequestURL,
    Response,
    TooLarge,
)
from ..fetch.leases import StickyLeases
from ..fetch.polite import PoliteFetcher, RobotsDisallowed
from ..frontier import host_of
from ..jobs.retry import backoff_delay
from ..store.aio import AsyncStore
from .archive import Hasher, IngestArchive, Kept
from .commits import COMMIT_BYTES, Commits
from .hosts import HostQueue
from .ledger import PAGE, Entry, entries
from .walk import DEFAULT_BLOCKLIST, MAX_HOPS, Answer, Blocklist, Fetch, Verdict, Walk

__all__ = ["IngestEngine", "IngestSettings", "ShardSummary"]

log = logging.getLogger("thresher.ingest")

# A body fetched, and its digests and records to come (`Hasher`).
Hashing = tuple[Response, "asyncio.Future[Kept]"]

STOP_SECONDS = 2.0
"""Once the process is stopping, how long the walks in flight have to end (a Ctrl-C is
answered within a few seconds; the walks still going then are fetched again next run)."""
HAND_BACK_SECONDS = 30.0
"""With only URLs whose host's turn is further away than this, the shard's job is
handed back until then (as the job system hands back a job whose host is busy)."""

# What each fetch error is called in the result.
ERRORS: tuple[tuple[type[Exception], str], ...] = (
    (RobotsDisallowed, "blocked-robots"),
    (TooLarge, "body-too-large"),
    (FetchTimeout, "timeout"),
    (DNSError, "dns-error"),
    (ConnectionFailed, "connection-error"),
    (BadResponse, "bad-response"),
    (AddressRefused, "blocked-address"),
    (InvalidRequestURL, "bad-url"),
    # A host that asked us to wait longer than a worker waits (Retry-After, backoff).
    (TransientError, "host-backoff"),
)


@dataclass(frozen=True)
class IngestSettings:
    """How one shard ingests (from the source's options and the process's config)."""

    max_hops: int = MAX_HOPS
    max_bytes: int = 128 * 2**20
    blocklist: tuple[str, ...] = ()  # besides DEFAULT_BLOCKLIST
    concurrency: int = 4
    max_attempts: int = 5
    backoff_base: float = 2.0
    backoff_max: float = 60.0


@dataclass(frozen=True)
class ShardSummary:
    urls: int  # results written
    statuses: dict[str, int]
    retried: int  # attempts that failed transiently and were tried again
    bodies: int  # records written (bodies new to the store)
    seconds: float

    def as_dict(self) -> dict[str, object]:
        return {
            "urls": self.urls,
            "statuses": dict(sorted(self.statuses.items())),
            "retried": self.retried,
            "bodies": self.bodies,
            "seconds": round(self.seconds, 3),
        }


class IngestEngine:
    """Walks the queued URLs of one shard of one run; `run()` returns when none is left."""

    def __init__(
        self,
        settings: IngestSettings,
        *,
        run: int,
        shard: int,
        store: AsyncStore,
        fetcher: PoliteFetcher,
        archive: IngestArchive,
        clock: Clock,
        job: int | None = None,
        owner: str | None = None,
        leases: StickyLeases | None = None,
        stopping: asyncio.Event | None = None,
    ) -> None:
        self.settings = settings
        # Set when the process is stopping (Ctrl-C, SIGTERM): the walks in flight are
        # abandoned (their URLs stay queued), what is done is committed, and the shard's
        # job goes back (Interrupted) at once, not after the pool's grace period.
        self.stopping = stopping
        self._stop_by: float | None = None
        self.run_id = run
        self.shard = shard
        self.store = store
        self.fetcher = fetcher
        self.archive = archive
        self.clock = clock
        # The fetcher's holds on hosts in the store, kept across fetches: given back
        # after each commit once they are old.
        self.leases = leases
        self.blocklist = Blocklist(DEFAULT_BLOCKLIST + settings.blocklist)
        self.commits = Commits(
            run=run, shard=shard, store=store, archive=archive, clock=clock, job=job, owner=owner
        )
        # The commits' batch, one object for the engine's life: the walks record in it.
        self.batch = self.commits.batch
        self.statuses: Counter[str] = Counter()
        self.retried = 0
        self.hosts = HostQueue(fetcher.ready_at)
        self._cursor: tuple[int, int] = (-1, -1)
        self._exhausted = False  # every row of the shard has been read
        self._loading: asyncio.Task[None] | None = None
        self._walks: set[asyncio.Task[None]] = set()
        # Walks whose bodies are still being hashed, to be recorded in the batch then.
        self._finishing: set[asyncio.Task[None]] = set()
        self._committing: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._failure: BaseException | None = None
        self._hasher: Hasher | None = None  # made in run(), on the loop

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> ShardSummary:
        t0 = time.monotonic()
        self._hasher = Hasher(asyncio.get_running_loop(), self.archive)
        try:
            await self.store.run(self.archive.open_in)
            self.commits.last = self.clock.monotonic()
            try:
                await self._loop()
            except BaseException as exc:
                await self._abort(exc)
                raise
            await self.commits.commit()
            await self.store.run(self.archive.close_in)
        finally:
            self._hasher.close()
        return ShardSummary(
            urls=sum(self.statuses.values()),
            statuses=dict(self.statuses),
            retried=self.retried,
            bodies=self.commits.bodies,
            seconds=time.monotonic() - t0,
        )

    async def _loop(self) -> None:
        limit = self.settings.concurrency
        # Held for the engine's life; looked up once, not on every turn of the loop.
        hosts, commits = self.hosts, self.commits
        ready, take = hosts.ready, hosts.take
        while True:
            self._wake.clear()
            if self._failure is not None:
                raise self._failure
            stopping = self.stopping is not None and self.stopping.is_set()
            if stopping:
                # No walk starts; those in flight get a moment to end (each done is one
                # URL the rerun does not fetch again), then are abandoned.
                if self._stop_by is None:
                    self._stop_by = self.clock.monotonic() + STOP_SECONDS
                if not self._walks or self.clock.monotonic() >= self._stop_by:
                    raise Interrupted(f"ingest shard {self.shard}: stopping", self.clock.now())
            now = self.clock.now()
            hosts.release_due(now)
            if (
                not stopping
                and not self._exhausted
                and self._loading is None
                and hosts.waiting < max(2 * limit, PAGE // 2)
            ):
                self._loading = asyncio.ensure_future(self._load())
            # Records waiting for a commit hold memory: past twice the threshold, wait.
            while (
                not stopping
                and len(self._walks) < limit
                and ready
                and self.batch.nbytes < 2 * COMMIT_BYTES
                and len(self._finishing) < 2 * limit
            ):
                entry = take(ready.popleft(), now)
                if entry is not None:
                    task = asyncio.ensure_future(self._walk(entry))
                    self._walks.add(task)
                    task.add_done_callback(self._walk_ended)
            if self._committing is None and commits.due():
                self._committing = asyncio.ensure_future(self._commit_in_background())
            # Done only once no commit is in flight either: a shard that ended with one
            # in the background let its process end with it, and lost those results.
            if (
                not self._walks
                and not self._finishing
                and not hosts.waiting
                and self._loading is None
                and self._committing is None
            ):
                if self._exhausted and not hosts.later:
                    return
                if self._exhausted and hosts.later[0][0] - now > HAND_BACK_SECONDS:
                    await self._hand_back(now)
            wait = commits.seconds
            if hosts.later:
                wait = min(wait, max(0.0, hosts.later[0][0] - now))
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wake.wait()

    # -- the queue ------------------------------------------------------------------------

    async def _load(self) -> None:
        after_turn, after_host = self._cursor
        try:
            rows = await self.store.run(
                lambda tx: tx.all(
                    "ingest_queue_page",
                    run=self.run_id,
                    shard=self.shard,
                    after_turn=after_turn,
                    after_host=after_host,
                    page=PAGE,
                ),
                False,
            )
        except Exception as exc:
            self._failure = self._failure or exc
            return
        finally:
            self._loading = None
            self._wake.set()
        if len(rows) < PAGE:
            self._exhausted = True
        if not rows:
            return
        self._cursor = (int(rows[-1]["turn"]), int(rows[-1]["host_no"]))
        now = self.clock.now()
        hosts = self.hosts
        for row, entry in zip(rows, entries(rows), strict=True):
            not_before = float(row["not_before"])
            if not_before > now:
                hosts.defer(entry, not_before)
            else:
                hosts.queue(entry)

    def _walk_ended(self, task: asyncio.Task[None]) -> None:
        self._walks.discard(task)
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()
        self._wake.set()

    # -- one URL --------------------------------------------------------------------------

    async def _walk(self, entry: Entry) -> None:
        try:
            await self._walk_held(entry)
        finally:
            self.hosts.ended(entry.host)

    async def _walk_held(self, entry: Entry) -> None:
        s = self.settings
        walk = Walk(
            entry.ingest_type, entry.base_url, max_hops=s.max_hops, blocklist=self.blocklist
        )
        # The 2xx bodies fetched, each hashed on the Hasher's thread meanwhile, and which
        # of them the last answer's, if it was one: the walk goes on without waiting.
        bodies: list[Hashing] = []
        terminal: int | None = None
        retry_after: float | None = None
        step = walk.start()
        while isinstance(step, Fetch):
            url = step.url
            try:
                # Only the base URL's host is held: a hop elsewhere (often to a host of
                # another shard, which holds it) goes without, when it has no delay.
                hold = host_of(url) == entry.host
                resp = await self.fetcher.get(url, None, max_body=s.max_bytes, hold=hold)
            except HostBusy as busy:
                # Not a result: the URL waits for its host's turn, no attempt counted.
                self.hosts.defer(entry, busy.until)
                self._finish(bodies, None, None, entry)
                return
            except (FetchError, RobotsDisallowed, TransientError) as exc:
                status = next((name for kind, name in ERRORS if isinstance(exc, kind)), "bad-url")
                retry_after = getattr(exc, "retry_after", None)
                step = walk.on_error(status, url, str(exc))
                break
            if len(resp.content) > s.max_bytes:  # within the limit on the wire, not decoded
                step = walk.on_error("body-too-large", url, f"decoded body exceeds {s.max_bytes}")
                break
            if resp.decode_error is not None:
                step = walk.on_error("bad-response", url, resp.decode_error)
                break
            if resp.status in (429, 503):
                retry_after = resp.retry_after
            content_type = resp.header("Content-Type")
            answer = Answer(url, resp.status, resp.location, resp.content, content_type)
            terminal = None
            step = walk.on_answer(answer)
            if 200 <= resp.status < 300 and resp.content:
                # Hashed and made into records on the Hasher's thread (hashlib and zlib
                # let go of the GIL) while the walk goes on; as sniffed (`stored` records
                # for compressed types).
                assert self._hasher is not None
                terminal = len(bodies)
                bodies.append((resp, self._hasher.keep(resp, walk.sniffed)))
        verdict: Verdict = step
        if verdict.transient and entry.attempts + 1 < s.max_attempts:
            entry.attempts += 1
            self.retried += 1
            delay = backoff_delay(entry.attempts, s.backoff_base, s.backoff_max, retry_after)
            until = self.clock.now() + delay
            self.batch.retries.append((entry.turn, entry.host_no, entry.attempts, until))
            log.info(
                "%s: %s, attempt %d; again in %.1f s",
                entry.base_url,
                verdict.status,
                entry.attempts,
                delay,
            )
            self.hosts.defer(entry, until)
            self._finish(bodies, None, None, entry)
            return
        if terminal is not None and bodies[terminal][0].url != verdict.terminal_url:
            terminal = None
        result = [
            entry.ingest_type,
            entry.base_url,
            1 if verdict.hit else 0,
            verdict.status,
            verdict.terminal_url,
            verdict.terminal_status,
            None,  # the terminal body's SHA-1, once hashed
            json.dumps(walk.hops, ensure_ascii=False),
            (verdict.error or None) and str(verdict.error)[:2000],
            self.clock.now(),
        ]
        self._finish(bodies, result, terminal, entry)

    def _finish(
        self,
        bodies: list[Hashing],
        result: list[Any] | None,
        terminal: int | None,
        entry: Entry,
    ) -> None:
        """Put the walk's bodies and its result (None: no result this time) in the batch
        once the bodies are hashed: beside the next walk of the host, which need not wait
        for that. Both go in the same batch, the result after its bodies."""
        if not bodies:
            self._record([], result, terminal, entry)
            return
        task = asyncio.ensure_future(self._finish_hashed(bodies, result, terminal, entry))
        self._finishing.add(task)
        task.add_done_callback(self._finished)

    async def _finish_hashed(
        self,
        bodies: list[Hashing],
        result: list[Any] | None,
        terminal: int | None,
        entry: Entry,
    ) -> None:
        kept = [await hashed for _, hashed in bodies]
        self._record(kept, result, terminal, entry)

    def _record(
        self, kept: list[Kept], result: list[Any] | None, terminal: int | None, entry: Entry
    ) -> None:
        for body in kept:
            self.batch.keep(body)
        if result is None:
            return
        if terminal is not None:
            result[6] = kept[terminal].sha1
        self.batch.results.append(result)
        self.batch.done.append((entry.turn, entry.host_no))
        self.statuses[result[3]] += 1

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._finishing.discard(task)
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()
        self._wake.set()

    # -- commits --------------------------------------------------------------------------

    async def _commit_in_background(self) -> None:
        try:
            await self.commits.commit()
            if self.leases is not None and self.leases.holding:
                await self.leases.release(self.clock.now())
        except Exception as exc:
            if self._failure is None:
                self._failure = exc
        finally:
            self._committing = None
            self._wake.set()

    async def _hand_back(self, now: float) -> None:
        """Nothing to do for a while: commit, with the URLs waiting for far turns, and
        give the job back until the earliest of them (Deferred)."""
        if self._committing is not None:
            await asyncio.shield(self._committing)
        until = self.hosts.later[0][0]
        for when, _, e in self.hosts.later:
            if isinstance(e, Entry):
                self.batch.retries.append((e.turn, e.host_no, e.attempts, when))
        await self.commits.commit()
        await self.store.run(self.archive.close_in)
        raise Deferred(f"ingest shard {self.shard}: the next host's turn is later", until, now)

    async def _abort(self, exc: BaseException) -> None:
        """Interrupted (a signal, a lost lease, a failed commit): keep what is done."""
        for task in list(self._walks):
            task.cancel()
        await asyncio.gather(*self._walks, return_exceptions=True)
        # Walks already over wait only for their bodies' digests: they are kept.
        await asyncio.gather(*self._finishing, return_exceptions=True)
        for pending in (self._committing, self._loading):
            if pending is not None:
                await asyncio.gather(asyncio.shield(pending), return_exceptions=True)
        if isinstance(exc, Deferred) and not isinstance(exc, Interrupted):
            return  # committed, and the slot closed, by _hand_back
        if self._failure is not None:
            self.archive.abandon()  # the slot's next owner cuts back what is not committed
            return
        try:
            await asyncio.shield(self.commits.commit())
            await asyncio.shield(self.store.run(self.archive.close_in))
        except Exception as error:
            log.warning("ingest shard %s: could not commit on stopping: %s", self.shard, error)
            self.archive.abandon()
