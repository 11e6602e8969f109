"""Time, injected. Everything that waits, schedules or expires takes a Clock.

Times are float seconds since the epoch (UTC); the store keeps them as such so that
SQLite and PostgreSQL compare them the same way and a FakeClock can drive both.

A Clock has two clocks, as a computer does: `now`, the wall clock that the store's times
are written in and that machines sharing a store agree on (through NTP), and
`monotonic`, which only ever counts the seconds that pass and is what `sleep` waits by.
The two drift apart whenever the wall clock is stepped (NTP, a VM resumed, an operator):
code that waits for a wall-clock time must work out how long to sleep from one reading
of `now` and never assume the two advance together. `FakeClock.step` moves the wall
clock alone, so tests can do to the code what NTP does.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Protocol

__all__ = ["Clock", "FakeClock", "SystemClock", "iso"]


class Clock(Protocol):
    def now(self) -> float:
        """The wall clock: seconds since the epoch; may jump either way."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back: what `sleep` waits by."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        import asyncio  # here: `thresher status` and `--help` never load asyncio

        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when told to (or when something sleeps on it).

    `sleep` advances time at once instead of waiting, so code that sleeps for an hour
    runs in a moment and a test can assert on exactly when things happened. `advance`
    and `sleep` move both clocks; `step` moves the wall clock alone, either way.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._monotonic = 0.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time does not go backwards")
        self._now += seconds
        self._monotonic += seconds

    def step(self, seconds: float) -> None:
        """Set the wall clock `seconds` forward (or back, if negative), as NTP or a
        resumed VM does; the monotonic clock does not move."""
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))
        import asyncio

        # Let other tasks run, as a real sleep would.
        await asyncio.sleep(0)


def iso(ts: Any) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC, to the second; None for None, or for a
    value no date can hold."""
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(float(ts), UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return None
