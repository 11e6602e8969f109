"""The execution plan and the worker pool, end to end on both backends."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from thresher.clock import Clock, FakeClock, SystemClock
from thresher.config import Config
from thresher.errors import HostBusy, UnknownSource
from thresher.jobs import JobContext, JobSpec, Outcome, WorkerPool, queue
from thresher.jobs.handlers import register
from thresher.plan import ExecutionPlan, RunReport, parse_duration
from thresher.sources import add_source
from thresher.store import Tx
from thresher.store.aio import AsyncStore


def make_config(store_url: str, home: Path, **kw: Any) -> Config:
    db = None if store_url.startswith("sqlite") else store_url
    defaults: dict[str, Any] = dict(
        home=home, db=db, backoff_base=0.01, backoff_max=0.05, grace_seconds=5, workers=4
    )
    return Config(**{**defaults, **kw})


async def add(store: AsyncStore, name: str, **options: object) -> None:
    raw = {k: str(v) for k, v in options.items()}
    await store.run(lambda tx: add_source(tx, name, "synthetic:", "synthetic", raw, time.time()))


async def results(store: AsyncStore, source: str) -> Counter[str]:
    rows = await store.run(lambda tx: tx.all("synthetic_results", source=source), write=False)
    return Counter(r["job_key"] for r in rows)


def expected_keys(
    run: int, name: str, jobs: int, fanout: int, skip: Sequence[int] = ()
) -> set[str]:
    root = f"run{run}:{name}"
    keys = {f"{root}#commit"} if not skip else set()
    for start in range(0, jobs, fanout):
        group = f"{root}/g{start}"
        leaves = [i for i in range(start, min(jobs, start + fanout)) if i not in skip]
        keys.update(f"{group}/l{i}" for i in leaves)
        if len(leaves) == min(fanout, jobs - start):
            keys.add(f"{group}#commit")
    return keys


async def run_plan(
    config: Config, clock: Clock | None = None, names: Sequence[str] = (), setup: Any = None
) -> tuple[RunReport, AsyncStore, ExecutionPlan]:
    store = await AsyncStore(config.store_url).open()
    if setup is not None:
        await setup(store)
    plan = ExecutionPlan(config, store, clock or SystemClock())
    return await plan.run_once(names), store, plan


def test_a_run_commits_every_job_once(store_url: str, tmp_path: Path) -> None:
    async def body() -> None:
        config = make_config(store_url, tmp_path)
        report, store, _ = await run_plan(config, setup=lambda s: add(s, "s", jobs=30))
        try:
            [src] = report.sources
            assert src.outcome == "ok" and src.error is None
            assert src.counts == {"done": 1 + 3 + 30 + 3 + 1}
            got = await results(store, "s")
            assert set(got) == expected_keys(src.run_id, "s", 30, 10)
            assert set(got.values()) == {1}
        finally:
            await store.close()

    asyncio.run(body())


def test_transient_failures_are_retried(store_url: str, tmp_path: Path) -> None:
    async def body() -> None:
        config = make_config(store_url, tmp_path)
        report, store, _ = await run_plan(
            config, setup=lambda s: add(s, "s", jobs=20, flaky_every=4)
        )
        try:
            [src] = report.sources
            assert src.outcome == "ok", src.error
            got = await results(store, "s")
            assert set(got) == expected_keys(src.run_id, "s", 20, 10)
            assert set(got.values()) == {1}
            jobs = await store.run(lambda tx: tx.all("list_jobs", run=src.run_id), write=False)
            retried = [j for j in jobs if j["attempts"] == 2]
            assert len(retried) == 5 and all("fails once" in j["last_error"] for j in retried)
        finally:
            await store.close()

    asyncio.run(body())


def test_a_failing_source_is_recorded_and_does_not_stop_the_others(
    store_url: str, tmp_path: Path
) -> None:
    async def setup(store: AsyncStore) -> None:
        await add(store, "bad", jobs=20, fail_every=7)
        await add(store, "good", jobs=20)

    async def body() -> None:
        config = make_config(store_url, tmp_path)
        report, store, plan = await run_plan(config, setup=setup)
        try:
            by_name = {s.source: s for s in report.sources}
            assert by_name["good"].outcome == "ok"
            bad = by_name["bad"]
            assert bad.outcome == "failed"
            assert bad.error is not None and "leaf 6 fails by design" in bad.error
            assert bad.counts["failed"] == 2 + 2 + 1  # leaves 6, 13; two group commits; root
            got = await results(store, "bad")
            assert set(got) == expected_keys(bad.run_id, "bad", 20, 10, skip=[6, 13])
            # The failed source gets a fresh run next time; the good one too.
            again = await plan.run_once(["bad"])
            assert again.sources[0].run_id != bad.run_id
            assert again.sources[0].outcome == "failed"
        finally:
            await store.close()

    asyncio.run(body())


def test_unknown_source_name(store_url: str, tmp_path: Path) -> None:
    async def body() -> None:
        config = make_config(store_url, tmp_path)
        store = await AsyncStore(config.store_url).open()
        try:
            with pytest.raises(UnknownSource):
                await ExecutionPlan(config, store, SystemClock()).run_once(["nope"])
        finally:
            await store.close()

    asyncio.run(body())


def test_stop_releases_unfinished_work_and_the_next_run_resumes(
    store_url: str, tmp_path: Path
) -> None:
    async def body() -> None:
        config = make_config(store_url, tmp_path, grace_seconds=0.05)
        store = await AsyncStore(config.store_url).open()
        try:
            await add(store, "s", jobs=200, work_ms=20)
            done = 0

            def listener(event: str, job: object) -> None:
                nonlocal done
                done += 1
                if done == 30:
                    plan.stop()

            plan = ExecutionPlan(config, store, SystemClock(), listener=listener)
            first = await plan.run_once()
            assert first.interrupted and first.sources[0].outcome == "interrupted"
            run_id = first.sources[0].run_id
            leased = await store.run(lambda tx: tx.all("leased_jobs"), write=False)
            assert leased == [], "every lease handed back"
            partial = await results(store, "s")
            assert 0 < len(partial) < 200 + 20 + 1

            second = await ExecutionPlan(config, store, SystemClock()).run_once()
            assert second.sources[0].run_id == run_id, "resumed, not restarted"
            assert second.sources[0].outcome == "ok"
            got = await results(store, "s")
            assert set(got) == expected_keys(run_id, "s", 200, 10)
            assert set(got.values()) == {1}, "no result written twice"
        finally:
            await store.close()

    asyncio.run(body())


def test_every_repeats_on_schedule_and_survives_failures(store_url: str, tmp_path: Path) -> None:
    async def body() -> None:
        clock = FakeClock(start=1_000_000.0)
        config = make_config(store_url, tmp_path)
        store = await AsyncStore(config.store_url).open()
        try:
            await add(store, "bad", jobs=3, fail_every=2)
            await add(store, "good", jobs=3)
            plan = ExecutionPlan(config, store, clock)
            starts: list[float] = []
            run_once = plan.run_once

            async def counted(
                names: Sequence[str] = (),
                options: Mapping[str, Mapping[str, Any]] | None = None,
                *,
                detach: bool = False,
            ) -> RunReport:
                starts.append(clock.now())
                report = await run_once(names, options, detach=detach)
                if len(starts) == 3:
                    plan.stop()
                return report

            plan.run_once = counted  # type: ignore[method-assign]
            reports = await plan.run_every(3600.0)
            assert len(reports) == 3
            # Each run starts an interval after the previous one started.
            assert [round(s - starts[0]) for s in starts] == [0, 3600, 7200]
            for report in reports:
                outcomes = {s.source: s.outcome for s in report.sources}
                assert outcomes == {"bad": "failed", "good": "ok"}
            runs = {s.run_id for r in reports for s in r.sources if s.source == "good"}
            assert len(runs) == 3, "a fresh run each time"
        finally:
            await store.close()

    asyncio.run(body())


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("90s", 90), ("15m", 900), ("1h", 3600), ("1d", 86400), ("1h30m", 5400)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1x", "h", "0", "1h 2", "-5m"])
def test_parse_duration_rejects(text: str) -> None:
    from thresher.errors import UsageError

    with pytest.raises(UsageError):
        parse_duration(text)


def test_removing_a_source_cancels_its_open_run(store_url: str, tmp_path: Path) -> None:
    from thresher.sources import remove_source

    async def body() -> None:
        config = make_config(store_url, tmp_path, grace_seconds=0.05)
        store = await AsyncStore(config.store_url).open()
        try:
            await add(store, "s", jobs=100, work_ms=20)
            plan = ExecutionPlan(
                config, store, SystemClock(), listener=lambda event, job: plan.stop()
            )
            first = await plan.run_once()
            assert first.interrupted
            await store.run(lambda tx: remove_source(tx, "s", time.time()))
            run_id = first.sources[0].run_id
            counts = await store.run(lambda tx: tx.all("run_job_counts", run=run_id))
            assert {r["state"] for r in counts} <= {"done", "failed"}
            again = await ExecutionPlan(config, store, SystemClock()).run_once()
            assert again.sources == []
            # Added again under the same name, it starts a fresh run.
            await add(store, "s", jobs=5)
            fresh = await ExecutionPlan(config, store, SystemClock()).run_once()
            assert fresh.sources[0].run_id != run_id and fresh.sources[0].outcome == "ok"
        finally:
            await store.close()

    asyncio.run(body())


@pytest.mark.parametrize("keep", [7.0, -1.0])
def test_jobs_of_runs_finished_long_ago_are_deleted(
    store_url: str, tmp_path: Path, keep: float
) -> None:
    """A finished run's jobs go once `keep_jobs_days` have passed since it finished (the
    run's row keeps their counts), when a later run closes; negative keeps them."""

    async def body() -> None:
        config = make_config(store_url, tmp_path, keep_jobs_days=keep)
        clock = FakeClock(start=1_000_000.0)

        async def jobs_of(store: AsyncStore, run: int) -> int:
            return len(await store.run(lambda tx: tx.all("list_jobs", run=run), write=False))

        first, store, _ = await run_plan(config, clock, setup=lambda s: add(s, "s", jobs=30))
        try:
            [old] = first.sources
            assert await jobs_of(store, old.run_id) == 38
            clock.advance(6 * 86400)  # not yet a week
            second = await ExecutionPlan(config, store, clock).run_once()
            [mid] = second.sources
            assert await jobs_of(store, old.run_id) == 38
            clock.advance(2 * 86400)  # the first finished 8 days ago, the second 2
            third = await ExecutionPlan(config, store, clock).run_once()
            [new] = third.sources
            expected_old = 38 if keep < 0 else 0
            assert await jobs_of(store, old.run_id) == expected_old
            assert await jobs_of(store, mid.run_id) == await jobs_of(store, new.run_id) == 38
        finally:
            await store.close()

    asyncio.run(body())


