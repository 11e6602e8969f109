from __future__ import annotations

import random

import aiohttp
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.errors import (
    LeaseLost,
    PermanentError,
    SourceError,
    StoreUnavailable,
    TransientError,
)
from thresher.jobs.retry import backoff_delay, is_transient


@given(attempts=st.integers(1, 60), base=st.floats(0.01, 100), seed=st.integers(0, 2**32))
@settings(deadline=None)
def test_backoff_is_bounded_and_jittered(attempts: int, base: float, seed: int) -> None:
    cap = base * 100
    delay = backoff_delay(attempts, base, cap, rng=random.Random(seed))
    exp = min(cap, base * 2 ** (attempts - 1))
    assert exp / 2 <= delay <= exp


def test_backoff_grows_then_caps() -> None:
    rng = random.Random(1)
    upper = [backoff_delay(a, 10, 100, rng=rng) for a in range(1, 10)]
    assert upper[0] <= 10 and upper[-1] >= 50 and max(upper) <= 100


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    assert backoff_delay(1, 1, 600, retry_after=120) >= 120
    assert backoff_delay(1, 1, 60, retry_after=3600) <= 60


def test_classification() -> None:
    assert is_transient(TransientError("x"))
    assert is_transient(TimeoutError())
    assert is_transient(ConnectionResetError())
    assert is_transient(aiohttp.ServerDisconnectedError())
    assert is_transient(KeyError("bug"))  # unknown: retried, bounded by max_attempts
    # A deadlock or a dropped connection rolled the commit back: nothing was written.
    assert is_transient(StoreUnavailable("PostgreSQL store: deadlock detected"))
    assert not is_transient(PermanentError("404"))
    assert not is_transient(SourceError("bad option"))
    assert not is_transient(LeaseLost("gone"))
