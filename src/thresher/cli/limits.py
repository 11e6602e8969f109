"""The bounds of every numeric command-line option, in one place.

A number out of range is a usage error (exit 2) that names the option and its range,
decided by click before anything runs: without an upper bound, `search --limit
9223372036854775808` failed deep in SQLite with a traceback, and `run --workers 1000000`
made a million tasks, gigabytes, and a loop too busy to hear SIGTERM. Each bound is far
above any sensible use and far below what breaks. Seconds must also be finite: click's
own ranges let "nan" through.
"""

from __future__ import annotations

import math
from typing import Any

import click

from ..config import MAX_GRACE_SECONDS, MAX_WORKERS
from ..crawl.settings import MAX_CONCURRENCY, MAX_SHARDS

__all__ = [
    "MAX_BYTES",
    "MAX_COUNT",
    "MAX_DELAY",
    "MAX_DEPTH",
    "MAX_HITS",
    "MAX_HOPS_OPTION",
    "concurrency",
    "count",
    "seconds",
    "shards",
    "workers",
]

MAX_COUNT = 10**9
"""Pages, URLs, requests per host: a billion."""
MAX_HITS = 10_000
"""Search hits printed at once (each is a row in memory; `export` writes them all)."""
MAX_DEPTH = 10_000
"""Links followed from a seed."""
MAX_HOPS_OPTION = 100
"""Landing-page links an ingest follows."""
MAX_BYTES = 2 * 2**30
"""The most a handler may read of one body (HANDLER_MAX_BODY)."""
MAX_DELAY = 86_400.0
"""Seconds between two requests to one host: a day."""


class _Seconds(click.FloatRange):
    """A FloatRange that refuses "nan" (which compares false with both of its ends)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return number


def count(maximum: int = MAX_COUNT, minimum: int = 1) -> click.IntRange:
    return click.IntRange(min=minimum, max=maximum)


def seconds(maximum: float) -> click.FloatRange:
    return _Seconds(min=0, max=maximum)


def workers() -> click.IntRange:
    """Jobs one process runs at once (`run --workers`, `worker --concurrency`, …)."""
    return click.IntRange(min=1, max=MAX_WORKERS)


def concurrency() -> click.IntRange:
    return click.IntRange(min=1, max=MAX_CONCURRENCY)


def shards() -> click.IntRange:
    return click.IntRange(min=1, max=MAX_SHARDS)


def grace() -> click.FloatRange:
    return seconds(MAX_GRACE_SECONDS)
