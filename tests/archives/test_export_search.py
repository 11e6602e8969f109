"""Exporting stored list messages (mboxrd, JSON lines) and searching them, on both stores.

Messages are inserted with plain SQL on a second connection (not through the harvest's
queries), so these tests only rely on the `messages` table of the migration.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import mailbox
import re
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.archives import export as export_module
from thresher.archives.export import envelope, export_messages, iter_messages, write_mboxrd
from thresher.archives.mbox import is_envelope, split_mbox
from thresher.archives.normal import normal_digest
from thresher.archives.rows import whole_message_path
from thresher.archives.search import fts5_query, parse_query, search_messages, split_snippet
from thresher.cli.main import main
from thresher.errors import UsageError
from thresher.store import Store, open_store

T0 = 1704067200.0  # 2024-01-01T00:00:00Z
SEEN = 1717200000.0  # 2024-06-01T00:00:00Z
_QUOTED = re.compile(rb"^>(>*From )", re.MULTILINE)

_COLUMNS = (
    "source", "month", "key", "sha256", "message_id", "date", "date_raw", "date_flag",
    "from_name", "from_addr", "subject", "in_reply_to", "refs", "body", "raw", "position",
    "conflict", "first_seen", "norm_sha256",
)  # fmt: skip


class RawDB:
    """A second connection to the store's database, for writing test rows with SQL."""

    def __init__(self, url: str) -> None:
        self.sqlite = url.startswith("sqlite:///")
        self.conn: Any = (
            sqlite3.connect(url.removeprefix("sqlite:///"))
            if self.sqlite
            else psycopg.connect(url, autocommit=True)
        )

    def close(self) -> None:
        self.conn.close()


def insert_message(db: RawDB, raw: bytes, **fields: Any) -> int:
    """Insert one message with plain SQL; every column not given gets a plausible value."""
    digest = hashlib.sha256(raw).hexdigest()
    row: dict[str, Any] = {
        "source": "dev",
        "month": "2024-01",
        "key": f"sha256:{digest}",
        "sha256": digest,
        "message_id": None,
        "date": T0,
        "date_raw": None,
        "date_flag": None,
        "from_name": None,
        "from_addr": None,
        "subject": None,
        "in_reply_to": None,
        "refs": None,
        "body": None,
        "raw": raw,
        "position": None,
        "conflict": 0,
        "first_seen": SEEN,
        "norm_sha256": normal_digest(raw),
    }
    unknown = set(fields) - set(row)
    assert not unknown, unknown
    row.update(fields)
    names = ", ".join(_COLUMNS)
    if db.sqlite:
        sql = f"INSERT INTO messages ({names}) VALUES ({', '.join('?' * len(_COLUMNS))})"
        cur = db.conn.execute(sql, [row[c] for c in _COLUMNS])
        # The harvester indexes what it stores in the same transaction (index_new_messages).
        db.conn.execute(
            "INSERT INTO messages_fts (rowid, subject, from_name, from_addr, body)"
            " SELECT id, subject, from_name, from_addr, body FROM messages WHERE id = ?",
            (cur.lastrowid,),
        )
        db.conn.commit()
        return int(cur.lastrowid)
    values = ", ".join(["%s"] * len(_COLUMNS))
    sql = f"INSERT INTO messages ({names}) VALUES ({values}) RETURNING id"
    found = db.conn.execute(sql, [row[c] for c in _COLUMNS]).fetchone()
    return int(found[0])


def open_sqlite(home: Path) -> Store:
    return open_store(f"sqlite:///{home / 'thresher.db'}")


def add_list(store: Store, name: str) -> None:
    with store.transaction() as tx:
        tx.execute(
            "insert_source", name=name, type="mbox", url=f"https://example.org/{name}.mbox",
            options="{}", now=T0,
        )  # fmt: skip


@pytest.fixture
def db(store: Store, store_url: str) -> Iterator[RawDB]:
    raw = RawDB(store_url)
    try:
        yield raw
    finally:
        raw.close()


