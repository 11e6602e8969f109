from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import new_pg_database
from thresher.errors import ConfigError, StoreError, StoreUnavailable
from thresher.store import Store, open_store
from thresher.store.migrate import migrations
from thresher.store.queries import _parse, load_queries


def test_migrations_applied_on_open(store: Store) -> None:
    assert store.schema_version() == len(migrations(store.backend))
    with store.transaction() as tx:
        assert tx.all("list_sources") == []


def test_reopen_does_not_reapply(store_url: str) -> None:
    first = open_store(store_url)
    with first.transaction() as tx:
        tx.execute(
            "insert_source", name="a", type="synthetic", url="synthetic:", options="{}", now=1
        )
    first.close()
    again = open_store(store_url)
    try:
        assert again.schema_version() == len(migrations(again.backend))
        with again.transaction(write=False) as tx:
            assert [r["name"] for r in tx.all("list_sources")] == ["a"]
    finally:
        again.close()


def test_both_backends_have_the_same_migrations() -> None:
    sqlite = [(m.version, m.name) for m in migrations("sqlite")]
    assert sqlite == [(m.version, m.name) for m in migrations("postgres")]


def test_newer_schema_is_refused(store_url: str) -> None:
    s = open_store(store_url)
    with s.transaction() as tx:
        # A store written by a later Thresher.
        tx.execute("insert_source", name="x", type="t", url="u", options="{}", now=1)
    s.close()
    if store_url.startswith("sqlite"):
        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        conn.execute("INSERT INTO schema_migrations VALUES (999, 'future', 0)")
        conn.commit()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store_url, autocommit=True) as pg:
            pg.execute("INSERT INTO schema_migrations VALUES (999, 'future', 0)")
    with pytest.raises(StoreError, match="newer than this Thresher"):
        open_store(store_url)


def test_transaction_rolls_back_on_error(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.execute("insert_source", name="gone", type="t", url="u", options="{}", now=1)
        raise RuntimeError("boom")
    with store.transaction(write=False) as tx:
        assert tx.one("get_source", name="gone") is None


def test_sqlite_is_in_wal_mode(tmp_path: Path) -> None:
    s = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    s.close()
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_unreachable_postgres_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="cannot connect"):
        open_store("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")


def test_unknown_store_url() -> None:
    with pytest.raises(ConfigError):
        open_store("mysql://x")


def test_unopenable_sqlite_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreUnavailable):
        open_store(f"sqlite:///{blocker / 'sub' / 'x.db'}")


def test_query_files_parse_and_convert_parameters() -> None:
    pg = load_queries("postgres")
    assert set(pg) == set(load_queries("sqlite"))
    assert "%(owner)s" in pg["claim_job"] and "SKIP LOCKED" in pg["claim_job"]
    assert (
        "::jsonb" in pg["runs_progress"] and "json_each" in load_queries("sqlite")["runs_progress"]
    )
    assert "SKIP LOCKED" not in load_queries("sqlite")["claim_job"]


def test_comments_in_queries_are_dropped_and_need_no_parameters() -> None:
    sql = "-- name: a\n-- Rows: JSON, as :rows says\nSELECT 1 -- one\n  -- :later\n-- Next.\n"
    assert _parse(sql, "x.sql") == {"a": "SELECT 1 -- one"}
    assert all(
        "\n--" not in q and not q.startswith("--") for q in load_queries("postgres").values()
    )


def test_query_parser_rejects_duplicates_and_stray_sql() -> None:
    with pytest.raises(ValueError, match="twice"):
        _parse("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n", "x.sql")
    with pytest.raises(ValueError, match="before the first"):
        _parse("SELECT 0;\n-- name: a\nSELECT 1\n", "x.sql")


def old_store(store_url: str, version: int, *rows: str) -> None:
    """Make a store at schema `version`, as an older Thresher left it, holding `rows`
    (INSERT statements)."""
    create = (
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied REAL NOT NULL)"
    )
    backend = "sqlite" if store_url.startswith("sqlite") else "postgres"
    script = [create] + [m.sql for m in migrations(backend)[:version]]
    script += [
        f"INSERT INTO schema_migrations VALUES ({v}, 'old', 0)" for v in range(1, version + 1)
    ]
    script += list(rows)
    if backend == "sqlite":
        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        conn.executescript(";\n".join(script) + ";")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store_url, autocommit=True) as pg:
            for statement in script:
                pg.execute(statement.encode())


def test_upgrade_from_version_1_keeps_data(store_url: str) -> None:
    """An old store is migrated forward on open, its rows intact."""
    old_store(
        store_url,
        1,
        "INSERT INTO workers (owner, hostname, pid, started, heartbeat) VALUES ('w', 'h', 1, 0, 0)",
    )
    upgraded = open_store(store_url)
    try:
        assert upgraded.schema_version() == len(migrations(upgraded.backend)) >= 2
        with upgraded.transaction(write=False) as tx:
            [row] = tx.all("live_workers", since=-1)
        assert row["owner"] == "w" and row["boot_id"] is None
    finally:
        upgraded.close()


