"""What the handlers of a worker pool share in its process, made on first use.

A handler's `JobContext` reaches them: its `fetcher` is one polite fetcher per manners,
its `shared` one object per key (ingest's WARC writer), its `leases` the hosts' turns
shared by the workers of a PostgreSQL store. The pool closes them all when it stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import cast

from ..clock import Clock
from ..config import Config
from ..fetch import FetchSettings
from ..fetch.leases import HostLeases
from ..fetch.polite import PoliteFetcher
from ..frontier import Politeness
from ..liveness import is_dead_here
from ..store.aio import AsyncStore
from .handlers import C, Closable

__all__ = ["HANDLER_MAX_BODY", "Resources"]

log = logging.getLogger("thresher.jobs")

# The most any handler may ask a fetch to read (a source's max_bytes is capped by it).
HANDLER_MAX_BODY = 2 * 2**30


class Resources:
    """A pool's fetchers (`fetcher`), shared objects (`get_shared`) and host leases
    (`leases`, None with SQLite), for the owner of its job leases. `stopping` set: the
    fetchers defer no more."""

    def __init__(
        self,
        config: Config,
        store: AsyncStore,
        clock: Clock,
        owner: str,
        stopping: asyncio.Event,
    ) -> None:
        self.config = config
        self.clock = clock
        self._stopping = stopping
        self._fetchers: dict[tuple[bool, float], PoliteFetcher] = {}
        self._shared: dict[str, asyncio.Future[Closable]] = {}
        # Workers anywhere may share a PostgreSQL store: they share its hosts' turns.
        self.leases = (
            HostLeases(store, owner, lease_seconds=config.lease_seconds, is_dead=is_dead_here)
            if store.backend == "postgres"
            else None
        )

    async def fetcher(
        self, *, allow_private: bool = False, delay: float | None = None
    ) -> PoliteFetcher:
        """The process's polite fetcher for these manners, made on first use."""
        key = (allow_private, self.config.delay if delay is None else delay)
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            settings = FetchSettings(
                user_agent=self.config.user_agent,
                total_timeout=self.config.http_timeout,
                stall_timeout=self.config.stall_timeout,
                read_timeout=self.config.read_timeout,
                allow_private=allow_private,
                # Handlers pass their own limit (`max_body=`, a source's max_bytes): a
                # month of a busy list's archive can be hundreds of megabytes.
                max_body=HANDLER_MAX_BODY,
                max_decoded=HANDLER_MAX_BODY,
            )
            politeness = Politeness(delay=key[1], ip_delay=key[1] / 2)
            fetcher = await PoliteFetcher(
                settings,
                politeness,
                self.clock,
                max_defer=self.config.defer_max,
                leases=self.leases,
                stopping=self._stopping,
            ).__aenter__()
            self._fetchers[key] = fetcher
        return fetcher

    async def get_shared(self, key: str, make: Callable[[], Awaitable[C]]) -> C:
        """The process's object under `key`, made once even when many jobs ask at once."""
        made = self._shared.get(key)
        if made is None or (made.done() and (made.cancelled() or made.exception() is not None)):
            made = self._shared[key] = asyncio.ensure_future(make())
        # The dict holds every key's object; the key's maker decides its type.
        return cast(C, await asyncio.shield(made))

    async def close_shared(self) -> None:
        shared, self._shared = self._shared, {}
        for key, made in shared.items():
            if not made.done() or made.cancelled() or made.exception() is not None:
                made.cancel()
                continue
            try:
                await made.result().aclose()
            except Exception as exc:  # the others must still be closed
                log.error("closing %s failed: %s", key, exc)

    async def close(self) -> None:
        """Close the fetchers and hand back the host leases (after `close_shared`)."""
        for fetcher in self._fetchers.values():
            await fetcher.__aexit__(None, None, None)
        if self.leases is not None:
            await self.leases.release_all(self.clock.now())
