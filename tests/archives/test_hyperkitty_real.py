"""Thresher against a real HyperKitty (the PyPI package, run by hyperkitty_server.py):
a list created today whose archive holds earlier years, mail HyperKitty files under
odd months (no Date, a garbage Date, dated 2031), late mail posted through the archiver
API as Mailman core posts it, and runs in a row; on a store of each backend."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hyperkitty_server import HyperKitty, missing_reason, start_hyperkitty
from test_archive_runs import Harvester, ShiftedClock

from cli_proc import Home
from thresher.archives.demo_mbox import render_mbox
from thresher.archives.demo_messages import generate_messages
from thresher.archives.kinds import hyperkitty_key
from thresher.archives.months import month_of
from thresher.plan import ExecutionPlan, SourceReport
from thresher.store.aio import AsyncStore

OLD_MONTHS = ["2019-05", "2020-02", "2021-09", "2022-11"]


@pytest.fixture(scope="module")
def hyperkitty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HyperKitty]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    server = start_hyperkitty(tmp_path_factory.mktemp("hyperkitty"))
    try:
        yield server
    finally:
        server.stop()


def new_address() -> str:
    return f"dev-{uuid.uuid4().hex[:8]}@example.org"


def message(address: str, name: str, date: str | None, body: str = "") -> bytes:
    head = f"Date: {date}\n" if date is not None else ""
    return (
        f"From: {name.title()} <{name}@example.net>\nTo: {address}\nSubject: {name}\n{head}"
        f"Message-ID: <{name}.{address}>\n\n{body or 'A message called ' + name}.\n"
    ).encode()


def imported_archive(address: str, per_month: int = 30) -> bytes:
    """An mbox as a Mailman 2 list leaves it: years of mail, plus the odd messages such
    archives hold, with the envelope dates Mailman 2 gave them."""
    mail = generate_messages(address, OLD_MONTHS, per_month, seed=18)
    regular = render_mbox([raw for month in OLD_MONTHS for raw in mail[month]], rd=False)
    odd = [
        (b"MAILER-DAEMON Mon Jan  1 00:00:00 2001", message(address, "undated", None)),
        (b"MAILER-DAEMON Mon Jan  1 00:00:00 2001", message(address, "garbage", "not a date")),
        (
            b"future@example.net Wed Jan 15 10:00:00 2031",
            message(address, "future", "Wed, 15 Jan 2031 10:00:00 +0000"),
        ),
    ]
    return regular + b"".join(b"From " + env + b"\n" + raw + b"\n" for env, raw in odd)


def listed(hk: HyperKitty, address: str) -> dict[str, str]:
    """Every message HyperKitty holds for the list: key → the month it files it under."""
    page = hk.api(f"list/{address}/emails/?limit=100000")
    assert page["count"] == len(page["results"])
    out = {}
    for item in page["results"]:
        moment = datetime.fromisoformat(item["date"]).astimezone(UTC)
        key = hyperkitty_key(item["message_id"])
        assert key is not None
        out[key] = f"{moment.year:04d}-{moment.month:02d}"
    return out


def exports(hk: HyperKitty, address: str) -> list[str]:
    """The months of `address` whose export was asked for since the last call."""
    asked = hk.new_requests(f"/{address}/export/")
    return sorted(target.split("start=")[1][:7] for _, target, _ in asked)


def run(harvester: Harvester) -> SourceReport:
    async def go() -> SourceReport:
        store = await AsyncStore(harvester.config.store_url).open()
        try:
            report = await ExecutionPlan(harvester.config, store, harvester.clock).run_once()
            return report.sources[0]
        finally:
            await store.close()

    return asyncio.run(go())


def stored(harvester: Harvester) -> dict[str, str]:
    rows = harvester.query("SELECT key, month FROM messages")
    return {r["key"]: r["month"] for r in rows}


def home_for(store_url: str, path: Path) -> Home:
    return Home(path, db=None if store_url.startswith("sqlite") else store_url)


@pytest.fixture(scope="module")
def migrated(hyperkitty: HyperKitty) -> tuple[str, dict[str, str]]:
    """A list migrated from Mailman 2, left as it is (each backend's test reads it)."""
    address = new_address()
    hyperkitty.import_mbox(address, imported_archive(address))
    return address, listed(hyperkitty, address)


def test_a_list_created_today_with_years_of_imported_mail_is_harvested_whole(
    hyperkitty: HyperKitty, migrated: tuple[str, dict[str, str]], store_url: str, tmp_path: Path
) -> None:
    address, archive = migrated
    info = hyperkitty.api(f"list/{address}/")
    assert info["created_at"][:7] == month_of(time.time())  # created today ...
    assert len(archive) == 4 * 30 + 3  # ... holding every imported message, and
    # the two without a usable Date under their envelope's 2001-01, one under 2031-01.
    assert [archive[f"{n}.{address}"] for n in ("undated", "garbage", "future")] == [
        "2001-01",
        "2001-01",
        "2031-01",
    ]

    home = home_for(store_url, tmp_path)
    options = ("-o", "allow_private=true", "-o", "delay=0")
    home.run("source", "add", "dev", hyperkitty.list_url(address), *options)
    first = json.loads(home.run("run", "--json").stdout)["sources"][0]
    assert (first["outcome"], first["shortfall"]) == ("ok", 0), first
    assert {r["key"]: r["month"] for r in home.query("SELECT key, month FROM messages")} == archive
    # Only months that hold mail were asked for, not every month since 2001.
    assert exports(hyperkitty, address) == sorted(set(archive.values()))

    again = json.loads(home.run("run", "--json").stdout)["sources"][0]
    assert (again["outcome"], again["shortfall"]) == ("ok", 0)
    assert exports(hyperkitty, address) == []  # the total adds up: no export at all
    status = json.loads(home.run("status", "--json").stdout)["sources"][0]
    assert status["last_run"]["outcome"] == "ok" and status["last_run"]["shortfall"] == 0
    assert status["archive"]["messages"] == len(archive)


def harvester_for(hk: HyperKitty, address: str, store_url: str, home: Path) -> Harvester:
    harvester = Harvester(store_url, home, ShiftedClock(time.time()))
    harvester.add(hk.list_url(address))
    return harvester


def test_late_mail_posted_through_the_archiver_api_is_found_on_the_next_run(
    hyperkitty: HyperKitty, store_url: str, tmp_path: Path
) -> None:
    address = new_address()
    hyperkitty.import_mbox(address, imported_archive(address, per_month=5))
    harvester = harvester_for(hyperkitty, address, store_url, tmp_path)
    assert run(harvester).outcome == "ok"
    assert stored(harvester) == listed(hyperkitty, address)
    exports(hyperkitty, address)

    now = datetime.now(UTC)
    late = [
        message(address, "today", now.strftime("%a, %d %b %Y %H:%M:%S +0000")),
        message(address, "nodate", None),  # HyperKitty files it at the moment it archives it
        message(address, "later", "Tue, 14 Jan 2031 09:00:00 +0000"),
        # Late mail for a month years back: HyperKitty lists it first all the same.
        message(address, "belated", "Fri, 14 Feb 2020 12:00:00 +0000"),
    ]
    for raw in late:
        assert hyperkitty.archive(address, raw)["url"]
    archive = listed(hyperkitty, address)
    assert len(archive) == 4 * 5 + 3 + len(late)

    report = run(harvester)
    assert (report.outcome, report.shortfall) == ("ok", 0), report
    assert set(stored(harvester)) == set(archive)
    new_months = {archive[f"{name}.{address}"] for name in ("today", "nodate", "later", "belated")}
    assert new_months == {month_of(time.time()), "2031-01", "2020-02"}
    assert exports(hyperkitty, address) == sorted(new_months)  # and no other month

    assert run(harvester).outcome == "ok"
    assert exports(hyperkitty, address) == []


def test_three_runs_in_a_row_leave_exactly_one_row_per_message(
    hyperkitty: HyperKitty, store_url: str, tmp_path: Path
) -> None:
    """Each run after new mail fetches the current month's export again, which HyperKitty
    rebuilds with new MIME boundaries: the messages already stored must not come back
    as second rows."""
    address = new_address()
    hyperkitty.import_mbox(address, imported_archive(address, per_month=5))
    harvester = harvester_for(hyperkitty, address, store_url, tmp_path)
    now = datetime.now(UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")
    for n in range(3):
        hyperkitty.archive(address, message(address, f"new{n}", now, body=f"Run {n}"))
        report = run(harvester)
        assert (report.outcome, report.shortfall) == ("ok", 0), report
    archive = listed(hyperkitty, address)
    rows = harvester.query("SELECT key, sha256, conflict FROM messages")
    assert sorted(r["key"] for r in rows) == sorted(archive)
    assert not any(r["conflict"] for r in rows)
