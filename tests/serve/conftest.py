"""Fixtures of the `thresher serve` tests: one store filled by real harvests for the
session, one `thresher serve` subprocess over it, one browser session per module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser import chromium, missing
from harvested import Filled, fill
from serving import Served, start_serve, stop_serve

from cli_proc import Home


@pytest.fixture(scope="session")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    """A SQLite home filled by `thresher demo`, a hostile list, a crawl and an ingest."""
    return fill(Home(tmp_path_factory.mktemp("served-home")))


@pytest.fixture(scope="session")
def served(filled: Filled) -> Iterator[Served]:
    proc, url = start_serve(filled.home)
    try:
        yield Served(url, proc, filled)
    finally:
        stop_serve(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = missing()
    if reason:
        pytest.skip(reason)
    with chromium() as driver:
        yield driver
