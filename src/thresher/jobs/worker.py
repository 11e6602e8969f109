"""The worker pool: stateless workers that claim jobs, run them and commit the outcome.

One pool per process; its workers share one lease owner id, renewed by one heartbeat.
The pool drains the jobs of the source runs it serves and returns when none is left
open, or when asked to stop: then it claims nothing more, lets in-flight jobs finish
within the grace period, and hands back the leases of the rest (no attempt counted).

A serving pool (`thresher worker`) serves every open run instead, whoever opened it,
looks for new runs while idle, hands each run whose jobs are all finished to
`on_drained` (which closes it), and returns only when asked to stop.

This module is the pool's life: its start, heartbeat, workers and stop. How a worker
gets its jobs is `thresher.jobs.claims`; how it runs one and commits the outcome,
`thresher.jobs.runner`; what the handlers share, `thresher.jobs.resources`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import uuid
from collections.abc import Sequence
from functools import partial
from typing import Any

from ..clock import Clock
from ..config import Config
from ..fetch.leases import forget_gone_waiters
from ..liveness import BOOT_ID as _BOOT_ID
from ..liveness import HOST as _HOST
from ..liveness import is_dead_here
from ..store import Tx
from ..store.aio import AsyncStore
from . import queue
from .claims import Claims, Drained
from .resources import Resources
from .runner import Listener, PoolStats, Runner

__all__ = ["PoolStats", "WorkerPool", "make_owner"]

log = logging.getLogger("thresher.jobs")


def make_owner(name: str | None = None) -> str:
    """A unique lease owner id: the name given (or the host's), this pid and a nonce."""
    return f"{name or _HOST}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class WorkerPool:
    def __init__(
        self,
        config: Config,
        store: AsyncStore,
        clock: Clock,
        runs: Sequence[int],
        *,
        owner: str | None = None,
        workers: int | None = None,
        listener: Listener | None = None,
        serve: bool = False,
        on_drained: Drained | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.owner = owner or make_owner()
        self.size = workers or config.workers
        self.stats = PoolStats()
        self.serve = serve
        self._stopping = asyncio.Event()
        self._finished = asyncio.Event()
        self._wake = asyncio.Event()
        self._resources = Resources(config, store, clock, self.owner, self._stopping)
        self._claims = Claims(
            config,
            store,
            clock,
            self.owner,
            list(runs),
            serve=serve,
            on_drained=on_drained,
            stopping=self._stopping,
            finished=self._finished,
            wake=self._wake,
            # The runner claims through the claims: it is made after them.
            committing=lambda: self._runner.committing(),
            commit_running=lambda: self._runner.commit_running(),
        )
        self._runner = Runner(
            config,
            store,
            clock,
            self.owner,
            claims=self._claims,
            resources=self._resources,
            stats=self.stats,
            listener=listener,
            stopping=self._stopping,
            wake=self._wake,
        )

    @property
    def runs(self) -> list[int]:
        """The source runs served (serving: every open run, as last looked up)."""
        return self._claims.runs

    @runs.setter
    def runs(self, runs: list[int]) -> None:
        self._claims.runs = runs

    def stop(self) -> None:
        """Claim nothing more; in-flight jobs get the grace period to finish."""
        self._stopping.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    async def run(self) -> PoolStats:
        await self.store.run(partial(self._beat, now=self.clock.now()))
        heartbeat = asyncio.create_task(self._heartbeat(), name="thresher-heartbeat")
        tasks = [
            asyncio.create_task(self._work(i), name=f"thresher-worker-{i}")
            for i in range(self.size)
        ]
        try:
            await self._drain(tasks)
        finally:
            # What the workers finished is committed before their leases go back.
            await self._runner.flush()
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await self._resources.close_shared()
            now = self.clock.now()
            self.stats.released += await self._claims.store_with_due(
                lambda tx: queue.release(tx, self.owner, now)
            )
            await self.store.run(
                lambda tx: tx.execute(
                    "stop_worker", owner=self.owner, now=now, jobs_done=self.stats.done
                )
            )
            await self._resources.close()
        return self.stats

    async def _drain(self, tasks: list[asyncio.Task[None]]) -> None:
        stop_wait: asyncio.Task[Any] = asyncio.create_task(self._stopping.wait())
        pending: set[asyncio.Task[Any]] = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(
                    pending | {stop_wait}, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(stop_wait)
                for task in done - {stop_wait}:
                    task.result()  # a worker that crashed (store gone) ends the pool
                if stop_wait in done:
                    break
            if pending:
                # Stopping: in-flight jobs get the grace period, then are cut off.
                _, late = await asyncio.wait(pending, timeout=self.config.grace_seconds)
                for task in late:
                    task.cancel()
        finally:
            stop_wait.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _heartbeat(self) -> None:
        while True:
            await self.clock.sleep(self.config.heartbeat_seconds)
            try:
                expired = await self.store.run(partial(self._beat, now=self.clock.now()))
                # Its own transaction: it locks commits' rows, the beat this worker's jobs.
                sweep = partial(queue.wake_ready, runs=list(self.runs), now=self.clock.now())
                expired += await self.store.run(sweep)
            except Exception as exc:  # a missed heartbeat is survivable; the next may work
                log.warning("heartbeat failed: %s", exc)
                continue
            if expired:
                self._wake.set()

    def _beat(self, tx: Tx, now: float) -> int:
        """Renew our leases, say we are alive, and free the jobs of workers that are not."""
        queue.renew(tx, self.owner, now, self.config.lease_seconds)
        tx.execute(
            "upsert_worker",
            owner=self.owner,
            hostname=_HOST,
            pid=os.getpid(),
            boot_id=_BOOT_ID,
            jobs_done=self.stats.done,
            now=now,
        )
        # What `status` needs to tell a run worked on from one left open.
        tx.execute(
            "set_worker_runs", owner=self.owner, runs=None if self.serve else json.dumps(self.runs)
        )
        if self._resources.leases is not None:
            forget_gone_waiters(tx, now)
        return queue.expire_leases(tx, now) + queue.expire_dead_owners(tx, now, is_dead_here)

    async def _work(self, index: int) -> None:
        # Bound once, outside the loop: a job costs no look-up it did not cost before.
        claims, execute = self._claims, self._runner.execute
        while not self._stopping.is_set() and not self._finished.is_set():
            claims.idle += 1
            try:
                job = await claims.next()
            finally:
                claims.idle -= 1
            if job is None:
                continue
            self.stats.running[index] = job.key
            try:
                await execute(job)
            finally:
                self.stats.running.pop(index, None)
