"""A message longer than the `max_message_bytes` setting, end to end: stored in the index
from its start and flagged, kept whole in its file under HOME/messages/, exported whole.
The built-in archive server on 127.0.0.1, both store backends, the real execution plan."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_archive_runs import ADDR, Harvester, ShiftedClock, make_list, ts

from thresher.archives.demo import DemoArchive
from thresher.archives.export import export_messages
from thresher.archives.mbox import split_mbox
from thresher.store import open_store

CAP = 64 * 2**10  # the least the setting takes


@pytest.fixture
def server() -> Iterator[DemoArchive]:
    with DemoArchive() as archive:
        yield archive


def long_message() -> bytes:
    # ">From" lines: a Pony Mail file quotes them once more (mboxrd); the index and the
    # file both hold them un-escaped, as the message was.
    lines = [f"line {i}: the vote passes\n" if i % 500 else ">From the vote, a quote\n"
             for i in range(10_000)]  # fmt: skip
    head = (
        f"From: Long Writer <long@example.net>\nTo: {ADDR}\nSubject: the long one\n"
        "Date: Sun, 3 Mar 2024 10:00:00 +0000\nMessage-ID: <long@example.net>\n\n"
    )
    return (head + "".join(lines)).encode()


@pytest.mark.parametrize("kind", ["modmbox", "ponymail", "mbox"])
def test_a_long_message_is_cut_in_the_index_and_kept_whole_in_its_file(
    server: DemoArchive, store_url: str, tmp_path: Path, kind: str
) -> None:
    archive = make_list(server, per_month=3)
    whole = long_message()
    assert len(whole) > 3 * CAP
    archive.add("2024-03", whole)
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)), max_message_bytes=CAP)
    harvester.add(server.url(kind, ADDR))
    harvester.run()
    [row] = harvester.query(
        "SELECT raw, sha256, truncated, body, subject FROM messages"
        " WHERE message_id = 'long@example.net'"
    )
    digest = hashlib.sha256(whole).hexdigest()
    assert bytes(row["raw"]) == whole[:CAP] and row["sha256"] == digest
    assert row["truncated"] == (
        f"truncated-in-index: {len(whole)} bytes, the first {CAP} stored (max_message_bytes);"
        f" the whole message is in HOME/messages/{digest[:2]}/{digest}"
    )
    assert row["subject"] == "the long one" and "line 1: the vote" in row["body"]
    assert (tmp_path / "messages" / digest[:2] / digest).read_bytes() == whole
    others = harvester.query("SELECT count(*) AS n FROM messages WHERE truncated IS NULL")
    assert others[0]["n"] == 9

    # Exported whole, in both formats.
    store = open_store(store_url)
    try:
        with store.transaction(write=False) as tx:
            mbox, jsonl = io.BytesIO(), io.BytesIO()
            export_messages(tx, "dev", "2024-03", "mbox", mbox, tmp_path)
            export_messages(tx, "dev", "2024-03", "jsonl", jsonl, tmp_path)
    finally:
        store.close()
    exported = {m.raw for m in split_mbox(mbox.getvalue())}
    assert whole in exported or whole.rstrip(b"\n") in exported
    [line] = [json.loads(x) for x in jsonl.getvalue().splitlines() if b"long@example" in x]
    assert base64.b64decode(line["raw_base64"]) == whole and line["truncated"] == row["truncated"]

    # Harvested again (the month rewritten): nothing new, the file as it was.
    archive.add("2024-03", whole.replace(b"long@", b"long2@"))
    harvester.run()
    assert harvester.count() == 11
    assert len(list((tmp_path / "messages").rglob("*"))) == 4  # 2 folders, 2 files
