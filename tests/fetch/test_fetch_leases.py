"""Politeness shared through a PostgreSQL store (`thresher.fetch.leases`): polite fetchers
of different workers, each with its own memory, take turns on a host and on a server
address, and a worker that vanishes mid-fetch does not block the host for ever."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from fetch_servers import serve

from conftest import new_pg_database
from thresher.clock import SystemClock
from thresher.errors import HostBusy
from thresher.fetch import FetchSettings
from thresher.fetch.leases import (
    HELD_POLL,
    WAITER_GRACE,
    WAITER_PATIENCE,
    HostLeases,
    StickyLeases,
    forget_gone_waiters,
)
from thresher.fetch.polite import PoliteFetcher
from thresher.frontier import Politeness, host_of
from thresher.store import Tx
from thresher.store.aio import AsyncStore

SETTINGS = FetchSettings(allow_private=True, total_timeout=5.0)


@pytest.fixture
def pg_url(pg_admin_url: str) -> str:
    return new_pg_database(pg_admin_url)


class Log:
    def __init__(self) -> None:
        self.starts: list[tuple[str, float]] = []  # (host header, time) of page requests
        self.paths: list[tuple[str, float]] = []  # (path, time) of page requests

    async def handle(self, request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        self.starts.append((request.host.split(":")[0], time.monotonic()))
        self.paths.append((request.path.lstrip("/"), time.monotonic()))
        await asyncio.sleep(0.02)
        return web.Response(text="page")


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(sorted(times))]


async def fetch_as_workers(
    pg_url: str, log: Log, policy: Politeness, urls: Callable[[str], list[list[str]]]
) -> None:
    """One polite fetcher per worker, each with its own memory and lease owner, sharing
    one store; worker i fetches `urls(base)[i]`, all at once."""
    store = await AsyncStore(pg_url, 3).open()
    try:
        async with serve(log.handle) as base:
            plan = urls(base)
            fetchers = [
                PoliteFetcher(
                    SETTINGS, policy, SystemClock(), leases=HostLeases(store, f"worker-{i}")
                )
                for i in range(len(plan))
            ]
            for f in fetchers:
                await f.__aenter__()
            try:
                await asyncio.gather(
                    *(f.get(url) for f, mine in zip(fetchers, plan, strict=True) for url in mine)
                )
            finally:
                for f in fetchers:
                    await f.__aexit__(None, None, None)
    finally:
        await store.close()


def test_workers_with_their_own_memory_take_turns_on_a_host(pg_url: str) -> None:
    """Three workers with three pages each on one host, with a delay longer than
    WAITER_PATIENCE: never two fetches within the delay, and the host goes round them, no
    worker fetching twice while another waits (without the queue of waiters, the worker
    that had just fetched mostly fetched again)."""
    log = Log()
    delay = WAITER_PATIENCE + 0.1
    asyncio.run(
        fetch_as_workers(
            pg_url,
            log,
            Politeness(delay=delay, ip_delay=0.0),
            lambda base: [[f"{base}/w{i}-{n}" for n in range(3)] for i in range(3)],
        )
    )
    assert len(log.starts) == 9
    # A little slack for the clock: the delay counts from the end of the previous fetch.
    assert min(gaps([t for _, t in log.starts])) >= delay
    workers = [path.split("-")[0] for path, _ in log.paths]
    assert all(x != y for x, y in itertools.pairwise(workers)), workers


def test_hosts_on_one_address_are_spaced_across_workers(pg_url: str) -> None:
    log = Log()
    ip_delay = 0.25

    def two_names(base: str) -> list[list[str]]:
        # Two host names for one address: 127.0.0.1 and localhost.
        port = base.rsplit(":", 1)[1]
        hosts = [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
        return [[f"{host}/p{n}" for n in range(3)] for host in hosts]

    asyncio.run(fetch_as_workers(pg_url, log, Politeness(delay=0.0, ip_delay=ip_delay), two_names))
    assert {h for h, _ in log.starts} == {"127.0.0.1", "localhost"}
    assert min(gaps([t for _, t in log.starts])) >= ip_delay * 0.95


def test_a_vanished_holder_blocks_the_host_only_until_its_hold_runs_out(pg_url: str) -> None:
    async def body() -> None:
        store = await AsyncStore(pg_url).open()
        try:
            gone, alive = HostLeases(store, "gone"), HostLeases(store, "alive")
            now = time.time()
            assert await gone.take("h.example", None, now, now + 30, 0.0, delay=0.0) is None
            # Held: the other worker is told to ask again soon (the holder may give it
            # back any moment), but not later than when the hold runs out.
            again = await alive.take("h.example", None, now + 1, now + 31, 0.0, delay=0.0)
            assert again == pytest.approx(now + 1 + HELD_POLL)
            assert (
                await alive.take("h.example", None, now + 29.99, now + 60, 0.0, delay=0.0)
                == now + 30
            )
            assert await alive.take("h.example", None, now + 31, now + 61, 0.0, delay=0.0) is None
            # A clean give hands the host over with its next allowed time.
            await alive.give("h.example", now + 40, None, 0.0)
            assert (
                await gone.take("h.example", None, now + 35, now + 65, 0.0, delay=0.0) == now + 40
            )
            # A worker that stops releases what it holds at once.
            assert await gone.take("h.example", None, now + 40, now + 70, 0.0, delay=0.0) is None
            assert await gone.release_all(now + 40) == 1
            assert await alive.take("h.example", None, now + 41, now + 71, 0.0, delay=0.0) is None
        finally:
            await store.close()

    asyncio.run(body())


def worker(owner: str, heartbeat: float, stopped: bool = False) -> Callable[[Tx], None]:
    """Write the row of worker `owner` (of another machine), as its heartbeat would."""

    def write(tx: Tx) -> None:
        tx.execute(
            "upsert_worker",
            owner=owner,
            hostname="elsewhere",
            pid=1,
            boot_id=None,
            jobs_done=0,
            now=heartbeat,
        )
        if stopped:
            tx.execute("stop_worker", owner=owner, now=heartbeat, jobs_done=0)

    return write


def test_a_hold_ends_when_its_worker_is_known_to_be_gone(pg_url: str) -> None:
    async def body() -> None:
        store = await AsyncStore(pg_url).open()
        try:
            now = time.time()
            others = HostLeases(store, "other", lease_seconds=10)
            for name, beat, stopped in (("silent", now - 11, False), ("stopped", now, True)):
                await store.run(worker(name, now))
                holder = HostLeases(store, name, lease_seconds=10)
                assert (
                    await holder.take(f"{name}.example", None, now, now + 60, 0.0, delay=0.0)
                    is None
                )
                assert (
                    await others.take(f"{name}.example", None, now, now + 60, 0.0, delay=0.0)
                    is not None
                )
                await store.run(worker(name, beat, stopped))
                assert (
                    await others.take(f"{name}.example", None, now, now + 60, 0.0, delay=0.0)
                    is None
                )
            # A process of this machine that no longer exists, as is_dead_here tells.
            dead = HostLeases(store, "dead")
            await store.run(worker("dead", now))
            assert await dead.take("dead.example", None, now, now + 60, 0.0, delay=0.0) is None
            judge = HostLeases(store, "judge", is_dead=lambda w: w["hostname"] == "elsewhere")
            assert await judge.take("dead.example", None, now, now + 60, 0.0, delay=0.0) is None
        finally:
            await store.close()

    asyncio.run(body())


def test_a_hold_never_given_back_gives_its_host_a_delay_after_it(store_url: str) -> None:
    """The fetch under a hold that was never given back may have reached the server as
    late as the hold ended: when its worker stopped, when the hold ran out, or (a killed
    worker) when that is found. The host's next fetch waits its delay after that. (In a
    CI run, a worker queued for a killed worker's host fetched it 88 ms after it.)"""
    delay = 0.5

    async def body(turns: Turns) -> None:
        t0 = turns.t0

        async def take(who: HostLeases, host: str, at: float) -> float | None:
            answer = await who.take(host, None, t0 + at, t0 + at + 30, 0.0, delay=delay)
            return None if answer is None else round(answer - t0, 6)

        other = HostLeases(turns.store, "other")
        for name in ("killed", "lapsed", "stopping"):
            await turns.store.run(worker(name, t0 + 100))
        # Killed mid-fetch, found dead at 1: its fetch may have started just before.
        killed = HostLeases(turns.store, "killed")
        judge = HostLeases(turns.store, "judge", is_dead=lambda w: w["owner"] == "killed")
        assert await take(killed, "k.example", 0) is None
        assert await take(judge, "k.example", 1) == 1 + delay
        assert await take(judge, "k.example", 1 + delay / 2) == 1 + delay  # not from now
        assert await take(judge, "k.example", 1 + delay) is None
        # A hold that ran out (at 30) without being given back.
        lapsed = HostLeases(turns.store, "lapsed")
        assert await take(lapsed, "l.example", 0) is None
        assert await take(other, "l.example", 30.2) == 30 + delay
        assert await take(other, "l.example", 30 + delay) is None
        # A worker that stops with a fetch in flight hands its hosts back, at 1.
        stopping = HostLeases(turns.store, "stopping")
        assert await take(stopping, "s.example", 0) is None
        assert await stopping.release_all(t0 + 1) == 1
        assert await stopping.release_all(t0 + 1.1) == 0
        assert await take(other, "s.example", 1.1) == 1 + delay
        assert await take(other, "s.example", 1 + delay) is None

    with_turns(store_url, body)


