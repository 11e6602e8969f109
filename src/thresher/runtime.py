"""Settings of a Thresher process as a whole, made once where the process starts.

**The garbage collector.** CPython's cyclic collector runs a young-generation pass every
700 new container objects, and now and then a full pass over every object it tracks —
modules, classes and functions included, about 50 000 once aiohttp and the rest are
imported. A crawl allocates in bursts (a response, its headers, a parse, a WARC
record's pieces), so it crossed that threshold over a thousand times in a 20 000-page
crawl, with ten full passes: 0.53-0.62 s of a 10.5 s crawl's CPU, 5 %. Hardly any of
it found garbage: Thresher's objects are freed by reference counting; cycles come from
the odd exception and traceback.

So a long-running process (the `thresher` command, a crawl shard's process) freezes what
its imports made (`gc.freeze`: never traversed again) and collects the young generation
every 10 000 new objects: 4 passes in the same crawl, 0.01 s. Cyclic garbage waits a
little longer to be freed; at most some thousands of objects. Tests that call
`thresher.cli.main.main` in their own process are left as they are.

**The C heap.** Lexbor builds each page's tree in memory chunks it mallocs and frees
again, and ISA-L mallocs its compressor's state for every record. With glibc's defaults
the free space at the top of the heap goes back to the kernel (`brk`) as soon as it
passes 128 KiB, so the next page grew the heap again and faulted in fresh zeroed pages:
`brk` alone was 3 % of a crawl shard's samples (py-spy --native), and a 20 000-page
crawl took 8 % less CPU and 9 % less time once the heap kept `MALLOC_TRIM_THRESHOLD`
bytes of free space and grew by `MALLOC_TOP_PAD` more than it needed (measured in
turns, three runs each: 6.6-6.8 s against 5.9-6.2 s). A process keeps at most those
few MiB more than before.

**The event loop.** Thresher's commands run their loop on uvloop (libuv) where it is
installed (`run`), else on asyncio's own. An ingest spends a third of its event loop's
time in asyncio's transports and aiohttp; with uvloop, `benchmarks/ingest` took 5 % less
CPU per request (3-10 % in seven pairs of runs made side by side, 2026-12-06), probably
because a socket's send on asyncio's loop lets go of the GIL and the hash thread takes
it, while uvloop's keeps it. The crawl benchmark was unchanged.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import importlib
import os
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "GC_THRESHOLD",
    "MALLOC_TOP_PAD",
    "MALLOC_TRIM_THRESHOLD",
    "event_loop_name",
    "private_files",
    "run",
    "tune_process",
    "tuned",
]

GC_THRESHOLD = (10_000, 10, 10)
"""New container objects before a young-generation pass, and passes of each generation
before one of the next (CPython's defaults: 700, 10, 10)."""


MALLOC_TRIM_THRESHOLD = 8 << 20
"""Bytes of free space at the top of the C heap kept rather than given back (glibc's
default: 128 KiB, raised as large blocks are freed)."""

MALLOC_TOP_PAD = 1 << 20
"""Bytes the C heap grows by beyond what an allocation needs (glibc's default: 128 KiB)."""

# mallopt's parameter numbers, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2

_tuned = False

T = TypeVar("T")


def tune_process() -> None:
    """Tune the collector and the C heap for a long run (see the module docstring).
    Call it once the process has imported what it needs."""
    global _tuned
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    _tune_malloc()
    _tuned = True


def private_files() -> None:
    """Files this process (and its children) create are its user's alone: 0600, folders
    0700, or stricter if the umask already is. A harvest holds other people's mail,
    a store's credentials and whatever a crawl found; a umask of 022 made them all
    readable by every user of the machine."""
    os.umask(os.umask(0o077) | 0o077)


def tuned() -> bool:
    """Whether `tune_process` ran: this is the `thresher` program (or a child of it), not
    a test's process that calls `main` — whose threads and fixtures are not its own."""
    return _tuned


def _tune_malloc() -> None:
    if not sys.platform.startswith("linux"):
        return
    # Where the C library is not glibc, mallopt is missing or a stub that does nothing.
    with contextlib.suppress(OSError, AttributeError):
        mallopt = ctypes.CDLL(None).mallopt
        mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD)
        mallopt(_M_TOP_PAD, MALLOC_TOP_PAD)


@functools.cache
def _loop_factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop] | None]:
    # Imported by name: uvloop is not installed where it has no build (Windows).
    with contextlib.suppress(ImportError):
        return "uvloop", importlib.import_module("uvloop").new_event_loop
    return "asyncio", None


def event_loop_name() -> str:
    """The event loop `run` runs on: ``uvloop`` or ``asyncio``."""
    return _loop_factory()[0]


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the event loop of `event_loop_name` (see the module
    docstring): what every command runs its work with."""
    import asyncio  # not at start-up: `thresher --help` needs no event loop

    with asyncio.Runner(loop_factory=_loop_factory()[1]) as runner:
        return runner.run(main)
