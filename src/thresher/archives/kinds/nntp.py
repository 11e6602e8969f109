"""NNTP (RFC 3977): a newsgroup read from a news server, as newsreaders and gmane-style
archives (public-inbox's `public-inbox-nntpd`) serve mail.

A group numbers its articles; GROUP gives its estimated count and its first and last
article numbers, OVER one line per article of a range (with its Message-ID), ARTICLE
one article. Numbers only grow: new mail, late mail included, is new numbers, and a
number once given is never given to another article. They have holes: articles
expired, cancelled or removed, numbers never used.

The units are ranges of `BLOCK` article numbers (`articles-1-10000`, `articles-10001-20000`…), so
a unit job is bounded and its name stable. A unit's stop sign (`stop_offset`) is the
last article number read, moved by checkpoints of `CHECKPOINT` articles stored as they
are read; its `length` is the article number its counts run to, written only when the
unit job ends (a job resumed after a crash counts from there again, and reads only
the articles past the stop sign). A unit is closed, so complete, once read to its end.

A run asks GROUP, and a unit whose articles were counted to the group's last number
is confirmed without a unit job: an unchanged group costs one GROUP. A unit job asks
GROUP, then OVER for the numbers past what it counted, `OVER_SPAN` at a time, then
ARTICLE for each article past the stop sign whose Message-ID the source does not hold.
Numbers OVER does not list are holes (a `gap` event); an article OVER listed that
ARTICLE does not find (423, 430: cancelled in between) is an `unavailable` event; an
article over `max_bytes` is a `too_large` event. None of them is asked for again.

GROUP's count is an estimate (RFC 3977 §6.1.1.2): public-inbox reports last - first,
other servers last - first + 1 whatever the holes. The group's total (`Listing.total`)
is that count, no higher than the numbers up to the last that OVER did not show
empty, and no lower than the articles already counted: a run whose units then count
fewer is `incomplete`, with the shortfall.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ...errors import SourceError
from ...fetch.news_address import NEWS_SCHEMES, news_url
from ...fetch.news_answers import ArticleTooLarge
from ..mbox import RawMessage
from ..message import normalize_message_id
from ..units import Known, Unit
from .base import ArchiveKind, Harvest, KindOption, Listing, Port

__all__ = [
    "BLOCK",
    "CHECKPOINT",
    "NNTP",
    "OVER_SPAN",
    "block_of",
    "group_total",
    "number_ranges",
    "unit_name",
    "unit_range",
]

BLOCK = 10_000  # article numbers per unit
OVER_SPAN = 1_000  # article numbers per OVER command (about 300 KiB of overview)
CHECKPOINT = 100  # articles stored together while a unit is read
_EVENT_NUMBERS = 20  # ranges of numbers listed in one event

_UNIT = re.compile(r"^articles-([1-9]\d*)-([1-9]\d*)$")


def block_of(number: int) -> tuple[int, int]:
    """The unit's range of article numbers that holds `number` (numbers start at 1)."""
    lo = (max(number, 1) - 1) // BLOCK * BLOCK + 1
    return lo, lo + BLOCK - 1


def unit_name(lo: int, hi: int) -> str:
    # Not zero-padded: short enough for `thresher status` to show whole. (Past 100,000
    # names no longer sort as numbers do, which only orders listings.)
    return f"articles-{lo}-{hi}"


def unit_range(name: str) -> tuple[int, int] | None:
    match = _UNIT.match(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def number_ranges(numbers: Sequence[int], limit: int = _EVENT_NUMBERS) -> str:
    """`3, 17-20, 40` for sorted numbers, the first `limit` ranges, then `…`."""
    ranges: list[list[int]] = []
    for n in numbers:
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in ranges[:limit]]
    return ", ".join(shown) + (", …" if len(ranges) > limit else "")


def group_total(count: int, first: int, last: int, known: Mapping[str, Known]) -> int:
    """The total a run of the group should reach (see the module's docstring): GROUP's
    `count`, no higher than the numbers 1..`last` less those known to hold no article
    (the units' holes, and the numbers below `first` no unit counted), and no lower
    than the articles the units counted already."""
    absent = 0
    counted = 0
    covered_below_first = 0
    for k in known.values():
        span = unit_range(k.month)
        if span is None or k.length is None:
            continue
        lo = span[0]
        examined = max(0, k.length - lo + 1)
        absent += max(0, examined - k.counted)
        counted += k.counted
        covered_below_first += max(0, min(k.length, first - 1) - lo + 1)
    absent += max(0, first - 1 - covered_below_first)
    return max(min(count, max(0, last - absent)), counted)


