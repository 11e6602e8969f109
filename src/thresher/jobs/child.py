"""Work in a child process of its own: how a shard (of a crawl, of an ingest) gets a core.

One engine is one event loop, and its fetching, parsing and WARC writing share one
core. A sharded run runs each shard's engine in a child process with its own connection
to the store: spawned afresh, so nothing of the parent's loop, threads or connections is
inherited — or, for the commands that know they will (`thresher crawl`, `run`, `ingest
run`), forked by `prewarm` before they have any, which saves the new interpreter's
imports (0.2-0.3 s before the first fetch). Either way the work (a `ChildWork`) reaches
it pickled through a pipe and its result comes back the same way; the parent keeps the
job's lease alive with its heartbeat as for any job, and the child's commits check that
lease, as the engines' always do.

Stopping: when the worker stops (SIGTERM or Ctrl-C) the parent sends SIGTERM at once,
and the child stops the way the engine in the worker's own process does — it starts no
fetch, gives those in flight a few seconds, commits what is done, keeps the rest for a
resume and answers `Interrupted`. A second SIGTERM (the job cancelled: a second Ctrl-C,
the grace period over, a hand-back) cuts the fetches in flight off at once, and it
commits and stops. The child never hears Ctrl-C itself: it starts with SIGINT blocked,
so the terminal's signal reaches only the parent, which decides.

The child asks Linux to SIGKILL it when its parent dies (`PR_SET_PDEATHSIG`), so a
`kill -9` of a worker never leaves a shard writing WARC files behind it while another
worker resumes it.
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
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, Protocol, TypeVar

from ..childproc import die_with_parent, sigint_blocked
from ..errors import PermanentError, TransientError
from ..redact import RedactingFilter, remember
from ..runtime import run, tune_process, tuned
from .retry import is_transient

__all__ = [
    "STOP_SECONDS",
    "ChildWork",
    "here_or_in_child",
    "prewarm",
    "release_prewarmed",
    "run_in_child",
]

log = logging.getLogger("thresher.jobs")

# Seconds a child gets to commit and stop after SIGTERM before it is killed.
STOP_SECONDS = 30.0


class ChildWork(Protocol):
    """What a child process runs: a picklable description of an engine's work (its
    class must be importable by name in a fresh interpreter)."""

    @property
    def what(self) -> str:
        """A name for messages: "crawl", "ingest shard"."""

    @property
    def store_url(self) -> str:
        """The store it opens: remembered, so that its password never prints."""

    @property
    def log_level(self) -> int: ...

    async def work(self, stop: asyncio.Event) -> Any:
        """Do the work and return a picklable result; `stop` set: finish what is in
        flight, commit, raise Interrupted."""


T = TypeVar("T")

# Shards running in this process. Of the shards this process takes, one at a time runs in
# it, the others each in a child process of its own (shards are there to use more cores):
# a worker that only waited for its children cost the run a process's memory (25-40 MiB)
# and its share of the CPU.
_here = 0


async def here_or_in_child(
    work: ChildWork,
    here: Callable[[], Awaitable[T]],
    stop: asyncio.Event | None = None,
    *,
    alone: bool = False,
) -> T:
    """What `here()` returns, run in this process when no other shard runs in it (or when
    `alone`: a run of one shard, which has no core to gain), else what `work` returns,
    run in a child process (`run_in_child`)."""
    global _here
    if _here and not alone:
        result: T = await run_in_child(work, stop)
        return result
    _here += 1
    try:
        return await here()
    finally:
        _here -= 1


async def run_in_child(work: ChildWork, stop: asyncio.Event | None = None) -> Any:
    """Run `work` in a new process (a forked one from `prewarm` if there is one left)
    and return what it returned, or raise what it raised. `stop` set: the child finishes
    what is in flight, commits and answers `Interrupted`."""
    child = _forked.pop() if _forked else await _Spawned.start()
    try:
        child.send(pickle.dumps(work))
    except OSError:  # it died waiting: it never saw the work
        await child.reap()
        child = await _Spawned.start()
        child.send(pickle.dumps(work))
    answer = asyncio.ensure_future(child.answer())

    async def pass_stop_on() -> None:
        assert stop is not None
        await stop.wait()
        child.signal(signal.SIGTERM)  # the first: stop soon

    relay = None if stop is None else asyncio.ensure_future(pass_stop_on())
    try:
        try:
            data = await asyncio.shield(answer)
        except asyncio.CancelledError:
            if relay is not None and relay.done():
                child.signal(signal.SIGTERM)  # the second: stop now
            else:
                # Stop now: the child hears "soon", then at once "now"; it commits what
                # is done, then stops.
                child.signal(signal.SIGTERM)
                await asyncio.sleep(0.05)
                child.signal(signal.SIGTERM)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(answer), STOP_SECONDS)
            raise
    finally:
        if relay is not None:
            relay.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(child.reap()), STOP_SECONDS)
        except TimeoutError:
            child.signal(signal.SIGKILL)
            await child.reap()
    try:
        kind, value = pickle.loads(data)
    except Exception:  # killed, or died without a word
        raise TransientError(f"the {work.what}'s process ended ({child.returncode})") from None
    if kind == "error":
        raise value
    return value


class _Spawned:
    """A child started afresh: ``python -m thresher.jobs.child``, work on its stdin,
    answer on its stdout. A plain subprocess, not multiprocessing: no resource tracker
    process beside it, and asyncio waits for it without a thread."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls) -> _Spawned:
        with sigint_blocked():  # Ctrl-C is the parent's to hear (see the module's doc)
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
    """Fork `count` processes for the shards this command is about to run, so they start
    with every module imported (a spawned one imports for 0.2-0.3 s before its first
    fetch, while the shard waits). `run_in_child` hands them their work; the
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
    """Stop the forked processes no work took: each sees its pipe close and exits."""
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
    """The spawned child: a `ChildWork` pickled on stdin, ("ok", summary) or ("error",
    exception) pickled on stdout. Anything else written to stdout goes to stderr."""
    die_with_parent(os.getppid())
    answer_to = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    answer = _run(pickle.loads(sys.stdin.buffer.read()))
    answer_to.write(answer)
    answer_to.close()


def _run(spec: Any) -> bytes:
    """Run the work `spec` describes in this process; its answer for the parent."""
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
        answer: tuple[str, Any] = ("ok", run(_until_sigterm(spec)))
    except BaseException as exc:  # every failure goes back to the parent
        answer = ("error", _portable(exc))
    return pickle.dumps(answer)


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling, else an error of the same kind for the job system."""
    if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
        return TransientError("the work was stopped")
    try:
        copy = pickle.loads(pickle.dumps(exc))
    except Exception:  # any exception may refuse to pickle
        text = f"{type(exc).__name__}: {exc}"
        return TransientError(text) if is_transient(exc) else PermanentError(text)
    assert isinstance(copy, BaseException)
    return copy


async def _until_sigterm(work: ChildWork) -> Any:
    stop = asyncio.Event()
    task = asyncio.ensure_future(work.work(stop))

    def on_sigterm() -> None:
        # The first: stop soon (finish what is in flight); the second: now.
        if stop.is_set():
            task.cancel()
        stop.set()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    return await task


if __name__ == "__main__":
    from thresher.jobs.child import main as _main  # the importable copy: pickles match

    _main()