@register("test.busy_host")
async def _busy_host(ctx: JobContext) -> Outcome:
    free_at = float(ctx.job.payload["free_at"])
    if ctx.clock.now() < free_at:
        raise HostBusy("example.org", free_at, ctx.clock.now(), "another worker's turn")
    return Outcome(result={"at": ctx.clock.now()})


def test_a_busy_host_hands_the_job_back_without_counting_an_attempt(
    store_url: str, tmp_path: Path
) -> None:
    """HostBusy is not a failure: the job waits in the table for the host's turn, and
    even a job allowed one attempt is done once its host is free."""

    async def body() -> None:
        config = make_config(store_url, tmp_path)
        clock = FakeClock(start=1_000.0)
        store = await AsyncStore(config.store_url).open()
        try:

            def setup(tx: Tx) -> int:
                row = tx.one("open_source_run", source="busy", now=1_000.0)
                assert row is not None
                run = int(row["id"])
                queue.enqueue(
                    tx,
                    JobSpec("test.busy_host", "j", {"free_at": 1_090.0}, max_attempts=1),
                    key=f"run{run}:j",
                    now=1_000.0,
                    default_max_attempts=1,
                    source="busy",
                    source_run_id=run,
                )
                return run

            run = await store.run(setup)
            stats = await WorkerPool(config, store, clock, [run], workers=1).run()
            job = await store.run(lambda tx: tx.one("get_job_by_key", key=f"run{run}:j"), False)
            assert job is not None and job["state"] == "done" and job["attempts"] == 1
            assert (stats.deferred, stats.retried, stats.failed) == (1, 0, 0)
            assert json.loads(job["result"])["at"] >= 1_090.0
        finally:
            await store.close()

    asyncio.run(body())