class NNTP(ArchiveKind):
    name = "nntp"
    doc = (
        "A newsgroup on a news server (RFC 3977): nntp://HOST[:PORT]/GROUP,"
        " news://HOST/GROUP, or nntps://HOST/GROUP over TLS."
    )
    demo = False  # `thresher demo` serves HTTP only
    options: ClassVar[Mapping[str, KindOption]] = {
        "user": KindOption(str, None, "User name for AUTHINFO, when the server asks for one."),
        "password": KindOption(str, None, "Password for AUTHINFO (never shown).", secret=True),
        "batch": KindOption(
            int, 100, "Commands sent to a news host between two pauses of `delay` seconds."
        ),
    }

    def check_url(self, url: str) -> str:
        return news_url(url)[2]

    def detect(self, url: str) -> bool:
        return urlsplit(url.strip()).scheme.lower() in NEWS_SCHEMES

    def check_options(self, url: str, options: Mapping[str, Any]) -> None:
        if int(options.get("batch") or 0) < 1:
            raise SourceError("option batch: at least one command between pauses")
        if options.get("password") and not options.get("user"):
            raise SourceError("option password needs option user")

    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        _, group, _ = news_url(url)
        async with port.news(url) as news:
            count, first, last = await news.group(group)
        if count <= 0 or last < max(first, 1):
            return Listing([], total=0)
        units = []
        vouched = set()
        lo, _ = block_of(first)
        while lo <= last:
            hi = lo + BLOCK - 1
            name = unit_name(lo, hi)
            units.append(Unit(name, (url,), grows=True))
            k = known.get(name)
            # Counted to the group's last number: nothing new can be in it.
            if k is not None and k.length is not None and k.length >= min(hi, last):
                vouched.add(name)
            lo += BLOCK
        return Listing(
            units, total=group_total(count, first, last, known), vouched=frozenset(vouched)
        )

    async def harvest(self, port: Port, unit: Unit, known: Known | None, max_bytes: int) -> Harvest:
        span = unit_range(unit.month)
        if span is None:
            raise SourceError(f"{unit.month!r} is not a range of article numbers")
        lo, hi = span
        url = unit.urls[0]
        _, group, _ = news_url(url)
        counted_to = lo - 1
        counted = 0
        if known is not None and known.length is not None:
            counted_to, counted = known.length, known.counted
        read_to = max(counted_to, known.stop_offset if known and known.stop_offset else 0)
        events: list[tuple[str, str]] = []
        batch: list[RawMessage] = []
        wire = 0
        gaps: list[int] = []
        unavailable: list[int] = []
        async with port.news(url) as news:
            _, first, last = await news.group(group)
            if last < counted_to:
                events.append(
                    ("shrunk", f"the group ends at article {last}, below {counted_to} counted")
                )
            end = min(hi, max(last, counted_to))
            seen: set[str] = set()
            start = counted_to + 1
            while start <= end:
                stop = min(start + OVER_SPAN - 1, end)
                listed = sorted(
                    {n: m for n, m in await news.over(start, stop) if start <= n <= stop}.items()
                )
                present = {n for n, _ in listed}
                gaps.extend(n for n in range(max(start, first), stop + 1) if n not in present)
                counted += len(listed)
                keys = {n: normalize_message_id(m) for n, m in listed}
                held = await port.stored_keys(sorted({k for k in keys.values() if k}))
                for number, _ in listed:
                    if number <= read_to:
                        continue  # read before a crash, stored by a checkpoint
                    key = keys[number]
                    if key is not None and (key in held or key in seen):
                        continue
                    try:
                        raw = await news.article(number, max_bytes)
                    except ArticleTooLarge as exc:
                        events.append(("too_large", str(exc)))
                        continue
                    if raw is None:
                        # Counted still, as the overview listed it (like a MHonArc page
                        # listed but gone): the run is not short of what it cannot have.
                        unavailable.append(number)
                        continue
                    wire += len(raw)
                    batch.append(RawMessage(number, raw))
                    if key is not None:
                        seen.add(key)
                    if len(batch) >= CHECKPOINT:
                        await port.checkpoint(unit.month, url, batch, number)
                        batch = []
                start = stop + 1
        if gaps:
            events.append(
                ("gap", f"{len(gaps)} article numbers without an article: {number_ranges(gaps)}")
            )
        if unavailable:
            events.append(
                (
                    "unavailable",
                    f"{len(unavailable)} articles listed but not served (423/430):"
                    f" {number_ranges(unavailable)}",
                )
            )
        return Harvest(
            url=url,
            status=200 if wire else 304,
            wire=wire,
            messages=batch,
            counted=max(0, counted),
            stop_offset=max(end, read_to),
            length=end,
            closed=end >= hi,
            events=events,
        )