def unescape(data: bytes) -> bytes:
    return _QUOTED.sub(rb"\1", data)


def read_back(raw: bytes) -> bytes:
    """What an mbox reader gives back: mboxrd cannot keep a missing final newline."""
    return raw if raw.endswith(b"\n") else raw + b"\n"


# Messages of list "dev", in the order the export must write them (month, position, id).
ESCAPES = (
    b"From: Alice <alice@example.org>\nSubject: Release plan\nMessage-ID: <a1@x>\n\n"
    b"From the start we planned this.\n>From quoted once\n>>From quoted twice\n"
    b"From alice@example.org Mon Jan  1 00:00:00 2024\n\nFrom \n>From\nFrom:\n"
)
CRLF = (
    b"From: Bob <bob@example.net>\r\nSubject: caf\xe9 r\xe9sum\xe9\r\nMessage-ID: <b1@x>\r\n"
    b"\r\nFrom Paris with love\r\n>From Lyon\r\n\xff\xfe 8-bit\r\n"
)
MIDDLE = b"Subject: inserted last, placed by position\n\nmiddle\n"
NO_NEWLINE = b"From: carol@example.com\nSubject: no final newline\n\nFrom here, final words"
NO_POSITION = b"Subject: no position\n\nkept after the positioned ones\n\n"


def fill_dev(db: RawDB) -> list[int]:
    ids = [
        insert_message(
            db, ESCAPES, position=0, message_id="a1@x", key="a1@x", from_name="Alice",
            from_addr="alice@example.org", subject="Release plan",
            body="From the start we planned this.", refs="r1@x r2@x", in_reply_to="r2@x",
            date_raw="Mon, 01 Jan 2024 00:00:00 +0000",
        ),
        insert_message(
            db, CRLF, position=900, message_id="b1@x", key="b1@x", from_name="Bob",
            from_addr="bob@example.net", subject="café résumé", body="From Paris with love",
            date=None, date_flag="missing", conflict=1,
        ),
        insert_message(db, NO_NEWLINE, month="2024-02", position=0, from_addr="carol@example.com"),
        insert_message(db, NO_POSITION, month="2024-02", position=None, date=None),
    ]  # fmt: skip
    middle = insert_message(db, MIDDLE, position=400, from_addr="two words@example.org")
    return [ids[0], middle, ids[1], ids[2], ids[3]]


DEV_RAWS = [ESCAPES, MIDDLE, CRLF, NO_NEWLINE, NO_POSITION]


def export_bytes(store: Store, fmt: str, month: str | None = None, source: str = "dev") -> bytes:
    out = io.BytesIO()
    with store.transaction(write=False) as tx:
        export_messages(tx, source, month, fmt, out)
    return out.getvalue()


# -- mboxrd ---------------------------------------------------------------------------


def test_mbox_reads_back_exactly_with_python_mailbox(
    store: Store, db: RawDB, tmp_path: Path
) -> None:
    fill_dev(db)
    data = export_bytes(store, "mbox")
    path = tmp_path / "dev.mbox"
    path.write_bytes(data)
    box = mailbox.mbox(path, create=False)
    try:
        got = [box.get_bytes(key) for key in box.iterkeys()]
        envelopes = [box.get_message(key).get_from() for key in box.iterkeys()]
    finally:
        box.close()
    assert len(got) == len(DEV_RAWS)
    assert [unescape(g) for g in got] == [read_back(r) for r in DEV_RAWS]
    # The escaping itself: one more '>' on every ^>*From line, nothing else touched.
    assert b"\n>From the start" in got[0] and b"\n>>From quoted once" in got[0]
    assert b"\n>>>From quoted twice" in got[0] and b"\n>From \n>From\nFrom:\n" in got[0]
    assert b"\r\n>From Paris with love\r\n>>From Lyon\r\n\xff\xfe" in got[2]
    # Only envelopes start with "From " in the whole file.
    assert len(re.findall(rb"^From ", data, re.MULTILINE)) == len(DEV_RAWS)
    assert envelopes[0] == "alice@example.org Mon Jan  1 00:00:00 2024"
    # No date: the time it was first seen; an address that is not one token: MAILER-DAEMON.
    assert envelopes[2] == "bob@example.net Sat Jun  1 00:00:00 2024"
    assert envelopes[1].startswith("MAILER-DAEMON ")


