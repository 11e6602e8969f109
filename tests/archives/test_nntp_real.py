"""The `nntp` type against a real news server: Debian's public-inbox, its
`public-inbox-nntpd` on 127.0.0.1 (nntp_server.py).

Thresher talks to the server through `CommandLog`, a proxy that writes down each
command, so the tests say exactly what a run asked: an unchanged group costs a GROUP,
new mail costs an OVER of the new numbers and an ARTICLE per new message."""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_archive_runs import Harvester, ShiftedClock, ts

from cli_proc import Home, kill_9
from nntp_server import (
    GROUP,
    CommandLog,
    Inbox,
    NewsServer,
    make_certificate,
    missing_reason,
    news_inbox,
)
from thresher.archives.demo_hostile import hostile_messages
from thresher.archives.demo_messages import generate_messages
from thresher.archives.kinds.nntp import CHECKPOINT

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

MESSAGES = "SELECT count(*) AS n FROM messages"

ADDR = "dev@example.org"
MONTHS = ["2024-01", "2024-02", "2024-03"]
UNIT = "articles-1-10000"


def mail(per_month: int = 10, seed: int = 11) -> list[bytes]:
    months = generate_messages(ADDR, MONTHS, per_month, seed=seed)
    found = [raw for month in MONTHS for raw in months[month]]
    return found + [h.raw for h in hostile_messages(ADDR, "2024-02")]


def late(n: int) -> bytes:
    return (
        f"From: Late Writer <late{n}@example.net>\nTo: {ADDR}\nSubject: late {n}\n"
        f"Date: Thu, 15 Feb 2024 10:00:00 +0000\nMessage-ID: <late{n}@example.net>\n"
        f"In-Reply-To: <nothing@example.org>\n\nA message delivered later: {n}.\n"
    ).encode()


@pytest.fixture
def inbox(tmp_path: Path) -> Inbox:
    return news_inbox(tmp_path / "pi")


@pytest.fixture
def server(inbox: Inbox) -> Iterator[NewsServer]:
    with NewsServer(inbox) as s:
        yield s


@pytest.fixture
def log(server: NewsServer) -> Iterator[CommandLog]:
    with CommandLog(server.port) as proxy:
        yield proxy


def articles(log: CommandLog) -> list[int]:
    return [int(c.split()[1]) for c in log.commands if c.upper().startswith("ARTICLE ")]


def test_the_first_harvest_is_what_the_server_holds_and_an_unchanged_run_sends_group_only(
    inbox: Inbox, server: NewsServer, log: CommandLog, store_url: str, tmp_path: Path
) -> None:
    inbox.import_many(mail())
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 20)))
    harvester.add(log.url())  # detected from the URL
    [source] = harvester.query("SELECT type, url FROM sources")
    assert (source["type"], source["url"]) == ("nntp", log.url())
    harvester.run()

    held = server.message_ids()
    assert len(held) >= 30
    assert harvester.ids() == held
    assert harvester.count() == len(held)
    assert sorted(articles(log)) == list(range(1, len(held) + 1))
    [unit] = harvester.months().values()
    assert (unit["month"], unit["state"], unit["counted"], unit["stored"]) == (
        UNIT,
        "open",
        len(held),
        len(held),
    )
    assert (unit["stop_offset"], unit["length"]) == (len(held), len(held))
    # Filed under the month of their Date, like a plain mbox's.
    months = {r["month"] for r in harvester.query("SELECT DISTINCT month FROM messages")}
    assert set(MONTHS) <= months
    rows = harvester.query("SELECT subject, position, raw FROM messages")
    assert {"Café crème", "Grüße from a misspelt charset"} <= {r["subject"] for r in rows}
    assert {r["position"] for r in rows} == set(range(1, len(held) + 1))
    assert not any(b"\r\n" in bytes(r["raw"]) for r in rows)  # NNTP's CRLF is the wire's

    log.reset()
    harvester.run()
    assert set(log.verbs()) <= {"CAPABILITIES", "MODE", "GROUP", "QUIT"}
    assert log.verbs().count("GROUP") == 1
    assert harvester.count() == len(held)
    [run] = harvester.query("SELECT outcome, shortfall FROM source_runs ORDER BY id DESC LIMIT 1")
    assert (run["outcome"], run["shortfall"]) == ("ok", 0)


