"""`here_or_in_child`: of the shards a process takes, one at a time runs in it; the
others each get a child process (a core) of their own."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from child_work import WhereRun
from thresher.jobs.child import here_or_in_child


async def _pid() -> int:
    return os.getpid()


def test_one_shard_runs_here_the_next_in_a_child_and_a_lone_one_always_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    here = os.getpid()

    async def scenario() -> tuple[int, int, int, int]:
        gate = asyncio.Event()

        async def first_shard() -> int:
            await gate.wait()
            return os.getpid()

        first = asyncio.ensure_future(here_or_in_child(WhereRun(), first_shard))
        await asyncio.sleep(0)  # the first shard runs here now, waiting at the gate
        second = await here_or_in_child(WhereRun(), _pid)
        lone = await here_or_in_child(WhereRun(), _pid, alone=True)
        gate.set()
        return await first, second, lone, await here_or_in_child(WhereRun(), _pid)

    first, second, lone, after = asyncio.run(scenario())
    assert first == here
    assert second != here  # a child process's pid
    assert lone == here  # a run of one shard has no core to gain
    assert after == here  # the first shard is done: this process is free again
