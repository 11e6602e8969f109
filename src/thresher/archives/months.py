"""Archive months and when they are done: calendar arithmetic and the completion rule.

An archive is a tree of sub-lists (months) whose leaves are messages. The harvest never
asks about a complete month again, so the rule for "complete" is what keeps the store
whole: a month is complete only when it matched the archive (its count, or an unchanged
file) at a check made after its grace period — `grace_days` after the month's end — was
over. Late mail reaches a month after it ended (mail servers queue, moderators approve
days later), so the month just ended is checked every run until then. The current month
is never complete. Times are seconds since the epoch, UTC; no I/O here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = [
    "ALL",
    "DEFAULT_GRACE_DAYS",
    "closes_at",
    "is_closed",
    "month_bounds",
    "month_of",
    "months_from",
    "next_month",
    "valid_month",
]

DEFAULT_GRACE_DAYS = 7.0

# The single sub-list of a plain mbox file, which has no months of its own.
ALL = "all"

_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")


def valid_month(text: str) -> bool:
    return _MONTH.match(text) is not None


def _parts(month: str) -> tuple[int, int]:
    match = _MONTH.match(month)
    if match is None:
        raise ValueError(f"not a month (YYYY-MM): {month!r}")
    return int(match.group(1)), int(match.group(2))


def next_month(month: str) -> str:
    year, mon = _parts(month)
    return f"{year + mon // 12:04d}-{mon % 12 + 1:02d}"


def month_bounds(month: str) -> tuple[float, float]:
    """The month's first instant and the first instant of the next month (UTC)."""
    year, mon = _parts(month)
    start = datetime(year, mon, 1, tzinfo=UTC)
    nyear, nmon = _parts(next_month(month))
    return start.timestamp(), datetime(nyear, nmon, 1, tzinfo=UTC).timestamp()


def month_of(ts: float) -> str:
    moment = datetime.fromtimestamp(ts, UTC)
    return f"{moment.year:04d}-{moment.month:02d}"


def months_from(first: str, now: float) -> list[str]:
    """Every month from `first` to the current one, oldest first."""
    current = month_of(now)
    if first > current:
        return []
    out = [first]
    while out[-1] != current:
        out.append(next_month(out[-1]))
    return out


def closes_at(month: str, grace_days: float) -> float:
    """When a check of `month` may first mark it complete."""
    if not valid_month(month):
        # A plain mbox file may grow for ever; a unit that is not a month (a git epoch,
        # a range of articles) has no calendar: its kind says when it is closed.
        return float("inf")
    return month_bounds(month)[1] + grace_days * 86400.0


def is_closed(month: str, now: float, grace_days: float) -> bool:
    return now >= closes_at(month, grace_days)
