"""cli.progress: the one live display of `run`, `crawl` and `ingest run`."""

from __future__ import annotations

import asyncio
import io
import logging

import pytest
from rich.console import Console

from thresher.cli import progress
from thresher.cli.progress import Polled, live_progress


def _poller(states: list[Polled | None]) -> tuple[list[int], progress.Poll]:
    calls = [0]

    async def poll() -> Polled | None:
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("database is locked")  # a busy store: only a delay
        return states[min(calls[0] - 1, len(states) - 1)]

    return calls, poll


async def _hold(console: Console | None, poll: progress.Poll, polls: list[int]) -> None:
    # Until the display has polled past the failing poll: it carries on after it.
    with live_progress(console, poll):
        while polls[0] < 4:
            await asyncio.sleep(0.001)


def test_without_a_terminal_it_logs_the_text_and_the_share(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(progress, "PLAIN_PROGRESS_SECONDS", 0.001)
    polls, poll = _poller([None, None, ("URLs done", 3, 10), ("jobs done 4", None, None)])
    with caplog.at_level(logging.INFO, logger="thresher"):
        asyncio.run(_hold(None, poll, polls))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("progress")]
    assert lines[:1] == ["progress: URLs done (3 of 10)"]
    assert "progress: jobs done 4" in lines[1:]


def test_on_a_terminal_it_draws_the_text_and_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "BAR_SECONDS", 0.001)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    polls, poll = _poller([("URLs done", 3, 10)])

    # Rich draws the last state as the bar stops, then erases it (transient).
    asyncio.run(_hold(console, poll, polls))
    assert "URLs done" in out.getvalue()
    assert "3/10" in out.getvalue()