def test_new_and_late_mail_are_found_on_the_next_run_and_only_they_are_fetched(
    inbox: Inbox, server: NewsServer, log: CommandLog, store_url: str, tmp_path: Path
) -> None:
    inbox.import_many(mail(per_month=4))
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 20)))
    harvester.add(log.url(), "nntp")
    harvester.run()
    before = harvester.ids()
    last = len(before)

    inbox.deliver(late(1))  # dated February: late mail is a new number all the same
    inbox.deliver(late(2))
    log.reset()
    harvester.run()
    assert harvester.ids() - before == {"late1@example.net", "late2@example.net"}
    assert articles(log) == [last + 1, last + 2]
    assert [c for c in log.commands if c.upper().startswith(("OVER", "XOVER"))] == [
        f"OVER {last + 1}-{last + 2}"
    ]
    [row] = harvester.query("SELECT month, in_reply_to FROM messages WHERE subject = 'late 2'")
    assert (row["month"], row["in_reply_to"]) == ("2024-02", "nothing@example.org")
    assert harvester.ids() == server.message_ids()


def test_holes_in_the_numbers_are_recorded_and_not_asked_for_again(
    inbox: Inbox, server: NewsServer, store_url: str, tmp_path: Path
) -> None:
    messages = mail(per_month=5)
    inbox.import_many(messages)
    inbox.remove(messages[3])  # article 4: a moderator removed it
    gone: list[int] = []

    def remove_later(command: str) -> None:
        # The server lists article 9 in its overview, then loses it before ARTICLE 9:
        # removed while the harvest runs.
        if command == "ARTICLE 8" and not gone:
            inbox.remove(messages[8])
            gone.append(9)

    with CommandLog(server.port, hook=remove_later) as log:
        harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 20)))
        harvester.add(log.url(), "nntp")
        harvester.run()
        assert gone == [9]
        asked = articles(log)
        assert 4 not in asked and 9 in asked
        held = server.message_ids()
        assert harvester.ids() == held
        events = {
            r["kind"]: r["detail"]
            for r in harvester.query("SELECT kind, detail FROM archive_events")
            if r["kind"] in ("gap", "unavailable")
        }
        assert events == {
            "gap": "1 article numbers without an article: 4",
            "unavailable": "1 articles listed but not served (423/430): 9",
        }
        [unit] = harvester.months().values()
        assert (unit["counted"], unit["stored"]) == (len(held) + 1, len(held))  # 9 was listed

        inbox.deliver(late(1))
        log.reset()
        harvester.run()
        assert articles(log) == [len(messages) + 1]
        overs = [c for c in log.commands if c.upper().startswith("OVER")]
        assert overs == [f"OVER {len(messages) + 1}-{len(messages) + 1}"]
        log.reset()
        harvester.run()
        assert "ARTICLE" not in log.verbs() and "OVER" not in log.verbs()
        kinds = [r["kind"] for r in harvester.query("SELECT kind FROM archive_events")]
        assert kinds.count("gap") == kinds.count("unavailable") == 1
        [run] = harvester.query(
            "SELECT outcome, shortfall FROM source_runs ORDER BY id DESC LIMIT 1"
        )
        assert (run["outcome"], run["shortfall"]) == ("ok", 0)


def test_a_private_address_is_refused_unless_allowed(
    inbox: Inbox, log: CommandLog, tmp_path: Path
) -> None:
    inbox.import_many(mail(per_month=1))
    harvester = Harvester(f"sqlite:///{tmp_path / 'thresher.db'}", tmp_path, ShiftedClock(0))
    harvester.add(log.url(), "nntp", allow_private="false")
    with pytest.raises(
        AssertionError, match=r"loopback address 127\.0\.0\.1; pass --allow-private"
    ):
        harvester.run()
    assert log.connections == 0


