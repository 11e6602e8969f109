"""How Thresher reads HyperKitty's listing: the REST `emails` pages (parsed as HyperKitty
1.3 writes them) and, over the built-in archive's HyperKitty, what a run asks for when
the total does not add up. test_hyperkitty_real.py does the same against the real one."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_archive_runs import Harvester, ShiftedClock, ts

from thresher.archives.demo import ArchiveList, DemoArchive, generate_messages
from thresher.archives.kinds import (
    ArchiveIndexError,
    hyperkitty_emails_url,
    hyperkitty_key,
    parse_hyperkitty_emails,
)

ADDR = "dev@example.org"
MONTHS = ["2024-01", "2024-02", "2024-03"]


def test_an_emails_page_gives_the_total_and_each_messages_key_and_month() -> None:
    page = json.dumps(
        {
            "count": 1234,
            "next": "http://x/api/list/dev@example.org/emails/?limit=3&offset=3",
            "previous": None,
            "results": [
                # As HyperKitty 1.3 writes them: ids without brackets, dates in TIME_ZONE.
                {"message_id": "a@example.org", "date": "2031-01-15T10:00:00Z"},
                {"message_id": "b (x)@example.org", "date": "2024-02-01T00:30:00+01:00"},
                {"message_id": "c@example.org", "date": "2024-02-29T23:59:59.999999Z"},
            ],
        }
    ).encode()
    parsed = parse_hyperkitty_emails(page)
    assert parsed.count == 1234
    assert parsed.emails == (
        ("a@example.org", "2031-01"),
        ("bx@example.org", "2024-01"),  # in UTC, as the export's start and end are
        ("c@example.org", "2024-02"),
    )
    assert hyperkitty_key(" <weird id> ") == "weirdid" and hyperkitty_key("<>") is None
    for bad in (b"<html>", b'{"results": []}', b'{"count": -1}', b'{"count": 1, "results": [{}]}'):
        with pytest.raises(ArchiveIndexError):
            parse_hyperkitty_emails(bad)
    assert hyperkitty_emails_url("https://h/archives/", ADDR, 20, 40) == (
        "https://h/archives/api/list/dev@example.org/emails/?limit=20&offset=40"
    )


@pytest.fixture
def server() -> Iterator[DemoArchive]:
    with DemoArchive() as archive:
        yield archive


def harvest(server: DemoArchive, store_url: str, home: Path) -> tuple[ArchiveList, Harvester]:
    archive = server.add_list(ADDR, "2024-01", generate_messages(ADDR, MONTHS, 20, seed=5))
    harvester = Harvester(store_url, home, ShiftedClock(ts(2024, 3, 20)))
    harvester.add(server.url("hyperkitty", ADDR))
    harvester.run()
    return archive, harvester


def asked(server: DemoArchive, pattern: str) -> list[str]:
    return [r.target for r in server.requests if re.search(pattern, r.target)]


def test_the_first_run_reads_the_listing_whole_then_only_the_total(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    _, harvester = harvest(server, store_url, tmp_path)
    assert asked(server, r"/emails/") == [
        f"/hyperkitty/api/list/{ADDR}/emails/?limit=1",  # the total: 60
        f"/hyperkitty/api/list/{ADDR}/emails/?limit=120",  # all of it, in one page
    ]
    months = harvester.months()
    assert {m: (r["expected"], r["counted"]) for m, r in months.items()} == dict.fromkeys(
        MONTHS, (20, 20)
    )
    assert [months[m]["state"] for m in MONTHS] == ["complete", "complete", "open"]
    server.reset_log()
    harvester.run()
    assert asked(server, r"/emails/") == [f"/hyperkitty/api/list/{ADDR}/emails/?limit=1"]
    assert asked(server, r"/export/") == []


def test_late_mail_for_a_complete_month_is_found_by_a_short_walk(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    """Mail imported late into January, complete for weeks: HyperKitty lists it first,
    so one small page finds it, and only January is fetched again."""
    archive, harvester = harvest(server, store_url, tmp_path)
    late = archive.months["2024-01"][0].replace(b"Message-ID: <", b"Message-ID: <late.", 1)
    archive.add("2024-01", late)
    server.reset_log()
    harvester.run()
    assert asked(server, r"/emails/\?limit=(?!1$)") == [
        f"/hyperkitty/api/list/{ADDR}/emails/?limit=20"
    ]
    assert [t.split("start=")[1][:7] for t in asked(server, r"/export/")] == ["2024-01"]
    assert len(harvester.ids()) == 61
    assert harvester.months()["2024-01"]["state"] == "complete"


def test_a_message_deleted_from_a_complete_month_is_noticed_by_a_whole_walk(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    archive, harvester = harvest(server, store_url, tmp_path)
    gone = archive.remove("2024-02", 4)
    server.reset_log()
    harvester.run()  # the total went down: the whole listing is counted
    assert [t.split("start=")[1][:7] for t in asked(server, r"/export/")] == ["2024-02"]
    february = harvester.months()["2024-02"]
    assert (february["expected"], february["counted"], february["missing"]) == (19, 19, 1)
    assert len(harvester.ids()) == 60 and gone  # nothing is deleted from the store
    assert ("missing", "2024-02") in harvester.events()
