"""The sieve: every URL is let through at most once per crawl.

Like BUbiNG's, the sieve keeps only a 64-bit hash of each URL it has seen (see
`thresher.frontier.canonical.url_hash` for what a collision costs). The hashes live in a
sorted ``array('Q')`` — 8 bytes each, searched by bisection — plus a small ``set`` of the
most recent ones. A Python ``set`` of ints costs about 60-90 bytes per entry; the array
costs 8. New hashes go to the set, which is merged into the array once it holds more than
`merge_fraction` of the array's size (and at least `min_buffer` entries), so the set stays
small and each hash is copied only a few times over the life of the crawl. The measured
cost is 8-12 bytes per URL at steady state, depending on how full the set is
(``tests/frontier/test_sieve.py`` measures it with tracemalloc), and a merge briefly
needs about 9 more while the old and the new array exist side by side (see `_merge`).

The sieve compares URLs as given: pass canonical URLs (`canonicalize`), so two spellings
of one URL count as one. It does no I/O; `snapshot` and `load` turn the hashes into bytes
and back, so that a store can persist them later.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from itertools import islice

from thresher.frontier.canonical import url_hash

__all__ = ["Sieve"]


class Sieve:
    """Remembers the 64-bit hash of every URL offered; `offer` returns only new ones."""

    def __init__(self, *, min_buffer: int = 4096, merge_fraction: float = 1 / 16) -> None:
        if min_buffer < 1 or not 0 < merge_fraction <= 1:
            raise ValueError("min_buffer must be >= 1 and merge_fraction in (0, 1]")
        self._sorted = array("Q")
        self._recent: set[int] = set()
        self._min_buffer = min_buffer
        self._merge_fraction = merge_fraction

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self._seen(url_hash(url))

    def _seen(self, h: int) -> bool:
        if h in self._recent:
            return True
        i = bisect_left(self._sorted, h)
        return i < len(self._sorted) and self._sorted[i] == h

    def offer(self, urls: Iterable[str]) -> list[str]:
        """The URLs never offered before, in the order given, each once.

        All of `urls` are remembered, so offering them again returns nothing.
        """
        return [url for url, _ in self.offer_hashed((url, url_hash(url)) for url in urls)]

    def offer_hashed(self, items: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """`offer` for callers that already have each URL's `url_hash` (and keep it)."""
        new: list[tuple[str, int]] = []
        for item in items:
            h = item[1]
            if not self._seen(h):
                self._recent.add(h)
                new.append(item)
        if len(self._recent) > max(self._min_buffer, len(self._sorted) * self._merge_fraction):
            self._merge()
        return new

    @classmethod
    def from_hashes(cls, hashes: Iterable[int]) -> Sieve:
        """A sieve that has seen exactly `hashes` (unsigned 64-bit, any order, repeats ok)."""
        sieve = cls()
        # In chunks, so a resumed crawl of millions of URLs never holds them as a list of
        # Python ints (~60 bytes each) but only the array and one chunk.
        it = iter(hashes)
        while chunk := list(islice(it, 1 << 17)):
            sieve._recent.update(chunk)
            sieve._merge()
        return sieve

    def _merge(self) -> None:
        """Merge the recent hashes into the sorted array.

        One Python step per *new* hash (a bisection); the runs of old hashes between them
        are copied as array slices, in C. So a merge costs O(new · log n) Python work plus
        one memcpy of the array, and needs no list of Python ints: the peak is the old and
        the new array side by side, about 17 bytes per URL, not the ~60 of `sorted`.
        """
        if not self._recent:
            return
        old = self._sorted
        merged = array("Q")
        start = 0
        for h in sorted(self._recent):
            end = bisect_left(old, h, start)
            merged.extend(old[start:end])
            merged.append(h)
            start = end
        merged.extend(old[start:])
        self._sorted = merged
        self._recent = set()

    def snapshot(self) -> bytes:
        """Every hash, sorted, as little-endian unsigned 64-bit integers."""
        self._merge()
        data = array("Q", self._sorted)
        if sys.byteorder == "big":  # pragma: no cover - no big-endian CI
            data.byteswap()
        return data.tobytes()

    @classmethod
    def load(cls, data: bytes, *, min_buffer: int = 4096, merge_fraction: float = 1 / 16) -> Sieve:
        """A sieve that has seen exactly the hashes of `snapshot` output `data`."""
        if len(data) % 8:
            raise ValueError("a sieve snapshot is a whole number of 8-byte hashes")
        hashes = array("Q")
        hashes.frombytes(data)
        if sys.byteorder == "big":  # pragma: no cover - no big-endian CI
            hashes.byteswap()
        if any(hashes[i] >= hashes[i + 1] for i in range(len(hashes) - 1)):
            hashes = array("Q", sorted(set(hashes)))
        sieve = cls(min_buffer=min_buffer, merge_fraction=merge_fraction)
        sieve._sorted = hashes
        return sieve
