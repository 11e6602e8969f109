"""Job handlers: the code that does a job, registered by kind.

A handler gets a JobContext and returns an Outcome; it raises TransientError or
PermanentError (or anything else, treated as transient) when it cannot. It must not
write to the store itself: what it returns is committed with the job, exactly once.
The one exception is a checkpoint of a job too big for one outcome (a mail archive's
unit read in parts): idempotent writes, in a transaction that checks first that the
job still holds its lease (`queue.hold`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from .model import JOIN_KIND, Job, Outcome

if TYPE_CHECKING:
    import asyncio

    from ..clock import Clock
    from ..config import Config
    from ..fetch.leases import HostLeases
    from ..fetch.polite import PoliteFetcher
    from ..store.aio import AsyncStore

__all__ = ["Closable", "Fetcher", "Handler", "JobContext", "Shared", "handler_for", "register"]

log = logging.getLogger("thresher.jobs")


@dataclass(frozen=True)
class JobContext:
    job: Job
    owner: str
    config: Config
    clock: Clock
    store: AsyncStore
    # The process's polite fetcher (robots.txt, per-host delay, private addresses
    # refused unless allowed): every fetch a handler makes goes through it.
    fetcher: Fetcher
    # Objects the handlers of one process share (ingest's WARC writer), made on first
    # use under a key and closed when the worker pool stops.
    shared: Shared
    # The hosts' turns shared by every worker of a PostgreSQL store; None with SQLite.
    # Handlers that fetch without `fetcher` (a crawl) take their hosts' turns here.
    leases: HostLeases | None = None
    # Set when the process is stopping (SIGINT, SIGTERM): a long job (a crawl) stops
    # starting work, commits what it did and raises `Interrupted` within a few seconds,
    # rather than run on through the grace period that short jobs get to finish.
    stopping: asyncio.Event | None = None


class Fetcher(Protocol):
    def __call__(
        self, *, allow_private: bool = False, delay: float | None = None
    ) -> Awaitable[PoliteFetcher]: ...


class Closable(Protocol):
    async def aclose(self) -> None: ...


C = TypeVar("C", bound=Closable)


class Shared(Protocol):
    def __call__(self, key: str, make: Callable[[], Awaitable[C]]) -> Awaitable[C]: ...


Handler = Callable[[JobContext], Awaitable[Outcome]]

_HANDLERS: dict[str, Handler] = {}


def register(kind: str) -> Callable[[Handler], Handler]:
    def decorate(fn: Handler) -> Handler:
        if kind in _HANDLERS and _HANDLERS[kind] is not fn:
            raise ValueError(f"two handlers for job kind {kind!r}")
        _HANDLERS[kind] = fn
        return fn

    return decorate


def handler_for(kind: str) -> Handler | None:
    """The handler registered for `kind`. Registering is the top layer's business (the
    execution plan loads the source types, which register their jobs' handlers): this
    layer never imports the ones above it."""
    return _HANDLERS.get(kind)


@register(JOIN_KIND)
async def _join(ctx: JobContext) -> Outcome:
    return Outcome()
