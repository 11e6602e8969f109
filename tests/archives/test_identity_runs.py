"""One row per message however the archive wraps it, end to end (issue 18): HyperKitty's
exports made anew with fresh MIME boundaries, month files that grow after an extra
blank line or whose tail is rewritten, and plain mbox files whose ``>From`` lines are
kept as served. The built-in archive server on 127.0.0.1, both store backends, the real
execution plan and workers."""

from __future__ import annotations

import base64
import email.generator
import io
import re
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest
from test_archive_runs import (
    ADDR,
    MONTH_FILE,
    Harvester,
    ShiftedClock,
    expected_ids,
    make_list,
    message_id,
    month_bodies,
    new_message,
    ts,
)

from thresher.archives.demo import DemoArchive
from thresher.archives.export import export_messages
from thresher.archives.mbox import split_mbox
from thresher.store import open_store


@pytest.fixture
def server() -> Iterator[DemoArchive]:
    with DemoArchive() as archive:
        yield archive


def hyperkitty_message(n: int, *, width: int = 76, message_id: bool = True) -> bytes:
    """Message `n` as HyperKitty writes it into an export: built anew each time
    (EmailMessage, set_content, make_mixed, attachments, BytesGenerator with
    mangle_from_), so its MIME boundary is new on every call; `width` re-wraps its
    base64 lines as another writer might."""
    msg = EmailMessage()
    msg["From"] = f"Jörg Müller {n} <joerg{n}@example.de>"
    msg["To"] = ADDR
    msg["Subject"] = f"Grüße, vote {n}"
    msg["Date"] = f"Mon, {n % 28 + 1:02d} Jan 2024 10:00:00 +0100"
    if message_id:
        msg["Message-ID"] = f"<hk{n}@example.de>"
    msg.set_content(f"Message {n}: the release vote passes.\nÜmläüts stay.\n" * (n % 3 + 1))
    msg.make_mixed()
    msg.add_attachment(bytes(range(256)) * (n + 1), maintype="image", subtype="png",
                       filename=f"graph{n}.png")  # fmt: skip
    msg.add_attachment(f"Notes {n}: déjà vu\n" * 30, subtype="plain", cte="quoted-printable")
    out = io.BytesIO()
    email.generator.BytesGenerator(out, mangle_from_=True).flatten(msg)
    raw = out.getvalue()
    if width != 76:
        raw = re.sub(
            rb"(Content-Transfer-Encoding: base64\n(?:[^\n]+\n)*\n)((?:[A-Za-z0-9+/=]+\n)+)",
            lambda m: m.group(1) + _wrap(base64.b64decode(m.group(2)), width),
            raw,
        )
    return raw


def _wrap(data: bytes, width: int) -> bytes:
    text = base64.b64encode(data)
    return b"".join(text[i : i + width] + b"\n" for i in range(0, len(text), width))


def conflicts(harvester: Harvester) -> int:
    return int(harvester.query("SELECT count(*) AS n FROM messages WHERE conflict = 1")[0]["n"])


def test_hyperkitty_exports_with_fresh_boundaries_keep_one_row_per_message(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    count = 6
    first = [hyperkitty_message(n) for n in range(count)]
    first.append(hyperkitty_message(99, message_id=False))  # keyed by its normal form
    archive = server.add_list(ADDR, "2024-01", {"2024-01": first})
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 1, 20)))
    harvester.add(server.url("hyperkitty", ADDR))
    harvester.run()
    assert harvester.count() == count + 1

    for run, width in ((1, 60), (2, 64)):
        # HyperKitty builds every message of the month again: new boundaries (and
        # here new base64 line lengths); one late message makes the month be fetched.
        again = [hyperkitty_message(n, width=width) for n in range(count)]
        again.append(hyperkitty_message(99, width=width, message_id=False))
        assert not set(again) & set(first)
        for i, raw in enumerate(again):
            archive.replace("2024-01", i, raw)
        archive.add("2024-01", new_message(run, "2024-01"))
        server.reset_log()
        harvester.run()
        assert month_bodies(server, "hyperkitty") == 1
        assert harvester.count() == count + 1 + run
        assert conflicts(harvester) == 0
        assert not [e for e in harvester.events() if e[0] == "missing"]
    assert harvester.ids() == expected_ids(archive)
    # The first capture's bytes are the ones kept.
    [row] = harvester.query("SELECT raw FROM messages WHERE message_id = 'hk0@example.de'")
    assert bytes(row["raw"]) == first[0]
    january = harvester.months()["2024-01"]
    assert (january["counted"], january["stored"], january["missing"]) == (count + 3,) * 2 + (0,)


def test_a_message_that_really_differs_under_its_id_is_kept_and_flagged(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    archive = server.add_list(ADDR, "2024-01", {"2024-01": [hyperkitty_message(1)]})
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 1, 20)))
    harvester.add(server.url("hyperkitty", ADDR))
    harvester.run()
    edited = hyperkitty_message(1).replace(b"the release vote passes", b"the release vote fails")
    archive.replace("2024-01", 0, edited)
    archive.add("2024-01", new_message(1, "2024-01"))
    harvester.run()
    flagged = harvester.query("SELECT message_id FROM messages WHERE conflict = 1")
    assert [r["message_id"] for r in flagged] == ["hk1@example.de"] * 2


