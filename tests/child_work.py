"""A `thresher.jobs.child.ChildWork` for tests: importable by name in a spawned child
(with this folder on its PYTHONPATH), it answers with the pid of the process it ran in."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class WhereRun:
    what: str = "test work"
    store_url: str = "sqlite:///unused.db"
    log_level: int = logging.WARNING

    async def work(self, stop: asyncio.Event) -> int:
        return os.getpid()
