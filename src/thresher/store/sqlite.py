"""The embedded default store: one SQLite file in WAL mode.

SQLite allows one writer at a time; every write transaction starts with BEGIN IMMEDIATE
so that it takes the write lock up front (waiting up to `busy_timeout`) instead of
failing half-way through with SQLITE_BUSY when it first writes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import StoreError, StoreUnavailable
from .base import Row
from .migrate import Step, check_current, pending
from .queries import load_queries, parse_queries

__all__ = ["SQLiteStore"]


class _SQLiteTx:
    def __init__(self, conn: sqlite3.Connection, queries: dict[str, str]) -> None:
        self._conn = conn
        self._queries = queries

    def execute(self, query: str, **params: Any) -> int:
        return self._conn.execute(self._queries[query], params).rowcount

    def execute_many(self, query: str, rows: Sequence[Mapping[str, Any]]) -> None:
        self._conn.executemany(self._queries[query], rows)

    def one(self, query: str, **params: Any) -> Row | None:
        row = self._conn.execute(self._queries[query], params).fetchone()
        return dict(row) if row is not None else None

    def all(self, query: str, **params: Any) -> list[Row]:
        return [dict(r) for r in self._conn.execute(self._queries[query], params)]

    def stream(self, query: str, **params: Any) -> Iterator[Row]:
        for row in self._conn.execute(self._queries[query], params):
            yield dict(row)


class SQLiteStore:
    backend = "sqlite"

    def __init__(self, path: Path, busy_timeout: float = 60.0, readonly: bool = False) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self.readonly = readonly
        try:
            if readonly:
                conn = self._connect_readonly(path, busy_timeout)
            else:
                # The home folder and the store are private whatever the umask (unless it
                # is stricter); SQLite gives its -wal and -shm files the database's mode.
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                # isolation_level=None: we issue BEGIN/COMMIT ourselves.
                conn = sqlite3.connect(
                    path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
                )
                conn.execute("PRAGMA journal_mode=WAL")
                # NORMAL is durable against process crashes (kill -9) in WAL mode; only a
                # power loss can cost the last transactions, never consistency.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA foreign_keys=ON")
            conn.row_factory = sqlite3.Row
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"cannot open SQLite store {path}: {exc}") from None
        self._conn = conn
        self._queries = load_queries(self.backend)
        try:
            if readonly:
                check_current(self.backend, self.schema_version(), f"store {self.path}")
            else:
                self._migrate()
        except sqlite3.Error as exc:
            self._conn.close()
            raise StoreUnavailable(f"cannot read SQLite store {path}: {exc}") from None
        except BaseException:
            self._conn.close()
            raise

    @staticmethod
    def _connect_readonly(path: Path, busy_timeout: float) -> sqlite3.Connection:
        """The file opened read-only (mode=ro: SQLite refuses every write) and
        query_only, so no statement can change it, nor create it if it is missing."""
        if not path.is_file():
            raise StoreUnavailable(f"no SQLite store at {path}: harvest something first")
        uri = path.resolve().as_uri() + "?mode=ro"
        conn = sqlite3.connect(
            uri, uri=True, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA query_only=ON")
        return conn

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[_SQLiteTx]:
        if write and self.readonly:
            raise StoreError(f"store {self.path} is open read-only")
        self._begin("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield _SQLiteTx(self._conn, self._queries)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _begin(self, statement: str) -> None:
        # busy_timeout covers most waits; a checkpoint can still report BUSY at once.
        for delay in (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 0):
            try:
                self._conn.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if not delay:
                    raise StoreUnavailable(f"SQLite store {self.path} stays locked") from None
                time.sleep(delay)

    def schema_version(self) -> int:
        row = self._conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    def _migrate(self) -> None:
        self._begin("BEGIN IMMEDIATE")
        try:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations"
                " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied REAL NOT NULL)"
            )
            for m in pending(self.backend, self.schema_version(), f"store {self.path}"):
                for part in m.parts():
                    if isinstance(part, Step):
                        queries, migrate = part.load()
                        migrate(
                            _SQLiteTx(self._conn, parse_queries(queries, part.module, "sqlite"))
                        )
                        continue
                    # executescript would commit our transaction; run statement by statement.
                    for statement in _statements(part):
                        self._conn.execute(statement)
                self._conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                    (m.version, m.name, time.time()),
                )
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()


def _statements(script: str) -> Iterator[str]:
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer
            buffer = ""
    if buffer.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in buffer.splitlines()
    ):
        raise StoreError(f"unterminated SQL statement in migration: {buffer[:80]!r}")