class Turns:
    """Workers' leases on one host, at times counted from the start."""

    def __init__(self, store: AsyncStore) -> None:
        self.store = store
        self.t0 = time.time()

    async def take(self, who: HostLeases, at: float) -> bool:
        return (
            await who.take("h.example", None, self.t0 + at, self.t0 + at + 30, 0.0, delay=0.0)
            is None
        )

    async def give(self, who: HostLeases, at: float) -> None:
        await who.give("h.example", self.t0 + at, None, 0.0)


def with_turns(store_url: str, body: Callable[[Turns], Awaitable[None]]) -> None:
    async def main() -> None:
        store = await AsyncStore(store_url).open()
        try:
            await body(Turns(store))
        finally:
            await store.close()

    asyncio.run(main())


def test_turns_come_in_the_order_asked(store_url: str) -> None:
    """A host that comes free goes to the first worker that asked for it and is still
    asking, not to whichever asks first after (mostly the one that just gave it back)."""

    async def body(turns: Turns) -> None:
        take, give = turns.take, turns.give
        a, b, c, d = (HostLeases(turns.store, name) for name in "abcd")
        assert await take(a, 0)
        assert not await take(b, 0.1)
        assert not await take(c, 0.2)
        await give(a, 1)
        # Free at 1: b asked first, then c; a comes after both.
        assert not await take(a, 1)
        assert not await take(c, 1.01)
        assert await take(b, 1.02)
        await give(b, 2)
        assert not await take(a, 2)
        assert await take(c, 2.01)
        await give(c, 3)
        assert await take(a, 3)
        await give(a, 4)
        # d queues, then stops asking: after WAITER_GRACE it no longer keeps its place.
        # b queues and leaves with release_all: no place kept either.
        assert not await take(d, 3.5)
        assert not await take(b, 3.6)
        await b.release_all(turns.t0 + 3.6)
        assert not await take(c, 4)  # d is still asking (it said it would at 4)
        assert await take(c, 4 + WAITER_GRACE + 0.1)
        rows = await turns.store.run(lambda tx: tx.all("select_host_lease_waiters"))
        assert rows == [], "the taker and the gone waiters left the queue"

    with_turns(store_url, body)


