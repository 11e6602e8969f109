"""An asyncio server on an event loop of its own, in a background thread: the demo
archive's, and the tests' other servers on 127.0.0.1; and what every server started and
stopped in a `with` block shares (`Served`).

Why a thread: synchronous tests, async tests on another loop and subprocesses can all
talk to a server that runs beside them. A subclass says how it starts listening
(`_serve`, which sets its port) and how it closes (`_shutdown`); `start` returns once it
listens, or raises what stopped it, and `stop` ends the loop and waits for the thread.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import Self

__all__ = ["Served", "ThreadedServer"]


class Served:
    """A server that `start` starts (returning it) and `stop` stops; in a `with`, for
    the block. The tests' servers in a process of their own are ones too."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ThreadedServer(Served):
    """`_serve` and `_shutdown` run on the server's own loop, in a thread named
    `thread_name`."""

    thread_name = "thresher-server"

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def _serve(self) -> None:
        raise NotImplementedError

    async def _shutdown(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:
                failure.append(exc)
                loop.run_until_complete(self._shutdown())
                loop.close()
                ready.set()
                return
            ready.set()
            loop.run_forever()
            try:
                loop.run_until_complete(self._shutdown())
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=self.thread_name, daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = self._loop = None
            raise failure[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self._loop = self._thread = None
