"""Async access to a synchronous store: each connection lives in its own thread.

sqlite3 and psycopg's sync API are simple and fast for short transactions; running each
connection on a dedicated single thread keeps them off the event loop and never shares
a connection between threads. SQLite gets one connection (one writer anyway);
PostgreSQL gets several so that concurrent workers claim and commit in parallel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from . import open_store
from .base import Store, Tx

__all__ = ["AsyncStore"]

T = TypeVar("T")


class AsyncStore:
    def __init__(self, url: str, connections: int = 1, readonly: bool = False) -> None:
        self.url = url
        self._readonly = readonly
        self._slots: list[tuple[ThreadPoolExecutor, Store]] = []
        self._free: asyncio.Queue[tuple[ThreadPoolExecutor, Store]] | None = None
        self._connections = connections

    async def open(self) -> AsyncStore:
        loop = asyncio.get_running_loop()
        for i in range(self._connections):
            executor = ThreadPoolExecutor(1, thread_name_prefix=f"thresher-store-{i}")
            try:
                store = await loop.run_in_executor(executor, open_store, self.url, self._readonly)
            except BaseException:
                executor.shutdown(wait=False)
                await self.close()
                raise
            self._slots.append((executor, store))
        self._free = asyncio.Queue()
        for slot in self._slots:
            self._free.put_nowait(slot)
        return self

    @property
    def backend(self) -> str:
        return self._slots[0][1].backend

    async def run(self, fn: Callable[[Tx], T], write: bool = True) -> T:
        """Run `fn` inside one transaction on a store thread; commit if it returns."""
        assert self._free is not None, "AsyncStore.open() first"
        slot = await self._free.get()
        executor, store = slot
        try:

            def call() -> T:
                with store.transaction(write=write) as tx:
                    return fn(tx)

            # Shielded: a cancelled caller must not leave the thread mid-transaction
            # while the slot is handed to someone else.
            future = asyncio.get_running_loop().run_in_executor(executor, call)
            return await asyncio.shield(future)
        finally:
            self._free.put_nowait(slot)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        for executor, store in self._slots:
            await loop.run_in_executor(executor, store.close)
            executor.shutdown(wait=True)
        self._slots.clear()
