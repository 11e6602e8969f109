"""A crawl engine in a child process of its own: how a shard gets a core.

One engine is one event loop, and its fetching, parsing and WARC writing share one
core. A sharded crawl runs each shard's engine in a child process (spawned, so nothing
of the parent's loop or connections is inherited) with its own connection to the store;
the parent keeps the job's lease alive with its heartbeat as for any job, and the child's
commits check that lease, as the engine's always do.

Stopping: when the job is cancelled (SIGTERM or Ctrl-C of the worker, a hand-back) the
parent sends SIGTERM, and the child stops the way an interrupted crawl does — it commits
what is done and keeps the rest for a resume. The child asks Linux to SIGKILL it when
its parent dies (`PR_SET_PDEATHSIG`), so a `kill -9` of a worker never leaves a crawl
writing WARC files behind it while another worker resumes the shard.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import pickle
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import Clock, SystemClock
from ..errors import PermanentError, TransientError
from ..fetch.leases import HostLeases
from ..jobs.retry import is_transient
from ..jobs.worker import is_dead_here
from ..runtime import tune_process
from ..store.aio import AsyncStore
from .engine import CrawlEngine, CrawlSummary
from .ledger import Shard
from .settings import CrawlSettings

__all__ = ["ChildCrawl", "crawl_in_child"]

log = logging.getLogger("thresher.crawl")

# Seconds a child gets to commit and stop after SIGTERM before it is killed.
STOP_SECONDS = 30.0
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ChildCrawl:
    """Everything a child process needs to run one engine (all of it pickles)."""

    settings: CrawlSettings
    source: str
    run: int
    store_url: str
    warc_dir: Path
    job: int | None
    owner: str | None
    shard: Shard | None
    # Workers share a PostgreSQL store's host turns (`thresher.fetch.leases`).
    shared_leases: bool
    lease_seconds: float
    log_level: int

    def engine(self, store: AsyncStore, clock: Clock, leases: HostLeases | None) -> CrawlEngine:
        """The engine this describes, on `store` (in this process or a child's)."""
        return CrawlEngine(
            self.settings,
            source=self.source,
            run=self.run,
            store=store,
            warc_dir=self.warc_dir,
            clock=clock,
            job=self.job,
            owner=self.owner,
            leases=leases,
            shard=self.shard,
        )


async def crawl_in_child(spec: ChildCrawl) -> CrawlSummary:
    """Run the crawl in a new process and return its summary, or raise what it raised."""
    # A plain subprocess, not multiprocessing: no resource tracker process beside it,
    # and asyncio waits for it without a thread.
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        __name__,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(pickle.dumps(spec))
    proc.stdin.close()
    answer = asyncio.ensure_future(proc.stdout.read())
    try:
        try:
            data = await asyncio.shield(answer)
        except asyncio.CancelledError:
            proc.terminate()  # SIGTERM: the child commits what is done, then stops
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(answer), STOP_SECONDS)
            raise
    finally:
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_SECONDS)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    try:
        kind, value = pickle.loads(data)
    except Exception:  # killed, or died without a word
        raise TransientError(f"the crawl's process ended ({proc.returncode})") from None
    if kind == "error":
        raise value
    assert isinstance(value, CrawlSummary)
    return value


def main() -> None:
    """The child: a `ChildCrawl` pickled on stdin, ("ok", summary) or ("error", exception)
    pickled on stdout. Anything else written to stdout goes to stderr."""
    _die_with_parent()
    answer_to = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    spec = pickle.loads(sys.stdin.buffer.read())
    assert isinstance(spec, ChildCrawl)
    tune_process()
    # Ctrl-C reaches the whole process group: the parent decides, and sends SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    root = logging.getLogger("thresher")
    root.setLevel(spec.log_level)
    root.propagate = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
    )
    root.addHandler(handler)
    try:
        answer: tuple[str, Any] = ("ok", asyncio.run(_crawl(spec)))
    except BaseException as exc:  # every failure goes back to the parent
        answer = ("error", _portable(exc))
    answer_to.write(pickle.dumps(answer))
    answer_to.close()


async def _crawl(spec: ChildCrawl) -> CrawlSummary:
    store = await AsyncStore(spec.store_url).open()
    leases = (
        HostLeases(
            store, spec.owner or "crawl", lease_seconds=spec.lease_seconds, is_dead=is_dead_here
        )
        if spec.shared_leases
        else None
    )
    task = asyncio.ensure_future(spec.engine(store, SystemClock(), leases).run())
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await task
    finally:
        if leases is not None:
            with contextlib.suppress(Exception):
                await leases.release_all()
        await store.close()


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling, else an error of the same kind for the job system."""
    if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
        return TransientError("the crawl was stopped")
    try:
        copy = pickle.loads(pickle.dumps(exc))
    except Exception:  # any exception may refuse to pickle
        text = f"{type(exc).__name__}: {exc}"
        return TransientError(text) if is_transient(exc) else PermanentError(text)
    assert isinstance(copy, BaseException)
    return copy


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):  # Linux only; elsewhere the lease check remains
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


if __name__ == "__main__":
    from thresher.crawl.process import main as _main  # the importable copy: pickles match

    _main()