def test_postgres_store_reconnects_after_the_server_drops_it(pg_admin_url: str) -> None:
    import psycopg

    url = new_pg_database(pg_admin_url)
    store = open_store(url)
    try:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
        with pytest.raises(StoreUnavailable), store.transaction(write=False) as tx:
            tx.all("list_sources")
        with store.transaction(write=False) as tx:
            assert tx.all("list_sources") == []
    finally:
        store.close()


def test_postgres_times_are_double_precision() -> None:
    """PostgreSQL's REAL is 4 bytes: a Unix time in it is off by up to a minute."""
    import re

    for m in migrations("postgres"):
        assert not re.search(r"\bREAL\b", m.sql, re.IGNORECASE), m.name


def test_upgrade_to_waiting_commits(store_url: str) -> None:
    """Migration 9: a commit left `pending` with unfinished children becomes `waiting`;
    one whose children are all done stays claimable; the job tree keeps its links."""
    job = (
        "INSERT INTO jobs (id, kind, key, parent_id, waits_for, state, max_attempts, not_before,"
        " created, updated) VALUES ({}, 'k', '{}', {}, {}, '{}', 3, 0, 0, 0)"
    )
    old_store(
        store_url,
        8,
        job.format(1, "root", "NULL", "NULL", "done"),
        job.format(2, "root/a", 1, "NULL", "done"),
        job.format(3, "root/b", 1, "NULL", "pending"),
        job.format(4, "root#commit", "NULL", 1, "pending"),
        job.format(5, "other", "NULL", "NULL", "done"),
        job.format(6, "other/a", 5, "NULL", "done"),
        job.format(7, "other#commit", "NULL", 5, "pending"),
        *(
            []
            if store_url.startswith("sqlite")
            else ["SELECT setval(pg_get_serial_sequence('jobs', 'id'), 7)"]
        ),
    )
    upgraded = open_store(store_url)
    try:
        assert upgraded.schema_version() == len(migrations(upgraded.backend))
        with upgraded.transaction() as tx:
            rows = {r["key"]: r for r in (tx.one("get_job", id=i) for i in range(1, 8)) if r}
            assert {k: r["state"] for k, r in rows.items()} == {
                "root": "done",
                "root/a": "done",
                "root/b": "pending",
                "root#commit": "waiting",
                "other": "done",
                "other/a": "done",
                "other#commit": "pending",
            }
            assert rows["root/b"]["parent_id"] == 1 and rows["root#commit"]["waits_for"] == 1
            tx.execute(
                "insert_job",
                kind="k",
                key="root/c",
                parent_id=1,
                waits_for=None,
                source=None,
                source_run_id=None,
                payload="{}",
                state="pending",
                max_attempts=3,
                priority=0,
                now=0,
            )
        if upgraded.backend == "sqlite":
            conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            conn.close()
    finally:
        upgraded.close()


