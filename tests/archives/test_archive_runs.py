"""The five archive types end to end: the built-in archive server on 127.0.0.1, a real
store of each backend, the real execution plan and workers. The archive changes between
runs; each test asserts the exact set of stored messages and what the server was asked."""

from __future__ import annotations

import asyncio
import io
import mailbox
import re
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from cli_proc import Home, kill_9
from thresher.archives.demo import ArchiveList, DemoArchive
from thresher.archives.demo_hostile import hostile_messages
from thresher.archives.demo_mbox import render_mbox
from thresher.archives.demo_messages import generate_messages
from thresher.archives.export import export_messages
from thresher.archives.harvest import OVERLAP
from thresher.archives.search import search_messages
from thresher.config import Config
from thresher.plan import ExecutionPlan, RunReport
from thresher.sources import add_source
from thresher.sources.types import detect_type
from thresher.store import open_store
from thresher.store.aio import AsyncStore

ADDR = "dev@example.org"
KINDS = ["pipermail", "modmbox", "ponymail", "hyperkitty", "mbox"]
# What a request for a month's file looks like, per kind.
MONTH_FILE = {
    "pipermail": re.compile(r"/pipermail/dev/\d{4}-\w+\.txt"),
    "modmbox": re.compile(r"/mod_mbox/dev/\d{6}\.mbox"),
    "ponymail": re.compile(r"/api/mbox\.lua"),
    "hyperkitty": re.compile(r"/export/"),
    "mbox": re.compile(r"/mbox/dev\.mbox"),
}
RANGES = {"pipermail", "modmbox", "mbox"}


def ts(year: int, month: int, day: int, hour: int = 12) -> float:
    return datetime(year, month, day, hour, tzinfo=UTC).timestamp()


class ShiftedClock:
    """Real time, shifted to a moment the test chooses: months turn when the test says."""

    def __init__(self, at: float) -> None:
        self.set(at)

    def set(self, at: float) -> None:
        self._offset = at - time.time()

    def now(self) -> float:
        return time.time() + self._offset

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


def message_id(raw: bytes) -> str | None:
    match = re.search(rb"^Message-ID:\s*<([^>]*)>", raw, re.MULTILINE | re.IGNORECASE)
    return match.group(1).decode() if match else None


class Harvester:
    """One user's Thresher: a store, a source, and `thresher run` as often as asked."""

    def __init__(self, store_url: str, home: Path, clock: ShiftedClock, **config: Any) -> None:
        self.store_url = store_url
        self.clock = clock
        db = None if store_url.startswith("sqlite") else store_url
        defaults: dict[str, Any] = dict(
            home=home, db=db, backoff_base=0.01, backoff_max=0.05, lease_seconds=30
        )
        self.config = Config(**{**defaults, **config})

    def add(self, url: str, kind: str | None = None, **options: str) -> None:
        raw = {"allow_private": "true", "delay": "0", **options}

        async def go() -> None:
            store = await AsyncStore(self.config.store_url).open()
            try:
                await store.run(lambda tx: add_source(tx, "dev", url, kind, raw, time.time()))
            finally:
                await store.close()

        asyncio.run(go())

    def run(self) -> RunReport:
        async def go() -> RunReport:
            store = await AsyncStore(self.config.store_url).open()
            try:
                return await ExecutionPlan(self.config, store, self.clock).run_once()
            finally:
                await store.close()

        report = asyncio.run(go())
        assert report.sources[0].outcome == "ok", report.sources[0]
        return report

    def query(self, sql: str) -> list[dict[str, Any]]:
        if self.store_url.startswith("sqlite"):
            db = sqlite3.connect(self.store_url.removeprefix("sqlite:///"))
            db.row_factory = sqlite3.Row
            try:
                return [dict(r) for r in db.execute(sql)]
            finally:
                db.close()
        with psycopg.connect(self.store_url, row_factory=dict_row) as conn:
            return conn.execute(sql.encode()).fetchall()

    def ids(self) -> set[str]:
        rows = self.query("SELECT message_id FROM messages WHERE message_id IS NOT NULL")
        return {r["message_id"] for r in rows}

    def count(self) -> int:
        return int(self.query("SELECT count(*) AS n FROM messages")[0]["n"])

    def months(self) -> dict[str, dict[str, Any]]:
        return {r["month"]: r for r in self.query("SELECT * FROM archive_months")}

    def events(self) -> list[tuple[str, str]]:
        return [(r["kind"], r["month"]) for r in self.query("SELECT * FROM archive_events")]


def expected_ids(archive: ArchiveList) -> set[str]:
    return {i for msgs in archive.months.values() for raw in msgs if (i := message_id(raw))}


