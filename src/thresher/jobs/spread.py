"""Spreading a new run's sibling jobs (crawl or ingest shards) over the workers alive.

Shards are there to use more cores and more machines: a worker that takes every shard
of a run as soon as it is queued would run them all in one place. So a worker already
holding its share hands the next one back for a moment, for another worker to take.
"""

from __future__ import annotations

import math

from ..errors import Deferred
from ..store import Tx
from .handlers import JobContext

__all__ = ["SPREAD_SECONDS", "holds_share", "take_share"]

# After this long any worker takes a shard, so busy peers cannot keep it waiting.
SPREAD_SECONDS = 10.0


def holds_share(tx: Tx, job: int, owner: str, shards: int, now: float, alive: float) -> bool:
    """Whether `owner` holds its share of the `shards` siblings of `job` already (the
    workers alive are those with a heartbeat since `alive`), while `job` is younger than
    `SPREAD_SECONDS`. Of siblings claimed together, the one with the lowest id is kept."""
    row = tx.one("shard_spread", job=job, owner=owner, alive=alive)
    if row is None or now - float(row["created"]) >= SPREAD_SECONDS:
        return False
    return int(row["held"]) >= math.ceil(shards / max(1, int(row["workers"])))


async def take_share(ctx: JobContext, shards: int, what: str) -> None:
    """Raise Deferred when this worker holds its share of the `shards` siblings of
    `ctx.job` already (see `holds_share`); `what` names the job in the reason."""
    now = ctx.clock.now()
    alive = now - ctx.config.lease_seconds
    held = await ctx.store.run(
        lambda tx: holds_share(tx, ctx.job.id, ctx.owner, shards, now, alive), False
    )
    if held:
        raise Deferred(f"{what}: this worker holds its share", now + 0.5, now)
