"""The execution plan: one pass over the sources, and the schedule that repeats it.

A run opens a source run per selected source (or resumes one a crash or a signal left
open), puts its root job in the job table, and lets a pool of stateless workers drain
the jobs of those runs; handlers write their results straight to the store. A source
whose jobs fail is recorded as failed and simply gets a fresh run next time: it never
stops the other sources or the schedule. A run whose jobs all succeeded but whose
source counts more than it stored (a job recorded a `shortfall`) is `incomplete`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .clock import Clock, iso
from .config import Config
from .errors import UsageError
from .jobs import JobSpec, PoolStats, WorkerPool, queue
from .jobs.runner import Listener
from .jobs.worker import make_owner
from .sources import Source, get_source, get_type, list_sources
from .sources.types import RunNote, load_builtin_types
from .store import Tx
from .store.aio import AsyncStore

__all__ = ["ExecutionPlan", "RunReport", "SourceReport", "parse_duration"]

log = logging.getLogger("thresher.run")


@dataclass(frozen=True)
class SourceReport:
    source: str
    run_id: int
    # ok; incomplete (every job done, but the source counts more than the store holds:
    # `shortfall`); failed; interrupted; queued (detached: left to workers)
    outcome: str
    counts: dict[str, int]
    error: str | None
    shortfall: int | None = None  # items the source counts that the run did not store
    # What an otherwise ok run still reports: a `urls` run's 404s ("1 URL failed: …").
    problems: str | None = None


@dataclass
class RunReport:
    sources: list[SourceReport] = field(default_factory=list)
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(s.outcome == "ok" for s in self.sources)


class ExecutionPlan:
    def __init__(
        self,
        config: Config,
        store: AsyncStore,
        clock: Clock,
        *,
        owner: str | None = None,
        listener: Listener | None = None,
    ) -> None:
        # The source types register their jobs' handlers, here at the top: the worker
        # pool below finds them by kind, and imports no source type itself.
        load_builtin_types()
        self.config = config
        self.store = store
        self.clock = clock
        self.owner = owner or make_owner()
        self.listener = listener
        self.pool: WorkerPool | None = None
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()
        if self.pool is not None:
            self.pool.stop()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    async def run_once(
        self,
        names: Sequence[str] = (),
        options: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        detach: bool = False,
    ) -> RunReport:
        """One pass over `names` (all sources when empty). `options` lays options over a
        source's own for this run only (e.g. `ingest run --limit`); a run resumed from an
        interruption keeps the options it started with. `detach`: open the runs and
        return, leaving their jobs to `thresher worker` processes."""
        now = self.clock.now()
        runs = await self.store.run(lambda tx: self._open_runs(tx, names, now, options or {}))
        report = RunReport()
        if detach:
            report.sources = [SourceReport(n, r, "queued", {}, None) for n, r in runs]
            return report
        if not runs:
            return report
        self.pool = WorkerPool(
            self.config,
            self.store,
            self.clock,
            [run_id for _, run_id in runs],
            owner=self.owner,
            listener=self.listener,
        )
        if self._stop.is_set():
            self.pool.stop()
        try:
            await self.pool.run()
        finally:
            report.interrupted = self.pool.stopping
            self.pool = None
        for name, run_id in runs:
            report.sources.append(await self._close_run(name, run_id, report.interrupted))
        return report

    def _open_runs(
        self,
        tx: Tx,
        names: Sequence[str],
        now: float,
        options: Mapping[str, Mapping[str, Any]],
    ) -> list[tuple[str, int]]:
        sources = [get_source(tx, n) for n in dict.fromkeys(names)] if names else list_sources(tx)
        return [(s.name, self._open_run(tx, s, now, options.get(s.name, {}))) for s in sources]

    def _open_run(self, tx: Tx, source: Source, now: float, options: Mapping[str, Any]) -> int:
        open_run = tx.one("get_open_run", source=source.name)
        row = None if open_run else tx.one("open_source_run", source=source.name, now=now)
        if row is None:
            open_run = open_run or tx.one("get_open_run", source=source.name)
            assert open_run is not None
            log.info("%s: resuming run %s", source.name, open_run["id"])
            return int(open_run["id"])
        run_id = int(row["id"])
        spec = JobSpec(
            get_type(source.type).root_kind,
            name=source.name,
            payload={"url": source.url, "options": {**source.options, **options}},
        )
        root = queue.enqueue(
            tx,
            spec,
            key=f"run{run_id}:{source.name}",
            now=now,
            default_max_attempts=self.config.max_attempts,
            source=source.name,
            source_run_id=run_id,
        )
        tx.execute("set_run_root", id=run_id, root=root)
        log.info("%s: run %s started", source.name, run_id)
        return run_id

    async def serve(self, workers: int | None = None) -> PoolStats:
        """Work on every open run, whoever opened it, until stopped (`thresher worker`);
        close each run once its jobs are all finished."""
        self.pool = WorkerPool(
            self.config,
            self.store,
            self.clock,
            [],
            owner=self.owner,
            workers=workers,
            listener=self.listener,
            serve=True,
            on_drained=self._close_drained,
        )
        if self._stop.is_set():
            self.pool.stop()
        try:
            return await self.pool.run()
        finally:
            self.pool = None

    async def _close_drained(self, runs: list[tuple[int, str]]) -> None:
        for run_id, name in runs:
            await self._close_run(name, run_id, interrupted=False)

    async def _close_run(self, name: str, run_id: int, interrupted: bool) -> SourceReport:
        now = self.clock.now()

        def close(tx: Tx) -> tuple[SourceReport, bool]:
            counts = {r["state"]: int(r["n"]) for r in tx.all("run_job_counts", run=run_id)}
            open_jobs = sum(counts.get(s, 0) for s in ("pending", "waiting", "leased"))
            if interrupted or open_jobs:
                # Left open: the next `thresher run` resumes it where it stopped.
                return SourceReport(name, run_id, "interrupted", counts, None), True
            failure = tx.one("first_failure", run=run_id)
            error = f"{failure['key']}: {failure['last_error']}" if failure else None
            row = tx.one("run_shortfall", id=run_id)
            shortfall = None if row is None or row["shortfall"] is None else int(row["shortfall"])
            outcome = "failed" if counts.get("failed") else "incomplete" if shortfall else "ok"
            note = _note(tx, name, run_id)
            problems = None if note is None else note.text
            if note is not None and note.failed and outcome == "ok":
                outcome, error, problems = "failed", f"run{run_id}:{name}: {note.text}", None
            closed = tx.execute(
                "close_source_run",
                id=run_id,
                now=now,
                outcome=outcome,
                counts=json.dumps(counts, sort_keys=True),
                error=error,
            )
            # Finished jobs do not change: whoever closed it first found the same.
            report = SourceReport(name, run_id, outcome, counts, error, shortfall, problems)
            return report, closed > 0

        report, news = await self.store.run(close)
        if news:  # every idle worker sees a drained run; the one that closes it says so
            level = logging.INFO if report.outcome == "ok" else logging.WARNING
            short = f", {report.shortfall} short" if report.shortfall else ""
            log.log(level, "%s: run %s %s %s%s", name, run_id, report.outcome, report.counts, short)
            await self._prune(now)
        return report

    async def _prune(self, now: float) -> None:
        """Delete the jobs of runs finished more than `keep_jobs_days` ago: without it the
        job table grows by every job of every run, for ever."""
        if self.config.keep_jobs_days < 0:
            return
        before = now - self.config.keep_jobs_days * 86400
        pruned = await self.store.run(lambda tx: queue.prune(tx, before))
        if pruned:
            log.info("deleted %d jobs of runs finished before %s", pruned, iso(before))

    async def run_every(self, interval: float, names: Sequence[str] = ()) -> list[RunReport]:
        """Run, wait until `interval` after the run's start, repeat until stopped.

        A run that takes longer than the interval is followed at once by the next one,
        never overlapped by it."""
        reports = []
        while not self._stop.is_set():
            started = self.clock.now()
            try:
                reports.append(await self.run_once(names))
            except Exception as exc:
                # The store may be down for a while: keep the schedule, try next time.
                log.error("run failed: %s", exc)
            if self._stop.is_set():
                break
            wait = max(0.0, started + interval - self.clock.now())
            log.info("next run in %.0f s", wait)
            sleeper = asyncio.create_task(self.clock.sleep(wait))
            stopper = asyncio.create_task(self._stop.wait())
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
            sleeper.cancel()
            stopper.cancel()
        return reports


def _note(tx: Tx, name: str, run_id: int) -> RunNote | None:
    """What the source's type reports of a finished run besides its outcome."""
    row = tx.one("source_run_started", id=run_id)
    try:
        source = get_source(tx, name)
    except UsageError:  # removed while it ran
        return None
    return None if row is None else get_type(source.type).problems(tx, name, float(row["started"]))


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'90', '90s', '15m', '1h', '1d', '1h30m' → seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise UsageError(f"bad duration {text!r}: use e.g. 90s, 15m, 1h, 1d")
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise UsageError(f"duration must be positive, not {text!r}")
    return seconds