def test_a_host_without_a_delay_stays_a_while_with_its_worker(store_url: str) -> None:
    """Handing a host over costs the waiter's poll: a place counts after WAITER_PATIENCE."""

    async def body(turns: Turns) -> None:
        take, give = turns.take, turns.give
        a, b = HostLeases(turns.store, "a"), HostLeases(turns.store, "b")
        assert await take(a, 0)
        assert not await take(b, 0.01)
        await give(a, 0.02)
        assert await take(a, 0.02)  # b has waited less than WAITER_PATIENCE: a goes on
        late = 0.02 + WAITER_PATIENCE
        await give(a, late)
        assert not await take(a, late)
        assert await take(b, late + 0.01)

    with_turns(store_url, body)


def test_places_of_gone_waiters_are_forgotten_by_the_heartbeat_sweep(store_url: str) -> None:
    """A waiter whose job ended without `release_all` never asks again; if the host is
    then taken by a worker that did not queue, nothing else deletes its place."""

    async def body(turns: Turns) -> None:
        take, give = turns.take, turns.give
        a, gone, late, e = (HostLeases(turns.store, name) for name in ("a", "gone", "late", "e"))
        assert await take(a, 0)
        assert not await take(gone, 0.1)  # says it will ask again at about 0.15
        await give(a, 1)
        assert await take(e, 1 + WAITER_GRACE)  # gone no longer counts; e never queued
        assert not await take(late, 1 + WAITER_GRACE + 0.1)  # queues while e holds it

        def waiters(tx: Tx) -> list[str]:
            return [r["owner"] for r in tx.all("select_host_lease_waiters")]

        assert await turns.store.run(waiters) == ["gone", "late"]
        now = turns.t0 + 1 + WAITER_GRACE + 0.2
        assert await turns.store.run(lambda tx: forget_gone_waiters(tx, now)) == 1
        assert await turns.store.run(waiters) == ["late"]  # still asking: keeps its place

    with_turns(store_url, body)


def test_a_hop_without_a_delay_does_not_wait_for_a_host_held_elsewhere(
    store_url: str,
) -> None:
    """`get(hold=False)` (an ingest walk's hop to a host of another shard): with no delay
    it fetches at once, leaving the holder's hold as it was; with a delay, or without
    `hold=False`, it waits for the host as any fetch does."""
    log = Log()

    async def main() -> None:
        store = await AsyncStore(store_url).open()
        try:
            async with serve(log.handle) as base:
                host = host_of(f"{base}/page")
                holder = HostLeases(store, "shard-0")
                now = time.time()
                assert await holder.take(host, None, now, now + 60, 0.0, delay=0.0) is None

                async def get(delay: float, hold: bool) -> None:
                    policy = Politeness(delay=delay, ip_delay=0.0)
                    leases = StickyLeases(store, "shard-1")
                    clock = SystemClock()
                    async with PoliteFetcher(
                        SETTINGS, policy, clock, leases=leases, max_wait=0.3
                    ) as fetcher:
                        await fetcher.get(f"{base}/page", hold=hold)

                await get(0.0, hold=False)
                assert len(log.starts) == 1
                with pytest.raises(HostBusy):
                    await get(0.0, hold=True)
                with pytest.raises(HostBusy):
                    await get(0.5, hold=False)
                assert len(log.starts) == 1
                keys = json.dumps([f"host:{host}"])
                [row] = await store.run(
                    lambda tx: tx.all("get_host_leases", keys=keys, live=now, patient=now)
                )
                assert row["owner"] == "shard-0"
        finally:
            await store.close()

    asyncio.run(main())
