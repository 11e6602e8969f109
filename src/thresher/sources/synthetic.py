"""`synthetic`: a generated job tree, for benchmarks and self-tests of the job system.

A run of a synthetic source is a root job with `jobs / fanout` group jobs, each with
`fanout` leaf jobs; every leaf and every commit writes one row to `synthetic_results`.
That table has no unique key on purpose: if the job system ever committed a job twice,
the duplicate would be there to see. Like pgbench, it measures the machinery itself.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import PermanentError, SourceError, TransientError
from ..jobs import JobContext, JobSpec, Outcome, register
from ..store import Tx
from .types import Option, SourceType, register_type

__all__ = ["SYNTHETIC"]


def _check_url(url: str) -> str:
    if not url.startswith("synthetic:"):
        raise SourceError(f"a synthetic source URL starts with 'synthetic:', not {url!r}")
    return url


SYNTHETIC = register_type(
    SourceType(
        name="synthetic",
        root_kind="synthetic.run",
        doc="A generated tree of jobs (benchmarks, self-tests).",
        check_url=_check_url,
        detect=lambda url: url.startswith("synthetic:"),
        options={
            "jobs": Option(int, 100, "Number of leaf jobs."),
            "fanout": Option(int, 10, "Leaf jobs per group job."),
            "work_ms": Option(float, 0.0, "Simulated work per leaf, in milliseconds."),
            "fail_every": Option(int, 0, "Every n-th leaf fails for good (0: none)."),
            "flaky_every": Option(int, 0, "Every n-th leaf fails once, transiently (0: none)."),
            "trace": Option(bool, False, "Log each leaf start to HOME/trace/PID.log."),
        },
    )
)


def _write(ctx: JobContext, value: str) -> Any:
    source, key, owner = ctx.job.source or "", ctx.job.key, ctx.owner
    now = ctx.clock.now()

    def write(tx: Tx) -> None:
        tx.execute(
            "insert_synthetic_result", source=source, job_key=key, owner=owner, value=value, now=now
        )

    return write


@register("synthetic.run")
async def _run(ctx: JobContext) -> Outcome:
    opts = ctx.job.payload["options"]
    jobs, fanout = int(opts["jobs"]), max(1, int(opts["fanout"]))
    groups = tuple(
        JobSpec(
            "synthetic.group",
            f"g{start}",
            {"start": start, "count": min(fanout, jobs - start), "options": opts},
        )
        for start in range(0, jobs, fanout)
    )
    return Outcome(
        result={"groups": len(groups)},
        children=groups,
        commit=JobSpec("synthetic.commit", "commit"),
    )


@register("synthetic.group")
async def _group(ctx: JobContext) -> Outcome:
    p = ctx.job.payload
    leaves = tuple(
        JobSpec("synthetic.leaf", f"l{i}", {"i": i, "options": p["options"]})
        for i in range(p["start"], p["start"] + p["count"])
    )
    return Outcome(children=leaves, commit=JobSpec("synthetic.commit", "commit"))


@register("synthetic.leaf")
async def _leaf(ctx: JobContext) -> Outcome:
    i, opts = int(ctx.job.payload["i"]), ctx.job.payload["options"]
    if opts.get("trace"):
        trace = ctx.config.home / "trace"
        trace.mkdir(parents=True, exist_ok=True)
        with open(trace / f"{os.getpid()}.log", "a", encoding="utf-8") as f:
            f.write(f"{ctx.job.key}\n")
    if opts.get("work_ms"):
        await ctx.clock.sleep(float(opts["work_ms"]) / 1000)
    if opts.get("fail_every") and i % opts["fail_every"] == opts["fail_every"] - 1:
        raise PermanentError(f"leaf {i} fails by design (fail_every={opts['fail_every']})")
    flaky = opts.get("flaky_every")
    if flaky and i % flaky == flaky - 1 and ctx.job.attempts == 0:
        raise TransientError(f"leaf {i} fails once by design (flaky_every={flaky})")
    return Outcome(result={"i": i}, write=_write(ctx, f"leaf {i}"))


@register("synthetic.commit")
async def _commit(ctx: JobContext) -> Outcome:
    return Outcome(write=_write(ctx, "commit"))
