"""Bodies kept once by SHA-1 (`thresher.ingest.archive`), on both backends: slots, commits
in an engine's transactions, a commit that fails, a process that dies with records past
its committed position, and a process whose slot was taken while it stalled."""

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
from thresher.ingest.archive import IngestArchive, Kept, SlotLost
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


def data(n: int) -> bytes:
    return b"%PDF-1.5\n" + f"body {n}\n".encode() * 50


def sha1(n: int) -> str:
    return hashlib.sha1(data(n)).hexdigest()


def keep(archive: IngestArchive, *ns: int) -> list[Kept]:
    return [
        archive.keep(response(f"http://example.org/{n}.pdf", data(n)), "application/pdf")
        for n in ns
    ]


async def commit(store: AsyncStore, archive: IngestArchive, *ns: int) -> int:
    bodies = keep(archive, *ns)
    return await store.run(lambda tx: archive.commit(tx, bodies, time.time()))


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

    async def archive(self, store: AsyncStore, owner: str, **kw: Any) -> IngestArchive:
        archive = IngestArchive(self.directory, owner, SystemClock(), lease_seconds=30, **kw)
        await store.run(archive.open_in)
        return archive

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


def test_each_body_is_written_once_and_its_row_points_at_it(world: World) -> None:
    async def go(store: AsyncStore) -> IngestArchive:
        await world.alive(store, "w1")
        archive = await world.archive(store, "w1")
        # 60 bodies in one batch, 20 distinct ones, each three times; then one again.
        assert await commit(store, archive, *(i % 20 for i in range(60))) == 20
        assert await commit(store, archive, 3, 99) == 1
        assert await commit(store, archive) == 0
        await store.run(archive.close_in)
        return archive

    archive = asyncio.run(world.run(go))
    assert archive.slot == "ingest-1" and archive.written == 21
    found = records(world.directory)
    assert sorted(d for _, d in found) == sorted({sha1(i) for i in [*range(20), 99]})
    rows = {r["sha1"]: r for r in world.query("SELECT * FROM file_meta")}
    assert set(rows) == {d for _, d in found}
    seven = data(7)
    assert (rows[sha1(7)]["size"], rows[sha1(7)]["md5"], rows[sha1(7)]["sha256"]) == (
        len(seven),
        hashlib.md5(seven).hexdigest(),
        hashlib.sha256(seven).hexdigest(),
    )
    # Each row points at its own record, and the closed file has its CDXJ index.
    for digest, row in rows.items():
        with open(world.directory / row["warc_file"], "rb") as f:
            f.seek(row["warc_offset"])
            record = next(iter(ArchiveIterator(f)))
            assert hashlib.sha1(record.content_stream().read()).hexdigest() == digest
            assert record.rec_headers.get_header("WARC-Payload-Digest").startswith("sha1:")
    assert [p.name for p in world.directory.glob("*.cdxj")] == [
        found[0][0].removesuffix(".warc.gz") + ".cdxj"
    ]
    # A clean close hands the slot back with no file open.
    [slot] = world.query("SELECT * FROM warc_slots")
    assert (slot["name"], slot["owner"], slot["filename"]) == ("ingest-1", None, None)


def test_stored_records_are_standard_gzip_with_the_right_digests(world: World) -> None:
    # A PDF's record is stored (deflate level 0), an HTML page's compressed: both read.
    page = b"<html><body>" + b"<p>landing page</p>" * 500 + b"</body></html>"

    async def go(store: AsyncStore) -> list[Kept]:
        await world.alive(store, "w")
        archive = await world.archive(store, "w")
        bodies = [
            archive.keep(response("http://example.org/a.pdf", data(1)), "application/pdf"),
            archive.keep(response("http://example.org/a", page), "text/html"),
        ]
        await store.run(lambda tx: archive.commit(tx, bodies, time.time()))
        await store.run(archive.close_in)
        return bodies

    pdf, html = asyncio.run(world.run(go))
    assert len(pdf.record.response) > len(data(1))  # stored: no smaller
    assert len(html.record.response) < len(page) // 10  # deflated
    assert sorted(d for _, d in records(world.directory)) == sorted(
        [sha1(1), hashlib.sha1(page).hexdigest()]
    )