def month_bodies(server: DemoArchive, kind: str) -> int:
    """Requests for a month's file that got a body (200 or 206)."""
    return sum(
        1 for r in server.requests if MONTH_FILE[kind].search(r.target) and r.status in (200, 206)
    )


def month_bytes(server: DemoArchive, kind: str) -> int:
    return sum(r.sent for r in server.requests if MONTH_FILE[kind].search(r.target))


@pytest.fixture
def server() -> Iterator[DemoArchive]:
    with DemoArchive() as archive:
        yield archive


def make_list(server: DemoArchive, per_month: int = 20) -> ArchiveList:
    months = generate_messages(ADDR, ["2024-01", "2024-02", "2024-03"], per_month, seed=7)
    return server.add_list(ADDR, "2024-01", months)


def new_message(n: int, month: str = "2024-03") -> bytes:
    return (
        f"From: Late Writer <late{n}@example.net>\nTo: {ADDR}\n"
        f"Subject: late {n}\nDate: Sun, 3 Mar 2024 10:00:00 +0000\n"
        f"Message-ID: <late{n}.{month}@example.net>\n\nA message added later: {n}.\n"
    ).encode()


@pytest.mark.parametrize("kind", KINDS)
def test_kind_is_detected_from_the_url(server: DemoArchive, kind: str) -> None:
    assert detect_type(server.url(kind, ADDR)).name == kind


@pytest.mark.parametrize("kind", KINDS)
def test_first_harvest_is_complete_and_an_unchanged_run_downloads_no_month(
    server: DemoArchive, store_url: str, tmp_path: Path, kind: str
) -> None:
    archive = make_list(server)
    archive.add("2024-02", hostile_messages(ADDR, "2024-02")[0].raw)  # no Message-ID
    clock = ShiftedClock(ts(2024, 3, 3))
    harvester = Harvester(store_url, tmp_path, clock)
    harvester.add(server.url(kind, ADDR))
    harvester.run()
    assert harvester.ids() == expected_ids(archive)
    assert harvester.count() == 61
    assert month_bodies(server, kind) == (1 if kind == "mbox" else 3)

    server.reset_log()
    harvester.run()
    assert month_bodies(server, kind) == 0
    assert harvester.count() == 61
    if kind in ("ponymail", "modmbox", "hyperkitty"):
        assert not any(MONTH_FILE[kind].search(r.target) for r in server.requests)
    if kind == "pipermail":
        # The index page too is asked for conditionally: the whole run is 304s.
        answers = [r.status for r in server.requests if r.path.startswith("/pipermail/")]
        assert answers and set(answers) == {304}


@pytest.mark.parametrize("kind", KINDS)
def test_new_mail_in_the_current_month_costs_one_request_or_its_bytes(
    server: DemoArchive, store_url: str, tmp_path: Path, kind: str
) -> None:
    archive = make_list(server)
    clock = ShiftedClock(ts(2024, 3, 15))  # February's grace period is over
    harvester = Harvester(store_url, tmp_path, clock)
    harvester.add(server.url(kind, ADDR))
    harvester.run()
    before = harvester.ids()
    server.reset_log()
    archive.add("2024-03", new_message(1))
    harvester.run()
    assert harvester.ids() - before == {"late1.2024-03@example.net"}
    assert month_bodies(server, kind) == 1
    if kind in RANGES:
        # Only the new message and the overlap checked before it.
        assert month_bytes(server, kind) < len(new_message(1)) + OVERLAP + 200
        assert any("range" in r.headers for r in server.requests)


@pytest.mark.parametrize("kind", KINDS)
def test_late_mail_for_the_previous_month_after_the_month_turned(
    server: DemoArchive, store_url: str, tmp_path: Path, kind: str
) -> None:
    archive = make_list(server)
    clock = ShiftedClock(ts(2024, 2, 29, 23))
    harvester = Harvester(store_url, tmp_path, clock)
    harvester.add(server.url(kind, ADDR))
    archive.months.pop("2024-03")  # not yet
    harvester.run()
    clock.set(ts(2024, 3, 2))
    archive.add("2024-02", new_message(2, "2024-02"))
    harvester.run()
    assert "late2.2024-02@example.net" in harvester.ids()
    assert harvester.ids() == expected_ids(archive)
    if kind != "mbox":
        assert harvester.months()["2024-02"]["state"] == "open"
        clock.set(ts(2024, 3, 9))  # the grace period is over
        harvester.run()
        assert harvester.months()["2024-02"]["state"] == "complete"
        server.reset_log()
        harvester.run()
        assert not any("2024-02" in r.target or "202402" in r.target for r in server.requests)


