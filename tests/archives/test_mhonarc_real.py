"""The `mhonarc` type against archives made by the real MHonArc (Debian's package).

Each test builds a list's archive the way lists.debian.org does — one MHonArc archive
per month under a list page, grown with `mhonarc -add` as mail arrives — serves its
files over HTTP on 127.0.0.1 and harvests it (mhonarc_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mhonarc_server import MHonArcList, StaticServer, missing_reason
from test_archive_runs import Harvester, ShiftedClock, message_id, ts

from cli_proc import Home, kill_9
from thresher.archives.demo_hostile import hostile_messages
from thresher.archives.demo_messages import generate_messages
from thresher.archives.demo_mhonarc import mhonarc_message_html
from thresher.archives.kinds.mhonarc import CHECKPOINT, rebuild_message
from thresher.archives.message import parse_message

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

MESSAGES = "SELECT count(*) AS n FROM messages"

ADDR = "dev@example.org"
MONTHS = ["2024-01", "2024-02", "2024-03"]


@pytest.fixture
def archive(tmp_path: Path) -> MHonArcList:
    return MHonArcList(tmp_path / "www")


@pytest.fixture
def server(archive: MHonArcList) -> Iterator[StaticServer]:
    with StaticServer(archive.root) as s:
        yield s


def build(archive: MHonArcList, per_month: int = 12) -> dict[str, list[bytes]]:
    mail = generate_messages(ADDR, MONTHS, per_month, seed=11)
    mail["2024-02"] += [h.raw for h in hostile_messages(ADDR, "2024-02")]
    for month in MONTHS:
        archive.add(month, mail[month])
    return mail


def late(n: int, month: str) -> bytes:
    return (
        f"From: Late Writer <late{n}@example.net>\nTo: {ADDR}\nSubject: late {n}\n"
        f"Date: Thu, 15 Feb 2024 10:00:00 +0000\nMessage-ID: <late{n}.{month}@example.net>\n"
        f"In-Reply-To: <nothing@example.org>\n\nA message archived later: {n}.\n"
    ).encode()


def test_the_first_harvest_is_what_mhonarc_archived_and_an_unchanged_run_reads_no_page(
    archive: MHonArcList, server: StaticServer, store_url: str, tmp_path: Path
) -> None:
    mail = build(archive)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 3)))
    # A page of one month, pasted: the type and the list page are found from it.
    harvester.add(server.url("/lists/dev/2024/01/msg00003.html"))
    [source] = harvester.query("SELECT type, url FROM sources")
    assert (source["type"], source["url"]) == ("mhonarc", server.url("/lists/dev/"))
    harvester.run()

    held = archive.message_ids()
    assert held == {i for msgs in mail.values() for raw in msgs if (i := message_id(raw))}
    assert harvester.ids() == held
    assert harvester.count() == len(archive.pages())  # the one without an id too
    months = harvester.months()
    assert {m: (r["counted"], r["stored"]) for m, r in months.items()} == {
        m: (len(archive.pages(m)), len(archive.pages(m))) for m in MONTHS
    }
    assert months["2024-01"]["state"] == "complete"
    rows = harvester.query("SELECT subject, from_name, date_flag, key FROM messages")
    assert {"Café crème", "Grüße from a misspelt charset"} <= {r["subject"] for r in rows}
    # MHonArc keeps a garbage Date as it was, and dates a message without one when it
    # archived it (now, in the future of the clock this test runs at).
    assert {"future", "unparseable"} == {r["date_flag"] for r in rows if r["date_flag"]}
    assert sum(r["key"].startswith("sha256:") for r in rows) == 1  # MHonArc's made-up id
    # Filed under the month of the archive that holds them, whatever their Date says.
    by_month = harvester.query("SELECT month, count(*) AS n FROM messages GROUP BY month")
    assert {r["month"]: r["n"] for r in by_month} == {m: len(archive.pages(m)) for m in MONTHS}

    server.reset_log()
    harvester.run()
    assert server.message_pages() == []
    asked = [(r.path, r.status) for r in server.requests if r.path.startswith("/lists/")]
    # The list page and the open months' indexes, each a 304; January is complete.
    assert sorted(asked) == [
        ("/lists/dev/", 304),
        ("/lists/dev/2024/02/maillist.html", 304),
        ("/lists/dev/2024/03/maillist.html", 304),
    ]
    assert harvester.count() == len(archive.pages())


def test_new_mail_and_late_mail_for_the_month_before_are_found_on_the_next_run(
    archive: MHonArcList, server: StaticServer, store_url: str, tmp_path: Path
) -> None:
    build(archive)
    clock = ShiftedClock(ts(2024, 3, 3))  # February is in its grace period
    harvester = Harvester(store_url, tmp_path, clock)
    harvester.add(server.url("/lists/dev/"), "mhonarc")
    harvester.run()
    before = harvester.ids()

    archive.add("2024-03", [late(1, "2024-03")])
    archive.add("2024-02", [late(2, "2024-02")])  # late mail: a new page in February
    server.reset_log()
    harvester.run()
    assert harvester.ids() - before == {"late1.2024-03@example.net", "late2.2024-02@example.net"}
    assert sorted(r.path for r in server.message_pages()) == [
        "/" + archive.pages(month)[-1].relative_to(archive.root).as_posix()
        for month in ("2024-02", "2024-03")
    ]
    [row] = harvester.query("SELECT month, in_reply_to FROM messages WHERE subject = 'late 2'")
    assert (row["month"], row["in_reply_to"]) == ("2024-02", "nothing@example.org")

    clock.set(ts(2024, 3, 9))  # February's grace period is over
    harvester.run()
    assert harvester.months()["2024-02"]["state"] == "complete"
    server.reset_log()
    harvester.run()
    assert not [r for r in server.requests if "/2024/02/" in r.path]


def test_a_paged_index_is_read_whole_and_then_asked_for_page_by_page(
    tmp_path: Path, store_url: str
) -> None:
    archive = MHonArcList(tmp_path / "www", page_size=5)
    mail = generate_messages(ADDR, ["2024-03"], 23, seed=3)
    archive.add("2024-03", mail["2024-03"])
    with StaticServer(archive.root) as server:
        harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 20)))
        harvester.add(server.url("/lists/dev/2024/03/"))
        harvester.run()
        assert harvester.ids() == archive.message_ids() and harvester.count() == 23
        server.reset_log()
        archive.add("2024-03", [late(3, "2024-03")])
        harvester.run()
        pages = [r for r in server.requests if r.path.startswith("/lists/dev/2024/03/mail")]
        assert len(pages) == 5 and {r.status for r in pages} == {200}  # 24 listed, 5 a page
        assert [r.path for r in server.message_pages()] == [
            f"/lists/dev/2024/03/{archive.pages('2024-03')[-1].name}"
        ]
    assert harvester.count() == 24


def test_a_message_removed_from_the_archive_is_kept_and_recorded(
    archive: MHonArcList, server: StaticServer, store_url: str, tmp_path: Path
) -> None:
    build(archive)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 20)))
    harvester.add(server.url("/lists/dev/"), "mhonarc")
    harvester.run()
    everything = harvester.ids()
    archive.remove("2024-03", 4)  # a moderator deletes a post: mhonarc -rmm
    harvester.run()
    assert harvester.ids() == everything
    march = harvester.months()["2024-03"]
    assert (march["counted"], march["stored"], march["missing"]) == (11, 12, 1)
    assert ("missing", "2024-03") in harvester.events()


def test_robots_txt_and_private_addresses_are_obeyed(
    archive: MHonArcList, server: StaticServer, store_url: str, tmp_path: Path
) -> None:
    build(archive)
    (archive.root / "robots.txt").write_text("User-agent: *\nDisallow: /lists/dev/2024/03/\n")
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 20)))
    harvester.add(server.url("/lists/dev/"), "mhonarc")
    with pytest.raises(AssertionError, match=r"disallowed by robots\.txt"):
        harvester.run()
    assert not [r for r in server.requests if "/2024/03/" in r.path]
    assert {r["month"] for r in harvester.query("SELECT DISTINCT month FROM messages")} == {
        "2024-01",
        "2024-02",
    }


def test_a_private_address_is_refused_unless_allowed(
    archive: MHonArcList, server: StaticServer, tmp_path: Path
) -> None:
    build(archive)
    harvester = Harvester(f"sqlite:///{tmp_path / 'thresher.db'}", tmp_path, ShiftedClock(0))
    harvester.add(server.url("/lists/dev/"), "mhonarc", allow_private="false")
    with pytest.raises(AssertionError, match="private"):
        harvester.run()
    assert server.requests == []


def test_the_demos_pages_read_back_as_the_real_mhonarcs_do(archive: MHonArcList) -> None:
    """`thresher demo` imitates MHonArc; Thresher reads the same mail from its pages."""
    mail = generate_messages(ADDR, ["2024-01"], 40, seed=9)["2024-01"]
    archive.add("2024-01", mail)
    pages = archive.pages("2024-01")
    for number, (raw, page) in enumerate(zip(mail, pages, strict=True)):
        demo = mhonarc_message_html(raw, number, "Mon Jan 01 00:00:00 2024")
        assert rebuild_message(demo) == rebuild_message(page.read_bytes()), page.name
    # Broken mail differs where MHonArc read it from an mbox (a `>From ` line stays
    # quoted) or dated it when archived; it is the same messages, by key.
    hostile = [h.raw for h in hostile_messages(ADDR, "2024-02")]
    archive.add("2024-02", hostile)
    real = {
        parse_message(rebuild_message(p.read_bytes()) or b"").key for p in archive.pages("2024-02")
    }
    demo_keys = {
        parse_message(rebuild_message(mhonarc_message_html(raw, n, "x")) or b"").key
        for n, raw in enumerate(hostile)
    }
    assert real == demo_keys and len(real) == len(hostile)


PER_MONTH = 120


@pytest.mark.slow
def test_kill_9_during_a_harvest_then_run_again_stores_each_message_once(
    home: Home, tmp_path: Path
) -> None:
    archive = MHonArcList(tmp_path / "www")
    mail = generate_messages(ADDR, MONTHS[:2], PER_MONTH, seed=5)
    for month in MONTHS[:2]:
        archive.add(month, mail[month])
    total = len(archive.pages())
    # Message pages answered slowly: the harvest is still running when it is killed.
    with StaticServer(archive.root, slow=0.01) as server:
        url = server.url("/lists/dev/")
        options = ("-o", "allow_private=true", "-o", "delay=0")
        home.run("source", "add", "dev", url, "--type", "mhonarc", *options)
        kill_9(home.start_run_until("dev", MESSAGES, CHECKPOINT))
        stored = home.count(MESSAGES)
        assert CHECKPOINT <= stored < total

        home.run("run", "dev")
        rows = home.query("SELECT key, message_id FROM messages")
        fetched = len(server.message_pages())
    assert len(rows) == total == len({r["key"] for r in rows})
    assert {r["message_id"] for r in rows} == archive.message_ids()
    # The rerun began at each month's last checkpoint: at most a checkpoint's worth of
    # pages per month was asked for twice.
    assert total <= fetched <= total + 2 * CHECKPOINT
    assert [r["outcome"] for r in home.query("SELECT outcome FROM source_runs")] == ["ok"]
