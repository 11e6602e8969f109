"""A crawl engine in a child process of its own: how a shard gets a core.

One engine is one event loop, and its fetching, parsing and WARC writing share one
core. A sharded crawl runs each shard's engine in a child process with its own connection
to the store: spawned afresh, so nothing of the parent's loop, threads or connections is
inherited — or, for the `thresher crawl` and `thresher run` commands, forked by `prewarm`
before they have any, which saves the new interpreter's imports (0.2-0.3 s before the
first fetch). Either way the crawl reaches it pickled through a pipe and its summary
comes back the same way; the parent keeps the job's lease alive with its heartbeat as for
any job, and the child's commits check that lease, as the engine's always do.

Stopping: when the job is cancelled (SIGTERM or Ctrl-C of the worker, a hand-back) the
parent sends SIGTERM, and the child stops the way an interrupted crawl does — it commits
what is done and keeps the rest for a resume. The child asks Linux to SIGKILL it when
its parent dies (`PR_SET_PDEATHSIG`), so a `kill -9` of a worker never leaves a crawl
writing WARC files behind it while another worker resumes the shard.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import pickle
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ..childproc import die_with_parent
from ..clock import Clock, SystemClock
from ..errors import PermanentError, TransientError
from ..fetch.leases import HostLeases
from ..jobs.retry import is_transient
from ..jobs.worker import is_dead_here
from ..redact import RedactingFilter, remember
from ..runtime import tune_process, tuned
from ..store.aio import AsyncStore
from .engine import CrawlEngine, CrawlSummary
from .ledger import Shard
from .settings import CrawlSettings

__all__ = ["ChildCrawl", "crawl_in_child", "prewarm", "release_prewarmed"]

log = logging.getLogger("thresher.crawl")

# Seconds a child gets to commit and stop after SIGTERM before it is killed.
STOP_SECONDS = 30.0


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
    """Run the crawl in a new process (a forked one from `prewarm` if there is one left)
    and return its summary, or raise what it raised."""
    child = _forked.pop() if _forked else await _Spawned.start()
    try:
        child.send(pickle.dumps(spec))
    except OSError:  # it died waiting: it never saw the crawl
        await child.reap()
        child = await _Spawned.start()
        child.send(pickle.dumps(spec))
    answer = asyncio.ensure_future(child.answer())
    try:
        try:
            data = await asyncio.shield(answer)
        except asyncio.CancelledError:
            child.signal(signal.SIGTERM)  # the child commits what is done, then stops
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(answer), STOP_SECONDS)
            raise
    finally:
        try:
            await asyncio.wait_for(asyncio.shield(child.reap()), STOP_SECONDS)
        except TimeoutError:
            child.signal(signal.SIGKILL)
            await child.reap()
    try:
        kind, value = pickle.loads(data)
    except Exception:  # killed, or died without a word
        raise TransientError(f"the crawl's process ended ({child.returncode})") from None
    if kind == "error":
        raise value
    assert isinstance(value, CrawlSummary)
    return value


class _Spawned:
    """A child started afresh: ``python -m thresher.crawl.process``, spec on its stdin,
    answer on its stdout. A plain subprocess, not multiprocessing: no resource tracker
    process beside it, and asyncio waits for it without a thread."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls) -> _Spawned:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            __name__,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(proc)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.close()

    async def answer(self) -> bytes:
        assert self.proc.stdout is not None
        return await self.proc.stdout.read()

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signum)

    async def reap(self) -> None:
        await self.proc.wait()