@pytest.mark.parametrize("kind", ["pipermail", "ponymail", "modmbox"])
def test_a_month_that_shrinks_keeps_every_message_and_records_the_difference(
    server: DemoArchive, store_url: str, tmp_path: Path, kind: str
) -> None:
    archive = make_list(server)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 3)))
    harvester.add(server.url(kind, ADDR))
    harvester.run()
    everything = harvester.ids()
    gone = message_id(archive.remove("2024-03", 5))
    harvester.run()
    assert harvester.ids() == everything and gone in everything
    march = harvester.months()["2024-03"]
    assert (march["counted"], march["stored"], march["missing"]) == (19, 20, 1)
    assert ("missing", "2024-03") in harvester.events()


def test_identical_copies_are_stored_once_and_shared_ids_are_flagged(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    archive = make_list(server)
    archive.add_duplicate("2024-01", 3)  # the archive lists one message twice
    twin = archive.months["2024-01"][4].replace(b"\n\n", b"\n\nA different body.\n", 1)
    archive.add("2024-01", twin)  # a different message with the same Message-ID
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(server.url("ponymail", ADDR))
    harvester.run()
    january = harvester.months()["2024-01"]
    # Like with like: the archive counts the copy, so does the harvest; stored once.
    assert (january["expected"], january["counted"], january["stored"]) == (22, 22, 21)
    assert january["state"] == "complete"
    flagged = harvester.query("SELECT message_id FROM messages WHERE conflict = 1")
    assert [r["message_id"] for r in flagged] == [message_id(twin)] * 2


def test_hostile_messages_are_kept_and_flagged(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    archive = make_list(server, per_month=2)
    hostile = hostile_messages(ADDR, "2024-02")
    for h in hostile:
        archive.add("2024-02", h.raw)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(server.url("pipermail", ADDR))
    harvester.run()
    assert harvester.count() == 6 + len(hostile)
    rows = harvester.query("SELECT key, date_flag, subject FROM messages WHERE month = '2024-02'")
    flags = sorted(r["date_flag"] for r in rows if r["date_flag"])
    assert flags == ["future", "missing", "unparseable"]
    assert sum(r["key"].startswith("sha256:") for r in rows) == 1
    harvester.run()  # and again: no second copy of the one without a Message-ID
    assert harvester.count() == 6 + len(hostile)


@pytest.mark.parametrize("fault", ["503", "500", "reset", "truncate", "hang"])
def test_faults_are_retried_and_lose_nothing(
    server: DemoArchive, store_url: str, tmp_path: Path, fault: Any
) -> None:
    archive = make_list(server)
    server.hang_seconds = 5
    server.fault("2024-February.txt", fault, times=2, retry_after=0)
    harvester = Harvester(
        store_url, tmp_path, ShiftedClock(ts(2024, 3, 3)), http_timeout=1.0, max_attempts=5
    )
    harvester.add(server.url("pipermail", ADDR))
    harvester.run()
    assert harvester.ids() == expected_ids(archive)
    [job] = harvester.query("SELECT attempts, last_error FROM jobs WHERE key LIKE '%/2024-02'")
    assert job["attempts"] >= 2, job  # the two faults were retried, then it worked


# Months this big are parsed in a child process (thresher.archives.rows.PARALLEL_MIN).
PER_MONTH = 250


def child_pids(parent: int | None) -> set[int]:
    """Processes whose parent is `parent` (None: every process)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if parent is None or int(fields[1]) == parent:
            found.add(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_kill_9_during_a_harvest_then_run_again_stores_each_message_once(home: Home) -> None:
    months = [f"{y}-{m:02d}" for y in (2021, 2022, 2023) for m in range(1, 13)]
    with DemoArchive() as server:
        archive = server.add_list(
            ADDR, months[0], generate_messages(ADDR, months, PER_MONTH, seed=3)
        )
        url = server.url("pipermail", ADDR)
        home.run("source", "add", "dev", url, "-o", "allow_private=true", "-o", "delay=0")
        deadline = time.monotonic() + 120
        proc = home.start_run_until("dev", "SELECT count(*) AS n FROM archive_months", 3)
        children = child_pids(proc.pid)
        assert children, "months this big are parsed in a child process"
        kill_9(proc)
        # The parsing child dies with its parent: nothing is left running.
        while children & set(child_pids(None)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not children & set(child_pids(None))
        assert 3 <= len(home.query("SELECT month FROM archive_months")) < len(months)

        home.run("run", "dev")
        stored = home.query("SELECT message_id FROM messages")
    assert len(stored) == len(months) * PER_MONTH
    assert {r["message_id"] for r in stored} == expected_ids(archive)
    assert [r["outcome"] for r in home.query("SELECT outcome FROM source_runs")] == ["ok"]


def test_harvested_messages_are_found_by_search_and_exported_whole(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    archive = make_list(server, per_month=5)
    archive.add("2024-02", new_message(7, "2024-02"))
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(server.url("modmbox", ADDR))
    harvester.run()
    store = open_store(store_url)
    try:
        with store.transaction(write=False) as tx:
            hits = search_messages(tx, store.backend, "added later", "dev", 10)
            assert [h["message_id"] for h in hits] == ["late7.2024-02@example.net"]
            out = io.BytesIO()
            assert export_messages(tx, "dev", "2024-02", "mbox", out) == 6
    finally:
        store.close()
    exported = [message_id(m.as_bytes()) for m in mailbox_messages(out.getvalue(), tmp_path)]
    assert exported[-1] == "late7.2024-02@example.net" and len(set(exported)) == 6


def mailbox_messages(data: bytes, tmp_path: Path) -> list[mailbox.mboxMessage]:
    path = tmp_path / "export.mbox"
    path.write_bytes(data)
    box = mailbox.mbox(path, create=False)
    try:
        return list(box)
    finally:
        box.close()


@pytest.mark.parametrize("kind", ["ponymail", "modmbox"])
def test_a_month_that_empties_out_of_the_listing_is_checked_and_kept(
    server: DemoArchive, store_url: str, tmp_path: Path, kind: str
) -> None:
    archive = make_list(server)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 3)))
    harvester.add(server.url(kind, ADDR))
    harvester.run()
    everything = harvester.ids()
    while archive.months["2024-03"]:
        archive.remove("2024-03", 0)
    if kind == "ponymail":
        archive.months.pop("2024-03")  # Pony Mail's stats leave out a month without mail
    harvester.run()
    assert harvester.ids() == everything
    march = harvester.months()["2024-03"]
    assert (march["counted"], march["stored"], march["missing"]) == (0, 20, 20)


def test_a_local_mbox_file_that_grows_is_read_from_its_stop_sign(
    store_url: str, tmp_path: Path
) -> None:
    months = generate_messages(ADDR, ["2024-01", "2024-02"], 10, seed=5)
    path = tmp_path / "list.mbox"
    path.write_bytes(render_mbox(months["2024-01"], rd=True))
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(str(path))  # detected as mbox from its name
    harvester.run()
    assert harvester.count() == 10
    first = harvester.months()["all"]
    with path.open("ab") as f:
        f.write(render_mbox(months["2024-02"], rd=True))
    harvester.run()
    assert harvester.ids() == {message_id(r) for m in months.values() for r in m}
    after = harvester.months()["all"]
    assert after["counted"] == 20 and after["stop_offset"] == path.stat().st_size
    # Only the new tail was read: OVERLAP bytes before the stop sign, then the new mail.
    assert after["bytes"] - first["bytes"] == path.stat().st_size - first["stop_offset"] + OVERLAP
    by_month = harvester.query("SELECT month, count(*) AS n FROM messages GROUP BY month")
    assert {r["month"]: r["n"] for r in by_month} == {"2024-01": 10, "2024-02": 10}


def test_a_server_that_ignores_ranges_sends_the_whole_file_and_only_the_tail_is_new(
    store_url: str, tmp_path: Path
) -> None:
    with DemoArchive(ranges=False) as server:
        archive = make_list(server)
        harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
        harvester.add(server.url("pipermail", ADDR))
        harvester.run()
        before = harvester.months()["2024-03"]
        server.reset_log()
        archive.add("2024-03", new_message(3))
        harvester.run()
        [answer] = [r for r in server.requests if MONTH_FILE["pipermail"].search(r.target)]
        assert "range" in answer.headers and answer.status == 200  # asked, not granted
        assert harvester.ids() == expected_ids(archive)
        after = harvester.months()["2024-03"]
        assert after["counted"] == before["counted"] + 1 and not harvester.events()


def test_a_gzipped_mbox_url_is_harvested_and_then_revalidated(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    archive = make_list(server)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(server.url("mbox", ADDR) + ".gz")
    harvester.run()
    assert harvester.ids() == expected_ids(archive)
    server.reset_log()
    harvester.run()
    assert [r.status for r in server.requests if "/mbox/" in r.target] == [304]


def test_an_archive_that_counts_differently_from_its_file_is_confirmed_next_run(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    archive = make_list(server)
    counts = archive.counts
    archive.counts = lambda: {**counts(), "2024-01": 21}  # type: ignore[method-assign]
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(server.url("ponymail", ADDR))
    harvester.run()
    january = harvester.months()["2024-01"]
    assert (january["expected"], january["counted"], january["state"]) == (21, 20, "open")
    assert ("count_mismatch", "2024-01") in harvester.events()
    server.reset_log()
    harvester.run()  # the archive's count has not moved: nothing arrived
    assert harvester.months()["2024-01"]["state"] == "complete"
    assert server.count("/api/mbox.lua") == 0