GROWING = ["pipermail", "modmbox", "mbox"]


@pytest.mark.parametrize("kind", GROWING)
def test_a_month_file_grown_after_an_extra_blank_line_reads_only_the_tail(
    server: DemoArchive, store_url: str, tmp_path: Path, kind: str
) -> None:
    archive = make_list(server)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(server.url(kind, ADDR))
    harvester.run()
    # The writer leaves one more blank line after the last message, then appends.
    last = archive.months["2024-03"][-1]
    archive.replace("2024-03", -1, last + b"\n")
    archive.add("2024-03", new_message(1))
    server.reset_log()
    harvester.run()
    assert harvester.ids() == expected_ids(archive)
    assert harvester.count() == 61 and conflicts(harvester) == 0
    assert harvester.events() == []  # no "changed", no false "missing"
    # The tail was enough: one 206, no second request for the whole file.
    answers = [r.status for r in server.requests if MONTH_FILE[kind].search(r.target)]
    assert answers == [206]
    march = harvester.months()["all" if kind == "mbox" else "2024-03"]
    assert march["missing"] == 0


@pytest.mark.parametrize("kind", GROWING)
@pytest.mark.parametrize(
    "rewrite",
    [
        lambda raw: raw.replace(b"\n", b"\r\n"),  # line endings
        lambda raw: raw + b"\n\n",  # trailing blank lines
        lambda raw: raw.replace(b"\nSubject: ", b"\nSubject:\n  ", 1),  # folded elsewhere
    ],
    ids=["crlf", "blank-lines", "refolded"],
)
def test_a_rewritten_tail_is_read_again_and_stores_nothing_twice(
    server: DemoArchive, store_url: str, tmp_path: Path, kind: str, rewrite: object
) -> None:
    archive = make_list(server)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(server.url(kind, ADDR))
    harvester.run()
    for index in (-2, -1):  # the archive re-wrote the last two messages
        raw = archive.months["2024-03"][index]
        archive.replace("2024-03", index, rewrite(raw))  # type: ignore[operator]
    archive.add("2024-03", new_message(2))
    harvester.run()
    assert harvester.ids() == expected_ids(archive)
    assert harvester.count() == 61 and conflicts(harvester) == 0
    assert not [e for e in harvester.events() if e[0] == "missing"]
    march = harvester.months()["all" if kind == "mbox" else "2024-03"]
    assert march["missing"] == 0
    harvester.run()  # and once more, unchanged
    assert harvester.count() == 61 and conflicts(harvester) == 0


QUOTED = (
    f"From: Ann <ann@example.org>\nTo: {ADDR}\nSubject: quoting\n"
    "Date: Mon, 15 Jan 2024 10:00:00 +0000\nMessage-ID: <quoted@example.org>\n\n"
    "The numbers:\n>From the 2.3M rows we kept 2.1M.\n>>From the list archive.\n"
    ">>>From the 2.3M\nFrom here on, all good.\n"
).encode()


def test_a_plain_mbox_keeps_from_lines_as_served_and_exports_mboxrd(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    archive = make_list(server, per_month=2)
    archive.add("2024-01", QUOTED)
    served = server.url("mbox", ADDR)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(served)
    harvester.run()
    [row] = harvester.query("SELECT raw FROM messages WHERE message_id = 'quoted@example.org'")
    stored = bytes(row["raw"])
    # The file is mboxo (From -> >From); every other byte is what the file holds.
    file_bytes = [m.raw for m in split_mbox(_get(served), unescape=False)]
    assert stored in file_bytes
    assert b"\n>From the 2.3M rows" in stored and b"\n>>From the list archive.\n" in stored
    assert b"\n>>>From the 2.3M\n" in stored and b"\n>From here on, all good.\n" in stored
    assert stored == QUOTED.replace(b"\nFrom here on", b"\n>From here on")
    store = open_store(store_url)
    try:
        with store.transaction(write=False) as tx:
            out = io.BytesIO()
            export_messages(tx, "dev", "2024-01", "mbox", out)
    finally:
        store.close()
    # mboxrd: one more ">" on each such line; a reader that removes one gets `stored`.
    assert b"\n>>>>From the 2.3M\n" in out.getvalue()
    [back] = [m.raw for m in split_mbox(out.getvalue(), unescape=True) if b"quoted@" in m.raw]
    assert back == stored


def _get(url: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url) as answer:
        return bytes(answer.read())


def placed(harvester: Harvester) -> dict[int, tuple[str, int]]:
    rows = harvester.query("SELECT id, month, position FROM messages")
    return {r["id"]: (r["month"], r["position"]) for r in rows}


def test_messages_keep_their_month_after_rereads(
    server: DemoArchive, store_url: str, tmp_path: Path
) -> None:
    """The row kept is the first capture's: month and position do not move on a reread."""
    archive = make_list(server)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(server.url("pipermail", ADDR))
    harvester.run()
    before = {
        r["id"]: (r["month"], r["position"]) for r in harvester.query("SELECT * FROM messages")
    }
    archive.replace("2024-03", 0, archive.months["2024-03"][0] + b"\n")  # a rewrite inside
    harvester.run()
    after = {
        r["id"]: (r["month"], r["position"]) for r in harvester.query("SELECT * FROM messages")
    }
    assert after == before
    assert message_id(archive.months["2024-03"][0]) in harvester.ids()
