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
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLD", "tune_gc"]

GC_THRESHOLD = (10_000, 10, 10)
"""New container objects before a young-generation pass, and passes of each generation
before one of the next (CPython's defaults: 700, 10, 10)."""


def tune_gc() -> None:
    """Freeze the objects alive now and collect less often (see the module docstring).
    Call it once the process has imported what it needs."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
