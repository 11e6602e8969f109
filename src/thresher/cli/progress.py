"""Live progress of a long command: a bar on a terminal, a log line now and then otherwise.

`run`, `crawl` and `ingest run` all poll the store for how far their run is (so what
other workers do counts too) and show it the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["PLAIN_PROGRESS_SECONDS", "Poll", "Polled", "live_progress"]

log = logging.getLogger("thresher")

# Without a terminal, a progress line goes to the log this many seconds apart.
PLAIN_PROGRESS_SECONDS = 10.0
# A terminal's bar is read again this often.
BAR_SECONDS = 0.5

Polled = tuple[str, int | None, int | None]
"""What a run has done: a line of text, and (done, total) for a bar when known."""

Poll = Callable[[], Awaitable[Polled | None]]


@contextmanager
def _running(work: Coroutine[Any, Any, None]) -> Iterator[None]:
    task = asyncio.get_running_loop().create_task(work)
    try:
        yield
    finally:
        task.cancel()


@contextmanager
def live_progress(console: Console | None, poll: Poll, *, bar: bool = True) -> Iterator[None]:
    """While the block runs, show what `poll` says: on `console` (a terminal) a spinner,
    a bar when `bar` and the total is known, the text and the time taken; without one,
    the text as a log line every PLAIN_PROGRESS_SECONDS. A failed poll (a busy store)
    only delays the display."""
    if console is None:

        async def plain() -> None:
            while True:
                await asyncio.sleep(PLAIN_PROGRESS_SECONDS)
                with contextlib.suppress(Exception):
                    got = await poll()
                    if got is not None:
                        text, done, total = got
                        share = f" ({done} of {total})" if total else ""
                        log.info("progress: %s%s", text, share)

        with _running(plain()):
            yield
        return

    columns: list[ProgressColumn] = [SpinnerColumn()]
    if bar:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns += [TextColumn("{task.description}"), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("starting", total=None)

        async def refresh() -> None:
            while True:
                with contextlib.suppress(Exception):
                    got = await poll()
                    if got is not None:
                        text, done, total = got
                        progress.update(task, description=text, completed=done, total=total)
                await asyncio.sleep(BAR_SECONDS)

        with _running(refresh()):
            yield
