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
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from .runtime import tune_process

__all__ = ["die_with_parent", "spawn_pool"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when `parent` dies; exit now if it already has."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


def _init(parent: int, setup: Callable[..., None] | None, args: tuple[Any, ...]) -> None:
    die_with_parent(parent)
    tune_process()
    if setup is not None:
        setup(*args)


def spawn_pool(
    workers: int, setup: Callable[..., None] | None = None, args: tuple[Any, ...] = ()
) -> ProcessPoolExecutor:
    """A pool of `workers` spawned children that die with this process; `setup(*args)`
    runs first in each."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init,
        initargs=(os.getpid(), setup, args),
    )