def test_two_processes_write_to_two_slots_and_share_bodies(world: World) -> None:
    async def go(store: AsyncStore) -> None:
        await world.alive(store, "a")
        await world.alive(store, "b")
        a, b = await world.archive(store, "a"), await world.archive(store, "b")
        assert await commit(store, a, 1, 2) == 2
        assert await commit(store, b, 2, 3) == 1
        assert {a.slot, b.slot} == {"ingest-1", "ingest-2"}
        # Two engines of one process (one owner) write to two slots too.
        a2 = await world.archive(store, "a")
        assert a2.slot == "ingest-3"
        await commit(store, a2, 5)
        for archive in (a, b, a2):
            await store.run(archive.close_in)
        # The next process takes the lowest free slot and starts a new file in it.
        await world.alive(store, "c")
        c = await world.archive(store, "c")
        await commit(store, c, 4)
        assert c.slot == "ingest-1"
        await store.run(c.close_in)

    asyncio.run(world.run(go))
    found = records(world.directory)
    assert sorted(d for _, d in found) == sorted(sha1(i) for i in (1, 2, 3, 4, 5))
    names = sorted({name for name, _ in found})
    assert len(names) == 4 and sum(n.startswith("ingest-1-") for n in names) == 2


def test_a_commit_that_fails_leaves_no_record_and_the_next_one_cuts_it_off(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def go(store: AsyncStore) -> None:
        await world.alive(store, "w")
        archive = await world.archive(store, "w")
        await commit(store, archive, 1)
        real = IngestArchive._set_position

        def broken(self: IngestArchive, tx: Tx, slot: str, position: Any, now: float) -> None:
            raise OSError("disk trouble after the records were written")

        monkeypatch.setattr(IngestArchive, "_set_position", broken)
        with pytest.raises(OSError, match="disk trouble"):
            await commit(store, archive, 2, 3)
        monkeypatch.setattr(IngestArchive, "_set_position", real)
        assert await commit(store, archive, 3, 4) == 2
        await store.run(archive.close_in)

    asyncio.run(world.run(go))
    found = [d for _, d in records(world.directory)]
    assert sorted(found) == sorted(sha1(n) for n in (1, 3, 4))
    assert {r["sha1"] for r in world.query("SELECT sha1 FROM file_meta")} == set(found)


def test_a_dead_process_slot_is_taken_over_and_cut_back_to_its_last_commit(
    world: World,
) -> None:
    async def crash(store: AsyncStore) -> None:
        await world.alive(store, "dead")
        archive = await world.archive(store, "dead")
        await commit(store, archive, 1, 2)
        # Records written after the last commit, then the process dies (no close).
        writer = archive._writer
        assert writer is not None
        for body in keep(archive, 3, 4):
            writer.append(body.record)
        writer.sync()
        archive.abandon()
        await world.alive(store, "dead", stopped=True)

    asyncio.run(world.run(crash))
    assert len(records(world.directory)) == 4

    async def resume(store: AsyncStore) -> None:
        await world.alive(store, "next")
        archive = await world.archive(store, "next")
        await commit(store, archive, 3, 5)
        assert archive.slot == "ingest-1"
        await store.run(archive.close_in)

    asyncio.run(world.run(resume))
    found = [d for _, d in records(world.directory)]
    assert sorted(found) == sorted(sha1(n) for n in (1, 2, 3, 5))
    assert len({name for name, _ in records(world.directory)}) == 1  # appended, not a new file


def test_a_stalled_process_whose_slot_was_taken_writes_nothing_more(world: World) -> None:
    async def go(store: AsyncStore) -> None:
        await world.alive(store, "slow")
        slow = await world.archive(store, "slow")
        await commit(store, slow, 1)

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
        fast = await world.archive(store, "fast")
        await commit(store, fast, 2)
        assert fast.slot == "ingest-1"
        with pytest.raises(SlotLost):
            await commit(store, slow, 3)
        await commit(store, fast, 4)
        await store.run(fast.close_in)

    asyncio.run(world.run(go))
    found = [d for _, d in records(world.directory)]
    assert sorted(found) == sorted(sha1(n) for n in (1, 2, 4))
    assert {r["sha1"] for r in world.query("SELECT sha1 FROM file_meta")} == set(found)
    assert os.listdir(world.directory)  # and the files are where file_meta says