def test_postgres_read_only_role(pg_admin_url: str) -> None:
    """A role that may only read opens a store at the current schema (for `status`,
    `search`, exports); one that would need migrating is a clear StoreError (exit 3)."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    role = f"ro_{uuid.uuid4().hex[:8]}"

    def as_role(url: str) -> str:
        u = urlsplit(url)
        return urlunsplit((u.scheme, f"{role}@{u.hostname}:{u.port}", u.path, u.query, ""))

    current, empty = new_pg_database(pg_admin_url), new_pg_database(pg_admin_url)
    open_store(current).close()
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
    with psycopg.connect(current, autocommit=True) as owner:
        owner.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    store = open_store(as_role(current))
    try:
        with store.transaction(write=False) as tx:
            assert tx.all("list_sources") == []
    finally:
        store.close()
    with pytest.raises(StoreError, match=r"cannot bring .* to schema version") as err:
        open_store(as_role(empty))
    assert err.value.exit_code == 3 and "permission denied" in str(err.value)


def _message_insert(
    store_url: str, id_: int, source: str, key: str, raw: bytes, **more: object
) -> str:
    import hashlib

    blob = f"X'{raw.hex()}'" if store_url.startswith("sqlite") else f"'\\x{raw.hex()}'::bytea"
    message_id = "NULL" if key.startswith("sha256:") else f"'{key}'"
    conflict = more.get("conflict", 0)
    return (
        "INSERT INTO messages (id, source, month, key, sha256, message_id, subject, body, raw,"
        f" position, conflict, first_seen) VALUES ({id_}, '{source}', '2024-01', '{key}',"
        f" '{hashlib.sha256(raw).hexdigest()}', {message_id}, 'subject {id_}', 'words {id_}',"
        f" {blob}, {id_ * 100}, {conflict}, {id_})"
    )


def test_upgrade_to_message_identity_merges_rewrapped_copies(store_url: str) -> None:
    """Migration 13: messages are told apart by their normal form. Copies stored because
    an archive re-wrapped a message collapse to the first capture, conflicts are those
    that really differ, a message without a Message-ID gets its new key (and the stop
    sign that named it too), `stored` is recounted, and the search index stays exact."""
    import hashlib

    from thresher.archives.normal import normal_digest

    hk = b'Message-ID: <a@x>\nContent-Type: multipart/mixed; boundary="%s"\n\n--%s\n\nhi\n--%s--\n'
    a1 = hk % (b"one", b"one", b"one")
    a2 = hk % (b"two", b"two", b"two")  # the same message, a new boundary
    b1 = b"Message-ID: <b@x>\n\nversion one\n"
    b2 = b"Message-ID: <b@x>\n\nversion two\n"  # really different
    c1 = b"Subject: no id\n\nbody\n"
    c2 = b"Subject: no id\r\n\r\nbody\r\n\r\n"  # re-wrapped, so today a second key
    old_key = "sha256:" + hashlib.sha256(c1).hexdigest()
    rows = [
        _message_insert(store_url, 1, "dev", "a@x", a1, conflict=1),
        _message_insert(store_url, 2, "dev", "b@x", b1, conflict=1),
        _message_insert(store_url, 3, "dev", old_key, c1),
        _message_insert(store_url, 4, "dev", "a@x", a2, conflict=1),
        _message_insert(store_url, 5, "dev", "b@x", b2, conflict=1),
        _message_insert(store_url, 6, "dev", "sha256:" + hashlib.sha256(c2).hexdigest(), c2),
        _message_insert(store_url, 7, "other", "a@x", a2),  # another list keeps its own
        "INSERT INTO archive_months (source, month, url, stored, stop_key)"
        f" VALUES ('dev', '2024-01', 'u', 6, '{old_key}')",
    ]
    sqlite = store_url.startswith("sqlite")
    if sqlite:
        rows.append(
            "INSERT INTO messages_fts (rowid, subject, from_name, from_addr, body)"
            " SELECT id, subject, from_name, from_addr, body FROM messages"
        )
    else:
        rows.append("SELECT setval(pg_get_serial_sequence('messages', 'id'), 7)")
    old_store(store_url, 12, *rows)
    upgraded = open_store(store_url)
    try:
        assert upgraded.schema_version() == len(migrations(upgraded.backend)) >= 13
        with upgraded.transaction() as tx:
            kept = {r["id"]: r for r in tx.all("export_messages_by_id", ids="[1,2,3,4,5,6,7]")}
            assert sorted(kept) == [1, 2, 3, 5, 7]
            assert bytes(kept[1]["raw"]) == a1  # the first capture's bytes
            assert {i: r["conflict"] for i, r in kept.items()} == {1: 0, 2: 1, 3: 0, 5: 1, 7: 0}
            assert kept[3]["key"] == "sha256:" + normal_digest(c1) == "sha256:" + normal_digest(c2)
            month = tx.one("get_archive_month", source="dev", month="2024-01")
            assert month is not None
            assert month["stored"] == 4 and month["stop_key"] == kept[3]["key"]
            # A new capture of a kept message adds nothing; a new message gets a new id.
            fields = dict(
                source="dev", month="2024-01", message_id=None, date=None, date_raw=None,
                date_flag=None, from_name=None, from_addr=None, subject="s", in_reply_to=None,
                refs=None, body="fresh words", position=None, now=9, parse_error=None,
                truncated=None,
            )  # fmt: skip
            again = c2 + b"\n"
            tx.execute_many(
                "insert_message",
                [
                    {**fields, "key": kept[3]["key"], "sha256": hashlib.sha256(again).hexdigest(),
                     "norm_sha256": normal_digest(again), "raw": again},
                    {**fields, "key": "new@x", "sha256": "0", "norm_sha256": "0", "raw": b"x"},
                ],
            )  # fmt: skip
            ids = [r["id"] for r in tx.all("export_message_ids", source="dev")]
            assert len(ids) == 5 and max(ids) > 7
            tx.execute("index_new_messages", after=7)
            hits = tx.all(
                "search_messages", fts='"words"', terms='["words"]', source=None, limit=9, ranked=9
            )
            assert len(hits) == 6  # the 4 + 1 kept of dev, the one of other, the new one
        if sqlite:
            conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
            conn.close()
    finally:
        upgraded.close()


def test_a_migration_step_runs_between_its_sql() -> None:
    from thresher.store.migrate import Migration, Step

    m = Migration(
        1, "x", "-- intro\nCREATE TABLE a (x INT);\n-- step: some.module\n-- only a comment\n"
    )
    assert m.parts() == ["-- intro\nCREATE TABLE a (x INT);\n", Step("some.module")]
    [identity] = [m for m in migrations("sqlite") if m.version == 13]
    assert [p for p in identity.parts() if isinstance(p, Step)] == [
        Step("thresher.archives.identity")
    ]


def test_upgrade_to_run_shortfall(store_url: str) -> None:
    """Migration 15: runs closed before it keep their outcome and have no shortfall
    (NULL: nothing said how many items their source held)."""
    old_store(
        store_url,
        14,
        "INSERT INTO source_runs (id, source, started, finished, outcome, counts)"
        " VALUES (1, 'list', 0, 1, 'ok', '{\"done\": 3}')",
    )
    upgraded = open_store(store_url)
    try:
        assert upgraded.schema_version() == len(migrations(upgraded.backend))
        with upgraded.transaction() as tx:
            [run] = tx.all("last_runs")
            assert (run["outcome"], run["shortfall"]) == ("ok", None)
            tx.execute("set_run_shortfall", id=1, shortfall=4)
            assert tx.one("run_shortfall", id=1) == {"shortfall": 4}
    finally:
        upgraded.close()


def test_upgrade_to_crawl_error_index(store_url: str) -> None:
    """Migration 16: a partial index on a crawl's errors, for the summary's reasons; the
    URLs crawled before it are found through it."""
    url = (
        "INSERT INTO crawl_urls (source, hash, url, host, depth, seq, discovered_run,"
        " fetched_run, state, status, error) VALUES ('c', {}, 'http://h/{}', 'h', 0, {}, 1,"
        " 1, '{}', {}, {})"
    )
    old_store(
        store_url,
        15,
        url.format(1, 1, 1, "error", 404, "'HTTP 404'"),
        url.format(2, 2, 2, "done", 200, "NULL"),
        url.format(3, 3, 3, "error", "NULL", "'timeout: GET http://h/3: …'"),
    )
    upgraded = open_store(store_url)
    try:
        assert upgraded.schema_version() == len(migrations(upgraded.backend)) >= 16
        with upgraded.transaction(write=False) as tx:
            errors = tx.all("crawl_run_errors", source="c", run=1)
        assert sorted((r["status"], r["error"]) for r in errors if r["status"]) == [
            (404, "HTTP 404")
        ]
        assert len(errors) == 2
    finally:
        upgraded.close()
    if store_url.startswith("sqlite"):
        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        found = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'crawl_urls_errors'"
        ).fetchall()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store_url) as pg:
            found = pg.execute(
                "SELECT indexname FROM pg_indexes WHERE indexname = 'crawl_urls_errors'"
            ).fetchall()
    assert len(found) == 1


def test_upgrade_to_requisites_and_sitemaps(store_url: str) -> None:
    """Migration 18: URLs known before it were all links (hop 0), with no lastmod; a URL
    waiting in a shard's inbox is a link too; a run's requisites and sitemaps start at 0."""
    old_store(
        store_url,
        17,
        "INSERT INTO crawl_urls (source, hash, url, host, depth, seq, discovered_run, etag)"
        " VALUES ('web', 7, 'http://h/a?z=1&a=2', 'h', 1, 1, 1, '\"e\"')",
        "INSERT INTO crawl_runs (run_id, source, pages, started, updated)"
        " VALUES (1, 'web', 3, 0, 0)",
        "INSERT INTO crawl_inbox (run_id, shard, hash, url, depth)"
        " VALUES (1, 0, 8, 'http://h/b', 2)",
    )
    upgraded = open_store(store_url)
    try:
        assert upgraded.schema_version() == len(migrations(upgraded.backend)) >= 18
        with upgraded.transaction() as tx:
            [row] = tx.all("crawl_pending", source="web", run=2)
            assert (row["url"], row["hop"], row["etag"]) == ("http://h/a?z=1&a=2", 0, '"e"')
            [state] = tx.all("crawl_url_states", source="web")
            assert (state["hop"], state["lastmod"]) == (0, None)
            tx.execute("set_crawl_lastmods", source="web", rows='[[7, "2024-05-12"]]')
            assert tx.all("crawl_url_states", source="web")[0]["lastmod"] == "2024-05-12"
            run = tx.one("get_crawl_run", run=1)
            assert run is not None
            assert (run["pages"], run["requisites"], run["sitemaps"]) == (3, 0, 0)
            [sent] = tx.all("drain_crawl_inbox", run=1, shard=0)
            assert (sent["url"], sent["depth"], sent["hop"]) == ("http://h/b", 2, 0)
    finally:
        upgraded.close()
