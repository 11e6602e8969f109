"""Which errors are worth retrying, and how long to wait before the next attempt."""

from __future__ import annotations

import asyncio
import random
import sqlite3

import aiohttp

from ..errors import PermanentError, StoreUnavailable, ThresherError, TransientError

__all__ = ["backoff_delay", "is_transient"]


def is_transient(exc: BaseException) -> bool:
    """Network and timeout trouble is transient; so is a bug we have not classified,
    since failing for good on the first surprise would lose work. Attempts are bounded
    by max_attempts either way."""
    if isinstance(exc, PermanentError):
        return False
    if isinstance(exc, TransientError | TimeoutError | asyncio.TimeoutError | ConnectionError):
        return True
    if isinstance(exc, StoreUnavailable):  # unreachable, or a deadlock: nothing was written
        return True
    if isinstance(exc, aiohttp.ClientError | OSError | sqlite3.OperationalError):
        return True
    return not isinstance(exc, ThresherError)


def backoff_delay(
    attempts: int,
    base: float,
    cap: float,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Exponential backoff with "equal jitter": half the delay fixed, half random, so that
    many jobs failing together do not come back together, yet none comes back at once.

    `attempts` is the number of attempts made so far (1 after the first failure). A
    server's Retry-After is honoured when it asks for longer.
    """
    exp = min(cap, base * 2.0 ** max(0, attempts - 1))
    delay = exp / 2 + (rng or random).uniform(0, exp / 2)
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return delay