class _Forked:
    """A child forked by `prewarm`, waiting for its spec on a pipe."""

    def __init__(self, pid: int, spec_w: int, answer_r: int) -> None:
        self.pid = pid
        self.spec_w = spec_w
        self.answer_r = answer_r
        self.returncode: int | None = None

    def send(self, data: bytes) -> None:
        # The child is blocked reading this pipe, so the write ends however long it is.
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.spec_w, view) :]
        finally:
            os.close(self.spec_w)

    async def answer(self) -> bytes:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        pipe = os.fdopen(self.answer_r, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
        try:
            return await reader.read()
        finally:
            transport.close()

    def signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    async def reap(self) -> None:
        if self.returncode is not None:
            return
        # A pidfd becomes readable when the process ends: no thread, no SIGCHLD handler.
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ended.done():
                ended.set_result(None)

        pidfd = os.pidfd_open(self.pid)
        try:
            loop.add_reader(pidfd, readable)
            try:
                await ended
            finally:
                loop.remove_reader(pidfd)
        finally:
            os.close(pidfd)
        _, status = os.waitpid(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)


_forked: list[_Forked] = []


def prewarm(count: int) -> None:
    """Fork `count` processes for the shards of a crawl this command is about to run, so
    they start with every module imported (a spawned one imports for 0.2-0.3 s before its
    first fetch, while the crawl waits). `crawl_in_child` hands them their crawls; the
    ones left are stopped by `release_prewarmed` (or at exit).

    Forking is safe only before the process has other threads, an event loop or a store
    connection, so call it first thing; it does nothing in a process that is not the
    `thresher` program (`thresher.runtime.tuned`), has other threads or cannot fork."""
    if count < 1 or not tuned() or threading.active_count() != 1:
        return
    if not hasattr(os, "pidfd_open"):  # not Linux: spawned processes will do
        return
    if not _forked:
        atexit.register(release_prewarmed)
    parent = os.getpid()
    for _ in range(count):
        spec_r, spec_w = os.pipe()
        answer_r, answer_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: keep only its own ends of its own pipes
            os.close(spec_w)
            os.close(answer_r)
            for sibling in _forked:
                os.close(sibling.spec_w)
                os.close(sibling.answer_r)
            _forked.clear()
            _serve_forked(parent, spec_r, answer_w)
        os.close(spec_r)
        os.close(answer_w)
        _forked.append(_Forked(pid, spec_w, answer_r))


def release_prewarmed() -> None:
    """Stop the forked processes no crawl took: each sees its pipe close and exits."""
    while _forked:
        child = _forked.pop()
        for fd in (child.spec_w, child.answer_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child.pid, 0)


def _serve_forked(parent: int, spec_r: int, answer_w: int) -> NoReturn:
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `_run` does, from the start
        die_with_parent(parent)
        os.dup2(2, 1)  # stray output goes to stderr, never into the command's own
        with os.fdopen(spec_r, "rb") as f:
            data = f.read()
        if data:  # else released unused
            answer = _run(pickle.loads(data))
            with os.fdopen(answer_w, "wb") as out:
                out.write(answer)
        code = 0
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def main() -> None:
    """The spawned child: a `ChildCrawl` pickled on stdin, ("ok", summary) or ("error",
    exception) pickled on stdout. Anything else written to stdout goes to stderr."""
    die_with_parent(os.getppid())
    answer_to = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    answer = _run(pickle.loads(sys.stdin.buffer.read()))
    answer_to.write(answer)
    answer_to.close()


def _run(spec: Any) -> bytes:
    """Run the crawl `spec` describes in this process; its answer for the parent."""
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
    handler.addFilter(RedactingFilter())
    remember(spec.store_url)
    root.handlers = [handler]
    try:
        answer: tuple[str, Any] = ("ok", asyncio.run(_crawl(spec)))
    except BaseException as exc:  # every failure goes back to the parent
        answer = ("error", _portable(exc))
    return pickle.dumps(answer)


async def _crawl(spec: ChildCrawl) -> CrawlSummary:
    store = await AsyncStore(spec.store_url).open()
    leases = (
        HostLeases(
            store, spec.owner or "crawl", lease_seconds=spec.lease_seconds, is_dead=is_dead_here
        )
        if spec.shared_leases
        else None
    )
    clock = SystemClock()
    task = asyncio.ensure_future(spec.engine(store, clock, leases).run())
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await task
    finally:
        if leases is not None:
            with contextlib.suppress(Exception):
                await leases.release_all(clock.now())
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


if __name__ == "__main__":
    from thresher.crawl.process import main as _main  # the importable copy: pickles match

    _main()
