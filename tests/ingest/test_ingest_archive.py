"""Bodies kept once by SHA-1 (`thresher.ingest.archive`), on both backends: slots, group
commits, a commit that fails, a process that dies with records past its committed
position, and a process whose slot was taken while it stalled."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from cli_proc import Home
from thresher.clock import SystemClock
from thresher.fetch import Response
from thresher.ingest.archive import Archiver, Kept, SlotLost, kept
from thresher.store import Tx
from thresher.store.aio import AsyncStore

T = TypeVar("T")


def response(url: str, body: bytes) -> Response:
    return Response(
        url=url,
        status=200,
        reason="OK",
        version="1.1",
        headers=(("Content-Type", "application/pdf"), ("Content-Length", str(len(body)))),
        body=body,
        content=body,
        decode_error=None,
        ip="127.0.0.1",
        request_head=f"GET {url} HTTP/1.1\r\nHost: example.org\r\n\r\n".encode(),
        started=time.time(),
        elapsed=0.01,
    )


def body(n: int) -> Kept:
    data = b"%PDF-1.5\n" + f"body {n}\n".encode() * 50
    return kept(response(f"http://example.org/{n}.pdf", data), "application/pdf")


def records(directory: Path) -> list[tuple[str, str]]:
    """(file, payload SHA-1) of every response record, in file order."""
    out = []
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "response":
                    digest = hashlib.sha1(record.content_stream().read()).hexdigest()
                    out.append((path.name, digest))
    return out


class World:
    """A store and a WARC folder shared by archivers of several 'processes'."""

    def __init__(self, store_url: str, home: Path) -> None:
        self.store_url = store_url
        self.home = home
        self.directory = home / "warc" / "ingest"

    async def run(self, fn: Callable[[AsyncStore], Awaitable[T]]) -> T:
        store = await AsyncStore(self.store_url).open()
        try:
            return await fn(store)
        finally:
            await store.close()

    def archiver(self, store: AsyncStore, owner: str, **kw: Any) -> Archiver:
        return Archiver(self.directory, store, owner, SystemClock(), lease_seconds=30, **kw)

    async def alive(self, store: AsyncStore, owner: str, stopped: bool = False) -> None:
        def beat(tx: Tx) -> None:
            tx.execute(
                "upsert_worker",
                owner=owner,
                hostname="elsewhere",  # not this machine: liveness by heartbeat alone
                pid=1,
                boot_id=None,
                jobs_done=0,
                now=time.time(),
            )
            if stopped:
                tx.execute("stop_worker", owner=owner, now=time.time(), jobs_done=0)

        await store.run(beat)

    def query(self, sql: str) -> list[dict[str, Any]]:
        db = None if self.store_url.startswith("sqlite") else self.store_url
        if db is None:
            return Home(Path(self.store_url.removeprefix("sqlite:///")).parent).query(sql)
        return Home(self.home, db).query(sql)


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> World:
    return World(store_url, tmp_path)


def test_concurrent_keeps_are_group_committed_and_each_body_written_once(world: World) -> None:
    async def go(store: AsyncStore) -> Archiver:
        await world.alive(store, "w1")
        archiver = world.archiver(store, "w1")
        # 60 jobs hand over bodies at once, 20 distinct ones, each three times.
        await asyncio.gather(*(archiver.keep([body(i % 20)]) for i in range(60)))
        await archiver.keep([body(3), body(99)])
        await archiver.aclose()
        return archiver

    archiver = asyncio.run(world.run(go))
    assert archiver.slot == "ingest-1"
    assert archiver.commits < 60  # grouped: the first commit, then the rest together
    found = records(world.directory)
    assert sorted(d for _, d in found) == sorted({body(i).sha1 for i in [*range(20), 99]})
    rows = {r["sha1"]: r for r in world.query("SELECT * FROM file_meta")}
    assert set(rows) == {d for _, d in found}
    one = body(7)
    assert (rows[one.sha1]["size"], rows[one.sha1]["md5"]) == (one.size, one.md5)
    # Each row points at its own record, and the closed file has its CDXJ index.
    for sha1, row in rows.items():
        with open(world.directory / row["warc_file"], "rb") as f:
            f.seek(row["warc_offset"])
            record = next(iter(ArchiveIterator(f)))
            assert hashlib.sha1(record.content_stream().read()).hexdigest() == sha1
    assert [p.name for p in world.directory.glob("*.cdxj")] == [
        found[0][0].removesuffix(".warc.gz") + ".cdxj"
    ]
    # A clean close hands the slot back with no file open.
    [slot] = world.query("SELECT * FROM warc_slots")
    assert (slot["name"], slot["owner"], slot["filename"]) == ("ingest-1", None, None)


def test_two_processes_write_to_two_slots_and_share_bodies(world: World) -> None:
    async def go(store: AsyncStore) -> None:
        await world.alive(store, "a")
        await world.alive(store, "b")
        a, b = world.archiver(store, "a"), world.archiver(store, "b")
        await asyncio.gather(a.keep([body(1), body(2)]), b.keep([body(2), body(3)]))
        assert {a.slot, b.slot} == {"ingest-1", "ingest-2"}
        await asyncio.gather(a.aclose(), b.aclose())
        # The next process takes the lowest free slot and starts a new file in it.
        await world.alive(store, "c")
        c = world.archiver(store, "c")
        await c.keep([body(4)])
        assert c.slot == "ingest-1"
        await c.aclose()

    asyncio.run(world.run(go))
    found = records(world.directory)
    assert sorted(d for _, d in found) == sorted(body(i).sha1 for i in (1, 2, 3, 4))
    names = sorted({name for name, _ in found})
    assert len(names) == 3 and sum(n.startswith("ingest-1-") for n in names) == 2


def test_a_commit_that_fails_leaves_no_record_and_the_next_one_cuts_it_off(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def go(store: AsyncStore) -> None:
        await world.alive(store, "w")
        archiver = world.archiver(store, "w")
        await archiver.keep([body(1)])
        real = Archiver._set_position

        def broken(self: Archiver, tx: Tx, position: Any, now: float) -> None:
            raise OSError("disk trouble after the records were written")

        monkeypatch.setattr(Archiver, "_set_position", broken)
        with pytest.raises(OSError, match="disk trouble"):
            await archiver.keep([body(2), body(3)])
        monkeypatch.setattr(Archiver, "_set_position", real)
        await archiver.keep([body(3), body(4)])
        await archiver.aclose()

    asyncio.run(world.run(go))
    found = [d for _, d in records(world.directory)]
    # Records of one commit go in SHA-1 order; compare as sets (each record once).
    assert sorted(found) == sorted(body(n).sha1 for n in (1, 3, 4))
    assert {r["sha1"] for r in world.query("SELECT sha1 FROM file_meta")} == set(found)


def test_a_dead_process_slot_is_taken_over_and_cut_back_to_its_last_commit(
    world: World,
) -> None:
    async def crash(store: AsyncStore) -> None:
        await world.alive(store, "dead")
        archiver = world.archiver(store, "dead")
        await archiver.keep([body(1), body(2)])
        # Records written after the last commit, then the process dies (no close).
        assert archiver._writer is not None
        for n in (3, 4):
            r = body(n).response
            archiver._writer.write_exchange(
                url=r.url,
                request_head=r.request_head,
                response_head=r.http_head(),
                payload=r.body,
                ip=r.ip,
                fetched_at=r.started,
            )
        archiver._writer.sync()
        archiver._writer.abort()
        await world.alive(store, "dead", stopped=True)

    asyncio.run(world.run(crash))
    assert len(records(world.directory)) == 4

    async def resume(store: AsyncStore) -> None:
        await world.alive(store, "next")
        archiver = world.archiver(store, "next")
        await archiver.keep([body(3), body(5)])
        assert archiver.slot == "ingest-1"
        await archiver.aclose()

    asyncio.run(world.run(resume))
    found = [d for _, d in records(world.directory)]
    assert sorted(found) == sorted(body(n).sha1 for n in (1, 2, 3, 5))
    assert len({name for name, _ in records(world.directory)}) == 1  # appended, not a new file


def test_a_stalled_process_whose_slot_was_taken_writes_nothing_more(world: World) -> None:
    async def go(store: AsyncStore) -> None:
        await world.alive(store, "slow")
        slow = world.archiver(store, "slow")
        await slow.keep([body(1)])

        def stale(tx: Tx) -> None:  # no heartbeat for longer than the lease
            tx.execute(
                "upsert_worker",
                owner="slow",
                hostname="elsewhere",
                pid=1,
                boot_id=None,
                jobs_done=0,
                now=time.time() - 3600,
            )

        await store.run(stale)
        await world.alive(store, "fast")
        fast = world.archiver(store, "fast")
        await fast.keep([body(2)])
        assert fast.slot == "ingest-1"
        with pytest.raises(SlotLost):
            await slow.keep([body(3)])
        await fast.keep([body(4)])
        await fast.aclose()

    asyncio.run(world.run(go))
    found = [d for _, d in records(world.directory)]
    assert sorted(found) == sorted(body(n).sha1 for n in (1, 2, 4))
    assert {r["sha1"] for r in world.query("SELECT sha1 FROM file_meta")} == set(found)
    assert os.listdir(world.directory)  # and the files are where file_meta says
