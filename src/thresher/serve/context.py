"""What every route of `thresher serve` shares: the read-only store, the settings, the
templates, and the headers that make a response safe."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from jinja2 import Environment

from ..clock import iso
from ..sources.archives import ARCHIVE_TYPE_NAMES
from ..store import Tx
from ..store.aio import AsyncStore
from .auth import Access
from .templates import environment, href

__all__ = [
    "CSP_PAGE",
    "CSP_SANDBOX",
    "Context",
    "source_href",
]

T = TypeVar("T")

# Pages computed under the same store fingerprint are served again for this long at
# most after they were read (a worker that stops beating changes nothing in the store:
# it just goes quiet).
CACHE_SECONDS = 10.0
_clock = time.monotonic
CACHE_ENTRIES = 256

# Every page: nothing but this server's own script, styles and fetches; no inline script
# or style, no plugin, no frame, no form posting elsewhere.
CSP_PAGE = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# Harvested bytes (a raw message, an archived page's payload, an attachment): even if a
# browser were talked into rendering them, they run in a sandbox without script, origin,
# forms or plugins.
CSP_SANDBOX = "sandbox; default-src 'none'; frame-ancestors 'none'"


def source_href(source: dict[str, Any]) -> str:
    """The page of a source, by its type."""
    if source["type"] in ARCHIVE_TYPE_NAMES:
        return href("lists", source["name"])
    if source["type"] == "web":
        return href("crawls", source["name"])
    if source["type"] == "ingest":
        return "/ingest"
    return href("sources", source["name"])


@dataclass
class Context:
    store: AsyncStore
    home: Path
    lease_seconds: float
    access: Access
    store_info: dict[str, Any]  # backend, url (password hidden), schema_version
    env: Environment = field(default_factory=environment)
    _cache: OrderedDict[Hashable, Any] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _running: dict[Hashable, asyncio.Future[Any]] = field(default_factory=dict)

    async def read(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` in a read-only transaction on a store thread."""
        return await self.store.run(fn, write=False)

    async def read_cached(self, key: Hashable, fn: Callable[[Tx], T]) -> T:
        """`read`, remembered: in the same transaction the store's fingerprint
        (serve_fingerprint) is read first, and while it is the same and the data less
        than `CACHE_SECONDS` old, the page's data is not read again. Why: the aggregate
        pages (the status's per-list counts, ingest stats) read many rows; a store where
        nothing moves answers them from memory, one where harvests run recomputes them at
        most once per change. A request for a key being read waits for that read rather
        than starting another (two of the same aggregate would halve each other's speed
        on the store threads). The data is never changed by the caller."""
        running = self._running.get(key)
        if running is not None:
            return await asyncio.shield(running)
        future = asyncio.ensure_future(self._read_cached(key, fn))
        self._running[key] = future
        try:
            return await asyncio.shield(future)
        finally:
            if future.done():
                self._finished(key, future)
            else:  # the caller was cancelled: the read goes on for the others
                future.add_done_callback(partial(self._finished, key))

    def _finished(self, key: Hashable, future: asyncio.Future[Any]) -> None:
        if self._running.get(key) is future:
            del self._running[key]
        if not future.cancelled():
            future.exception()  # retrieved: nobody may be left waiting for it

    async def _read_cached(self, key: Hashable, fn: Callable[[Tx], T]) -> T:

        def run(tx: Tx) -> T:
            fingerprint = tuple((tx.one("serve_fingerprint") or {}).values())
            full = (key, fingerprint)
            with self._lock:
                found = self._cache.get(full)
                if found is not None and _clock() - found[1] < CACHE_SECONDS:
                    self._cache.move_to_end(full)
                    return found[0]  # type: ignore[no-any-return]
            read_at = _clock()
            value = fn(tx)
            with self._lock:
                self._cache[full] = (value, read_at)
                self._cache.move_to_end(full)
                while len(self._cache) > CACHE_ENTRIES:
                    self._cache.popitem(last=False)
            return value

        return await self.store.run(run, write=False)

    def render(
        self, template: str, nav: str = "", status: int = 200, **values: Any
    ) -> web.Response:
        now = time.time()
        html = self.env.get_template(template).render(
            nav=nav,
            now=now,
            now_iso=iso(now),
            store_label=f"{self.store_info['backend']} store",
            source_href=source_href,
            **values,
        )
        return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
