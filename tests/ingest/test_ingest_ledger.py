"""An ingest run's queue (`thresher.ingest.ledger`): the selection placed in shards and
turns, read back a page at a time with the hosts in turns, and the batches that empty it;
on both backends."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from thresher.ingest.ledger import Filler, Selection, fill_page, guard
from thresher.store import Store, Tx

A, B, C = "http://a.example", "http://B.example:8080", "https://c.example"


def test_the_filler_numbers_hosts_and_turns_and_balances_the_shards() -> None:
    filler = Filler(2)
    urls = [f"{A}/{i}" for i in range(5)] + [f"{B}/{i}" for i in range(2)] + [f"{C}/x"]
    placed = [filler.place("pdf", u) for u in urls]
    # [shard, turn, host_no, ingest_type, base_url]
    assert [p[:3] for p in placed] == [
        [0, 0, 0], [0, 1, 0], [0, 2, 0], [0, 3, 0], [0, 4, 0],  # a: shard 0 (both empty)
        [1, 0, 1], [1, 1, 1],  # b: shard 1, which had none
        [1, 0, 2],  # c: shard 1 again, which has 2 URLs to shard 0's 5
    ]  # fmt: skip
    assert filler.loads() == [5, 3] and filler.hosts == 3 and filler.urls == 8
    # The host is the unit of politeness: its name, whatever the port or the case.
    assert filler.place("xml", "http://b.example/other")[:3] == [1, 2, 1]


def test_the_selection_from_options() -> None:
    s = Selection.from_options({"retry": "timeout, dns-error timeout", "limit": 5, "force": 0})
    assert s == Selection(retry=("timeout", "dns-error"), limit=5)


def _load(tx: Tx, urls: list[str], source: str = "s") -> None:
    rows = [
        {
            "ingest_type": "pdf",
            "base_url": u,
            "link_source": source,
            "link_source_id": str(i),
            "release_stage": None,
            "ext_ids": None,
            "request": None,
        }
        for i, u in enumerate(urls)
    ]
    tx.execute("insert_ingest_requests", rows=json.dumps(rows), now=time.time())


def _open_run(tx: Tx) -> int:
    tx.execute("insert_source", name="ingest", url="ingest:", type="ingest", options="{}", now=0.0)
    row = tx.one("open_source_run", source="ingest", now=time.time())
    assert row is not None
    return int(row["id"])


def test_a_shard_reads_its_queue_with_the_hosts_in_turns(store: Store) -> None:
    urls = (
        [f"{A}/{i}" for i in range(4)]
        + [f"{B}/{i}" for i in range(3)]
        + [f"{C}/{i}" for i in range(2)]
    )
    with store.transaction() as tx:
        _load(tx, urls)
        run = _open_run(tx)
        filler = Filler(1)
        read = fill_page(tx, run, Selection(), ("", ""), 1000, filler)
        assert len(read) == len(urls)
        # Filled again (a crash before the root job committed): nothing twice.
        fill_page(tx, run, Selection(), ("", ""), 1000, Filler(1))
    with store.transaction(write=False) as tx:
        got: list[str] = []
        cursor = (-1, -1)
        while True:
            page = tx.all(
                "ingest_queue_page",
                run=run,
                shard=0,
                after_turn=cursor[0],
                after_host=cursor[1],
                page=2,
            )
            got += [r["base_url"] for r in page]
            if len(page) < 2:
                break
            cursor = (page[-1]["turn"], page[-1]["host_no"])
    # Key order puts B's URLs first ("http://B" < "http://a"), then A's, then C's.
    assert got == [
        f"{B}/0", f"{A}/0", f"{C}/0", f"{B}/1", f"{A}/1", f"{C}/1", f"{B}/2", f"{A}/2", f"{A}/3",
    ]  # fmt: skip


def test_finished_rows_go_and_retries_keep_their_attempts(store: Store) -> None:
    with store.transaction() as tx:
        _load(tx, [f"{A}/{i}" for i in range(3)])
        run = _open_run(tx)
        fill_page(tx, run, Selection(limit=3), ("", ""), 3, Filler(1))
        tx.execute("finish_ingest_queue", run=run, shard=0, rows=json.dumps([[1, 0]]))
        tx.execute("retry_ingest_queue", run=run, shard=0, rows=json.dumps([[2, 0, 3, 99.5]]))
    with store.transaction(write=False) as tx:
        rows = tx.all("ingest_queue_page", run=run, shard=0, after_turn=-1, after_host=-1, page=9)
    left = [(r["turn"], r["attempts"], r["not_before"]) for r in rows]
    assert left == [(0, 0, 0.0), (2, 3, 99.5)]


@pytest.mark.parametrize("held", [True, False])
def test_the_guard_writes_nothing_without_the_lease(store: Store, held: bool) -> None:
    from thresher.errors import LeaseLost
    from thresher.jobs import JobSpec, queue

    with store.transaction() as tx:
        run = _open_run(tx)
        job = queue.enqueue(
            tx, JobSpec("ingest.shard", "s"), key="k", now=0.0, default_max_attempts=3,
            source_run_id=run,
        )  # fmt: skip
        claimed = queue.claim(tx, "me", [run], 1.0, 60.0)
        assert claimed is not None and claimed.id == job
    owner: Any = "me" if held else "someone else"
    with store.transaction() as tx:
        if held:
            guard(tx, job, owner)
        else:
            with pytest.raises(LeaseLost):
                guard(tx, job, owner)
