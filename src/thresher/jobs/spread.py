"""Spreading a new run's sibling jobs (crawl or ingest shards) over the workers alive.

Shards are there to use more cores and more machines: a worker that takes every shard
of a run as soon as it is queued would run them all in one place. So a worker already
holding its share hands the next one back for a moment, for another worker to take.
"""

from __future__ import annotations

import math

from ..errors import Deferred
from .handlers import JobContext

__all__ = ["SPREAD_SECONDS", "take_share"]

# After this long any worker takes a shard, so busy peers cannot keep it waiting.
SPREAD_SECONDS = 10.0


async def take_share(ctx: JobContext, shards: int, what: str) -> None:
    """Raise Deferred when this worker holds its share of the `shards` siblings of
    `ctx.job` already and the job is younger than `SPREAD_SECONDS`; `what` names the
    job in the deferral's reason."""
    now = ctx.clock.now()
    row = await ctx.store.run(
        lambda tx: tx.one(
            "shard_spread",
            job=ctx.job.id,
            owner=ctx.owner,
            alive=now - ctx.config.lease_seconds,
        ),
        False,
    )
    if row is None or now - float(row["created"]) >= SPREAD_SECONDS:
        return
    if int(row["held"]) >= math.ceil(shards / max(1, int(row["workers"]))):
        raise Deferred(f"{what}: this worker holds its share", now + 0.5, now)
