"""The `nntp` kind's arithmetic: units of article numbers, the group's total, events."""

from __future__ import annotations

import pytest

from thresher.archives.kinds.nntp import (
    BLOCK,
    NNTP,
    block_of,
    group_total,
    number_ranges,
    unit_name,
    unit_range,
)
from thresher.archives.units import Known
from thresher.errors import SourceError
from thresher.sources.types import detect_type, get_type


def test_units_are_blocks_of_article_numbers_named_by_their_range() -> None:
    assert block_of(1) == (1, BLOCK) == block_of(BLOCK)
    assert block_of(BLOCK + 1) == (BLOCK + 1, 2 * BLOCK)
    assert block_of(0) == (1, BLOCK)  # an empty group's first may be 0
    assert unit_name(*block_of(123_456)) == "articles-120001-130000"
    assert unit_range("articles-120001-130000") == (120_001, 130_000)
    for name in ("2024-01", "all", "articles-0-9", "articles-1-", "git-0"):
        assert unit_range(name) is None


def test_number_ranges_are_written_short() -> None:
    assert number_ranges([3, 17, 18, 19, 20, 40]) == "3, 17-20, 40"
    assert number_ranges(list(range(1, 100, 2)), limit=3) == "1, 3, 5, …"


def known(lo: int, length: int, counted: int) -> Known:
    return Known(unit_name(lo, lo + BLOCK - 1), "u", counted=counted, length=length)


def test_the_total_is_groups_count_within_what_the_overview_allows() -> None:
    # First run: nothing known; a count above the numbers in range is cut to them.
    assert group_total(50, 1, 40, {}) == 40
    assert group_total(39, 1, 40, {}) == 39  # public-inbox: last - first
    units = {k.month: k for k in [known(1, 40, 37)]}
    # Three holes found: a server counting last - first + 1 is not believed; and the
    # articles counted already are the least the group holds.
    assert group_total(40, 1, 40, units) == 37
    assert group_total(30, 1, 40, units) == 37
    # New numbers since: they may all hold articles.
    assert group_total(45, 1, 45, units) == 42
    # Numbers below the group's first expired; those no unit counted are holes too.
    assert group_total(10_000, 5_001, 15_000, {}) == 10_000
    units = {k.month: k for k in [known(1, 10_000, 4_000), known(10_001, 15_000, 5_000)]}
    assert group_total(10_000, 5_001, 15_000, units) == 9_000


def test_the_type_is_detected_and_checks_its_options() -> None:
    for url in ("nntp://h/g", "news://h/g", "nntps://h/g", "snews://h/g"):
        assert detect_type(url).name == "nntp"
    stype = get_type("nntp")
    url, options = stype.validate("news://H/g", {"user": "u", "password": "p"})
    assert url == "nntp://h/g"
    assert (options["batch"], options["user"], options["password"]) == (100, "u", "p")
    assert stype.shown(options)["password"] == "***"
    with pytest.raises(SourceError, match="batch"):
        stype.validate("nntp://h/g", {"batch": "0"})
    with pytest.raises(SourceError, match="needs option user"):
        stype.validate("nntp://h/g", {"password": "p"})
    assert not NNTP.demo