def test_nntps_checks_the_certificate_and_reads_over_tls(
    inbox: Inbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox.import_many(mail(per_month=2))
    cert, key = make_certificate(tmp_path)
    with NewsServer(inbox, tls=(cert, key)) as server:
        url = server.url("nntps")
        harvester = Harvester(f"sqlite:///{tmp_path / 'thresher.db'}", tmp_path, ShiftedClock(0))
        harvester.add(url)
        [source] = harvester.query("SELECT type, url FROM sources")
        assert source["type"] == "nntp"
        # The system's trust store does not know the server's certificate.
        with pytest.raises(AssertionError, match="certificate"):
            harvester.run()
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        harvester.run()
        assert harvester.ids() == server.message_ids()


def test_user_and_password_are_sent_after_starttls_and_never_shown(
    inbox: Inbox, server: NewsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox.import_many(mail(per_month=2))
    secret = "s3cret-Pw"
    home = Home(tmp_path / "home")
    cert, key = make_certificate(tmp_path, "proxy")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    env = {"SSL_CERT_FILE": str(cert)}
    home.env.update(env)
    with CommandLog(server.port, auth=("reader", secret)) as log:
        # Without credentials the server's 480 says what to give.
        home.run("source", "add", "bare", log.url(), "-o", "allow_private=true", "-o", "delay=0")
        proc = home.run("run", "bare", check=False)
        assert proc.returncode != 0
        assert "asks for a user name and password" in proc.stdout + proc.stderr
        options = ("-o", "allow_private=true", "-o", "delay=0", "-o", "user=reader")
        home.run("source", "add", "dev", log.url(), *options, "-o", f"password={secret}")
        ran = home.run("-v", "run", "dev")
        assert log.secret_seen[-1] == secret
        assert secret not in ran.stdout + ran.stderr
        shown = [
            home.run("source", "show", "dev").stdout,
            home.run("source", "show", "dev", "--json").stdout,
            home.run("source", "list", "--json").stdout,
            home.run("status", "--json").stdout,
        ]
        assert all(secret not in text for text in shown)
        assert json.loads(shown[1])["options"]["password"] == "***"
        assert "***" in shown[0]
    held = server.message_ids()
    assert {r["message_id"] for r in home.query("SELECT message_id FROM messages")} >= held
    # A server that offers STARTTLS gets the password only inside TLS.
    with CommandLog(server.port, auth=("reader", secret), starttls=tls) as log:
        home.run("source", "add", "tls", log.url(), *options, "-o", f"password={secret}")
        home.run("run", "tls")
        sent = [(c.upper(), inside) for c, inside in zip(log.commands, log.tls_seen, strict=True)]
        assert ("STARTTLS", False) in sent
        assert ("AUTHINFO PASS ***", True) in sent
        assert not [c for c, inside in sent if c.startswith("AUTHINFO") and not inside]
        assert log.secret_seen[-1] == secret


def test_kill_9_during_a_harvest_then_run_again_stores_each_message_once(
    home: Home, tmp_path: Path
) -> None:
    inbox = news_inbox(tmp_path / "pi")
    messages = generate_messages(ADDR, MONTHS, 100, seed=5)
    inbox.import_many([raw for month in MONTHS for raw in messages[month]])
    with NewsServer(inbox) as server, CommandLog(server.port) as log:
        total = len(server.message_ids())
        # A pause of a second after every 50 commands: the harvest is still running
        # when it is killed.
        options = ("-o", "allow_private=true", "-o", "delay=1", "-o", "batch=50")
        home.run("source", "add", "dev", log.url(), *options)
        kill_9(home.start_run_until("dev", MESSAGES, CHECKPOINT))
        stored = home.count(MESSAGES)
        assert CHECKPOINT <= stored < total

        home.run("run", "dev")
        rows = home.query("SELECT key, message_id FROM messages")
        fetched = articles(log)
        held = server.message_ids()
    assert len(rows) == total == len({r["key"] for r in rows})
    assert {r["message_id"] for r in rows} == held
    # The rerun began at the last checkpoint: at most a checkpoint's worth was read twice.
    assert total <= len(fetched) <= total + CHECKPOINT
    assert len(set(fetched)) == total
    assert [r["outcome"] for r in home.query("SELECT outcome FROM source_runs")] == ["ok"]
    [unit] = home.query("SELECT counted, stored, length FROM archive_months")
    assert (unit["counted"], unit["stored"], unit["length"]) == (total, total, total)


def test_the_group_must_exist(server: NewsServer, log: CommandLog, tmp_path: Path) -> None:
    harvester = Harvester(f"sqlite:///{tmp_path / 'thresher.db'}", tmp_path, ShiftedClock(0))
    harvester.add(re.sub(rf"/{GROUP}$", "/no.such.group", log.url()), "nntp")
    with pytest.raises(AssertionError, match="no such newsgroup"):
        harvester.run()


def test_an_article_over_max_bytes_is_recorded_and_skipped(
    inbox: Inbox, server: NewsServer, log: CommandLog, tmp_path: Path
) -> None:
    small = [f"From: a@x\nSubject: s{i}\nMessage-ID: <s{i}@x>\n\nhi\n".encode() for i in range(3)]
    big = b"From: a@x\nSubject: big\nMessage-ID: <big@x>\n\n" + b"x" * 5000 + b"\n"
    inbox.import_many([small[0], big, small[1], small[2]])
    harvester = Harvester(f"sqlite:///{tmp_path / 'thresher.db'}", tmp_path, ShiftedClock(0))
    harvester.add(log.url(), "nntp", max_bytes="2000")
    harvester.run()
    assert harvester.ids() == {"s0@x", "s1@x", "s2@x"}
    [event] = [
        r for r in harvester.query("SELECT * FROM archive_events") if r["kind"] != "total_mismatch"
    ]
    assert (event["kind"], event["detail"]) == (
        "too_large",
        "article 2 is over 2000 bytes (5118 read)",
    )
    log.reset()
    harvester.run()
    assert "ARTICLE" not in log.verbs()
