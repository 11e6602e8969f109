"""The `publicinbox` type against real public-inbox inboxes (Debian's `public-inbox`).

Each test makes inboxes with `public-inbox-init`, feeds them with public-inbox's own
tools, serves them with `public-inbox-httpd` on 127.0.0.1 and harvests them; what the
server was asked is read from its access log (tests/public_inbox.py)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_archive_runs import Harvester, ShiftedClock, message_id

from cli_proc import Home, kill_9
from public_inbox import Inbox, PublicInboxes, PublicInboxHTTPD, missing_reason
from thresher.archives.demo_hostile import hostile_messages
from thresher.archives.demo_messages import generate_messages
from thresher.archives.kinds.publicinbox import CHECKPOINT

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

MESSAGES = "SELECT count(*) AS n FROM messages"

ADDR = "dev@example.org"
MONTHS = ["2024-01", "2024-02", "2024-03"]


@pytest.fixture
def inboxes(tmp_path: Path) -> PublicInboxes:
    return PublicInboxes(tmp_path / "public-inbox")


@pytest.fixture
def inbox(inboxes: PublicInboxes) -> Inbox:
    """A v2 inbox, `dev`, still empty."""
    return inboxes.init("dev")


@pytest.fixture
def server(inboxes: PublicInboxes, inbox: Inbox) -> Iterator[PublicInboxHTTPD]:
    # public-inbox-httpd reads its config, with the inboxes, when it starts.
    with PublicInboxHTTPD(inboxes) as s:
        yield s


def mail(n: int, seed: int = 11, address: str = ADDR) -> list[bytes]:
    per_month = -(-n // len(MONTHS))
    months = generate_messages(address, MONTHS, per_month, seed=seed)
    return [raw for month in MONTHS for raw in months[month]][:n]


def note(n: int, address: str = ADDR, date: str = "Fri, 15 Mar 2024 10:00:00 +0000") -> bytes:
    return (
        f"From: Late Writer <late{n}@example.net>\nTo: {address}\nSubject: note {n}\n"
        f"Date: {date}\nMessage-ID: <note{n}@example.net>\n"
        f"\nA message delivered later: {n}.\n"
    ).encode()


def build(inbox: Inbox) -> None:
    """Two epochs: mail delivered one by one and in bulk, the broken kinds included."""
    first = mail(40)
    for raw in first[:3]:
        inbox.deliver(raw)
    inbox.import_many(first[3:] + [h.raw for h in hostile_messages(ADDR, "2024-02")])
    inbox.new_epoch()
    inbox.deliver(note(1))
    inbox.deliver(note(2))


def mirror_head(home: Path, path: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={home / 'git' / path}", "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def server_head(git_dir: Path) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_the_first_harvest_is_what_the_inbox_holds_and_a_rerun_fetches_no_pack(
    inbox: Inbox, server: PublicInboxHTTPD, store_url: str, tmp_path: Path
) -> None:
    build(inbox)
    assert inbox.epochs() == [0, 1]
    harvester = Harvester(store_url, tmp_path, ShiftedClock(time.time()))
    # The mirroring instructions, pasted: the type and the inbox are found from them.
    harvester.add(server.url("/dev/_/text/mirror/"))
    [source] = harvester.query("SELECT type, url FROM sources")
    assert (source["type"], source["url"]) == ("publicinbox", server.url("/dev/"))
    harvester.run()

    held = inbox.message_ids()
    assert harvester.ids() == held  # the ids public-inbox gave mail without one, too
    assert harvester.count() == inbox.commits() == len(held)
    units = harvester.months()
    assert set(units) == {"git-0", "git-1"}
    assert {u: (r["counted"], r["stop_offset"]) for u, r in units.items()} == {
        "git-0": (inbox.commits() - 2, inbox.commits() - 2),
        "git-1": (2, 2),
    }
    assert sum(r["stored"] for r in units.values()) == len(held)
    for n, git_dir in enumerate(inbox.git_dirs()):
        head = server_head(git_dir)
        assert units[f"git-{n}"]["tail_sha256"] == head
        assert mirror_head(tmp_path, f"dev/git/{n}.git") == head  # a real git mirror
    # Filed under their Date's month, like every kind whose units are not months.
    rows = harvester.query("SELECT month, date_flag, subject FROM messages")
    assert {r["month"] for r in rows} >= set(MONTHS)
    assert {"Café crème", "note 2"} <= {r["subject"] for r in rows}
    asked = server.requests()
    assert sorted(r.path for r in asked if r.method == "POST") == [
        "/dev/git/0.git/git-upload-pack",
        "/dev/git/1.git/git-upload-pack",
    ]

    server.reset_log()
    harvester.run()
    # The manifest's fingerprints vouch for both epochs: no ref, no pack, no message.
    assert [r.path for r in server.requests() if r.path != "/robots.txt"] == ["/dev/manifest.js.gz"]
    assert harvester.count() == len(held)


def test_new_and_late_mail_and_a_new_epoch_are_found_on_the_next_run(
    inbox: Inbox, server: PublicInboxHTTPD, store_url: str, tmp_path: Path
) -> None:
    build(inbox)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(time.time()))
    harvester.add(server.url("/dev/"), "publicinbox")
    harvester.run()
    before = harvester.ids()
    untouched = harvester.months()["git-0"]

    # Late mail, dated in the first month harvested: a new commit all the same.
    inbox.deliver(note(3, date="Wed, 10 Jan 2024 10:00:00 +0000"))  # into epoch 1
    inbox.new_epoch()
    inbox.deliver(note(4))  # into epoch 2
    server.reset_log()
    harvester.run()
    assert harvester.ids() - before == {"note3@example.net", "note4@example.net"}
    assert harvester.ids() == inbox.message_ids()
    asked = server.requests()
    # Epoch 0 did not change: its fingerprint vouched for it, nothing was asked.
    assert not [r for r in asked if r.path.startswith("/dev/git/0.git/")]
    assert sorted(r.path for r in asked if r.method == "POST") == [
        "/dev/git/1.git/git-upload-pack",
        "/dev/git/2.git/git-upload-pack",
    ]
    units = harvester.months()
    kept = ("stop_offset", "tail_sha256", "counted", "stored", "etag", "bytes")
    assert {k: units["git-0"][k] for k in kept} == {k: untouched[k] for k in kept}
    assert units["git-0"]["checked_at"] > untouched["checked_at"]  # confirmed
    assert (units["git-1"]["stop_offset"], units["git-2"]["stop_offset"]) == (3, 1)
    assert units["git-1"]["stop_key"] == "note3@example.net"
    [late] = harvester.query("SELECT month FROM messages WHERE message_id = 'note3@example.net'")
    assert late["month"] == "2024-01"  # filed by its Date, like every kind's mail


def test_a_removed_message_is_recorded_and_kept(
    inbox: Inbox, server: PublicInboxHTTPD, store_url: str, tmp_path: Path
) -> None:
    messages = mail(6)
    inbox.import_many(messages)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(time.time()))
    harvester.add(server.url("/dev/"), "publicinbox")
    harvester.run()
    everything = harvester.ids()

    inbox.remove(messages[2])  # spam, removed by the inbox's admin
    harvester.run()
    assert harvester.ids() == everything  # nothing is deleted
    gone = message_id(messages[2])
    assert gone not in inbox.message_ids()
    [event] = harvester.query("SELECT kind, month, detail FROM archive_events")
    assert (event["kind"], event["month"]) == ("removed", "git-0")
    assert f"<{gone}>" in event["detail"]
    assert harvester.months()["git-0"]["counted"] == 5


def test_a_v1_inbox_is_one_repository(
    inboxes: PublicInboxes, store_url: str, tmp_path: Path
) -> None:
    address = "old@example.org"
    inbox = inboxes.init("old", version=1)
    messages = mail(8, seed=3, address=address)
    inbox.deliver(messages[0])
    inbox.import_many(messages[1:])
    harvester = Harvester(store_url, tmp_path, ShiftedClock(time.time()))
    with PublicInboxHTTPD(inboxes) as server:
        harvester.add(server.url("/old/"), "publicinbox")
        harvester.run()
        assert harvester.ids() == inbox.message_ids() == {message_id(m) for m in messages}
        assert set(harvester.months()) == {"git"}

        inbox.deliver(note(1, address))
        inbox.remove(messages[0])
        harvester.run()
    assert harvester.ids() - inbox.message_ids() == {message_id(messages[0])}
    assert "note1@example.net" in harvester.ids()
    assert [e for e in harvester.events() if e[0] == "removed"] == [("removed", "git")]


def test_without_a_manifest_the_mirror_page_and_the_refs_decide(
    inbox: Inbox, server: PublicInboxHTTPD, store_url: str, tmp_path: Path
) -> None:
    build(inbox)
    server.robots.write_text("User-agent: *\nDisallow: /dev/manifest.js.gz\n")
    harvester = Harvester(store_url, tmp_path, ShiftedClock(time.time()))
    harvester.add(server.url("/dev/"), "publicinbox")
    harvester.run()
    assert harvester.ids() == inbox.message_ids()
    assert not [r for r in server.requests() if r.path.endswith("manifest.js.gz")]

    server.reset_log()
    harvester.run()
    # Unchanged: the mirror page, then each epoch's refs — no pack, no message.
    assert sorted(r.path for r in server.requests() if r.path != "/robots.txt") == [
        "/dev/_/text/mirror/",
        "/dev/git/0.git/info/refs?service=git-upload-pack",
        "/dev/git/1.git/info/refs?service=git-upload-pack",
    ]


def test_robots_txt_is_obeyed(inbox: Inbox, server: PublicInboxHTTPD, tmp_path: Path) -> None:
    build(inbox)
    server.robots.write_text("User-agent: *\nDisallow: /dev/git/\n")
    harvester = Harvester(f"sqlite:///{tmp_path / 'thresher.db'}", tmp_path, ShiftedClock(0))
    harvester.add(server.url("/dev/"), "publicinbox")
    with pytest.raises(AssertionError, match=r"disallowed by robots\.txt"):
        harvester.run()
    assert [r.path for r in server.requests()] == ["/robots.txt", "/dev/manifest.js.gz"]
    assert harvester.count() == 0


def test_a_private_address_is_refused_unless_allowed(
    inbox: Inbox, server: PublicInboxHTTPD, tmp_path: Path
) -> None:
    build(inbox)
    harvester = Harvester(f"sqlite:///{tmp_path / 'thresher.db'}", tmp_path, ShiftedClock(0))
    harvester.add(server.url("/dev/"), "publicinbox", allow_private="false")
    with pytest.raises(AssertionError, match="private"):
        harvester.run()
    assert server.requests() == []


def test_a_site_that_is_not_a_public_inbox_is_told_so(
    server: PublicInboxHTTPD, tmp_path: Path
) -> None:
    harvester = Harvester(f"sqlite:///{tmp_path / 'thresher.db'}", tmp_path, ShiftedClock(0))
    harvester.add(server.url("/nothing-here/"), "publicinbox")
    with pytest.raises(AssertionError, match="lists a git repository"):
        harvester.run()
    [job] = harvester.query("SELECT last_error FROM jobs WHERE state = 'failed'")
    assert f"{server.url('/nothing-here/')} is not a public-inbox" in job["last_error"]


BULK = 3000


def test_kill_9_during_a_harvest_then_run_again_stores_each_message_once(
    home: Home, inboxes: PublicInboxes, inbox: Inbox
) -> None:
    inbox.import_many(mail(BULK, seed=5))
    total = len(inbox.message_ids())
    assert total == BULK
    with PublicInboxHTTPD(inboxes) as server:
        options = ("-o", "allow_private=true", "-o", "delay=0")
        home.run("source", "add", "dev", server.url("/dev/"), "--type", "publicinbox", *options)
        kill_9(home.start_run_until("dev", MESSAGES, CHECKPOINT, timeout=300, poll=0.01))
        stored = home.count(MESSAGES)
        assert CHECKPOINT <= stored < total
        [unit] = home.query("SELECT stop_offset FROM archive_months")
        assert unit["stop_offset"] == stored  # the stop sign is just past what is stored

        server.reset_log()
        home.run("run", "dev")
        rows = home.query("SELECT key, message_id FROM messages")
        # The pack came before the kill: the rerun asked for the refs, not for it again.
        assert server.packs() == []
    assert len(rows) == total == len({r["key"] for r in rows})
    assert {r["message_id"] for r in rows} == inbox.message_ids()
    assert [r["outcome"] for r in home.query("SELECT outcome FROM source_runs")] == ["ok"]
