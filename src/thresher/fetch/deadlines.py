"""The read and total timeouts of every exchange a `Fetcher` has in flight, on one timer.

aiohttp's own (`ClientTimeout`'s ``total`` and ``sock_read``) arm and cancel a timer per
request and re-arm one for every chunk received: on a loopback crawl that was a fifth of
the client's CPU per request (108 µs with them, 84 µs without, best of six runs each).
Here an exchange notes when it started and when it last heard from the server (a clock
read), and one timer, armed for the earliest moment any exchange in flight could expire,
cancels the tasks of those that did. It wakes about once per ``read_timeout`` while
exchanges are in flight, and not at all when none are. Silence counts only once the
request is sent: waiting for a pooled connection counts towards the total alone.

The silence allowed grows with what the server has sent (`Exchange.patience`): a
server that has sent nothing of the body is given up after `stall_timeout`, and every
`PATIENCE_BYTES` of body received buy one second more, up to `read_timeout`. A stalled
connection that has delivered nothing is most likely dead, and trying again costs
nothing; one mid-way through a large body has proved it works, and giving it up throws
away what came (defaults: 10 s, 30 s once 1.25 MiB have come). Each chunk costs an
addition and a comparison, and the timer stays right: patience only grows, so a timer
set for an exchange's deadline is never late, at worst early, and then re-armed.

An expired exchange's task is cancelled the way `asyncio.timeout` cancels it: the
fetcher turns the `CancelledError` into a `FetchTimeout` only if `Task.uncancel` says
nobody else asked for the cancellation too. Every await between `Deadlines.start` and
`Deadlines.finish` must be inside the fetcher's ``try``, so the cancellation lands there.
"""

from __future__ import annotations

import asyncio
import math

__all__ = [
    "HEAD_EXPIRED",
    "PATIENCE_BYTES",
    "READ_EXPIRED",
    "TOTAL_EXPIRED",
    "Deadlines",
    "Exchange",
]

READ_EXPIRED = "no data from the server"  # the start of every silence's reason
# aiohttp does not say when bytes of the head arrive, only when it is whole: a server
# sending it a byte a second is not silent, just never done in time. Which of the two
# happened cannot be told, so the reason for a head not in names both.
HEAD_EXPIRED = "not a whole response head"
TOTAL_EXPIRED = "the exchange exceeded total_timeout"

# Bytes of body that buy a silent connection one second more than `stall_timeout`.
PATIENCE_BYTES = 64 * 1024


class Exchange:
    """One request in flight: when it started, when the server was last heard from (or
    infinity: the request is not sent yet, so no silence counts, as while it waits for a
    pooled connection), the body bytes received and the silence they allow, and once a
    deadline passed, why it was cancelled."""

    __slots__ = ("_owner", "expired", "head", "heard", "patience", "received", "started", "task")

    def __init__(self, owner: Deadlines, task: asyncio.Task[object]) -> None:
        self._owner = owner
        self.task = task
        self.started = owner.time()
        self.heard = math.inf
        self.patience = owner.first_patience
        self.received = 0
        self.expired: str | None = None
        self.head = True  # False from the request's sending until its answer's head is in

    def sent(self) -> None:
        """The request is sent: its answer's head is awaited, silence counts from now."""
        self.head = False
        self.hear()

    def hear(self, received: int = 0) -> None:
        """The request is sent, or the server sent something (`received` bytes of the
        body): silence counts from now."""
        owner = self._owner
        now = owner.time()
        if self.heard == math.inf:  # just sent: the timer may be set for later than this
            owner.arm(now + self.patience)
        self.heard = now
        if received:
            self.received += received
            if self.patience < owner.read_timeout:
                self.patience = min(
                    owner.read_timeout, owner.stall_timeout + self.received / PATIENCE_BYTES
                )

    def silence(self) -> str:
        """Why a silent exchange was given up, for the error."""
        owner = self._owner
        if not self.head:
            return (
                f"{READ_EXPIRED}, or {HEAD_EXPIRED}, within {self.patience:.3g} s of sending"
                f" the request (stall_timeout {owner.stall_timeout:g} s, at most"
                f" read_timeout {owner.read_timeout:g} s)"
            )
        return (
            f"{READ_EXPIRED} for {self.patience:.3g} s, after {self.received} bytes of the"
            f" body (the silence allowed: stall_timeout {owner.stall_timeout:g} s,"
            f" growing with the body to read_timeout {owner.read_timeout:g} s)"
        )


class Deadlines:
    """The exchanges in flight on one event loop, each cancelled once silent for longer
    than its patience (`stall_timeout` growing to `read_timeout` with the body received;
    `stall_timeout` None: `read_timeout` throughout) or running for `total_timeout`
    seconds (loop time)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        read_timeout: float,
        total_timeout: float,
        stall_timeout: float | None = None,
    ):
        self.time = loop.time
        self.read_timeout = read_timeout
        self.total_timeout = total_timeout
        self.stall_timeout = read_timeout if stall_timeout is None else stall_timeout
        self.first_patience = min(self.stall_timeout, read_timeout)
        self._loop = loop
        self._live: dict[asyncio.Task[object], Exchange] = {}
        self._timer: asyncio.TimerHandle | None = None

    @property
    def armed(self) -> bool:
        """Whether the timer is set: it is while exchanges are in flight, and until its
        next check after the last one finished."""
        return self._timer is not None

    def start(self) -> Exchange:
        """Watch the exchange the current task is starting."""
        task = asyncio.current_task(self._loop)
        if task is None:
            raise RuntimeError("a fetch must run in a task")
        exchange = self._live[task] = Exchange(self, task)
        self.arm(exchange.started + self.total_timeout)
        return exchange

    def arm(self, when: float) -> None:
        """Check no later than `when` (loop time). Usually a comparison: the timer is set
        for the earliest deadline in flight, and a new one comes later."""
        timer = self._timer
        if timer is None or timer.when() > when:
            if timer is not None:
                timer.cancel()
            self._timer = self._loop.call_at(when, self._check)

    def heard(self, task: asyncio.Task[object] | None) -> None:
        """`Exchange.sent` for `task`'s exchange, if it has one in flight."""
        exchange = self._live.get(task) if task is not None else None
        if exchange is not None:
            exchange.sent()

    def finish(self, exchange: Exchange) -> None:
        """Stop watching `exchange` (whether it succeeded, failed or expired)."""
        if self._live.get(exchange.task) is exchange:
            del self._live[exchange.task]

    def close(self) -> None:
        """Stop the timer; exchanges still in flight are no longer watched."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._live.clear()

    def _check(self) -> None:
        self._timer = None
        now = self.time()
        due = math.inf
        for exchange in list(self._live.values()):
            silent_until = exchange.heard + exchange.patience
            over_at = exchange.started + self.total_timeout
            if over_at <= now or silent_until <= now:
                exchange.expired = TOTAL_EXPIRED if over_at <= now else exchange.silence()
                del self._live[exchange.task]
                exchange.task.cancel()
            else:
                due = min(due, silent_until, over_at)
        if self._live:
            self._timer = self._loop.call_at(due, self._check)
