"""Child processes that die with their parent: CPU-bound work on the machine's other cores.

Parsing pages (crawls) and messages (mail archives) is pure Python and holds the GIL; a
child process lets it run beside the event loop and the store's threads. The children are
started with `spawn`, not `fork` (the parent has threads: forking those is unsafe), and
ask Linux to kill them when the parent dies, so a `kill -9` of Thresher leaves nothing
running behind it. They tune their collector and heap as the `thresher` program does
(`thresher.runtime`).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from .runtime import tune_process

__all__ = ["die_with_parent", "sigint_blocked", "spawn_pool"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when `parent` dies; exit now if it already has."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Processes started inside never hear SIGINT: they inherit it blocked, from the first
    instruction on. A Ctrl-C reaches the terminal's whole process group, and a child
    still importing would print a KeyboardInterrupt traceback; the parent decides what
    a Ctrl-C means and tells its children (SIGTERM). The parent's own SIGINT is not
    lost: blocked only in this thread for the moment a child takes to start, it waits
    (or goes to another thread, and Python runs its handler in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # a test's loop in a thread: nothing to hear Ctrl-C there anyway
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _init(parent: int, setup: Callable[..., None] | None, args: tuple[Any, ...]) -> None:
    die_with_parent(parent)
    tune_process()
    if setup is not None:
        setup(*args)


def spawn_pool(
    workers: int, setup: Callable[..., None] | None = None, args: tuple[Any, ...] = ()
) -> ProcessPoolExecutor:
    """A pool of `workers` spawned children that die with this process; `setup(*args)`
    runs first in each. They start now, not at the first task, so that they start
    without hearing Ctrl-C (`sigint_blocked`)."""
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init,
        initargs=(os.getpid(), setup, args),
    )
    with sigint_blocked():
        for _ in range(workers):  # each submit to a pool without an idle child starts one
            pool.submit(_nothing)
    return pool


def _nothing() -> None:
    pass