def test_mbox_reads_back_with_thresher_splitter(store: Store, db: RawDB) -> None:
    fill_dev(db)
    data = export_bytes(store, "mbox")
    messages = split_mbox(data, unescape=True)
    assert [m.raw for m in messages] == [read_back(r) for r in DEV_RAWS]
    assert all(is_envelope(m.envelope) for m in messages)


def test_mbox_month_and_empty(store: Store, db: RawDB) -> None:
    fill_dev(db)
    data = export_bytes(store, "mbox", month="2024-02")
    assert [m.raw for m in split_mbox(data)] == [NO_NEWLINE + b"\n", NO_POSITION]
    assert export_bytes(store, "mbox", month="2023-12") == b""
    undated = insert_message(db, b"Subject: u\n\nno date\n", month="undated", date=None)
    assert [m.raw for m in split_mbox(export_bytes(store, "mbox", "undated"))] == [
        b"Subject: u\n\nno date\n"
    ]
    with store.transaction(write=False) as tx:
        last = list(iter_messages(tx, "dev"))[-1]
    assert last["id"] == undated  # after the YYYY-MM months
    assert export_bytes(store, "mbox", source="nobody") == b""


def test_export_streams_in_batches(
    store: Store, db: RawDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("thresher.archives.export.BATCH", 2)
    raws = [f"Subject: {i}\n\nFrom {i}\n".encode() for i in range(7)]
    for i, raw in enumerate(raws):
        insert_message(db, raw, position=(7 - i) % 7 * 10, month="2024-03" if i % 2 else "2024-01")
    path = tmp_path / "x.mbox"
    path.write_bytes(export_bytes(store, "mbox"))
    box = mailbox.mbox(path, create=False)
    try:
        got = [unescape(box.get_bytes(k)) for k in box.iterkeys()]
    finally:
        box.close()
    # Month first, then position: 2024-01 holds 0 (pos 0), 6 (10), 4 (30), 2 (50).
    assert got == [raws[i] for i in (0, 6, 4, 2, 5, 3, 1)]


def test_export_batches_are_bounded_by_bytes_too(
    store: Store, db: RawDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Messages up to max_message_bytes each: 200 of them a query could be gigabytes.
    monkeypatch.setattr("thresher.archives.export.BATCH_BYTES", 110)
    raws = [f"Subject: {i}\n\n{'x' * 40}\n".encode() for i in range(7)]
    for i, raw in enumerate(raws):
        insert_message(db, raw, position=i, month="2024-01")
    queries: list[int] = []
    real = export_module.messages_by_id

    def counted(tx: Any, ids: list[int]) -> Any:
        queries.append(len(ids))
        return real(tx, ids)

    monkeypatch.setattr("thresher.archives.export.messages_by_id", counted)
    with store.transaction(write=False) as tx:
        assert [bytes(r["raw"]) for r in iter_messages(tx, "dev")] == raws
    assert queries == [2, 2, 2, 1]  # 53 bytes each: two fit in 110


def test_serve_sends_a_month_as_export_writes_it(
    store: Store, store_url: str, db: RawDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`thresher serve` streams a month's mbox a batch (and a transaction) at a time: the
    bytes of `thresher export --month`, through several batches."""
    from aiohttp import ClientSession
    from aiohttp.test_utils import TestServer

    from thresher.serve.app import make_app
    from thresher.serve.auth import Access
    from thresher.serve.context import Context
    from thresher.store.aio import AsyncStore

    monkeypatch.setattr("thresher.archives.export.BATCH", 3)
    add_list(store, "dev")
    fill_dev(db)
    for i in range(8):
        insert_message(db, f"Subject: {i}\n\nFrom {i}\n".encode(), position=1000 + i)
    # One cut short in the index and kept whole in its file: sent whole, as exported.
    whole = b"Subject: long\n\n" + b"From a long line\n" * 1000
    digest = hashlib.sha256(whole).hexdigest()
    cut = insert_message(db, whole[:100], position=2000, sha256=digest)
    db.conn.execute(f"UPDATE messages SET truncated = 'max_message_bytes' WHERE id = {cut}")
    if db.sqlite:
        db.conn.commit()
    (tmp_path / whole_message_path(digest)).parent.mkdir(parents=True)
    (tmp_path / whole_message_path(digest)).write_bytes(whole)
    out = io.BytesIO()
    with store.transaction(write=False) as tx:
        export_messages(tx, "dev", "2024-01", "mbox", out, tmp_path)
    expected = out.getvalue()
    assert expected.count(b"\nFrom ") + 1 == 3 + 8 + 1
    assert expected.count(b">From a long line\n") == 1000

    async def get(path: str) -> tuple[int, str, bytes]:
        aio = await AsyncStore(store_url, 2, readonly=True).open()
        info = {"backend": store.backend, "url": store_url, "schema_version": 0}
        server = TestServer(make_app(Context(aio, tmp_path, 60.0, Access(None), info)))
        try:
            await server.start_server()
            async with ClientSession() as session, session.get(server.make_url(path)) as resp:
                return resp.status, resp.headers.get("Transfer-Encoding", ""), await resp.read()
        finally:
            await server.close()
            await aio.close()

    status, encoding, body = asyncio.run(get("/lists/dev/2024-01.mbox"))
    assert status == 200 and encoding == "chunked" and body == expected
    status, _encoding, body = asyncio.run(get("/lists/dev/2024-02.mbox"))
    assert status == 200 and body == export_bytes(store, "mbox", "2024-02")
    assert asyncio.run(get("/lists/dev/all.mbox"))[0] == 400
    assert asyncio.run(get("/lists/nobody/2024-01.mbox"))[0] == 404


@given(
    st.lists(
        st.tuples(
            st.lists(
                st.sampled_from(
                    [b"From x", b">From y", b">>>From z", b"", b"text", b"From", b" From a",
                     b"\r", b"\xff\xfe\x00", b"From: h", b"X>From "]
                ),
                max_size=8,
            ),
            st.sampled_from([b"\n", b"\r\n"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    )
)  # fmt: skip
@settings(max_examples=150, deadline=None)
def test_mboxrd_round_trip_property(messages: list[tuple[list[bytes], bytes, bool]]) -> None:
    raws = []
    for lines, eol, final in messages:
        raw = eol.join([b"Subject: s", b"", *lines])
        raws.append(raw + eol if final else raw)
    rows = [{"raw": r, "from_addr": "a@b.c", "date": T0, "first_seen": SEEN} for r in raws]
    out = io.BytesIO()
    assert write_mboxrd(rows, out) == len(raws)
    data = out.getvalue()
    assert [m.raw for m in split_mbox(data)] == [read_back(r) for r in raws]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.mbox"
        path.write_bytes(data)
        box = mailbox.mbox(path, create=False)
        try:
            got = [unescape(box.get_bytes(k)) for k in box.iterkeys()]
        finally:
            box.close()
    assert got == [read_back(r) for r in raws]


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"from_addr": "a@b.c", "date": T0}, b"From a@b.c Mon Jan  1 00:00:00 2024\n"),
        ({"from_addr": None, "date": None}, b"From MAILER-DAEMON Sat Jun  1 00:00:00 2024\n"),
        ({"from_addr": "", "date": 1e12}, b"From MAILER-DAEMON Sat Jun  1 00:00:00 2024\n"),
        ({"from_addr": "a\nb", "date": -1e11}, b"From MAILER-DAEMON Sat Jun  1 00:00:00 2024\n"),
        ({"from_addr": "jörg@exämple.de", "date": 0.0},
         "From jörg@exämple.de Thu Jan  1 00:00:00 1970\n".encode()),
    ],
)  # fmt: skip
def test_envelope_line(fields: dict[str, Any], line: bytes) -> None:
    assert envelope({**fields, "first_seen": SEEN}) == line
    assert is_envelope(line)


# -- JSON lines -----------------------------------------------------------------------


def test_jsonl_fields(store: Store, db: RawDB) -> None:
    fill_dev(db)
    lines = export_bytes(store, "jsonl").decode("utf-8").splitlines()
    objs = [json.loads(line) for line in lines]
    assert len(objs) == 5
    assert all(
        set(o)
        == {
            "source", "month", "key", "message_id", "date", "date_raw", "date_flag",
            "from_name", "from_addr", "subject", "in_reply_to", "references", "conflict",
            "sha256", "parse_error", "truncated", "raw", "raw_base64",
        }
        for o in objs
    )  # fmt: skip
    assert [base64.b64decode(o["raw_base64"]) for o in objs] == DEV_RAWS
    first, crlf = objs[0], objs[2]
    assert first["source"] == "dev" and first["month"] == "2024-01"
    assert first["key"] == "a1@x" and first["message_id"] == "a1@x"
    assert first["date"] == "2024-01-01T00:00:00+00:00"
    assert first["date_raw"] == "Mon, 01 Jan 2024 00:00:00 +0000" and first["date_flag"] is None
    assert first["from_name"] == "Alice" and first["from_addr"] == "alice@example.org"
    assert first["subject"] == "Release plan" and first["in_reply_to"] == "r2@x"
    assert first["references"] == ["r1@x", "r2@x"] and first["conflict"] is False
    assert first["parse_error"] is None and first["truncated"] is None
    assert first["sha256"] == hashlib.sha256(ESCAPES).hexdigest()
    assert first["raw"] == ESCAPES.decode()
    assert crlf["date"] is None and crlf["date_flag"] == "missing" and crlf["conflict"] is True
    assert crlf["references"] == [] and crlf["subject"] == "café résumé"
    assert "caf\ufffd r\ufffdsum\ufffd\r\n" in crlf["raw"]
    month = [json.loads(x) for x in export_bytes(store, "jsonl", "2024-02").splitlines()]
    assert [o["month"] for o in month] == ["2024-02", "2024-02"]


def test_export_rejects_bad_month_and_format(store: Store) -> None:
    with store.transaction(write=False) as tx:
        for month in ("2024-13", "2024-1", "24-01", "", "all", "Undated"):
            with pytest.raises(UsageError, match="not a month"):
                export_messages(tx, "dev", month, "mbox", io.BytesIO())
        with pytest.raises(UsageError, match="unknown export format"):
            export_messages(tx, "dev", None, "csv", io.BytesIO())
        assert export_messages(tx, "dev", "undated", "jsonl", io.BytesIO()) == 0


# -- search ---------------------------------------------------------------------------


SEARCH_DOCS: list[dict[str, Any]] = [
    {"source": "dev", "subject": "Release plan for 2.0", "from_name": "Alice",
     "from_addr": "alice@example.org", "body": "The release candidate ships next week.",
     "date": T0},
    {"source": "dev", "subject": "Re: Release plan for 2.0", "from_name": "Bob",
     "from_addr": "bob@example.net", "body": "Next week is too early for the release.",
     "date": T0 + 86400},
    {"source": "dev", "subject": "Build broken", "from_name": "Carol",
     "from_addr": "carol@example.com", "body": "The nightly build broke again; see the log.",
     "date": T0 + 2 * 86400},
    {"source": "users", "subject": "How do I build it?", "from_name": "Dave",
     "from_addr": "dave@example.org", "body": "I cannot build the release on my laptop.",
     "date": None},
    {"source": "users", "subject": "Grüße", "from_name": "Eve", "from_addr": "eve@example.de",
     "body": "grüße aus köln, a foo-bar question: and * or - signs", "date": T0 - 86400},
]  # fmt: skip


def fill_search(db: RawDB) -> list[int]:
    return [
        insert_message(db, f"Subject: {d['subject']}\n\n{d['body']}\n".encode(), **d)
        for d in SEARCH_DOCS
    ]


def search_ids(store: Store, query: str, source: str | None = None, limit: int = 50) -> list[int]:
    with store.transaction(write=False) as tx:
        return [r["id"] for r in search_messages(tx, store.backend, query, source, limit)]


# query -> indexes into SEARCH_DOCS of the messages that must match, on both backends.
SEARCHES: list[tuple[str, set[int]]] = [
    ("release", {0, 1, 3}),
    ("RELEASE week", {0, 1}),
    ('"next week"', {0, 1}),
    ('"week next"', set()),
    ('"release plan" bob', {1}),
    ("build", {2, 3}),
    ("alice@example.org", {0}),
    ("example", {0, 1, 2, 3, 4}),  # part of an address, on both backends
    ("grusse", set()),  # accents are kept, on both backends
    ("grüße köln", {4}),
    ("foo-bar", {4}),
    ('"foo bar"', {4}),
    ("foo-bar question", {4}),
    ("2.0", {0, 1}),
    ("nothing-matches-this", set()),
]


def test_search_words_and_phrases(store: Store, db: RawDB) -> None:
    ids = fill_search(db)
    for query, expected in SEARCHES:
        assert set(search_ids(store, query)) == {ids[i] for i in expected}, query


HOSTILE = [
    'foo"', '"foo', '"', '""', "AND", "OR", "NOT", "*", "-x", ":", "^", "(", ")", "()",
    "NEAR(a b)", "subject:release", "body : x", "release*", "'", "\\", "a'b", "!x", "&|",
    "release AND", "OR release", "-release", "\x00release", "release\x00", "\ud800",
    "{subject}: x", "a + b", "<->", "x:*", "'x':A", "release -", "* release *", "≠",
]  # fmt: skip


def test_search_survives_hostile_input(store: Store, db: RawDB) -> None:
    """No input is read as query syntax: no error, and operators are plain words."""
    ids = fill_search(db)
    for query in HOSTILE:
        found = set(search_ids(store, query))
        words = parse_query(query)
        assert found <= set(ids), query
        if words == ["release"]:
            assert found == {ids[i] for i in (0, 1, 3)}, query
        if not words:
            assert found == set(), query
    # "AND", "or" and "-" are words or punctuation here, never operators.
    assert set(search_ids(store, "question and or")) == {ids[4]}
    assert search_ids(store, "release AND zebra") == []
    assert set(search_ids(store, "-release")) == {ids[i] for i in (0, 1, 3)}


def test_parse_query() -> None:
    assert parse_query('  a "b  c" d"e f') == ["a", "b c", "d", "e f"]
    assert parse_query('a a "a"') == ["a"]
    assert parse_query("* - : \x00 \ud800") == []
    assert parse_query("x\x00y") == ["x", "y"]
    assert fts5_query(["a", "b c"]) == '"a" AND "b c"'


def test_search_by_list_limit_order_and_snippet(store: Store, db: RawDB) -> None:
    ids = fill_search(db)
    assert set(search_ids(store, "release", "users")) == {ids[3]}
    assert set(search_ids(store, "release", "dev")) == {ids[0], ids[1]}
    assert search_ids(store, "release", "nobody") == []
    assert len(search_ids(store, "release", limit=2)) == 2
    # "build" is as relevant in both hits but for length; equal scores sort newest first.
    with store.transaction(write=False) as tx:
        rows = search_messages(tx, store.backend, "laptop", None, 10)
    assert [r["id"] for r in rows] == [ids[3]]
    row = rows[0]
    assert set(row) == {
        "id", "source", "month", "date", "from_name", "from_addr", "subject", "message_id",
        "snippet", "matches",
    }  # fmt: skip
    assert row["source"] == "users" and row["from_name"] == "Dave" and row["date"] is None
    assert "laptop" in row["snippet"] and "\x02" not in row["snippet"]
    assert [row["snippet"][a:b] for a, b in row["matches"]] == ["laptop"]


def test_search_newest_first_on_equal_rank(store: Store, db: RawDB) -> None:
    ids = [
        insert_message(db, f"{i}".encode(), subject="same words", body="same words", date=d)
        for i, d in enumerate([T0, None, T0 + 100, T0 - 100])
    ]
    assert search_ids(store, "same") == [ids[2], ids[0], ids[3], ids[1]]
    # Cut to a page, equal scores still sort by date, not by which was scored first.
    assert search_ids(store, "same", limit=2) == [ids[2], ids[0]]


def test_search_ranks_only_the_newest_matches(store: Store, db: RawDB) -> None:
    """The newest `ranked` matches (of the list asked for) are ranked, not every match."""
    ids = fill_search(db)

    def ranked(ranked: int, source: str | None = None, limit: int = 1) -> list[int]:
        with store.transaction(write=False) as tx:
            rows = search_messages(tx, store.backend, "release", source, limit, ranked)
        return [r["id"] for r in rows]

    full = search_ids(store, "release")
    assert set(full) == {ids[0], ids[1], ids[3]}
    assert ranked(3, limit=3) == ranked(10_000, limit=3) == full
    assert set(ranked(2, limit=2)) == {ids[1], ids[3]}
    assert ranked(2, limit=1) == [i for i in full if i in (ids[1], ids[3])][:1]
    # The list is chosen before the newest are taken: ids[3] (users) is not counted.
    assert ranked(1, "dev") == [ids[1]]
    # A page is never shorter than asked for because of the cap.
    assert len(ranked(1, limit=3)) == 3


def test_split_snippet() -> None:
    text, spans = split_snippet("a\n\n\x02b\x03  c \x02dd\x03")
    assert text == "a b c dd" and spans == [(2, 3), (6, 8)]
    long, spans = split_snippet("word " * 100 + "\x02hit\x03")
    assert len(long) <= 161 and long.endswith("…") and spans == []
    assert split_snippet(None) == ("", [])


def test_both_backends_find_the_same_messages(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Same rows, same queries: the same ids on SQLite and PostgreSQL."""
    from conftest import new_pg_database

    urls = [
        f"sqlite:///{tmp_path / 'same.db'}",
        new_pg_database(request.getfixturevalue("pg_admin_url")),
    ]
    queries = [q for q, _ in SEARCHES] + HOSTILE + ["the", '"the release"']
    results: list[dict[str, list[int]]] = []
    for url in urls:
        store = open_store(url)
        raw = RawDB(url)
        try:
            fill_search(raw)
            results.append({q: sorted(search_ids(store, q)) for q in queries})
            results[-1]["users:build"] = search_ids(store, "build", "users")
        finally:
            raw.close()
            store.close()
    assert results[0] == results[1]


# -- command line ---------------------------------------------------------------------


@pytest.fixture
def cli_args(
    store: Store, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    monkeypatch.delenv("THRESHER_DB", raising=False)
    monkeypatch.delenv("THRESHER_HOME", raising=False)
    args = ["--home", str(tmp_path)]
    return args if store.backend == "sqlite" else [*args, "--db", store_url]


def test_cli_export_to_file_and_stdout(
    store: Store, db: RawDB, cli_args: list[str], tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:  # fmt: skip
    add_list(store, "dev")
    fill_dev(db)
    out = tmp_path / "out" / "dev.mbox"
    out.parent.mkdir()
    assert main([*cli_args, "export", "dev", "--format", "mbox", "-o", str(out)]) == 0
    assert b"exported 5 messages of dev to" in capsysbinary.readouterr().err
    assert out.read_bytes() == export_bytes(store, "mbox")
    assert [p.name for p in out.parent.iterdir()] == ["dev.mbox"]

    assert main([*cli_args, "export", "dev", "--month", "2024-02", "--format", "jsonl"]) == 0
    captured = capsysbinary.readouterr()
    assert captured.out == export_bytes(store, "jsonl", "2024-02")
    assert b"exported 2 messages of dev (2024-02)" in captured.err

    assert main([*cli_args, "-q", "export", "dev", "--format", "mbox", "-o", "-"]) == 0
    captured = capsysbinary.readouterr()
    assert captured.out == export_bytes(store, "mbox") and captured.err == b""


def test_cli_export_errors_leave_no_file(
    store: Store, db: RawDB, cli_args: list[str], tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    add_list(store, "dev")
    fill_dev(db)
    out = tmp_path / "dev.mbox"
    assert main([*cli_args, "export", "nobody", "--format", "mbox", "-o", str(out)]) == 2
    assert b"no source named 'nobody'" in capsysbinary.readouterr().err
    assert main([*cli_args, "export", "dev", "--month", "2024-1", "--format", "mbox"]) == 2
    assert b"thresher: error: not a month: '2024-1'" in capsysbinary.readouterr().err
    assert main([*cli_args, "export", "dev", "--format", "csv"]) == 2
    assert (
        main([*cli_args, "export", "dev", "--format", "mbox", "-o", str(tmp_path / "no" / "x")])
        == 2
    )
    assert b"cannot write" in capsysbinary.readouterr().err

    # A failure half-way leaves neither the file nor a temporary one.
    out.write_bytes(b"old")

    def explode(rows: Any, stream: Any, home: Any) -> int:
        stream.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("thresher.archives.export.write_mboxrd", explode)
    assert main([*cli_args, "export", "dev", "--format", "mbox", "-o", str(out)]) == 2
    assert b"No space left on device" in capsysbinary.readouterr().err
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".dev")) == []


def test_cli_search(
    store: Store, db: RawDB, cli_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    add_list(store, "dev")
    add_list(store, "users")
    ids = fill_search(db)
    assert main([*cli_args, "search", "release", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert {h["id"] for h in hits} == {ids[0], ids[1], ids[3]}
    assert set(hits[0]) == {
        "id", "source", "month", "date", "from_name", "from_addr", "subject", "message_id",
        "snippet",
    }  # fmt: skip
    assert main([*cli_args, "search", "release", "--list", "users", "--json"]) == 0
    assert [h["id"] for h in json.loads(capsys.readouterr().out)] == [ids[3]]
    assert main([*cli_args, "search", '"next week"', "--limit", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].split("\t")[1] == "dev"
    assert "Next week" in lines[0] or "next week" in lines[0]
    assert main([*cli_args, "search", "release", "plan"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main([*cli_args, "search", "release", "--list", "nobody"]) == 2
    assert "no source named 'nobody'" in capsys.readouterr().err
    assert main([*cli_args, "search", "--", "-", "*"]) == 2
    assert "nothing to search for" in capsys.readouterr().err
    assert main([*cli_args, "search", 'zebra"', "AND", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_cli_search_table_on_a_terminal(
    store: Store, db: RawDB, cli_args: list[str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fill_search(db)
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.setattr("rich.console.Console.is_terminal", property(lambda self: True))
    assert main([*cli_args, "search", "laptop"]) == 0
    out = capsys.readouterr().out
    assert "Dave <dave@example.org>" in out and "How do I build it?" in out
    assert "\x1b[" in out  # the match is highlighted
    assert main([*cli_args, "search", "zebra"]) == 0
    assert "no messages match" in capsys.readouterr().out


def test_cli_export_to_a_closed_pipe(tmp_path: Path) -> None:
    """`thresher export … | head`: one line on stderr and exit 141, no traceback."""
    from cli_proc import Home

    store = open_sqlite(tmp_path)
    add_list(store, "dev")
    store.close()
    db = RawDB(f"sqlite:///{tmp_path / 'thresher.db'}")
    for i in range(200):
        insert_message(db, f"Subject: {i}\n\n{'x' * 1000}\n".encode(), position=i)
    db.close()
    home = Home(tmp_path)
    proc = subprocess.Popen(
        home.cmd("export", "dev", "--format", "mbox"),
        env=home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10) == b"From MAILE"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 141
    assert err == "thresher: error: standard output was closed before the export ended\n"
