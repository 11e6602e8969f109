"""The demo archive's model: one mailing list (`ArchiveList`), its months and their
messages, as `thresher.archives.demo` serves it.

Why the model is mutable while served: the hard part of harvesting archives is what
changes between runs — late mail for an old month, a month that shrinks (a moderator
deleted a post), the same message listed twice — and tests change the model between
runs to check the harvester notices, through validators that move with every change.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from .months import month_of, valid_month

__all__ = ["ArchiveList", "Clock"]

Clock = Callable[[], float]


class ArchiveList:
    """One mailing list: its months ('YYYY-MM', kept in date order) and their messages in
    archive order. Change it only through the methods, which are thread-safe and bump
    the month's version and "last changed" time, so ETags and Last-Modified move."""

    def __init__(
        self,
        address: str,
        created: str | None = None,
        months: Mapping[str, Sequence[bytes]] | None = None,
        *,
        clock: Clock = time.time,
    ) -> None:
        name, at, domain = address.partition("@")
        if not (name and at and domain):
            raise ValueError(f"not a list address: {address!r}")
        self.address, self.name, self.domain = address, name, domain
        self._clock = clock
        self._lock = threading.RLock()
        self.months: dict[str, list[bytes]] = {}
        self.versions: dict[str, int] = {}
        self.changed: dict[str, float] = {}
        self.generation = 0  # bumped by every change of any month
        self._added: list[tuple[str, bytes]] = []  # (month, message) of each later add
        now = clock()
        for month in sorted(months or {}):
            self._check(month)
            self.months[month] = list((months or {})[month])
            self.versions[month], self.changed[month] = 1, now
        self.created = created or (min(self.months) if self.months else month_of(now))
        self._check(self.created)

    @staticmethod
    def _check(month: str) -> None:
        if not valid_month(month):
            raise ValueError(f"not a month (YYYY-MM): {month!r}")

    def _touch(self, month: str) -> None:
        self.versions[month] = self.versions.get(month, 0) + 1
        self.changed[month] = self._clock()
        self.generation += 1

    def add(self, month: str, raw: bytes) -> None:
        """Append a message to `month` (late mail for an old month is just this)."""
        self._check(month)
        with self._lock:
            if month not in self.months:
                months = sorted([*self.months.items(), (month, [])])
                self.months.clear()
                self.months.update(months)
            self.months[month].append(raw)
            self._added.append((month, raw))
            self._touch(month)

    def remove(self, month: str, index: int) -> bytes:
        """Delete the message at `index` of `month` (a month that shrinks)."""
        with self._lock:
            raw = self.months[month].pop(index)
            self._touch(month)
            return raw

    def replace(self, month: str, index: int, raw: bytes) -> None:
        """Put `raw` in place of the message at `index` of `month`: an archive that
        rewrites a message it holds (re-wrapped, or a trailing blank line added)."""
        with self._lock:
            self.months[month][index] = raw
            self._touch(month)

    def add_duplicate(self, month: str, index: int) -> None:
        """List an identical copy of the message at `index` of `month` again."""
        with self._lock:
            self.months[month].append(self.months[month][index])
            self._added.append((month, self.months[month][index]))
            self._touch(month)

    def snapshot(self, month: str) -> tuple[int, tuple[bytes, ...], float] | None:
        """(version, messages, last changed) of one month, or None when there is none."""
        with self._lock:
            if month not in self.months:
                return None
            return self.versions[month], tuple(self.months[month]), self.changed[month]

    def all_messages(self) -> tuple[int, tuple[bytes, ...], float]:
        """(generation, every message in archive order, last change of any month)."""
        with self._lock:
            messages = tuple(raw for month in self.months.values() for raw in month)
            return self.generation, messages, max(self.changed.values(), default=0.0)

    def archived(self) -> list[tuple[str, bytes]]:
        """Every message with its month, in the order the archive received them (what
        HyperKitty's listing sorts by): the list as built, month by month, then each
        later `add` in turn, late mail for an old month included."""
        with self._lock:
            left = Counter((m, raw) for m, messages in self.months.items() for raw in messages)
            later = [item for item in self._added if _take(left, item)]
            first = [
                (m, raw) for m, msgs in self.months.items() for raw in msgs if _take(left, (m, raw))
            ]
            return first + later

    def counts(self) -> dict[str, int]:
        """Messages listed per month; a copy listed twice counts twice."""
        with self._lock:
            return {month: len(messages) for month, messages in self.months.items()}


def _take(left: Counter[tuple[str, bytes]], item: tuple[str, bytes]) -> bool:
    if left[item] <= 0:
        return False
    left[item] -= 1
    return True
